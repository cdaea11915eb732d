// `ptxbench report --server` against a real server over loopback (a real store on a fresh
// PostgreSQL, a worker speaking WorkerService). Five one-turn trajectories whose files record
// the verdicts their submissions first got (as `ptxbench run` writes them); then on the server
// one submission is re-judged from pass to wrong_result, one from wrong_result to pass, one is
// marked hacked, and one has kept a pass with an unstable speedup. With --server the figures
// follow the current verdicts, the hacked turn credits nothing, and the changes and the mark
// are listed; without it the report says that it shows the verdicts the files recorded.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/report/commands.h"
#include "client/trajectory.h"
#include "common/sha256.h"
#include "nlohmann/json.hpp"
#include "tests/client/server_rounds.h"
#include "tests/server/api/api_test_support.h"
#include "tests/support/temp_files.h"

namespace ptxbench::client {
namespace {

using api_test::FakeWorker;
using api_test::TestServer;
using Catch::Matchers::Contains;
using ::ptxbench::testing::ReadWholeFile;
using ::ptxbench::testing::ScopedTempDir;
using json = nlohmann::json;

// A verdict of `verdict_class`; a pass whose samples scattered when `unstable`.
v1::Verdict VerdictOf(v1::VerdictClass verdict_class, bool unstable = false) {
  v1::Verdict verdict = api_test::MakeVerdict(verdict_class);
  if (verdict_class == v1::VERDICT_CLASS_PASS) {
    v1::Sampling* sampling = verdict.mutable_sampling();
    sampling->set_stop_reason(unstable ? "sample_cap" : "converged");
    sampling->set_converged(!unstable);
    sampling->set_speedup_stable(!unstable);
    sampling->set_candidate_scatter(unstable ? 0.2 : 0.004);
    sampling->set_baseline_scatter(0.003);
  }
  return verdict;
}

v1::Submission GetSubmission(TestServer& server, const std::string& token, const std::string& id) {
  grpc::ClientContext context;
  api_test::WithDeadline(&context);
  Authorize(&context, token);
  v1::GetSubmissionRequest request;
  request.set_submission_id(id);
  v1::Submission submission;
  grpc::Status status = server.submissions()->GetSubmission(&context, request, &submission);
  INFO(status.error_message());
  REQUIRE(status.ok());
  return submission;
}

// A one-turn trajectory of `submission` whose file records the verdict it has now on the
// server, converted as `ptxbench run` converts it.
void WriteTrajectory(const std::string& dir, int index, const v1::Submission& submission,
                     const std::string& source) {
  TrajectoryHeader header;
  header.run.model = "openai:m";
  header.run.task = api_test::kTaskId;
  header.run.arch = "sm_90a";
  header.run.knowledge = "none";
  header.run.trajectory_index = index;
  header.run.turns = 1;
  header.started_at = absl::StrCat("2026-12-05T00:00:0", index, "Z");
  auto writer = TrajectoryWriter::Create(absl::StrCat(dir, "/traj-0", index, ".jsonl"), header);
  REQUIRE(writer.ok());
  TurnRecord turn;
  turn.turn = 1;
  turn.prompt_messages = {{"system", "You write GPU kernels."}, {"user", "Task: gemm"}};
  turn.source = source;
  turn.source_sha256 = Sha256Hex(source);
  turn.reply = absl::StrCat("```cuda\n", source, "\n```");
  turn.extracted = true;
  turn.language = "cuda";
  turn.submission_id = submission.id();
  absl::StatusOr<Verdict> verdict = VerdictFromWire(submission.verdict());
  REQUIRE(verdict.ok());
  turn.verdict = *verdict;
  REQUIRE(writer->AppendTurn(turn).ok());
  REQUIRE(writer->AppendEnd({EndReason::kTurnLimit, "", "2026-12-05T00:01:00Z"}).ok());
}

TEST_CASE("report --server: current verdicts, hacked turns left out, changes listed",
          "[client][report][rejudge]") {
  TestServer server;
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  FakeWorker worker(server.channel(), server.CreateToken("fleet", v1::ROLE_WORKER), v1::ARCH_SM_90A,
                    "GPU-report");
  REQUIRE(worker.Register().ok());
  worker.OpenLease(1);

  // The first judging, as the run saw it: 0 pass, 1 pass, 2 wrong_result, 3 pass, 4 pass with
  // an unstable speedup.
  const std::vector<v1::Verdict> first = {
      VerdictOf(v1::VERDICT_CLASS_PASS), VerdictOf(v1::VERDICT_CLASS_PASS),
      VerdictOf(v1::VERDICT_CLASS_WRONG_RESULT), VerdictOf(v1::VERDICT_CLASS_PASS),
      VerdictOf(v1::VERDICT_CLASS_PASS, /*unstable=*/true)};
  std::vector<std::string> ids;
  std::vector<std::string> sources;
  for (size_t i = 0; i < first.size(); ++i) {
    v1::SubmitRequest request = api_test::ValidSubmit(/*full=*/true);
    request.set_source(absl::StrCat(request.source(), "// kernel ", i, "\n"));
    request.set_session_id(absl::StrCat("traj-", i));
    v1::SubmitResponse response;
    grpc::Status status = api_test::Submit(server, vendor, request, &response);
    INFO(status.error_message());
    REQUIRE(status.ok());
    ids.push_back(response.submission().id());
    sources.push_back(request.source());
    testing::JudgeOpenRound(worker, ids.back(), first[i]);
  }
  ScopedTempDir dir("ptxbench-report-server-");
  const std::string runs = dir.path() + "/runs";
  for (size_t i = 0; i < ids.size(); ++i) {
    WriteTrajectory(runs, static_cast<int>(i), GetSubmission(server, vendor, ids[i]), sources[i]);
  }

  // Since then: 0 was re-judged and fails, 2 was re-judged and passes, 1 was marked hacked.
  testing::RejudgeOne(server, ids[0]);
  testing::JudgeOpenRound(worker, ids[0], VerdictOf(v1::VERDICT_CLASS_WRONG_RESULT));
  testing::RejudgeOne(server, ids[2]);
  testing::JudgeOpenRound(worker, ids[2], VerdictOf(v1::VERDICT_CLASS_PASS));
  testing::MarkHacked(server, ids[1], "reads the reference output");
  const std::string token_file = dir.path() + "/token";
  std::ofstream(token_file) << vendor << "\n";

  {  // With --server the figures follow the current verdicts.
    const std::string out_dir = dir.path() + "/current";
    std::ostringstream out;
    std::ostringstream err;
    const int code = ReportCommand(
        {"--server", server.address(), "--token-file", token_file, "--out", out_dir, runs}, out,
        err);
    INFO(err.str() << out.str());
    REQUIRE(code == 0);
    const json report = json::parse(ReadWholeFile(out_dir + "/report.json"));
    REQUIRE(report["groups"].size() == 1);
    const json& g = report["groups"][0];
    // TIC now: 2 (re-judged to pass), 3, 4 (TIC, its speedup unstable). Not 0 (re-judged to
    // wrong_result), not 1 (hacked).
    CHECK(g["tic_rate_at_turn_limit"]["1"]["hits"] == 3);
    CHECK(g["tic_rate_at_turn_limit"]["1"]["total"] == 5);
    CHECK(g["correct_rate"]["hits"] == 3);
    // The hacked turn credits nothing, not even "compiled"; the re-judged failure compiled.
    CHECK(g["compiled_rate"]["hits"] == 4);
    // Speedups of 2 and 3 only: 4's is unstable, 1's hacked.
    CHECK(g["tic_speedups"] == json::array({1.25, 1.25}));
    CHECK(g["tic_turns_unstable_speedup"] == 1);
    CHECK(g["fast_p"]["fast_1.0"]["hits"] == 2);

    const json& verdicts = report["verdicts"];
    CHECK(verdicts["source"] == "server");
    CHECK(verdicts["server"] == server.address());
    REQUIRE(verdicts["changed"].size() == 2);
    CHECK(verdicts["changed"][0]["submission_id"] == ids[0]);
    CHECK_THAT(verdicts["changed"][0]["change"].get<std::string>(),
               Contains("pass (TIC, speedup 1.25) -> wrong_result"));
    CHECK(verdicts["changed"][1]["submission_id"] == ids[2]);
    CHECK_THAT(verdicts["changed"][1]["change"].get<std::string>(),
               Contains("wrong_result -> pass (TIC, speedup 1.25)"));
    REQUIRE(verdicts["hacked"].size() == 1);
    CHECK(verdicts["hacked"][0]["submission_id"] == ids[1]);
    CHECK(verdicts["hacked"][0]["reason"] == "reads the reference output");
    CHECK(verdicts["without_current_verdict"].empty());

    // The table and the Markdown say where the verdicts come from and list every change.
    CHECK_THAT(out.str(), Contains("verdicts: the current verdicts on " + server.address() +
                                   ": 2 turns' verdicts changed"));
    CHECK_THAT(out.str(), Contains("1 turns marked hacked"));
    CHECK_THAT(out.str(), Contains("changed: " + runs + "/traj-00.jsonl turn 1 (submission " +
                                   ids[0] + "): pass (TIC, speedup 1.25) -> wrong_result"));
    CHECK_THAT(out.str(), Contains("marked hacked: " + runs + "/traj-01.jsonl turn 1 (submission " +
                                   ids[1] + "): reads the reference output"));
    CHECK_THAT(out.str(), Contains("unstable speedups"));
    CHECK_THAT(out.str(), Contains("openai:m " + std::string(api_test::kTaskId) +
                                   " sm_90a none: 1 TIC turns"));
    const std::string markdown = ReadWholeFile(out_dir + "/report.md");
    CHECK_THAT(markdown, Contains("## Verdicts"));
    CHECK_THAT(markdown, Contains("reads the reference output"));
    CHECK_THAT(ReadWholeFile(out_dir + "/report.html"), Contains("reads the reference output"));
  }

  {  // Without --server the report shows the verdicts the files recorded, and says so.
    const std::string out_dir = dir.path() + "/recorded";
    std::ostringstream out;
    std::ostringstream err;
    REQUIRE(ReportCommand({"--out", out_dir, runs}, out, err) == 0);
    const json report = json::parse(ReadWholeFile(out_dir + "/report.json"));
    const json& g = report["groups"][0];
    CHECK(g["tic_rate_at_turn_limit"]["1"]["hits"] == 4);  // 0, 1, 3, 4 as first judged.
    CHECK(g["tic_speedups"] == json::array({1.25, 1.25, 1.25}));
    CHECK(report["verdicts"]["source"] == "trajectory files");
    CHECK_THAT(out.str(), Contains("verdicts: as recorded in the trajectory files, not checked "
                                   "against the server"));
  }

  {  // A token the server refuses fails the report, naming the server; nothing is written.
    std::ostringstream out;
    std::ostringstream err;
    std::ofstream(token_file, std::ios::trunc) << "not-a-token\n";
    const int code = ReportCommand({"--server", server.address(), "--token-file", token_file,
                                    "--retries", "1", "--out", dir.path() + "/refused", runs},
                                   out, err);
    CHECK(code == 2);
    CHECK_THAT(err.str(), Contains("ptxbench report: current verdicts from " + server.address()));
    CHECK_THAT(err.str(), Contains("nothing was written"));
    CHECK_FALSE(std::filesystem::exists(dir.path() + "/refused/report.json"));
  }
}

}  // namespace
}  // namespace ptxbench::client
