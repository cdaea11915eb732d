// `ptxbench export` against the hand-written fixture in testdata/report. What the fixture holds
// (files in sorted order, charged turns):
//   model-b gemm traj-00 [pass tic-Y]; traj-01 [wrong x3, wrong wrong-X, pass tic-Y];
//                traj-02 [wrong wrong-X, pass tic-Y]
//   model-b mha sm_100a: 3 x 3 runtime_unverified turns (one claims pass each)
//   model-a gemm traj-00 [wrong, pass, pass]; traj-01 [(infra: pass), compile_error,
//                target_not_executed, pass]; traj-02 [compile_error x8]
//   model-a mha  traj-00 [pass]; traj-01 [pass, wrong]; traj-02 [compile_error, wrong]
#include "client/report/export.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "client/report/commands.h"
#include "client/report/metrics.h"
#include "client/trajectory.h"
#include "common/build_info.h"
#include "common/task.h"
#include "tests/support/status_testing.h"
#include "tests/support/temp_files.h"

namespace ptxbench::client::report {
namespace {

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using ::ptxbench::testing::ReadWholeFile;
using ::ptxbench::testing::ScopedTempDir;
using ::ptxbench::testing::ValueOrFail;
using json = nlohmann::json;

std::string SourceDir() {
  const char* dir = std::getenv("PTXBENCH_SOURCE_DIR");
  return dir != nullptr ? dir : PTXBENCH_SOURCE_DIR_DEFAULT;
}

// The task catalog the exports below take as current: the source tree's.
std::string TasksDir() { return SourceDir() + "/tasks"; }

// Task::JudgingHash of a task of TasksDir(), as `ptxbench export` computes it.
std::string CurrentTaskHash(const std::string& task_id) {
  return ValueOrFail(LoadTask(TasksDir() + "/" + task_id)).JudgingHash();
}

// The hand-written fixture with every verdict's harness task_hash (written there as
// "fixture") set to its task's current hash: the fixture's verdicts were judged by the current
// harness, engine and task content. One copy per process, removed at exit.
std::string FixtureDir() {
  static const ScopedTempDir* const copy = [] {
    auto* dir = new ScopedTempDir("ptxbench-export-fixture-");
    fs::copy(SourceDir() + "/tests/client/testdata/report", dir->path(),
             fs::copy_options::recursive);
    for (const auto& entry : fs::recursive_directory_iterator(dir->path())) {
      if (entry.path().extension() != ".jsonl") continue;
      // <model>/<task>/<arch>/<knowledge>/traj-NN.jsonl
      const std::string task = entry.path().parent_path().parent_path().parent_path().filename();
      std::string text = ReadWholeFile(entry.path().string());
      text = absl::StrReplaceAll(
          text, {{R"("task_hash":"fixture")",
                  absl::StrCat(R"("task_hash":")", CurrentTaskHash(task), R"(")")}});
      std::ofstream(entry.path(), std::ios::binary | std::ios::trunc) << text;
    }
    return dir;
  }();
  return copy->path();
}

// Runs `ptxbench export` and returns its rows, each parsed (a line that is not JSON fails).
std::vector<json> Export(const std::vector<std::string>& flags, const std::string& dir,
                         json* summary, std::string* printed = nullptr) {
  std::vector<std::string> args = flags;
  args.insert(args.end(), {"--tasks-dir", TasksDir(), "--out", dir + "/rows.jsonl", FixtureDir()});
  std::ostringstream out;
  std::ostringstream err;
  const int code = ExportCommand(args, out, err);
  INFO(err.str());
  REQUIRE(code == 0);
  if (printed != nullptr) *printed = out.str();
  std::ifstream rows_in(dir + "/rows.jsonl");
  std::vector<json> rows;
  for (std::string line; std::getline(rows_in, line);) {
    // "messages" first, and each message's "role" before its "content", as people read them.
    CHECK(line.rfind("{\"messages\":[{\"role\":", 0) == 0);
    json row = json::parse(line, nullptr, /*allow_exceptions=*/false);
    INFO(line);
    REQUIRE_FALSE(row.is_discarded());
    rows.push_back(std::move(row));
  }
  std::ifstream summary_in(dir + "/rows.summary.json");
  *summary = json::parse(summary_in);
  return rows;
}

// Roles in order, "weight" only on assistant messages, 1 on the last message alone.
void CheckRows(const std::vector<json>& rows, const std::vector<std::string>& roles) {
  for (const json& row : rows) {
    REQUIRE(row.is_object());
    REQUIRE(row["messages"].is_array());
    const json& messages = row["messages"];
    REQUIRE(messages.size() == roles.size());
    for (size_t i = 0; i < messages.size(); ++i) {
      CHECK(messages[i]["role"] == roles[i]);
      CHECK(messages[i]["content"].is_string());
      const bool last = i + 1 == messages.size();
      if (messages[i]["role"] == "assistant") {
        CHECK(messages[i]["weight"] == (last ? 1 : 0));
      } else {
        CHECK_FALSE(messages[i].contains("weight"));
      }
    }
    CHECK(messages[0]["content"] == "You write GPU kernels.");
    // Nothing from the infrastructure-failed record or unverified verdicts.
    CHECK(row.dump().find("infra-kernel") == std::string::npos);
    CHECK(row.dump().find("sm_100a") == std::string::npos);
  }
}

TEST_CASE("kernelgen rows: every TIC kernel once, no infra or unverified turn") {
  ScopedTempDir dir("ptxbench-export-");
  json summary;
  std::string printed;
  std::vector<json> rows =
      Export({"--format", "kernelgen", "--metadata"}, dir.path(), &summary, &printed);
  // model-b gemm: tic-Y once (two repeats dropped); model-a gemm: 3; model-a mha: 2.
  REQUIRE(rows.size() == 6);
  CheckRows(rows, {"system", "user", "assistant"});
  CHECK(rows[0]["messages"][1]["content"] == "Task: gemm_n7168_k5120");
  CHECK(rows[0]["messages"][2]["content"] == "Reasoning.\n```cuda\ntic-Y\n```");
  CHECK(rows[0]["metadata"]["model"] == "anthropic:model-b");
  CHECK(rows[0]["metadata"]["class"] == "pass");
  CHECK(summary["format"] == "kernelgen");
  CHECK(summary["rows"] == 6);
  CHECK(summary["trajectories"] == 12);
  CHECK(summary["per_task"] ==
        json::parse(R"({"gemm_n7168_k5120":{"pass":4},"mha_with_lse_d128":{"pass":2}})"));
  CHECK(summary["excluded"]["duplicate"] == 2);
  CHECK(summary["excluded"]["over_cap"] == 0);
  CHECK(summary["excluded"]["infra_failed_turns"] == 1);
  CHECK(summary["excluded"]["runtime_unverified_turns"] == 9);
  CHECK_THAT(printed, Contains("kernelgen: 6 rows from 12 trajectories"));
  CHECK_THAT(printed, Contains("2 duplicates"));
}

TEST_CASE("kernelgen rows are capped per (task, class)") {
  ScopedTempDir dir("ptxbench-export-");
  json summary;
  std::vector<json> rows =
      Export({"--format", "kernelgen", "--max-per-class", "3"}, dir.path(), &summary);
  REQUIRE(rows.size() == 5);
  CHECK(summary["per_task"]["gemm_n7168_k5120"]["pass"] == 3);
  CHECK(summary["per_task"]["mha_with_lse_d128"]["pass"] == 2);
  CHECK(summary["excluded"]["over_cap"] == 1);
  CHECK_FALSE(rows[0].contains("metadata"));
}

// The prompt messages of a fixit row are those the model was shown before it wrote the repaired
// kernel: the repaired turn's prompt_messages in its trajectory file, byte for byte.
void CheckPromptIsWhatTheModelSaw(const json& row) {
  const json& messages = row["messages"];
  const json& meta = row["metadata"];
  const Trajectory t = ValueOrFail(ReadTrajectory(meta["file"].get<std::string>()));
  const int repaired_turn = meta["turns"][1];
  const TurnRecord* repaired = nullptr;
  for (const TurnRecord& turn : t.turns) {
    if (!turn.infra_failed && turn.turn == repaired_turn) repaired = &turn;
  }
  REQUIRE(repaired != nullptr);
  const std::vector<ChatMessage>& seen = repaired->prompt_messages;
  REQUIRE(seen.size() >= 4);
  CHECK(messages[0]["content"] == seen[0].content);                // system
  CHECK(messages[1]["content"] == seen[1].content);                // the task
  CHECK(messages[2]["content"] == seen[seen.size() - 2].content);  // the failed reply as resent
  CHECK(messages[3]["content"] == seen.back().content);            // the feedback message as sent
  CHECK_THAT(messages[3]["content"].get<std::string>(), Contains("Feedback on attempt "));
}

TEST_CASE("fixit rows: failed kernel, its feedback, the next turn's TIC kernel") {
  ScopedTempDir dir("ptxbench-export-");
  json summary;
  std::vector<json> rows =
      Export({"--format", "fixit", "--assistant", "source", "--metadata"}, dir.path(), &summary);
  // model-b traj-01 (4 -> 5) and traj-02 (1 -> 2): the same kernels, but the model was shown
  // other feedback ("attempt 4" / "attempt 1"), so both rows stay; model-a gemm traj-00 (1 -> 2)
  // and traj-01 (target_not_executed 2 -> 3).
  REQUIRE(rows.size() == 4);
  CheckRows(rows, {"system", "user", "assistant", "user", "assistant"});
  for (const json& row : rows) CheckPromptIsWhatTheModelSaw(row);
  const json& first = rows[0]["messages"];
  CHECK(first[2]["content"] == "Reasoning.\n```cuda\nwrong-X\n```");
  CHECK(first[3]["content"] ==
        "Feedback on attempt 4:\n\nfeedback: wrong_result at turn 4\nFix the problems above and "
        "improve the kernel. Reply with the complete source file in one fenced code block, "
        "including its /* PTXBENCH_PLAN {...} */ launch plan.");
  // --assistant source applies to the trained message; the prompt stays as the model saw it.
  CHECK(first[4]["content"] == "```cuda\ntic-Y\n```");
  CHECK(rows[0]["metadata"]["turns"] == json::array({4, 5}));
  CHECK(rows[1]["metadata"]["turns"] == json::array({1, 2}));
  CHECK(rows[3]["metadata"]["class"] == "target_not_executed");
  CHECK(rows[3]["metadata"]["turns"] == json::array({2, 3}));
  CHECK(summary["per_task"] ==
        json::parse(R"({"gemm_n7168_k5120":{"target_not_executed":1,"wrong_result":3}})"));
  CHECK(summary["per_class"]["wrong_result"] == 3);
  CHECK(summary["excluded"]["duplicate"] == 0);
}

TEST_CASE("fixit rows are capped per (task, failure class)") {
  ScopedTempDir dir("ptxbench-export-");
  json summary;
  std::vector<json> rows =
      Export({"--format", "fixit", "--max-per-class", "1"}, dir.path(), &summary);
  REQUIRE(rows.size() == 2);
  CHECK(summary["per_task"]["gemm_n7168_k5120"]["wrong_result"] == 1);
  CHECK(summary["per_task"]["gemm_n7168_k5120"]["target_not_executed"] == 1);
  CHECK(summary["excluded"]["over_cap"] == 2);
  // The whole reply by default.
  CHECK(rows[0]["messages"][4]["content"] == "Reasoning.\n```cuda\ntic-Y\n```");
}

TEST_CASE("<think> reasoning never reaches a trained message unless asked") {
  ScopedTempDir dir("ptxbench-export-");
  json summary;
  // model-a mha traj-00's TIC reply starts with a <think> block.
  auto reasoning_rows = [](const std::vector<json>& rows) {
    int n = 0;
    for (const json& row : rows) n += row.dump().find("<think>") != std::string::npos ? 1 : 0;
    return n;
  };
  std::vector<json> rows = Export({"--format", "kernelgen", "--metadata"}, dir.path(), &summary);
  CHECK(reasoning_rows(rows) == 0);
  bool found = false;
  for (const json& row : rows) {
    if (row["metadata"]["file"].get<std::string>().find("mha_with_lse_d128/sm_90a/templates/"
                                                        "traj-00") == std::string::npos) {
      continue;
    }
    found = true;
    CHECK(row["messages"][2]["content"] ==
          "Reasoning.\n```cuda\nopenai:model-a-mha_with_lse_d128-0-1\n```");
  }
  CHECK(found);
  rows = Export({"--format", "kernelgen", "--keep-reasoning"}, dir.path(), &summary);
  CHECK(reasoning_rows(rows) == 1);

  CHECK(WithoutReasoning("<think>a</think>\n\nanswer") == "answer");
  CHECK(WithoutReasoning("x <think>a</think>y<think>b</think>z") == "x yz");
  CHECK(WithoutReasoning("answer <think>cut off by max_tokens") == "answer ");
  CHECK(WithoutReasoning("no reasoning") == "no reasoning");
}

// The schema each trainer documents for its layout (docs/client.md, "export"), checked row by
// row: the keys allowed, the roles and their order, and a loss mask that trains the last
// assistant message alone. Returns the (prompt texts, trained text) of the row.
std::pair<std::vector<std::string>, std::string> CheckLayout(const json& row,
                                                             const std::string& layout) {
  INFO(layout << ": " << row.dump());
  std::vector<std::string> prompt;
  std::string trained;
  auto only_keys = [](const json& object, std::set<std::string> allowed) {
    REQUIRE(object.is_object());
    for (const auto& [key, value] : object.items()) {
      INFO(key);
      CHECK(allowed.count(key) == 1);
    }
  };
  if (layout == "openai" || layout == "axolotl") {
    only_keys(row, {"messages", "metadata"});
    const json& messages = row.at("messages");
    REQUIRE(messages.size() >= 2);
    for (size_t i = 0; i < messages.size(); ++i) {
      const json& m = messages[i];
      const std::string role = m.at("role");
      const bool last = i + 1 == messages.size();
      REQUIRE(m.at("content").is_string());
      // system first if at all, then user and assistant in turn, ending with the assistant.
      if (i == 0) {
        CHECK((role == "system" || role == "user"));
      } else {
        const std::string before = messages[i - 1].at("role");
        CHECK(role == (before == "user" ? "assistant" : "user"));
      }
      if (layout == "openai") {
        only_keys(m, role == "assistant" ? std::set<std::string>{"role", "content", "weight"}
                                         : std::set<std::string>{"role", "content"});
        if (role == "assistant") CHECK(m.at("weight") == (last ? 1 : 0));
      } else {
        only_keys(m, {"role", "content", "train"});
        CHECK(m.at("train") == last);
      }
      if (last) {
        CHECK(role == "assistant");
        trained = m.at("content");
      } else {
        prompt.push_back(m.at("content"));
      }
    }
  } else if (layout == "trl") {
    only_keys(row, {"prompt", "completion", "metadata"});
    const json& p = row.at("prompt");
    REQUIRE(p.size() >= 1);
    for (const json& m : p) {
      only_keys(m, {"role", "content"});
      prompt.push_back(m.at("content"));
    }
    CHECK(p.back().at("role") == "user");
    REQUIRE(row.at("completion").size() == 1);
    const json& c = row.at("completion")[0];
    only_keys(c, {"role", "content"});
    CHECK(c.at("role") == "assistant");
    trained = c.at("content");
  } else {
    REQUIRE(layout == "llama-factory");
    only_keys(row, {"system", "conversations", "metadata"});
    if (row.contains("system")) prompt.push_back(row.at("system"));
    const json& conversation = row.at("conversations");
    REQUIRE(conversation.size() % 2 == 0);
    for (size_t i = 0; i < conversation.size(); ++i) {
      const json& m = conversation[i];
      only_keys(m, {"from", "value"});
      // sharegpt: human at odd positions (1-based), gpt at even ones; the last is learned.
      CHECK(m.at("from") == (i % 2 == 0 ? "human" : "gpt"));
      if (i + 1 == conversation.size()) {
        trained = m.at("value");
      } else {
        prompt.push_back(m.at("value"));
      }
    }
  }
  return {prompt, trained};
}

TEST_CASE("every layout follows its trainer's schema and carries the same prompt and target") {
  for (const std::string format : {"kernelgen", "fixit"}) {
    std::vector<std::vector<std::pair<std::vector<std::string>, std::string>>> per_layout;
    for (const std::string layout : {"openai", "trl", "llama-factory", "axolotl"}) {
      INFO(format << " " << layout);
      ScopedTempDir dir("ptxbench-export-");
      const std::vector<std::string> args = {
          "--format",    format,     "--layout", layout,
          "--tasks-dir", TasksDir(), "--out",    dir.path() + "/rows.jsonl",
          FixtureDir()};
      std::ostringstream out;
      std::ostringstream err;
      REQUIRE(ExportCommand(args, out, err) == 0);
      std::ifstream in(dir.path() + "/rows.jsonl");
      std::vector<std::pair<std::vector<std::string>, std::string>> rows;
      for (std::string line; std::getline(in, line);) {
        rows.push_back(CheckLayout(json::parse(line), layout));
      }
      CHECK_FALSE(rows.empty());
      per_layout.push_back(std::move(rows));
      CHECK(json::parse(ReadWholeFile(dir.path() + "/rows.summary.json"))["layout"] == layout);
    }
    // The same rows in the same order, texts byte-equal: only the shape differs.
    for (size_t l = 1; l < per_layout.size(); ++l) CHECK(per_layout[l] == per_layout[0]);
  }
}

// Trajectories written with the real writer, for the cases the hand-written fixture lacks.
class RunDir {
 public:
  RunDir() : dir_("ptxbench-export-run-") {}
  const std::string& path() const { return dir_.path(); }

  // A trajectory whose turns are (verdict class, kernel) pairs, prompts built as `ptxbench run`
  // builds them with context full; `task_prompt` stands for the knowledge level's prompt.
  void Write(const std::string& knowledge, int index, v1::EvaluationScope scope,
             const std::string& task_prompt,
             const std::vector<std::pair<VerdictClass, std::string>>& turns,
             const std::string& prose = "Here it is.") {
    TrajectoryHeader header;
    header.run.model = "openai:m";
    header.run.task = "gemm_n7168_k5120";
    header.run.arch = "sm_90a";
    header.run.knowledge = knowledge;
    header.run.trajectory_index = index;
    header.run.turns = 8;
    header.run.scope = scope;
    header.started_at = "2026-12-01T00:00:0" + std::to_string(index) + "Z";
    TrajectoryWriter writer = ValueOrFail(TrajectoryWriter::Create(
        absl::StrCat(path(), "/", knowledge, "/traj-0", index, ".jsonl"), header));
    std::vector<ChatMessage> prompt = {{"system", "You write GPU kernels."}, {"user", task_prompt}};
    for (size_t i = 0; i < turns.size(); ++i) {
      TurnRecord turn;
      turn.turn = static_cast<int>(i) + 1;
      turn.prompt_messages = prompt;
      turn.source = turns[i].second;
      turn.reply = absl::StrCat(prose, "\n```cuda\n", turn.source, "\n```");
      turn.extracted = true;
      turn.language = "cuda";
      Verdict verdict;
      verdict.verdict_class = turns[i].first;
      verdict.compiled = turns[i].first != VerdictClass::kCompileError;
      verdict.correct = verdict.tic = turns[i].first == VerdictClass::kPass;
      verdict.target_executed = verdict.tic;
      verdict.speedup = verdict.tic ? 1.1 : 0;
      // Judged by the current harness: its engine and the task's current task.json.
      verdict.harness.engine = kHarnessVersion;
      verdict.harness.task_hash = CurrentTaskHash(header.run.task);
      turn.verdict = verdict;
      turn.feedback = absl::StrCat("verdict ", VerdictClassName(turns[i].first));
      REQUIRE(writer.AppendTurn(turn).ok());
      prompt.push_back({"assistant", turn.reply});
      prompt.push_back({"user", absl::StrCat("Feedback on attempt ", i + 1, ":\n\n", turn.feedback,
                                             "\nFix it.")});
    }
    REQUIRE(writer.AppendEnd({EndReason::kTurnLimit, "", "2026-12-01T00:01:00Z"}).ok());
  }

 private:
  ScopedTempDir dir_;
};

std::vector<json> ExportRun(const std::vector<std::string>& flags, const std::string& run,
                            json* summary, std::string* printed = nullptr) {
  ScopedTempDir out_dir("ptxbench-export-out-");
  std::vector<std::string> args = flags;
  args.insert(args.end(),
              {"--tasks-dir", TasksDir(), "--out", out_dir.path() + "/rows.jsonl", run});
  std::ostringstream out;
  std::ostringstream err;
  INFO(err.str());
  REQUIRE(ExportCommand(args, out, err) == 0);
  if (printed != nullptr) *printed = out.str();
  std::vector<json> rows;
  std::ifstream in(out_dir.path() + "/rows.jsonl");
  for (std::string line; std::getline(in, line);) rows.push_back(json::parse(line));
  *summary = json::parse(ReadWholeFile(out_dir.path() + "/rows.summary.json"));
  return rows;
}

TEST_CASE("compile-only runs give fixit rows only as compile repairs, when asked") {
  RunDir run;
  run.Write("none", 0, v1::EVALUATION_SCOPE_COMPILE_ONLY, "Task",
            {{VerdictClass::kCompileError, "broken"}, {VerdictClass::kCompiled, "fixed"}});
  run.Write("none", 1, v1::EVALUATION_SCOPE_COMPILE_ONLY, "Task",
            {{VerdictClass::kCompiled, "first-try"}, {VerdictClass::kCompiled, "again"}});
  json summary;
  std::string printed;
  std::vector<json> rows = ExportRun({"--format", "fixit"}, run.path(), &summary, &printed);
  CHECK(rows.empty());
  CHECK(summary["excluded"]["compile_only_trajectories"] == 2);
  CHECK_THAT(printed, Contains("--compile-repairs"));

  rows = ExportRun({"--format", "fixit", "--compile-repairs", "--metadata"}, run.path(), &summary);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0]["metadata"]["class"] == "compile_error");
  CHECK(rows[0]["metadata"]["turns"] == json::array({1, 2}));
  CheckPromptIsWhatTheModelSaw(rows[0]);
  CHECK(rows[0]["messages"][3]["content"] ==
        "Feedback on attempt 1:\n\nverdict compile_error\nFix it.");
  CHECK(rows[0]["messages"][4]["content"] == "Here it is.\n```cuda\nfixed\n```");
  CHECK(summary["compile_repairs"] == true);

  std::ostringstream out;
  std::ostringstream err;
  CHECK(ExportCommand({"--format", "kernelgen", "--compile-repairs", "--out",
                       run.path() + "/x.jsonl", run.path()},
                      out, err) == 2);
  CHECK_THAT(err.str(), Contains("--compile-repairs needs --format fixit"));
}

TEST_CASE("dedup keeps rows whose prompts differ and drops those that repeat one") {
  RunDir run;
  // The same TIC kernel under two knowledge levels: two prompts, two rows.
  run.Write("none", 0, v1::EVALUATION_SCOPE_FULL, "Task, no knowledge",
            {{VerdictClass::kPass, "same-kernel"}});
  run.Write("templates", 0, v1::EVALUATION_SCOPE_FULL, "Task, with templates",
            {{VerdictClass::kPass, "same-kernel"}});
  // The same prompt and kernel again, other prose around it: one row with the first.
  run.Write("none", 1, v1::EVALUATION_SCOPE_FULL, "Task, no knowledge",
            {{VerdictClass::kPass, "same-kernel"}}, "Other words.");
  json summary;
  std::vector<json> rows = ExportRun({"--format", "kernelgen"}, run.path(), &summary);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0]["messages"][1]["content"] != rows[1]["messages"][1]["content"]);
  CHECK(summary["excluded"]["duplicate"] == 1);
}

TEST_CASE("export refuses bad flags and malformed files with a clear message") {
  ScopedTempDir dir("ptxbench-export-");
  std::ostringstream out;
  std::ostringstream err;
  CHECK(ExportCommand({"--out", dir.path() + "/x.jsonl", FixtureDir()}, out, err) == 2);
  CHECK_THAT(err.str(), Contains("--format is required"));
  CHECK(ExportCommand({"--format", "sft", "--out", dir.path() + "/x.jsonl", FixtureDir()}, out,
                      err) == 2);
  CHECK_THAT(err.str(), Contains("unknown export format 'sft'"));
  CHECK(ExportCommand({"--format", "fixit", "--max-per-class", "-1", "--out",
                       dir.path() + "/x.jsonl", FixtureDir()},
                      out, err) == 2);
  CHECK_THAT(err.str(), Contains("--max-per-class must not be negative"));

  const std::string broken = dir.path() + "/run/m/t/sm_90a/none/traj-00.jsonl";
  fs::create_directories(fs::path(broken).parent_path());
  std::ofstream(broken) << "{\"kind\":\"header\"}\n";
  CHECK(ExportCommand({"--format", "fixit", "--out", dir.path() + "/x.jsonl", dir.path() + "/run"},
                      out, err) == 2);
  CHECK_THAT(err.str(), Contains(broken + ":1: missing field 'run'"));
}

// A copy of the current fixture whose first TIC turn of the file `relative` has its verdict's
// harness `field` ("engine" or "task_hash") set to `value`.
std::string FixtureWithOneHarnessChanged(const std::string& dir, const std::string& relative,
                                         const std::string& field, const std::string& value) {
  const std::string copy = dir + "/report";
  fs::copy(FixtureDir(), copy, fs::copy_options::recursive);
  std::string file = copy + "/" + relative;
  std::string text = ReadWholeFile(file);
  const size_t pass = text.find(R"("verdict_class":"pass")");
  REQUIRE(pass != std::string::npos);
  const size_t begin = text.rfind(absl::StrCat("\"", field, "\":\""), pass);
  REQUIRE(begin != std::string::npos);
  const size_t value_begin = begin + field.size() + 4;
  text.replace(value_begin, text.find('"', value_begin) - value_begin, value);
  std::ofstream(file, std::ios::binary | std::ios::trunc) << text;
  return file;
}

// A copy of the fixture where the first TIC turn of one trajectory was judged by an older
// harness: that kernel must not become a training row, and it is named on stderr.
TEST_CASE("a TIC turn of an older harness is left out and named") {
  ScopedTempDir dir("ptxbench-export-harness-");
  const std::string file = FixtureWithOneHarnessChanged(
      dir.path(), "openai_model-a/gemm_n7168_k5120/sm_90a/templates/traj-00.jsonl", "engine",
      "0.1.0");

  std::ostringstream out;
  std::ostringstream err;
  REQUIRE(ExportCommand({"--format", "kernelgen", "--tasks-dir", TasksDir(), "--out",
                         dir.path() + "/rows.jsonl", dir.path() + "/report"},
                        out, err) == 0);
  const json summary = json::parse(ReadWholeFile(dir.path() + "/rows.summary.json"));
  CHECK(summary["excluded"]["not_current_tic"] == 1);
  CHECK(summary["excluded"]["not_current_tic_by_reason"]["harness_engine"] == 1);
  CHECK(summary["excluded"]["not_current_tic_by_reason"]["task_content"] == 0);
  REQUIRE(summary["left_out"].size() == 1);
  CHECK(summary["left_out"][0]["kind"] == "harness_engine");
  CHECK_THAT(summary["left_out"][0]["reason"].get<std::string>(),
             Contains("harness engine '0.1.0', not the current '0.2.0'"));
  CHECK_THAT(err.str(), Contains("left out: " + file));
  CHECK_THAT(out.str(), Contains("1 TIC turns left out"));
  CHECK_THAT(out.str(), Contains("1 harness_engine"));
}

// The harness is the engine and the task's content: a TIC turn judged by the current engine
// but under an older task.json (another tolerance, other workloads) is not current-harness TIC.
TEST_CASE("a TIC turn judged under another task.json is left out and counted by reason") {
  ScopedTempDir dir("ptxbench-export-task-hash-");
  const std::string old_hash(64, 'a');
  const std::string file = FixtureWithOneHarnessChanged(
      dir.path(), "openai_model-a/gemm_n7168_k5120/sm_90a/templates/traj-00.jsonl", "task_hash",
      old_hash);
  std::ostringstream out;
  std::ostringstream err;
  REQUIRE(ExportCommand({"--format", "kernelgen", "--tasks-dir", TasksDir(), "--out",
                         dir.path() + "/rows.jsonl", dir.path() + "/report"},
                        out, err) == 0);
  json summary = json::parse(ReadWholeFile(dir.path() + "/rows.summary.json"));
  CHECK(summary["excluded"]["not_current_tic"] == 1);
  CHECK(summary["excluded"]["not_current_tic_by_reason"]["task_content"] == 1);
  CHECK(summary["tasks_dir"] == TasksDir());
  REQUIRE(summary["left_out"].size() == 1);
  CHECK(summary["left_out"][0]["file"] == file);
  CHECK(summary["left_out"][0]["kind"] == "task_content");
  CHECK_THAT(summary["left_out"][0]["reason"].get<std::string>(),
             Contains("judged under another task.json of gemm_n7168_k5120 (task hash '" + old_hash +
                      "', the catalog's is '" + CurrentTaskHash("gemm_n7168_k5120") + "'"));
  CHECK_THAT(err.str(), Contains("left out: " + file + " turn 2"));
  CHECK_THAT(out.str(), Contains("1 task_content"));
  // That kernel alone is missing from the rows of the current fixture.
  ScopedTempDir current("ptxbench-export-task-hash-current-");
  json current_summary;
  Export({"--format", "kernelgen"}, current.path(), &current_summary);
  CHECK(current_summary["excluded"]["not_current_tic"] == 0);
  CHECK(current_summary["rows"].get<int>() == summary["rows"].get<int>() + 1);

  // A catalog without the run's tasks: none of their TIC turns is current, each says why.
  auto trajectories = ValueOrFail(LoadTrajectories({FixtureDir()}));
  ExportOptions options;
  options.tasks_dir = "/elsewhere/tasks";
  options.current_task_hashes = {{"gemm_n7168_k5120", CurrentTaskHash("gemm_n7168_k5120")}};
  ExportResult result = BuildExport(trajectories, options);
  REQUIRE_FALSE(result.left_out.empty());
  for (const LeftOutTurn& turn : result.left_out) {
    INFO(turn.file);
    CHECK(turn.file.find("mha_with_lse_d128") != std::string::npos);
    CHECK(turn.kind == LeftOutKind::kTaskContent);
    CHECK_THAT(turn.reason, Contains("task mha_with_lse_d128 is not in the task catalog "
                                     "/elsewhere/tasks"));
  }
  CHECK(result.summary["excluded"]["not_current_tic_by_reason"]["task_content"] ==
        result.left_out.size());
}

// The server's current verdicts (what --server fetches) replace the files': a turn re-judged
// to wrong_result, one marked hacked and one the server does not know are all left out.
TEST_CASE("current verdicts from the server decide which turns are exported") {
  auto trajectories = ValueOrFail(LoadTrajectories({FixtureDir()}));
  ExportOptions options;
  for (const char* task : {"gemm_n7168_k5120", "mha_with_lse_d128"}) {
    options.current_task_hashes[task] = CurrentTaskHash(task);
  }
  ExportResult stored = BuildExport(trajectories, options);
  REQUIRE(stored.left_out.empty());
  REQUIRE_FALSE(stored.rows.empty());

  // Give every turn a submission id, and the server the stored verdicts, except three.
  std::map<std::string, CurrentVerdict> current;
  std::vector<std::string> tic_ids;
  int n = 0;
  for (Trajectory& t : trajectories) {
    for (TurnRecord& turn : t.turns) {
      turn.submission_id = absl::StrCat("sub-", n++);
      current[turn.submission_id].verdict = turn.verdict;
      if (IsTic(turn) && turn.extracted) tic_ids.push_back(turn.submission_id);
    }
  }
  REQUIRE(tic_ids.size() >= 3);
  current[tic_ids[0]].verdict->verdict_class = VerdictClass::kWrongResult;
  current[tic_ids[0]].verdict->tic = false;
  current[tic_ids[1]].hacked_reason = "reads the reference output";
  current.erase(tic_ids[2]);
  options.current_verdicts = current;
  ExportResult result = BuildExport(trajectories, options);
  REQUIRE(result.left_out.size() == 3);
  std::map<std::string, std::string> reasons;
  for (const LeftOutTurn& turn : result.left_out) reasons[turn.submission_id] = turn.reason;
  CHECK_THAT(reasons[tic_ids[0]], Contains("current verdict is wrong_result"));
  CHECK_THAT(reasons[tic_ids[1]], Contains("marked hacked: reads the reference output"));
  CHECK_THAT(reasons[tic_ids[2]], Contains("the server does not know submission " + tic_ids[2]));
  const json& by_reason = result.summary["excluded"]["not_current_tic_by_reason"];
  CHECK(by_reason["not_tic_now"] == 1);
  CHECK(by_reason["hacked"] == 1);
  CHECK(by_reason["no_current_verdict"] == 1);
  CHECK(result.summary["current_verdicts_from_server"] == true);
  CHECK(result.rows.size() <= stored.rows.size());
  for (const nlohmann::ordered_json& row : result.rows) {
    CHECK(row.dump().find("reads the reference output") == std::string::npos);
  }
}

}  // namespace
}  // namespace ptxbench::client::report
