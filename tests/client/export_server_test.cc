// `ptxbench export --server` against a real server over loopback (a real store on a fresh
// PostgreSQL, a worker speaking WorkerService): trajectory files whose stored verdicts are all
// TIC, while on the server one submission was re-judged to wrong_result and one marked hacked;
// both are left out with their reasons, as are a turn whose id the server does not know and a
// turn that borrows another kernel's submission id; the others are kept. A server that cannot
// be reached is an error naming its address, and nothing is written.
#include "client/report/export_server.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/report/commands.h"
#include "client/report/export.h"
#include "client/trajectory.h"
#include "common/build_info.h"
#include "common/sha256.h"
#include "common/task.h"
#include "nlohmann/json.hpp"
#include "tests/client/server_rounds.h"
#include "tests/server/api/api_test_support.h"
#include "tests/support/status_testing.h"
#include "tests/support/temp_files.h"

namespace ptxbench::client {
namespace {

namespace fs = std::filesystem;
using api_test::FakeWorker;
using api_test::TestServer;
using Catch::Matchers::Contains;
using ::ptxbench::testing::ReadWholeFile;
using ::ptxbench::testing::ScopedTempDir;
using ::ptxbench::testing::ValueOrFail;
using json = nlohmann::json;

// The test server's task as its catalog holds it now: the hash a current verdict carries.
std::string CurrentTaskHash() {
  return ValueOrFail(LoadTask(api_test::TestTasksDir() + "/" + api_test::kTaskId)).JudgingHash();
}

// A verdict as the current harness's worker sends it (the harness recorded), judged under the
// task.json of `task_hash`.
v1::Verdict CurrentHarnessVerdict(v1::VerdictClass verdict_class, const std::string& task_hash) {
  v1::Verdict verdict = api_test::MakeVerdict(verdict_class);
  verdict.mutable_harness()->set_engine(kHarnessVersion);
  verdict.mutable_harness()->set_task_hash(task_hash);
  return verdict;
}

// Serves the open round of `id`: compile, then evaluate ending in `verdict_class`, judged
// under the task.json of `task_hash` (default: the current one).
void JudgeRound(FakeWorker& worker, const std::string& id, v1::VerdictClass verdict_class,
                const std::string& task_hash = CurrentTaskHash()) {
  testing::JudgeOpenRound(worker, id, CurrentHarnessVerdict(verdict_class, task_hash));
}

// One kernel of the files: its submission on the server (if any), its source, and the task
// hash its verdict in the file carries (empty: the current one).
struct Kernel {
  std::string submission_id;
  std::string source;
  std::string task_hash;
};

// A one-turn trajectory of `kernel` whose stored verdict is a TIC pass of the current harness
// engine, under the kernel's task hash.
void WriteTrajectory(const std::string& dir, int index, const Kernel& kernel) {
  TrajectoryHeader header;
  header.run.model = "openai:m";
  header.run.task = api_test::kTaskId;
  header.run.arch = "sm_90a";
  header.run.knowledge = "contract";
  header.run.trajectory_index = index;
  header.run.turns = 1;
  header.started_at = absl::StrCat("2026-12-02T00:00:0", index, "Z");
  auto writer = TrajectoryWriter::Create(absl::StrCat(dir, "/traj-0", index, ".jsonl"), header);
  REQUIRE(writer.ok());
  TurnRecord turn;
  turn.turn = 1;
  turn.prompt_messages = {{"system", "You write GPU kernels."}, {"user", "Task: gemm"}};
  turn.source = kernel.source;
  turn.source_sha256 = Sha256Hex(kernel.source);
  turn.reply = absl::StrCat("Here.\n```cuda\n", kernel.source, "\n```");
  turn.extracted = true;
  turn.language = "cuda";
  turn.submission_id = kernel.submission_id;
  Verdict verdict;
  verdict.verdict_class = VerdictClass::kPass;
  verdict.compiled = verdict.correct = verdict.target_executed = verdict.tic = true;
  verdict.speedup = 1.3;
  verdict.harness.engine = kHarnessVersion;
  verdict.harness.task_hash = kernel.task_hash.empty() ? CurrentTaskHash() : kernel.task_hash;
  turn.verdict = verdict;
  REQUIRE(writer->AppendTurn(turn).ok());
  REQUIRE(writer->AppendEnd({EndReason::kTicReached, "", "2026-12-02T00:01:00Z"}).ok());
}

TEST_CASE("export --server: re-judged, hacked, unknown and borrowed submissions are left out",
          "[client][export][rejudge]") {
  TestServer server;
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  FakeWorker worker(server.channel(), server.CreateToken("fleet", v1::ROLE_WORKER), v1::ARCH_SM_90A,
                    "GPU-export");
  REQUIRE(worker.Register().ok());
  worker.OpenLease(1);

  // Five kernels judged TIC by the current harness engine, the last under an older task.json
  // (judged before the task's tolerance changed, and not re-judged since).
  const std::string old_task_hash(64, 'e');
  std::vector<Kernel> judged;
  for (int i = 0; i < 5; ++i) {
    v1::SubmitRequest request = api_test::ValidSubmit(/*full=*/true);
    request.set_source(absl::StrCat(request.source(), "// kernel ", i, "\n"));
    request.set_turn_index(i);
    v1::SubmitResponse response;
    grpc::Status status = api_test::Submit(server, vendor, request, &response);
    INFO(status.error_message());
    REQUIRE(status.ok());
    const std::string task_hash = i == 4 ? old_task_hash : CurrentTaskHash();
    judged.push_back({response.submission().id(), request.source(), task_hash});
    JudgeRound(worker, judged.back().submission_id, v1::VERDICT_CLASS_PASS, task_hash);
  }
  const Kernel& kept = judged[0];
  const Kernel& rejudged = judged[1];
  const Kernel& hacked = judged[2];
  const Kernel& also_kept = judged[3];
  const Kernel& old_task = judged[4];

  // The harness changed: kernel 1 is re-judged and now fails.
  testing::RejudgeOne(server, rejudged.submission_id);
  JudgeRound(worker, rejudged.submission_id, v1::VERDICT_CLASS_WRONG_RESULT);
  // Kernel 2 games the harness, an admin found.
  testing::MarkHacked(server, hacked.submission_id, "reads the reference output");

  ScopedTempDir dir("ptxbench-export-server-");
  const std::string runs = dir.path() + "/runs";
  WriteTrajectory(runs, 0, kept);
  WriteTrajectory(runs, 1, rejudged);
  WriteTrajectory(runs, 2, hacked);
  WriteTrajectory(runs, 3, also_kept);
  // Attacks on the files: an id the server never issued, and a faster kernel of one's own
  // claiming the id of a kernel that passed.
  const std::string unknown_id = "00000000-0000-4000-8000-000000000000";
  WriteTrajectory(runs, 4, {unknown_id, "// a kernel the server never saw\n", ""});
  WriteTrajectory(runs, 5,
                  {kept.submission_id, "// another kernel, borrowing kernel 0's id\n", ""});
  WriteTrajectory(runs, 6, old_task);
  const std::string token_file = dir.path() + "/token";
  std::ofstream(token_file) << vendor << "\n";

  const std::string out_file = dir.path() + "/rows.jsonl";
  std::ostringstream out;
  std::ostringstream err;
  const int code = ExportCommand({"--server", server.address(), "--token-file", token_file,
                                  "--tasks-dir", api_test::TestTasksDir(), "--format", "kernelgen",
                                  "--assistant", "source", "--out", out_file, runs},
                                 out, err);
  INFO(err.str());
  REQUIRE(code == 0);

  std::vector<std::string> rows;
  std::istringstream lines(ReadWholeFile(out_file));
  for (std::string line; std::getline(lines, line);) rows.push_back(line);
  REQUIRE(rows.size() == 2);
  CHECK_THAT(rows[0], Contains("kernel 0"));
  CHECK_THAT(rows[1], Contains("kernel 3"));

  const json summary = json::parse(ReadWholeFile(dir.path() + "/rows.summary.json"));
  CHECK(summary["current_verdicts_from_server"] == true);
  CHECK(summary["server"] == server.address());
  CHECK(summary["excluded"]["not_current_tic"] == 5);
  const json& by_reason = summary["excluded"]["not_current_tic_by_reason"];
  CHECK(by_reason["not_tic_now"] == 1);
  CHECK(by_reason["hacked"] == 1);
  CHECK(by_reason["no_current_verdict"] == 2);
  CHECK(by_reason["task_content"] == 1);
  CHECK(by_reason["harness_engine"] == 0);
  std::map<std::string, std::string> reasons;  // By file name.
  for (const json& turn : summary["left_out"]) {
    reasons[fs::path(turn["file"].get<std::string>()).filename().string()] =
        turn["reason"].get<std::string>();
  }
  REQUIRE(reasons.size() == 5);
  CHECK_THAT(reasons["traj-06.jsonl"],
             Contains("judged under another task.json of " + std::string(api_test::kTaskId) +
                      " (task hash '" + old_task_hash + "', the catalog's is '" +
                      CurrentTaskHash() + "'"));
  CHECK_THAT(reasons["traj-01.jsonl"], Contains("its current verdict is wrong_result"));
  CHECK_THAT(reasons["traj-02.jsonl"], Contains("marked hacked: reads the reference output"));
  CHECK_THAT(reasons["traj-04.jsonl"],
             Contains("the server does not know submission " + unknown_id));
  CHECK_THAT(reasons["traj-05.jsonl"],
             Contains("the server's submission " + kept.submission_id + " is another source"));
  // Each is named on stderr, with its submission.
  CHECK_THAT(err.str(), Contains("traj-01.jsonl turn 1 (submission " + rejudged.submission_id +
                                 "): its current verdict is wrong_result"));
  CHECK_THAT(err.str(), Contains("traj-02.jsonl turn 1 (submission " + hacked.submission_id +
                                 "): marked hacked"));
  CHECK_THAT(out.str(), Contains("5 TIC turns left out"));
  CHECK_THAT(err.str(), Contains("traj-06.jsonl turn 1 (submission " + old_task.submission_id +
                                 "): judged under another task.json"));

  // Without --server the files' stored verdicts are all the export has: the six of the
  // current harness pass; the one judged under the older task.json still does not.
  std::ostringstream offline_out;
  std::ostringstream offline_err;
  REQUIRE(ExportCommand({"--tasks-dir", api_test::TestTasksDir(), "--format", "kernelgen", "--out",
                         dir.path() + "/offline.jsonl", runs},
                        offline_out, offline_err) == 0);
  const json offline = json::parse(ReadWholeFile(dir.path() + "/offline.summary.json"));
  CHECK(offline["rows"] == 6);
  CHECK(offline["current_verdicts_from_server"] == false);
  CHECK(offline["excluded"]["not_current_tic_by_reason"]["task_content"] == 1);
}

TEST_CASE("export --server: a server that cannot be reached fails the export, naming it",
          "[client][export]") {
  ScopedTempDir dir("ptxbench-export-unreachable-");
  const std::string runs = dir.path() + "/runs";
  WriteTrajectory(runs, 0, {"11111111-2222-4333-8444-555555555555", "// kernel\n", ""});
  // A port nothing listens on: bound, then closed by the server going away.
  std::string address;
  {
    TestServer gone;
    address = gone.address();
  }
  std::ostringstream out;
  std::ostringstream err;
  const std::string out_file = dir.path() + "/rows.jsonl";
  const int code = ExportCommand(
      {"--server", address, "--retries", "1", "--format", "kernelgen", "--out", out_file, runs},
      out, err);
  CHECK(code == 3);
  CHECK_THAT(err.str(), Contains("current verdicts from " + address));
  CHECK_THAT(err.str(), Contains("cannot reach the server at " + address));
  CHECK_THAT(err.str(), Contains("nothing was written"));
  CHECK_FALSE(fs::exists(out_file));
}

TEST_CASE("export: connection flags without --server are refused", "[client][export]") {
  ScopedTempDir dir("ptxbench-export-flags-");
  std::ostringstream out;
  std::ostringstream err;
  CHECK(ExportCommand({"--token-file", dir.path() + "/t", "--format", "kernelgen", "--out",
                       dir.path() + "/rows.jsonl", dir.path()},
                      out, err) == 2);
  CHECK_THAT(err.str(), Contains("--token-file needs --server"));
}

}  // namespace
}  // namespace ptxbench::client
