// The whole pipeline on a CPU machine, with the real programs: ptxbench-server over a fresh
// PostgreSQL database, compile-only ptxbench-worker daemons, and the ptxbench client. What the
// GPU stages add is shown on the H200 by scripts/gpu-test; arch routing of GPU workers is in
// the queue conformance suite (tests/server/store), since CI has no GPU worker to route to.
#include <signal.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/server/api/api_test_support.h"
#include "tests/support/pg_fixture.h"
#include "tests/support/process.h"

namespace ptxbench::testing {
namespace {

const std::string kBin = PTXBENCH_BIN_DIR;
const std::string kSource = PTXBENCH_SOURCE_DIR_FOR_TESTS;
const std::string kTask = "gemm_n7168_k5120";

std::string TaskFile(const std::string& relative) {
  return absl::StrCat(kSource, "/tasks/", kTask, "/", relative);
}

// A server and its compile-only workers, all real processes, on a fresh database.
class Stack {
 public:
  explicit Stack(int lease_seconds = 30) : lease_seconds_(lease_seconds) {
    auto database = TestDatabase::Create(/*migrate=*/false);
    REQUIRE(database.ok());
    database_ = std::move(*database);
    dir_ = MakeTempDir("ptxbench-pipeline-");
    StartServer("127.0.0.1:0");
  }

  void StartServer(const std::string& listen) {
    server_ = ChildProcess::Start(
        {kBin + "/ptxbench-server", "serve", "--database-url", database_->url(), "--listen", listen,
         "--metrics-listen", "off", "--tasks-dir", kSource + "/tasks", "--migrations-dir",
         kSource + "/migrations", "--lease-seconds", std::to_string(lease_seconds_)},
        absl::StrCat(dir_, "/server-", ++server_starts_, ".log"));
    REQUIRE(server_ != nullptr);
    auto line = server_->WaitForLogLine("ptxbench-server serving grpc=", absl::Seconds(60));
    INFO(server_->Log());
    REQUIRE(line.has_value());
    const size_t at = line->find("grpc=") + 5;
    address_ = line->substr(at, line->find(' ', at) - at);
  }

  ChildProcess& StartWorker() {
    const int n = static_cast<int>(workers_.size());
    workers_.push_back(ChildProcess::Start(
        {kBin + "/ptxbench-worker", "--compile-only", "--server", address_, "--tasks-dir",
         kSource + "/tasks", "--hostname", absl::StrCat("ci-worker-", n)},
        absl::StrCat(dir_, "/worker-", n, ".log")));
    REQUIRE(workers_.back() != nullptr);
    REQUIRE(workers_.back()->WaitForLogLine("registered with", absl::Seconds(30)).has_value());
    return *workers_.back();
  }

  CommandResult Client(std::vector<std::string> args, absl::Duration timeout = absl::Seconds(120)) {
    args.insert(args.begin(), kBin + "/ptxbench");
    args.insert(args.begin() + 2, {"--server", address_});
    return RunCommand(args, timeout);
  }

  // Submits without waiting; returns the submission id.
  std::string Submit(const std::string& arch, const std::string& file) {
    CommandResult r = Client({"submit", "--task", kTask, "--arch", arch, "--compile-only", file});
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    std::string id = r.output;
    while (!id.empty() && (id.back() == '\n' || id.back() == '\r')) id.pop_back();
    REQUIRE(id.size() == 36);
    return id;
  }

  std::string Sql(const std::string& sql) {
    auto value = database_->Scalar(sql);
    INFO(sql);
    REQUIRE(value.ok());
    return value->value_or("NULL");
  }

  ChildProcess& server() { return *server_; }
  const std::string& address() const { return address_; }

 private:
  int lease_seconds_;
  std::unique_ptr<TestDatabase> database_;
  std::string dir_;
  int server_starts_ = 0;
  std::unique_ptr<ChildProcess> server_;
  std::string address_;
  std::vector<std::unique_ptr<ChildProcess>> workers_;
};

struct Case {
  std::string file;
  std::string arch;
  int exit_code;
  std::string verdict;
};

TEST_CASE("pipeline: valid and invalid sources for both arches get their verdicts streamed") {
  Stack stack;
  stack.StartWorker();
  stack.StartWorker();
  const std::vector<Case> cases = {
      {TaskFile("solutions/sm90a_wgmma_tma.cu"), "sm_90a", 0, "verdict: compiled"},
      {TaskFile("solutions/sm100a_tcgen05_tma.cu"), "sm_100a", 0, "verdict: compiled"},
      {TaskFile("decoys/compile_error_syntax.cu"), "sm_90a", 1, "verdict: compile_error"},
      {TaskFile("decoys/compile_error_syntax.cu"), "sm_100a", 1, "verdict: compile_error"},
      // wgmma does not exist on Blackwell: ptxas refuses it for sm_100a.
      {TaskFile("solutions/sm90a_wgmma_tma.cu"), "sm_100a", 1, "verdict: compile_error"},
      {TaskFile("decoys/plan_unknown_tensor.cu"), "sm_90a", 1, "verdict: plan_invalid"},
  };
  for (const Case& c : cases) {
    CommandResult r = stack.Client(
        {"submit", "--task", kTask, "--arch", c.arch, "--compile-only", "--wait", c.file});
    INFO(c.file << " on " << c.arch << ":\n" << r.output);
    CHECK(r.exit_code == c.exit_code);
    CHECK(r.output.find("queued") != std::string::npos);
    CHECK(r.output.find("compile ") != std::string::npos);  // The stage line, streamed.
    CHECK(r.output.find(c.verdict) != std::string::npos);
  }
  CHECK(stack.Sql("SELECT count(*) FROM verdicts") == std::to_string(cases.size()));
}

TEST_CASE("pipeline: a worker killed mid-job -> the job is leased again and finishes once") {
  Stack stack(/*lease_seconds=*/3);
  ChildProcess& first = stack.StartWorker();
  const std::string id =
      stack.Submit("sm_90a", kSource + "/tests/integration/testdata/slow_compile.cu");
  // The slow source keeps ptxas busy for seconds: the job is in the worker's hands.
  REQUIRE(first.WaitForLogLine(id, absl::Seconds(30)).has_value());
  first.Signal(SIGKILL);
  REQUIRE(first.Wait(absl::Seconds(10)).has_value());
  stack.StartWorker();
  CommandResult r = stack.Client({"watch", id}, absl::Seconds(180));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("verdict: compiled") != std::string::npos);
  CHECK(stack.Sql("SELECT count(*) FROM verdicts WHERE submission_id = '" + id + "'") == "1");
  // The first lease expired with the dead worker; a later attempt finished the job.
  CHECK(std::stoi(stack.Sql("SELECT max(attempt) FROM jobs WHERE submission_id = '" + id + "'")) >=
        2);
}

TEST_CASE("pipeline: a worker of the wrong arch never receives a job, one of the right arch does") {
  Stack stack;
  stack.StartWorker();  // Compiles the submission; the evaluate job then waits for sm_90a.
  CommandResult submitted = stack.Client(
      {"submit", "--task", kTask, "--arch", "sm_90a", TaskFile("solutions/sm90a_wgmma_tma.cu")});
  INFO(submitted.output);
  REQUIRE(submitted.exit_code == 0);
  std::string id = submitted.output.substr(0, 36);
  // CI has no GPU: the GPU workers here speak WorkerService over gRPC like ptxbench-worker.
  auto channel = api_test::DialTestServer(stack.address());
  api_test::FakeWorker blackwell(channel, "", v1::ARCH_SM_100A, "GPU-wrong-arch");
  REQUIRE(blackwell.Register().ok());
  blackwell.OpenLease(1);
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (stack.Sql("SELECT count(*) FROM jobs WHERE kind = 'evaluate' AND submission_id = '" + id +
                   "'") != "1") {
    REQUIRE(absl::Now() < deadline);
    absl::SleepFor(absl::Milliseconds(100));
  }
  CHECK_FALSE(blackwell.NextJob(absl::Seconds(3)).has_value());
  CHECK(stack.Sql("SELECT state FROM jobs WHERE kind = 'evaluate' AND submission_id = '" + id +
                  "'") == "queued");
  api_test::FakeWorker hopper(channel, "", v1::ARCH_SM_90A, "GPU-right-arch");
  REQUIRE(hopper.Register().ok());
  hopper.OpenLease(1);
  std::optional<v1::LeasedJob> job = hopper.NextJob(absl::Seconds(30));
  REQUIRE(job.has_value());
  CHECK(job->submission_id() == id);
  CHECK(job->kind() == v1::JOB_KIND_EVALUATE);
  CHECK(job->arch() == v1::ARCH_SM_90A);
  CHECK_FALSE(blackwell.NextJob(absl::Seconds(1)).has_value());
}

TEST_CASE("pipeline: SIGTERM drains a worker: the job in hand finishes, no new one is taken") {
  Stack stack;
  ChildProcess& worker = stack.StartWorker();
  const std::string slow =
      stack.Submit("sm_90a", kSource + "/tests/integration/testdata/slow_compile.cu");
  REQUIRE(worker.WaitForLogLine(slow, absl::Seconds(30)).has_value());
  worker.Signal(SIGTERM);
  // Queued after the drain began: must stay queued, never leased by the draining worker.
  const std::string later = stack.Submit("sm_90a", TaskFile("solutions/sm90a_wgmma_tma.cu"));
  std::optional<int> status = worker.Wait(absl::Seconds(120));
  REQUIRE(status.has_value());
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 0);
  CHECK(stack.Sql("SELECT verdict_class FROM verdicts WHERE submission_id = '" + slow + "'") ==
        "compiled");
  CHECK(stack.Sql("SELECT state FROM submissions WHERE id = '" + later + "'") == "queued");
  // Another worker picks the waiting one up.
  stack.StartWorker();
  CommandResult r = stack.Client({"watch", later}, absl::Seconds(120));
  INFO(r.output);
  CHECK(r.exit_code == 0);
}

TEST_CASE("pipeline: the server killed and restarted mid-run loses and duplicates nothing") {
  Stack stack(/*lease_seconds=*/5);
  stack.StartWorker();
  stack.StartWorker();
  std::vector<std::string> ids;
  for (int i = 0; i < 6; ++i)
    ids.push_back(stack.Submit("sm_90a", TaskFile("solutions/sm90a_wgmma_tma.cu")));
  ids.push_back(stack.Submit("sm_90a", kSource + "/tests/integration/testdata/slow_compile.cu"));
  ids.push_back(stack.Submit("sm_100a", TaskFile("solutions/sm100a_tcgen05_tma.cu")));
  // kill -9 while jobs are queued and leased; then a new server on the same address and
  // database. The workers reconnect by themselves.
  const std::string address = stack.address();
  stack.server().Signal(SIGKILL);
  REQUIRE(stack.server().Wait(absl::Seconds(10)).has_value());
  stack.StartServer(address);
  for (const std::string& id : ids) {
    CommandResult r = stack.Client({"watch", id}, absl::Seconds(180));
    INFO(id << ":\n" << r.output);
    CHECK(r.exit_code == 0);
    CHECK(r.output.find("verdict: compiled") != std::string::npos);
  }
  CHECK(stack.Sql("SELECT count(*) FROM submissions") == std::to_string(ids.size()));
  CHECK(stack.Sql("SELECT count(*) FROM verdicts") == std::to_string(ids.size()));
  CHECK(stack.Sql("SELECT count(*) FROM (SELECT submission_id FROM verdicts GROUP BY 1 "
                  "HAVING count(*) > 1) AS twice") == "0");
}

}  // namespace
}  // namespace ptxbench::testing
