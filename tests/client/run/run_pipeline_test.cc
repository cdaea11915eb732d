// `ptxbench run` end to end on a CPU machine: the real ptxbench binary against the real
// ptxbench-server over a fresh PostgreSQL database, with real compile-only ptxbench-worker
// processes; only the model APIs are local HTTP stubs (stub_http_server.h). Submissions are
// compile-only, since CI has no GPU.
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/trajectory.h"
#include "tests/client/run/stub_http_server.h"
#include "tests/client/run/tcp_proxy.h"
#include "tests/server/api/api_test_support.h"
#include "tests/support/pg_fixture.h"
#include "tests/support/process.h"
#include "tests/support/temp_files.h"

namespace ptxbench::testing {
namespace {

const std::string kBin = PTXBENCH_BIN_DIR;
const std::string kSource = PTXBENCH_SOURCE_DIR_FOR_TESTS;
const std::string kTask = "gemm_n7168_k5120";

std::string TaskFile(const std::string& relative) {
  return absl::StrCat(kSource, "/tasks/", kTask, "/", relative);
}

// A model reply holding one task file in a fenced block, with prose around it.
std::string ReplyWith(const std::string& relative) {
  return absl::StrCat("Here is my kernel.\n\n```cuda\n", ReadWholeFile(TaskFile(relative)),
                      "```\n\nIt uses wgmma and TMA.");
}

// A compile error NVRTC reports as `identifier "accum" is undefined`.
const char kBroken[] = "decoys/compile_error_syntax.cu";
const char kFixed[] = "solutions/sm90a_wgmma_tma.cu";

StubResponse OpenAi(const std::string& content) {
  return StubResponse{200, OpenAiChatBody(content, 5000, 1500, 700), {}, 0};
}

// The server and a compile-only worker, real processes, on a fresh database.
class Stack {
 public:
  Stack() {
    auto database = TestDatabase::Create(/*migrate=*/false);
    REQUIRE(database.ok());
    database_ = std::move(*database);
    dir_ = MakeTempDir("ptxbench-run-test-");
    server_ =
        ChildProcess::Start({kBin + "/ptxbench-server", "serve", "--database-url", database_->url(),
                             "--listen", "127.0.0.1:0", "--metrics-listen", "off", "--tasks-dir",
                             kSource + "/tasks", "--migrations-dir", kSource + "/migrations"},
                            dir_ + "/server.log");
    REQUIRE(server_ != nullptr);
    address_ = WaitForServingAddress(*server_, absl::Seconds(60));
    INFO(server_->Log());
    REQUIRE_FALSE(address_.empty());
    worker_ =
        ChildProcess::Start({kBin + "/ptxbench-worker", "--compile-only", "--server", address_,
                             "--tasks-dir", kSource + "/tasks", "--hostname", "run-test-worker"},
                            dir_ + "/worker.log");
    REQUIRE(worker_ != nullptr);
    REQUIRE(worker_->WaitForLogLine("registered with", absl::Seconds(30)).has_value());
  }
  ~Stack() { std::filesystem::remove_all(dir_); }

  // The arguments of a compile-only `ptxbench run` against this stack.
  std::vector<std::string> RunArgs(const std::string& model, const std::string& base_url,
                                   const std::string& out, int turns, int trajectories) const {
    return {kBin + "/ptxbench",
            "run",
            "--server",
            address_,
            "--model",
            model,
            "--base-url",
            base_url,
            "--task",
            kTask,
            "--arch",
            "sm_90a",
            "--knowledge",
            "none",
            "--turns",
            std::to_string(turns),
            "--trajectories",
            std::to_string(trajectories),
            "--concurrency",
            "2",
            "--compile-only",
            "--retries",
            "3",
            "--retry-base-seconds",
            "0.01",
            "--out",
            out};
  }

  std::string Sql(const std::string& sql) {
    auto value = database_->Scalar(sql);
    INFO(sql);
    REQUIRE(value.ok());
    return value->value_or("NULL");
  }

  const std::string& dir() const { return dir_; }
  const std::string& address() const { return address_; }

 private:
  std::unique_ptr<TestDatabase> database_;
  std::string dir_;
  std::unique_ptr<ChildProcess> server_;
  std::unique_ptr<ChildProcess> worker_;
  std::string address_;
};

client::Trajectory ReadRun(const std::string& out, const std::string& model, int index) {
  client::RunConfig config;
  config.model = model;
  config.task = kTask;
  config.arch = "sm_90a";
  config.knowledge = "none";
  config.trajectory_index = index;
  auto trajectory = client::ReadTrajectory(client::TrajectoryPath(out, config));
  INFO(client::TrajectoryPath(out, config));
  REQUIRE(trajectory.ok());
  return *trajectory;
}

std::string SessionOf(const std::string& out, const client::Trajectory& trajectory) {
  return std::filesystem::path(trajectory.path).lexically_relative(out).string() + "@" +
         trajectory.header.started_at;
}

std::string Quoted(const std::string& text) { return "'" + text + "'"; }

// The one stack-* folder the embedded stack made under a PTXBENCH_STATE_DIR.
std::string StackDirUnder(const std::string& state) {
  std::vector<std::string> found;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(state, error)) {
    if (absl::StartsWith(entry.path().filename().string(), "stack-")) {
      found.push_back(entry.path().string());
    }
  }
  REQUIRE(found.size() == 1);
  return found[0];
}

TEST_CASE("run: a compile error, its log as feedback, then the fix, turns linked in the database") {
  Stack stack;
  StubHttpServer model([](const StubRequest& request) {
    return OpenAi(ReplyWith(TurnOfRequest(request) == 1 ? kBroken : kFixed));
  });
  const std::string out = stack.dir() + "/out";
  CommandResult r = RunCommand(stack.RunArgs("openai:stub-model", model.url() + "/v1", out, 2, 2),
                               absl::Seconds(180));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(absl::StrContains(r.output, "2 trajectories"));
  CHECK(absl::StrContains(r.output, "4 turns run, 0 already done"));
  for (int index : {0, 1}) {
    client::Trajectory t = ReadRun(out, "openai:stub-model", index);
    CHECK(t.header.run.provider == "openai");
    CHECK(t.header.run.turns == 2);
    CHECK(t.header.run.context_policy == "full");
    CHECK_FALSE(t.header.run.task_version.empty());
    REQUIRE(t.turns.size() == 2);
    const client::TurnRecord& first = t.turns[0];
    CHECK(first.turn == 1);
    CHECK(first.extracted);
    CHECK(first.language == "cuda");
    CHECK(first.source == ReadWholeFile(TaskFile(kBroken)));
    CHECK(first.usage.input_tokens == 5000);
    CHECK(first.usage.output_tokens == 1500);
    CHECK(first.usage.reasoning_tokens == 700);
    REQUIRE(first.verdict.has_value());
    CHECK(first.verdict->verdict_class == VerdictClass::kCompileError);
    // The feedback carries the compiler's own words.
    CHECK(absl::StrContains(first.feedback, "## 1. Compile"));
    CHECK(absl::StrContains(first.feedback, "identifier \"accum\" is undefined"));
    CHECK(first.submission_id.size() == 36);
    const client::TurnRecord& second = t.turns[1];
    CHECK(second.turn == 2);
    REQUIRE(second.verdict.has_value());
    CHECK(second.verdict->verdict_class == VerdictClass::kCompiled);
    // The second prompt is the conversation: task, reply 1, feedback 1 with the compile log.
    REQUIRE(second.prompt_messages.size() == 4);
    CHECK(second.prompt_messages[2].content == ReplyWith(kBroken));
    CHECK(absl::StrContains(second.prompt_messages[3].content, "is undefined"));
    REQUIRE(t.end.has_value());
    CHECK(t.end->reason == client::EndReason::kTurnLimit);
    const std::string session = Quoted(SessionOf(out, t));
    CHECK(stack.Sql("SELECT count(*) FROM submissions WHERE session_id = " + session) == "2");
    CHECK(stack.Sql("SELECT id::text FROM submissions WHERE session_id = " + session +
                    " AND turn_index = 1") == second.submission_id);
    CHECK(stack.Sql("SELECT DISTINCT model FROM submissions WHERE session_id = " + session) ==
          "openai:stub-model");
  }
  // Every turn-2 request carried the compile log of turn 1.
  int second_turns = 0;
  for (const StubRequest& request : model.requests()) {
    if (TurnOfRequest(request) != 2) continue;
    ++second_turns;
    CHECK(absl::StrContains(request.body, "is undefined"));
  }
  CHECK(second_turns == 2);
}

TEST_CASE("run: no code in a reply is feedback and a charged turn, a 429 first is not charged") {
  Stack stack;
  std::atomic<int> calls{0};
  StubHttpServer model([&](const StubRequest& request) {
    if (++calls == 1) {
      return StubResponse{429, R"({"error": {"message": "rate limited"}})", {"Retry-After: 0"}, 0};
    }
    return OpenAi(TurnOfRequest(request) == 1 ? "I would rather explain the algorithm in words."
                                              : ReplyWith(kFixed));
  });
  const std::string out = stack.dir() + "/out";
  CommandResult r =
      RunCommand(stack.RunArgs("openai:m", model.url(), out, 2, 1), absl::Seconds(120));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  client::Trajectory t = ReadRun(out, "openai:m", 0);
  REQUIRE(t.turns.size() == 2);
  const client::TurnRecord& first = t.turns[0];
  CHECK_FALSE(first.infra_failed);
  CHECK_FALSE(first.extracted);
  CHECK(first.submission_id.empty());
  CHECK_FALSE(first.verdict.has_value());
  CHECK(absl::StrContains(first.feedback, "no fenced code block"));
  REQUIRE(first.infra_failures.size() == 1);
  CHECK(absl::StrContains(first.infra_failures[0].what, "429"));
  CHECK(t.turns[1].turn == 2);
  CHECK(absl::StrContains(t.turns[1].prompt_messages.back().content, "no fenced code block"));
  CHECK(t.charged_turns() == 2);
  CHECK(model.requests().size() == 3);
  CHECK(stack.Sql("SELECT count(*) FROM submissions WHERE session_id = " +
                  Quoted(SessionOf(out, t))) == "1");
}

TEST_CASE("run: 500s past the retry budget are infrastructure, not charged, the rerun resumes") {
  Stack stack;
  StubHttpServer model([](const StubRequest& request) {
    if (TurnOfRequest(request) == 2) {
      return StubResponse{500, R"({"error": {"message": "internal error"}})", {}, 0};
    }
    return OpenAi(ReplyWith(kBroken));
  });
  const std::string out = stack.dir() + "/out";
  const auto args = stack.RunArgs("openai:m", model.url(), out, 2, 1);
  CommandResult r = RunCommand(args, absl::Seconds(120));
  INFO(r.output);
  CHECK(r.exit_code == 3);
  CHECK(absl::StrContains(r.output, "stopped by infrastructure 1"));
  CHECK(absl::StrContains(r.output, "not charged"));
  client::Trajectory stopped = ReadRun(out, "openai:m", 0);
  REQUIRE(stopped.turns.size() == 2);
  CHECK_FALSE(stopped.turns[0].infra_failed);
  CHECK(stopped.turns[1].infra_failed);
  CHECK(stopped.turns[1].turn == 2);
  REQUIRE_FALSE(stopped.turns[1].infra_failures.empty());
  CHECK(absl::StrContains(stopped.turns[1].infra_failures.back().what, "HTTP 500"));
  CHECK(stopped.turns[1].infra_failures.back().attempts == 3);
  CHECK(stopped.charged_turns() == 1);
  CHECK_FALSE(stopped.finished());

  const size_t before = model.requests().size();
  CHECK(before == 4);  // Turn 1 once, turn 2 three times.
  model.set_handler([](const StubRequest& request) {
    return OpenAi(ReplyWith(TurnOfRequest(request) == 1 ? kBroken : kFixed));
  });
  CommandResult resumed = RunCommand(args, absl::Seconds(120));
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  CHECK(absl::StrContains(resumed.output, "1 turns run, 1 already done"));
  const std::vector<StubRequest> requests = model.requests();
  REQUIRE(requests.size() == before + 1);
  CHECK(TurnOfRequest(requests.back()) == 2);
  client::Trajectory done = ReadRun(out, "openai:m", 0);
  REQUIRE(done.turns.size() == 3);
  CHECK(done.turns[2].turn == 2);
  CHECK_FALSE(done.turns[2].infra_failed);
  REQUIRE(done.turns[2].verdict.has_value());
  CHECK(done.turns[2].verdict->verdict_class == VerdictClass::kCompiled);
  REQUIRE(done.end.has_value());
  CHECK(done.end->reason == client::EndReason::kTurnLimit);
}

TEST_CASE("run: a client killed mid-run resumes with the same command, finished turns kept") {
  Stack stack;
  StubHttpServer model([](const StubRequest& request) {
    StubResponse response = OpenAi(ReplyWith(TurnOfRequest(request) == 1 ? kBroken : kFixed));
    // Turn 2 hangs until the client is killed.
    if (TurnOfRequest(request) == 2) response.delay_seconds = 120;
    return response;
  });
  const std::string out = stack.dir() + "/out";
  const auto args = stack.RunArgs("openai:m", model.url(), out, 3, 1);
  auto client = ChildProcess::Start(args, stack.dir() + "/client.log");
  REQUIRE(client != nullptr);
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  auto waiting_for_turn_two = [&] {
    for (const StubRequest& request : model.requests()) {
      if (TurnOfRequest(request) == 2) return true;
    }
    return false;
  };
  while (!waiting_for_turn_two()) {
    INFO(client->Log());
    REQUIRE(absl::Now() < deadline);
    absl::SleepFor(absl::Milliseconds(50));
  }
  client->Signal(SIGKILL);
  REQUIRE(client->Wait(absl::Seconds(10)).has_value());
  client::Trajectory killed = ReadRun(out, "openai:m", 0);
  REQUIRE(killed.turns.size() == 1);
  CHECK_FALSE(killed.finished());

  const size_t before = model.requests().size();
  model.set_handler([](const StubRequest& request) {
    return OpenAi(ReplyWith(TurnOfRequest(request) == 1 ? kBroken : kFixed));
  });
  CommandResult resumed = RunCommand(args, absl::Seconds(120));
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  CHECK(absl::StrContains(resumed.output, "2 turns run, 1 already done"));
  const std::vector<StubRequest> requests = model.requests();
  REQUIRE(requests.size() == before + 2);
  for (size_t i = before; i < requests.size(); ++i) CHECK(TurnOfRequest(requests[i]) >= 2);
  client::Trajectory done = ReadRun(out, "openai:m", 0);
  REQUIRE(done.turns.size() == 3);
  CHECK(done.turns[0].submission_id == killed.turns[0].submission_id);
  CHECK(done.end.has_value());
  const std::string session = Quoted(SessionOf(out, done));
  CHECK(stack.Sql("SELECT count(*) FROM submissions WHERE session_id = " + session +
                  " AND turn_index = 0") == "1");
  CHECK(stack.Sql("SELECT count(*) FROM submissions WHERE session_id = " + session) == "3");
}

// CI has no GPU: this stand-in GPU worker speaks WorkerService like ptxbench-worker and
// completes the evaluations with the scripted verdict classes, in order (then pass).
class ScriptedGpuWorker {
 public:
  ScriptedGpuWorker(const std::string& address, std::vector<v1::VerdictClass> script)
      : worker_(api_test::DialTestServer(address), "", v1::ARCH_SM_90A, "GPU-scripted"),
        script_(std::move(script)) {
    REQUIRE(worker_.Register().ok());
    worker_.OpenLease(1);
    thread_ = std::thread([this] { Serve(); });
  }
  ~ScriptedGpuWorker() {
    stop_ = true;
    thread_.join();
    (void)worker_.CloseLease();
  }
  int evaluations() const { return evaluations_; }

 private:
  void Serve() {
    while (!stop_) {
      std::optional<v1::LeasedJob> job = worker_.NextJob(absl::Milliseconds(200));
      if (!job.has_value()) continue;
      if (job->kind() == v1::JOB_KIND_COMPILE) {
        (void)worker_.ReportStage(*job, v1::STAGE_COMPILE, true);
        (void)worker_.Complete(*job, api_test::MakeVerdict(v1::VERDICT_CLASS_COMPILED));
        continue;
      }
      const size_t index = static_cast<size_t>(evaluations_++);
      const v1::VerdictClass verdict_class =
          index < script_.size() ? script_[index] : v1::VERDICT_CLASS_PASS;
      v1::Verdict verdict = api_test::MakeVerdict(verdict_class);
      verdict.set_compiled(true);
      if (verdict_class == v1::VERDICT_CLASS_WRONG_RESULT) {
        verdict.set_message(
            "wrong result on workload 'small_square' (public seed): C: max abs error 105.2");
      }
      if (verdict_class == v1::VERDICT_CLASS_INFRASTRUCTURE_FAILURE) {
        // As a worker whose GPU failed: the server retries the job, then gives it this verdict.
        bool will_retry = false;
        (void)worker_.Fail(*job, v1::FAILURE_KIND_INFRASTRUCTURE, &will_retry);
        continue;
      }
      (void)worker_.ReportStage(*job, v1::STAGE_CORRECTNESS,
                                verdict_class == v1::VERDICT_CLASS_PASS);
      (void)worker_.Complete(*job, verdict);
    }
  }

  api_test::FakeWorker worker_;
  std::vector<v1::VerdictClass> script_;
  std::atomic<bool> stop_{false};
  std::atomic<int> evaluations_{0};
  std::thread thread_;
};

TEST_CASE("run: full scope stops a trajectory at TIC with the target speedup") {
  Stack stack;
  ScriptedGpuWorker gpu(stack.address(), {v1::VERDICT_CLASS_WRONG_RESULT});
  StubHttpServer model([](const StubRequest&) { return OpenAi(ReplyWith(kFixed)); });
  const std::string out = stack.dir() + "/out";
  std::vector<std::string> args = stack.RunArgs("openai:m", model.url(), out, 4, 1);
  args.erase(std::find(args.begin(), args.end(), "--compile-only"));
  args.insert(args.end(), {"--target-speedup", "1.2"});
  CommandResult r = RunCommand(args, absl::Seconds(180));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(absl::StrContains(r.output, "TIC 1"));
  client::Trajectory t = ReadRun(out, "openai:m", 0);
  REQUIRE(t.turns.size() == 2);  // Of 4 allowed: the second turn reached the target.
  REQUIRE(t.turns[0].verdict.has_value());
  CHECK(t.turns[0].verdict->verdict_class == VerdictClass::kWrongResult);
  CHECK(absl::StrContains(t.turns[0].feedback, "max abs error 105.2"));
  CHECK_FALSE(client::IsTic(t.turns[0]));
  CHECK(client::IsTic(t.turns[1]));
  CHECK(t.turns[1].verdict->speedup == Approx(1.25));
  REQUIRE(t.end.has_value());
  CHECK(t.end->reason == client::EndReason::kTicReached);
  CHECK(gpu.evaluations() == 2);
  CHECK(model.requests().size() == 2);
}

TEST_CASE("run: an infrastructure_failure verdict is evaluated again, the turn charged once") {
  Stack stack;
  // The server gives up on a job after 3 infrastructure failures (StoreOptions).
  ScriptedGpuWorker gpu(stack.address(), {v1::VERDICT_CLASS_INFRASTRUCTURE_FAILURE,
                                          v1::VERDICT_CLASS_INFRASTRUCTURE_FAILURE,
                                          v1::VERDICT_CLASS_INFRASTRUCTURE_FAILURE});
  StubHttpServer model([](const StubRequest&) { return OpenAi(ReplyWith(kFixed)); });
  const std::string out = stack.dir() + "/out";
  std::vector<std::string> args = stack.RunArgs("openai:m", model.url(), out, 3, 1);
  args.erase(std::find(args.begin(), args.end(), "--compile-only"));
  CommandResult r = RunCommand(args, absl::Seconds(180));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  client::Trajectory t = ReadRun(out, "openai:m", 0);
  REQUIRE(t.turns.size() == 1);  // The pass after the resubmission reached TIC at turn 1.
  const client::TurnRecord& turn = t.turns[0];
  CHECK_FALSE(turn.infra_failed);
  REQUIRE(turn.infra_failures.size() == 1);
  CHECK(absl::StrContains(turn.infra_failures[0].what, "infrastructure_failure"));
  CHECK(client::IsTic(turn));
  CHECK(t.end.has_value());
  CHECK(gpu.evaluations() == 4);
  CHECK(model.requests().size() == 1);  // The model was not asked again.
  // Two submissions of the same source for turn 0: the failed one and its replacement.
  CHECK(stack.Sql("SELECT count(*) FROM submissions WHERE session_id = " +
                  Quoted(SessionOf(out, t)) + " AND turn_index = 0") == "2");
}

TEST_CASE("run: the anthropic provider drives a run, key from ANTHROPIC_API_KEY") {
  Stack stack;
  StubHttpServer model([](const StubRequest&) {
    return StubResponse{
        200, AnthropicMessageBody(ReplyWith(kFixed), "thinking...", 3000, 900), {}, 0};
  });
  setenv("ANTHROPIC_API_KEY", "ak-run-test", 1);
  const std::string out = stack.dir() + "/out";
  CommandResult r = RunCommand(stack.RunArgs("anthropic:claude-stub", model.url(), out, 1, 1),
                               absl::Seconds(120));
  unsetenv("ANTHROPIC_API_KEY");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE(model.requests().size() == 1);
  CHECK(model.requests()[0].path == "/v1/messages");
  CHECK(model.requests()[0].headers.at("x-api-key") == "ak-run-test");
  client::Trajectory t = ReadRun(out, "anthropic:claude-stub", 0);
  CHECK(t.header.run.provider == "anthropic");
  REQUIRE(t.turns.size() == 1);
  CHECK(t.turns[0].usage.input_tokens == 3000);
  CHECK(t.turns[0].usage.output_tokens == 900);
  REQUIRE(t.turns[0].verdict.has_value());
  CHECK(t.turns[0].verdict->verdict_class == VerdictClass::kCompiled);
}

TEST_CASE("run: replay with no server given starts the embedded stack and stops it") {
  const std::string dir = MakeTempDir("ptxbench-run-replay-");
  // As root, the embedded PostgreSQL runs as 'postgres', which must reach its data folder.
  std::filesystem::permissions(
      dir, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
               std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
               std::filesystem::perms::others_exec);
  const std::string replay = dir + "/replay/" + kTask + "/sm_90a/traj-00";
  std::filesystem::create_directories(replay);
  std::filesystem::copy_file(TaskFile(kBroken), replay + "/turn-01.cu");
  std::ofstream(replay + "/turn-02.md") << ReplyWith(kFixed);
  unsetenv("PTXBENCH_SERVER");
  setenv("PTXBENCH_STATE_DIR", (dir + "/state").c_str(), 1);
  const std::string out = dir + "/out";
  CommandResult r =
      RunCommand({kBin + "/ptxbench", "run", "--model", "replay:" + dir + "/replay", "--task",
                  kTask, "--arch", "sm_90a", "--turns", "5", "--trajectories", "2",
                  "--compile-only", "--out", out, "--tasks-dir", kSource + "/tasks"},
                 absl::Seconds(300));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(absl::StrContains(r.output, "starting the embedded stack"));
  // The replay has no traj-01: skipped, no file.
  CHECK(absl::StrContains(r.output, "1 trajectories skipped"));
  // Compile-only: turn 2 compiled, so the trajectory is "compiled", never "failed".
  CHECK(absl::StrContains(r.output, "1/1 compiled 1 not compiled 0"));
  CHECK(absl::StrContains(r.output, "trajectories: compiled 1, not compiled 0"));
  client::RunConfig missing;
  missing.model = "replay:" + dir + "/replay";
  missing.task = kTask;
  missing.arch = "sm_90a";
  missing.knowledge = "none";
  missing.trajectory_index = 1;
  CHECK_FALSE(std::filesystem::exists(client::TrajectoryPath(out, missing)));
  client::Trajectory t = ReadRun(out, "replay:" + dir + "/replay", 0);
  CHECK(t.header.run.provider == "replay");
  // The header records the scope and where the run was evaluated.
  CHECK(t.header.run.scope == v1::EVALUATION_SCOPE_COMPILE_ONLY);
  CHECK(t.header.scope_recorded);
  CHECK(t.header.run.server == "embedded");
  REQUIRE(t.turns.size() == 2);
  REQUIRE(t.turns[0].verdict.has_value());
  CHECK(t.turns[0].verdict->verdict_class == VerdictClass::kCompileError);
  REQUIRE(t.turns[1].verdict.has_value());
  CHECK(t.turns[1].verdict->verdict_class == VerdictClass::kCompiled);
  REQUIRE(t.end.has_value());
  CHECK(t.end->reason == client::EndReason::kTurnLimit);  // The replay had two turns.
  // The stack lives apart from RUN_DIR (which holds results, not a PostgreSQL cluster), and
  // it stopped cleanly: the server took its SIGTERM as a graceful stop.
  CHECK_FALSE(std::filesystem::exists(out + "/stack"));
  const std::string stack_dir = StackDirUnder(dir + "/state");
  CHECK(absl::StrContains(r.output, "starting the embedded stack in " + stack_dir));
  CHECK(absl::StrContains(ReadWholeFile(stack_dir + "/server.log"), "stopping"));
  unsetenv("PTXBENCH_STATE_DIR");
  std::filesystem::remove_all(dir);
}

TEST_CASE("run: a killed run takes its embedded stack down, and the rerun resumes on its data") {
  const std::string dir = MakeTempDir("ptxbench-run-embedded-");
  std::filesystem::permissions(
      dir, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
               std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
               std::filesystem::perms::others_exec);
  StubHttpServer model([](const StubRequest& request) {
    StubResponse response = OpenAi(ReplyWith(TurnOfRequest(request) == 1 ? kBroken : kFixed));
    if (TurnOfRequest(request) == 2) response.delay_seconds = 120;  // Killed while waiting.
    return response;
  });
  unsetenv("PTXBENCH_SERVER");
  const std::string out = dir + "/out";
  const std::string stack_dir = dir + "/stack";
  const std::vector<std::string> args = {
      kBin + "/ptxbench", "run",   "--model", "openai:m",    "--base-url",       model.url(),
      "--task",           kTask,   "--turns", "2",           "--trajectories",   "1",
      "--compile-only",   "--out", out,       "--tasks-dir", kSource + "/tasks", "--stack-dir",
      stack_dir};
  auto client = ChildProcess::Start(args, dir + "/client.log");
  REQUIRE(client != nullptr);
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  auto turn_two_asked = [&] {
    for (const StubRequest& request : model.requests()) {
      if (TurnOfRequest(request) == 2) return true;
    }
    return false;
  };
  while (!turn_two_asked()) {
    INFO(client->Log());
    REQUIRE(absl::Now() < deadline);
    absl::SleepFor(absl::Milliseconds(50));
  }
  client->Signal(SIGKILL);
  REQUIRE(client->Wait(absl::Seconds(10)).has_value());
  // The stack's programs got SIGTERM when their parent died: the server stops gracefully.
  const absl::Time stop_deadline = absl::Now() + absl::Seconds(60);
  while (!absl::StrContains(ReadWholeFile(stack_dir + "/server.log"), "stopping")) {
    INFO(ReadWholeFile(stack_dir + "/server.log"));
    REQUIRE(absl::Now() < stop_deadline);
    absl::SleepFor(absl::Milliseconds(100));
  }
  model.set_handler([](const StubRequest& request) {
    return OpenAi(ReplyWith(TurnOfRequest(request) == 1 ? kBroken : kFixed));
  });
  std::vector<std::string> again = args;
  CommandResult resumed = RunCommand(again, absl::Seconds(300));
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  CHECK(absl::StrContains(resumed.output, "1 turns run, 1 already done"));
  client::Trajectory t = ReadRun(out, "openai:m", 0);
  REQUIRE(t.turns.size() == 2);
  REQUIRE(t.turns[1].verdict.has_value());
  CHECK(t.turns[1].verdict->verdict_class == VerdictClass::kCompiled);
  CHECK(t.end.has_value());
  std::filesystem::remove_all(dir);
}

TEST_CASE("run: an unreachable server is retried with backoff, then reported as infrastructure") {
  StubHttpServer model([](const StubRequest&) { return OpenAi(ReplyWith(kFixed)); });
  std::string closed_port;
  {
    StubHttpServer gone([](const StubRequest&) { return StubResponse{}; });
    closed_port = std::to_string(gone.port());
  }
  const std::string dir = MakeTempDir("ptxbench-run-unreachable-");
  CommandResult r =
      RunCommand({kBin + "/ptxbench", "run", "--server", "127.0.0.1:" + closed_port, "--model",
                  "openai:m", "--base-url", model.url(), "--task", kTask, "--out", dir + "/out",
                  "--retries", "3", "--retry-base-seconds", "0.01"},
                 absl::Seconds(120));
  INFO(r.output);
  CHECK(r.exit_code == 3);
  CHECK(absl::StrContains(r.output, "task 'gemm_n7168_k5120' for sm_90a"));
  CHECK(model.requests().empty());  // Nothing was asked of the model.
  std::filesystem::remove_all(dir);
}

TEST_CASE("run: reasoning is kept in the trajectory and never sent back; its tokens not reported") {
  Stack stack;
  // DeepSeek-R1 style through a server without a reasoning parser (vLLM's usage: no count).
  StubHttpServer model([](const StubRequest& request) {
    const std::string content =
        absl::StrCat("<think>turn ", TurnOfRequest(request), ": I should use wgmma.</think>\n",
                     ReplyWith(TurnOfRequest(request) == 1 ? kBroken : kFixed));
    return StubResponse{200,
                        ChatCompletionBody({{"role", "assistant"}, {"content", content}},
                                           {{"prompt_tokens", 100}, {"completion_tokens", 50}},
                                           TurnOfRequest(request) == 1 ? "length" : "stop"),
                        {},
                        0};
  });
  const std::string out = stack.dir() + "/out";
  CommandResult r =
      RunCommand(stack.RunArgs("openai:r1", model.url(), out, 2, 1), absl::Seconds(180));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(absl::StrContains(r.output, "reasoning not reported by the provider"));
  client::Trajectory t = ReadRun(out, "openai:r1", 0);
  REQUIRE(t.turns.size() == 2);
  CHECK(t.turns[0].reasoning == "turn 1: I should use wgmma.");
  CHECK(t.turns[0].stop_reason == "length");
  CHECK(t.turns[1].stop_reason == "stop");
  CHECK(absl::StartsWith(t.turns[0].reply, "<think>"));  // The reply is kept as it came.
  CHECK_FALSE(t.turns[0].usage.reasoning_tokens.has_value());
  // Turn 2's prompt holds turn 1's answer without its reasoning.
  REQUIRE(t.turns[1].prompt_messages.size() == 4);
  CHECK(t.turns[1].prompt_messages[2].role == "assistant");
  CHECK(t.turns[1].prompt_messages[2].content == ReplyWith(kBroken));
  for (const StubRequest& request : model.requests()) {
    CHECK_FALSE(absl::StrContains(request.body, "I should use wgmma"));
  }
}

TEST_CASE("run and submit: an unknown task id is a usage error with the server's task ids") {
  Stack stack;
  StubHttpServer model([](const StubRequest&) { return OpenAi(ReplyWith(kFixed)); });
  std::vector<std::string> args =
      stack.RunArgs("openai:m", model.url(), stack.dir() + "/out", 1, 1);
  *std::find(args.begin(), args.end(), kTask) = "gemm_typo";
  CommandResult r = RunCommand(args, absl::Seconds(60));
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(absl::StrContains(r.output, "unknown task 'gemm_typo'"));
  CHECK(absl::StrContains(r.output, "hint: the server's tasks are "));
  CHECK(absl::StrContains(r.output, kTask));
  CHECK(model.requests().empty());
  CommandResult submit =
      RunCommand({kBin + "/ptxbench", "submit", "--server", stack.address(), "--task", "gemm_typo",
                  "--arch", "sm_90a", "--compile-only", TaskFile(kFixed)},
                 absl::Seconds(60));
  INFO(submit.output);
  CHECK(submit.exit_code == 2);
  CHECK(absl::StrContains(submit.output, "hint: the server's tasks are "));
  CHECK_FALSE(absl::StrContains(submit.output, "(3)"));  // Code names, not numbers.
}

// A ptxbench-server that the test stops and starts again on the same database, reached
// through a proxy whose address stays the same, with a compile-only worker when asked for.
class RestartableStack {
 public:
  RestartableStack() : proxy_("127.0.0.1:1") {
    auto database = TestDatabase::Create(/*migrate=*/false);
    REQUIRE(database.ok());
    database_ = std::move(*database);
    dir_ = MakeTempDir("ptxbench-restart-test-");
    StartServer();
  }
  ~RestartableStack() {
    worker_.reset();
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  void StartServer() {
    const std::string log = absl::StrCat(dir_, "/server-", ++starts_, ".log");
    server_ =
        ChildProcess::Start({kBin + "/ptxbench-server", "serve", "--database-url", database_->url(),
                             "--listen", "127.0.0.1:0", "--metrics-listen", "off", "--tasks-dir",
                             kSource + "/tasks", "--migrations-dir", kSource + "/migrations"},
                            log);
    REQUIRE(server_ != nullptr);
    auto line = server_->WaitForLogLine("ptxbench-server serving grpc=", absl::Seconds(60));
    INFO(server_->Log());
    REQUIRE(line.has_value());
    const size_t at = line->find("grpc=") + 5;
    proxy_.set_upstream(line->substr(at, line->find(' ', at) - at));
  }
  // SIGKILL: a crash; SIGTERM: a graceful stop (in-flight calls end CANCELLED or UNAVAILABLE).
  void StopServer(int signal) {
    server_->Signal(signal);
    REQUIRE(server_->Wait(absl::Seconds(60)).has_value());
    proxy_.set_upstream("127.0.0.1:1");  // Nothing listens there: connections are refused.
    proxy_.CutAll();
  }
  void StartWorker() {
    worker_ = ChildProcess::Start(
        {kBin + "/ptxbench-worker", "--compile-only", "--server", proxy_.address(), "--tasks-dir",
         kSource + "/tasks", "--hostname", "restart-test-worker"},
        dir_ + "/worker.log");
    REQUIRE(worker_ != nullptr);
    REQUIRE(worker_->WaitForLogLine("registered with", absl::Seconds(30)).has_value());
  }

  std::string Sql(const std::string& sql) {
    auto value = database_->Scalar(sql);
    INFO(sql);
    REQUIRE(value.ok());
    return value->value_or("NULL");
  }
  // Waits until `sql` answers `want`.
  void WaitForSql(const std::string& sql, const std::string& want, absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (Sql(sql) != want) {
      INFO(sql);
      REQUIRE(absl::Now() < deadline);
      absl::SleepFor(absl::Milliseconds(50));
    }
  }

  TcpProxy& proxy() { return proxy_; }
  const std::string& dir() const { return dir_; }

 private:
  TcpProxy proxy_;
  std::unique_ptr<TestDatabase> database_;
  std::string dir_;
  std::unique_ptr<ChildProcess> server_;
  std::unique_ptr<ChildProcess> worker_;
  int starts_ = 0;
};

TEST_CASE("submit: the reply lost after the commit, the retry returns the original submission") {
  RestartableStack stack;
  // The source carries a marker: the proxy lets the Submit through and drops its reply.
  const std::string marker = "lost-reply-marker-7f3a";
  const std::string source = stack.dir() + "/kernel.cu";
  std::ofstream(source) << "// " << marker << "\n" << ReadWholeFile(TaskFile(kFixed));
  stack.proxy().HoldRepliesAfter(marker);
  auto client = ChildProcess::Start(
      {kBin + "/ptxbench", "submit", "--server", stack.proxy().address(), "--task", kTask, "--arch",
       "sm_90a", "--compile-only", "--session", "lost-reply", source},
      stack.dir() + "/client.log");
  REQUIRE(client != nullptr);
  // The server committed the submission; its answer is held in the proxy.
  stack.WaitForSql("SELECT count(*) FROM submissions WHERE session_id = 'lost-reply'", "1",
                   absl::Seconds(60));
  CHECK(stack.proxy().holding());
  const std::string id =
      stack.Sql("SELECT id::text FROM submissions WHERE session_id = 'lost-reply'");
  stack.StopServer(SIGKILL);  // Killed right after the commit: the client never heard.
  stack.StartServer();
  auto status = client->Wait(absl::Seconds(90));
  INFO(client->Log());
  REQUIRE(status.has_value());
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 0);
  // The client retried with the same idempotency key and printed the first submission.
  CHECK(absl::StrContains(client->Log(), "retry 1 of"));
  CHECK(absl::StrContains(client->Log(), id));
  CHECK(stack.Sql("SELECT count(*) FROM submissions WHERE session_id = 'lost-reply'") == "1");
  CHECK(stack.Sql("SELECT count(*) FROM submissions WHERE idempotency_key IS NULL") == "0");
}

TEST_CASE("run: through a graceful server stop and a crash, no turn is charged twice or lost") {
  RestartableStack stack;  // No worker yet: the first submission waits in the queue.
  std::atomic<bool> asked_turn_two{false};
  StubHttpServer model([&](const StubRequest& request) {
    StubResponse response = OpenAi(ReplyWith(TurnOfRequest(request) == 1 ? kBroken : kFixed));
    if (TurnOfRequest(request) == 2) {
      asked_turn_two = true;
      response.delay_seconds = 1;  // The crash comes while the model writes turn 2.
    }
    return response;
  });
  const std::string out = stack.dir() + "/out";
  std::vector<std::string> args = {kBin + "/ptxbench",
                                   "run",
                                   "--server",
                                   stack.proxy().address(),
                                   "--model",
                                   "openai:m",
                                   "--base-url",
                                   model.url(),
                                   "--task",
                                   kTask,
                                   "--turns",
                                   "2",
                                   "--trajectories",
                                   "1",
                                   "--compile-only",
                                   "--retries",
                                   "10",
                                   "--retry-base-seconds",
                                   "0.3",
                                   "--out",
                                   out};
  auto client = ChildProcess::Start(args, stack.dir() + "/client.log");
  REQUIRE(client != nullptr);
  // Turn 1 is submitted and its verdict awaited (nobody compiles yet): stop the server
  // gracefully under the open watch, start it again, then give it a worker.
  stack.WaitForSql("SELECT count(*) FROM submissions WHERE turn_index = 0", "1", absl::Seconds(60));
  stack.StopServer(SIGTERM);
  stack.StartServer();
  stack.StartWorker();
  // Turn 2: the model is asked; the server crashes before the submission arrives.
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  while (!asked_turn_two) {
    INFO(client->Log());
    REQUIRE(absl::Now() < deadline);
    absl::SleepFor(absl::Milliseconds(20));
  }
  stack.StopServer(SIGKILL);
  absl::SleepFor(absl::Seconds(1));
  stack.StartServer();
  auto status = client->Wait(absl::Seconds(180));
  INFO(client->Log());
  REQUIRE(status.has_value());
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 0);
  client::Trajectory t = ReadRun(out, "openai:m", 0);
  // Two charged turns, both with their real verdicts; the outages are recorded as retries of
  // those turns, not as turns.
  REQUIRE(t.turns.size() == 2);
  CHECK(t.charged_turns() == 2);
  for (const client::TurnRecord& turn : t.turns) {
    CHECK_FALSE(turn.infra_failed);
    REQUIRE(turn.verdict.has_value());
  }
  CHECK(t.turns[0].verdict->verdict_class == VerdictClass::kCompileError);
  CHECK(t.turns[1].verdict->verdict_class == VerdictClass::kCompiled);
  CHECK_FALSE(t.turns[0].infra_failures.empty());  // The stopped server's watch, retried.
  CHECK(model.requests().size() == 2);             // The model was asked once per turn.
  const std::string session = Quoted(SessionOf(out, t));
  CHECK(stack.Sql("SELECT count(*) FROM submissions WHERE session_id = " + session +
                  " AND turn_index = 0") == "1");
  CHECK(stack.Sql("SELECT count(*) FROM submissions WHERE session_id = " + session +
                  " AND turn_index = 1") == "1");
  CHECK(absl::StrContains(client->Log(), "0 already done"));
}

// The processes whose command line contains `needle` (other than this test).
std::vector<pid_t> ProcessesWith(const std::string& needle) {
  std::vector<pid_t> found;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = ReadWholeFile(entry.path().string() + "/cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    const std::string stat = ReadWholeFile(entry.path().string() + "/stat");
    const bool zombie = stat.find(") Z ") != std::string::npos;
    if (!zombie && cmdline.find(needle) != std::string::npos) found.push_back(std::stoi(name));
  }
  return found;
}

TEST_CASE("run: Ctrl-C stops cleanly, stops the embedded stack and prints how to resume") {
  const std::string dir = MakeTempDir("ptxbench-run-interrupt-");
  std::filesystem::permissions(
      dir, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
               std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
               std::filesystem::perms::others_exec);
  StubHttpServer model([](const StubRequest& request) {
    StubResponse response = OpenAi(ReplyWith(kBroken));
    if (TurnOfRequest(request) == 2) response.delay_seconds = 120;  // Interrupted while waiting.
    return response;
  });
  unsetenv("PTXBENCH_SERVER");
  const std::string stack_dir = dir + "/stack";
  const std::vector<std::string> args = {
      kBin + "/ptxbench", "run",   "--model",    "openai:m",    "--base-url",       model.url(),
      "--task",           kTask,   "--turns",    "3",           "--trajectories",   "1",
      "--compile-only",   "--out", dir + "/out", "--tasks-dir", kSource + "/tasks", "--stack-dir",
      stack_dir};
  auto client = ChildProcess::Start(args, dir + "/client.log");
  REQUIRE(client != nullptr);
  const absl::Time deadline = absl::Now() + absl::Seconds(180);
  auto turn_two_asked = [&] {
    for (const StubRequest& request : model.requests()) {
      if (TurnOfRequest(request) == 2) return true;
    }
    return false;
  };
  while (!turn_two_asked()) {
    INFO(client->Log());
    REQUIRE(absl::Now() < deadline);
    absl::SleepFor(absl::Milliseconds(50));
  }
  CHECK_FALSE(ProcessesWith(stack_dir).empty());  // The embedded server runs.
  client->Signal(SIGINT);
  auto status = client->Wait(absl::Seconds(120));
  INFO(client->Log());
  REQUIRE(status.has_value());
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 130);
  CHECK(absl::StrContains(client->Log(), "interrupted; stopping"));
  CHECK(absl::StrContains(client->Log(), "Resume with the same command:"));
  CHECK(absl::StrContains(client->Log(), "ptxbench run --model openai:m"));
  // Nothing of the stack is left: no server on its folder, no worker on its address.
  const std::string serving = ReadWholeFile(stack_dir + "/server.log");
  const size_t at = serving.rfind("grpc=");
  REQUIRE(at != std::string::npos);
  const std::string address = serving.substr(at + 5, serving.find(' ', at) - at - 5);
  CHECK(ProcessesWith(stack_dir).empty());
  CHECK(ProcessesWith("--server " + address).empty());
  CHECK(absl::StrContains(serving, "stopping"));
  // The finished turn is on disk; the interrupted one is not.
  client::Trajectory t = ReadRun(dir + "/out", "openai:m", 0);
  CHECK(t.turns.size() == 1);
  CHECK_FALSE(t.finished());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ptxbench::testing
