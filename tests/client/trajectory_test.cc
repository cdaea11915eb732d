#include "client/trajectory.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/support/status_testing.h"
#include "tests/support/temp_files.h"

namespace ptxbench::client {
namespace {

namespace fs = std::filesystem;
using ::ptxbench::testing::ReadWholeFile;
using ::ptxbench::testing::ScopedTempDir;
using ::ptxbench::testing::ValueOrFail;

void Spit(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

TrajectoryHeader SampleHeader() {
  TrajectoryHeader header;
  header.run.model = "openai:gpt-4.1";
  header.run.provider = "openai";
  header.run.task = "gemm_n7168_k5120";
  header.run.task_version = "abc123";
  header.run.arch = "sm_90a";
  header.run.knowledge = "templates";
  header.run.trajectory_index = 3;
  header.run.context_policy = "full";
  header.run.turns = 8;
  header.run.target_speedup = 1.2;
  header.run.temperature = 0.7;
  header.run.max_tokens = 32000;
  header.started_at = "2026-11-30T05:40:00Z";
  return header;
}

TurnRecord SampleTurn(int number, bool pass) {
  TurnRecord turn;
  turn.turn = number;
  turn.prompt_messages = {{"system", "You write kernels."}, {"user", "Write the GEMM."}};
  turn.reply = "```cuda\n__global__ void k() {}\n```";
  turn.usage = {1200, 800, 300};
  turn.extracted = true;
  turn.source = "__global__ void k() {}";
  turn.language = "cuda";
  turn.source_sha256 = "00ff";
  turn.submission_id = "sub-1";
  Verdict verdict;
  verdict.verdict_class = pass ? VerdictClass::kPass : VerdictClass::kWrongResult;
  verdict.compiled = true;
  verdict.correct = pass;
  verdict.target_executed = pass;
  verdict.tic = pass;
  verdict.speedup = pass ? 1.25 : 0;
  verdict.message = pass ? "ok" : "workload S=128: 12 elements differ";
  StageReport compile;
  compile.stage = Stage::kCompile;
  compile.ok = true;
  compile.detail = {{"log", "ptxas info: 0 bytes spill"}};
  verdict.stages.push_back(compile);
  turn.verdict = verdict;
  turn.feedback = pass ? "" : "wrong result on S=128";
  turn.model_seconds = 12.5;
  turn.eval_seconds = 40.25;
  turn.finished_at = "2026-11-30T05:41:00Z";
  return turn;
}

TEST_CASE("A trajectory written record by record reads back field for field") {
  ScopedTempDir dir("ptxbench-trajectory-");
  TrajectoryHeader header = SampleHeader();
  const std::string path = TrajectoryPath(dir.path(), header.run);
  CHECK(path == dir.path() + "/openai_gpt-4.1/gemm_n7168_k5120/sm_90a/templates/traj-03.jsonl");

  TrajectoryWriter writer = ValueOrFail(TrajectoryWriter::Create(path, header));
  TurnRecord infra = SampleTurn(1, false);
  infra.verdict.reset();
  infra.infra_failed = true;
  infra.infra_failures = {{"worker lost", 3}};
  REQUIRE_OK(writer.AppendTurn(infra));
  REQUIRE_OK(writer.AppendTurn(SampleTurn(1, false)));
  REQUIRE_OK(writer.AppendTurn(SampleTurn(2, true)));
  REQUIRE_OK(writer.AppendEnd({EndReason::kTicReached, "", "2026-11-30T05:50:00Z"}));
  CHECK(writer.charged_turns() == 2);

  // One line per record, each ending in a newline.
  const std::string text = ReadWholeFile(path);
  CHECK(std::count(text.begin(), text.end(), '\n') == 5);
  CHECK(text.back() == '\n');

  Trajectory read = ValueOrFail(ReadTrajectory(path));
  CHECK(read.torn_line == 0);
  CHECK(read.header.run.model == "openai:gpt-4.1");
  CHECK(read.header.run.trajectory_index == 3);
  CHECK(read.header.run.turns == 8);
  CHECK(read.header.run.target_speedup == 1.2);
  CHECK(read.header.run.max_tokens == 32000);
  CHECK(read.header.started_at == "2026-11-30T05:40:00Z");
  REQUIRE(read.turns.size() == 3);
  CHECK(read.charged_turns() == 2);
  CHECK(read.turns[0].infra_failed);
  CHECK_FALSE(read.turns[0].verdict.has_value());
  REQUIRE(read.turns[0].infra_failures.size() == 1);
  CHECK(read.turns[0].infra_failures[0].what == "worker lost");
  CHECK(read.turns[0].infra_failures[0].attempts == 3);
  const TurnRecord& last = read.turns[2];
  CHECK(last.turn == 2);
  REQUIRE(last.prompt_messages.size() == 2);
  CHECK(last.prompt_messages[1].role == "user");
  CHECK(last.prompt_messages[1].content == "Write the GEMM.");
  CHECK(last.usage.input_tokens == 1200);
  CHECK(last.usage.reasoning_tokens == 300);
  CHECK(last.language == "cuda");
  REQUIRE(last.verdict.has_value());
  CHECK(last.verdict->verdict_class == VerdictClass::kPass);
  CHECK(last.verdict->speedup == 1.25);
  REQUIRE(last.verdict->stages.size() == 1);
  CHECK(last.verdict->stages[0].detail["log"] == "ptxas info: 0 bytes spill");
  CHECK(last.model_seconds == 12.5);
  CHECK(last.eval_seconds == 40.25);
  CHECK(IsTic(last));
  CHECK_FALSE(IsTic(read.turns[1]));
  REQUIRE(read.finished());
  CHECK(read.end->reason == EndReason::kTicReached);

  // The verdict is stored in the server's verdict JSON (common/verdict.h).
  std::vector<std::string> lines;
  std::stringstream stream(text);
  for (std::string l; std::getline(stream, l);) lines.push_back(l);
  REQUIRE(lines.size() == 5);
  const nlohmann::json line = nlohmann::json::parse(lines[3]);
  CHECK(line["kind"] == "turn");
  CHECK(line["verdict"]["verdict_class"] == "pass");
  CHECK(line["verdict"]["tic"] == true);
}

TEST_CASE("A torn last line is ignored, reported, and cut off when the run resumes") {
  ScopedTempDir dir("ptxbench-trajectory-");
  const std::string path = dir.path() + "/traj-00.jsonl";
  {
    TrajectoryWriter writer = ValueOrFail(TrajectoryWriter::Create(path, SampleHeader()));
    REQUIRE_OK(writer.AppendTurn(SampleTurn(1, false)));
  }
  // A crash in the middle of writing turn 2.
  const std::string turn2 = TurnJson(SampleTurn(2, false)).dump();
  {
    std::ofstream out(path, std::ios::binary | std::ios::app);
    out << turn2.substr(0, turn2.size() / 2);
  }
  Trajectory read = ValueOrFail(ReadTrajectory(path));
  CHECK(read.torn_line == 3);
  CHECK(read.charged_turns() == 1);
  CHECK_FALSE(read.finished());

  TrajectoryWriter resumed = ValueOrFail(TrajectoryWriter::Resume(read));
  CHECK(resumed.charged_turns() == 1);
  // The writer refuses a turn number that does not follow.
  REQUIRE_STATUS(resumed.AppendTurn(SampleTurn(3, false)), absl::StatusCode::kInvalidArgument);
  REQUIRE_OK(resumed.AppendTurn(SampleTurn(2, true)));
  REQUIRE_OK(resumed.AppendEnd({EndReason::kTicReached, "", ""}));
  REQUIRE_STATUS(resumed.AppendEnd({EndReason::kError, "x", ""}),
                 absl::StatusCode::kFailedPrecondition);

  Trajectory again = ValueOrFail(ReadTrajectory(path));
  CHECK(again.torn_line == 0);
  REQUIRE(again.turns.size() == 2);
  CHECK(again.turns[1].turn == 2);
  CHECK(IsTic(again.turns[1]));
  REQUIRE_STATUS(TrajectoryWriter::Resume(again), absl::StatusCode::kFailedPrecondition);
}

TEST_CASE("Missing, empty and header-less files are told apart") {
  ScopedTempDir dir("ptxbench-trajectory-");
  REQUIRE_STATUS(ReadTrajectory(dir.path() + "/none.jsonl"), absl::StatusCode::kNotFound);
  const std::string empty = dir.path() + "/empty.jsonl";
  Spit(empty, "");
  REQUIRE_STATUS(ReadTrajectory(empty), absl::StatusCode::kDataLoss);
  const std::string torn_header = dir.path() + "/torn.jsonl";
  Spit(torn_header, "{\"kind\":\"header\",\"ru");
  auto torn = ReadTrajectory(torn_header);
  REQUIRE_STATUS(torn, absl::StatusCode::kDataLoss);
  CHECK(std::string(torn.status().message()).find("torn") != std::string::npos);
}

TEST_CASE("Malformed trajectory lines give an error naming the file and line") {
  ScopedTempDir dir("ptxbench-trajectory-");
  const std::string path = dir.path() + "/traj-01.jsonl";
  const std::string header = HeaderJson(SampleHeader()).dump() + "\n";
  nlohmann::json turn = TurnJson(SampleTurn(1, false));
  const std::string good_turn = turn.dump() + "\n";

  struct Case {
    std::string text;
    std::string expected;
  };
  nlohmann::json bad_turn_type = turn;
  bad_turn_type["turn"] = "one";
  nlohmann::json bad_verdict = turn;
  bad_verdict["verdict"]["verdict_class"] = "great";
  nlohmann::json bad_message = turn;
  bad_message["prompt_messages"][1].erase("content");
  nlohmann::json missing_run = HeaderJson(SampleHeader());
  missing_run["run"].erase("task");
  const std::vector<Case> cases = {
      {header + "not json\n", path + ":2: not valid JSON"},
      {header + bad_turn_type.dump() + "\n", path + ":2: field 'turn': expected an integer"},
      {header + good_turn + bad_verdict.dump() + "\n", path + ":3: field 'verdict'"},
      {header + bad_message.dump() + "\n",
       path + ":2: prompt_messages[1]: missing field 'content'"},
      {missing_run.dump() + "\n", path + ":1: missing field 'task'"},
      {good_turn, path + ":1: the first record must be the header"},
      {header + header, path + ":2: a second header"},
      {header + good_turn + good_turn, path + ":3: turn 1 out of order"},
      {header + "{\"kind\":\"end\",\"reason\":\"bored\"}\n", path + ":2: unknown end reason"},
      {header + "{\"kind\":\"end\",\"reason\":\"error\"}\n" + good_turn,
       path + ":3: a record after the end record"},
      {header + "{\"kind\":\"note\"}\n", path + ":2: unknown record kind 'note'"},
      {header + "\n", path + ":2: empty line"},
  };
  for (const Case& c : cases) {
    Spit(path, c.text);
    auto read = ReadTrajectory(path);
    INFO(c.expected);
    REQUIRE_STATUS(read, absl::StatusCode::kInvalidArgument);
    CHECK(std::string(read.status().message()).rfind(c.expected, 0) == 0);
  }
}

TEST_CASE("runtime_unverified verdicts are never TIC nor correct") {
  TurnRecord turn = SampleTurn(1, true);
  CHECK(IsTic(turn));
  CHECK(IsCorrect(turn));
  turn.verdict->runtime_unverified = true;
  CHECK_FALSE(IsTic(turn));
  CHECK_FALSE(IsCorrect(turn));
  turn = SampleTurn(1, true);
  turn.infra_failed = true;
  CHECK_FALSE(IsTic(turn));
}

TEST_CASE("Trajectory files are found recursively, in order") {
  ScopedTempDir dir("ptxbench-trajectory-");
  TrajectoryHeader header = SampleHeader();
  for (int i : {2, 0, 1}) {
    header.run.trajectory_index = i;
    REQUIRE_OK(TrajectoryWriter::Create(TrajectoryPath(dir.path(), header.run), header));
  }
  Spit(dir.path() + "/notes.jsonl", "{}\n");
  std::vector<std::string> files = ValueOrFail(FindTrajectoryFiles(dir.path()));
  REQUIRE(files.size() == 3);
  CHECK(fs::path(files[0]).filename() == "traj-00.jsonl");
  CHECK(fs::path(files[2]).filename() == "traj-02.jsonl");
  REQUIRE_STATUS(FindTrajectoryFiles(dir.path() + "/missing"), absl::StatusCode::kNotFound);
  CHECK(ModelSlug("openrouter:meta/llama 3") == "openrouter_meta_llama_3");
}

TEST_CASE("A wire verdict becomes the stored verdict JSON") {
  v1::Verdict wire;
  wire.set_verdict_class(v1::VERDICT_CLASS_TARGET_NOT_EXECUTED);
  wire.set_compiled(true);
  wire.set_correct(true);
  wire.set_speedup(0.5);
  wire.set_runtime_unverified(false);
  v1::StageResult* stage = wire.add_stages();
  stage->set_stage(v1::STAGE_TARGET_INSTRUCTIONS);
  stage->set_ok(false);
  stage->set_detail_json(R"({"wgmma":{"executed":0}})");
  wire.set_report_json(R"({"gpu":"H200"})");
  // What judged it and the strong check's figures travel too: export keeps a TIC turn only
  // when its harness is the current one, so a dropped harness would lose every turn.
  wire.mutable_harness()->set_engine("0.2.0");
  wire.mutable_harness()->set_task_hash("abc");
  wire.mutable_target_work()->set_strong_check(v1::STRONG_CHECK_NOT_MADE);
  wire.mutable_target_work()->set_share_of_task(0.003);
  wire.mutable_target_work()->set_figures_json(R"({"wgmma":0.003})");
  wire.mutable_sampling()->set_stop_reason("sample_cap");
  Verdict verdict = ValueOrFail(VerdictFromWire(wire));
  CHECK(verdict.verdict_class == VerdictClass::kTargetNotExecuted);
  CHECK(verdict.correct);
  CHECK_FALSE(verdict.tic);
  CHECK(verdict.harness.engine == "0.2.0");
  CHECK(verdict.harness.task_hash == "abc");
  CHECK(verdict.target_work.strong_check == StrongCheck::kNotMade);
  CHECK(verdict.target_work.share_of_task == 0.003);
  CHECK(verdict.target_work.figures["wgmma"] == 0.003);
  REQUIRE(verdict.sampling.has_value());
  CHECK(verdict.sampling->stop_reason == "sample_cap");
  REQUIRE(verdict.stages.size() == 1);
  CHECK(verdict.stages[0].stage == Stage::kTargetInstructions);
  CHECK(verdict.stages[0].detail["wgmma"]["executed"] == 0);
  CHECK(verdict.report["gpu"] == "H200");
  stage->set_detail_json("{oops");
  REQUIRE_STATUS(VerdictFromWire(wire), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ptxbench::client
