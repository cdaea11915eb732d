// The whole pipeline on a CPU machine, with the real programs: ptxbench-server over a fresh
// PostgreSQL database, compile-only ptxbench-worker daemons, and the ptxbench client. What the
// GPU stages add is shown on the H200 by scripts/gpu-test; arch routing of GPU workers is in
// the queue conformance suite (tests/server/store), since CI has no GPU worker to route to.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"
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

// A server and its compile-only workers, all real processes, on a fresh database.
class Stack {
 public:
  explicit Stack(int lease_seconds = 30, std::string tasks_dir = kSource + "/tasks")
      : lease_seconds_(lease_seconds), tasks_dir_(std::move(tasks_dir)) {
    auto database = TestDatabase::Create(/*migrate=*/false);
    REQUIRE(database.ok());
    database_ = std::move(*database);
    dir_ = MakeTempDir("ptxbench-pipeline-");
    StartServer("127.0.0.1:0");
  }

  void StartServer(const std::string& listen) {
    server_ = ChildProcess::Start(
        {kBin + "/ptxbench-server", "serve", "--database-url", database_->url(), "--listen", listen,
         "--metrics-listen", "off", "--tasks-dir", tasks_dir_, "--migrations-dir",
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
         tasks_dir_, "--hostname", absl::StrCat("ci-worker-", n)},
        absl::StrCat(dir_, "/worker-", n, ".log")));
    REQUIRE(workers_.back() != nullptr);
    REQUIRE(workers_.back()->WaitForLogLine("registered with", absl::Seconds(30)).has_value());
    return *workers_.back();
  }

  // A GPU worker whose GPU is the fake evaluator's (FakeGpu), verifying compile artifacts with
  // probability `verify_fraction`.
  ChildProcess& StartGpuWorker(const std::string& evaluator, const std::string& verify_fraction) {
    const int n = static_cast<int>(workers_.size());
    workers_.push_back(ChildProcess::Start(
        {kBin + "/ptxbench-worker", "--gpu", "0", "--server", address_, "--tasks-dir", tasks_dir_,
         "--hostname", absl::StrCat("ci-gpu-", n), "--evaluator", evaluator, "--gpu-lock-dir", dir_,
         "--artifact-verify-fraction", verify_fraction},
        absl::StrCat(dir_, "/worker-", n, ".log")));
    REQUIRE(workers_.back() != nullptr);
    INFO(workers_.back()->Log());
    REQUIRE(workers_.back()->WaitForLogLine("registered with", absl::Seconds(60)).has_value());
    return *workers_.back();
  }

  CommandResult Client(std::vector<std::string> args, absl::Duration timeout = absl::Seconds(120)) {
    args.insert(args.begin(), kBin + "/ptxbench");
    args.insert(args.begin() + 2, {"--server", address_});
    return RunCommand(args, timeout);
  }

  // Submits without waiting; returns the submission id.
  std::string Submit(const std::string& arch, const std::string& file, bool compile_only = true) {
    std::vector<std::string> args = {"submit", "--task", kTask, "--arch", arch, file};
    if (compile_only) args.insert(args.end() - 1, "--compile-only");
    CommandResult r = Client(args);
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

  // Polls `sql` until it returns `expected`; FAILs after `timeout` with the logs.
  void WaitForSql(const std::string& sql, const std::string& expected,
                  absl::Duration timeout = absl::Seconds(180)) {
    const absl::Time deadline = absl::Now() + timeout;
    std::string value;
    while ((value = Sql(sql)) != expected && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(200));
    }
    INFO(sql << " returned " << value);
    for (const auto& worker : workers_) INFO(worker->Log());
    REQUIRE(value == expected);
  }

  ChildProcess& server() { return *server_; }
  const std::string& address() const { return address_; }

 private:
  int lease_seconds_;
  std::string tasks_dir_;
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

// A GPU that is not there, as tests/worker/engine/gpu/evaluate_test.cc and scripts/bench set
// one up: the fake evaluator's GPU modes beside the real evaluator (whose compile mode it runs,
// NVRTC and ptxas for real), and a copy of the tasks whose GEMM workloads are small (the fake
// writes every output element). The server and every worker read that copy: the task's
// version hash must be the same everywhere.
struct FakeGpu {
  std::string dir = MakeTempDir("ptxbench-fake-gpu-");
  std::string tasks = dir + "/tasks";

  FakeGpu() {
    REQUIRE(symlink((kBin + "/ptxbench-evaluator").c_str(),
                    (dir + "/ptxbench-evaluator").c_str()) == 0);
    REQUIRE(symlink(PTXBENCH_FAKE_EVALUATOR, evaluator().c_str()) == 0);
    // The sandboxes run as nobody and read the tasks.
    REQUIRE(
        std::system(("cp -r '" + kSource + "/tasks' '" + tasks + "' && chmod -R a+rX '" + dir + "'")
                        .c_str()) == 0);
    const std::string path = tasks + "/" + kTask + "/task.json";
    nlohmann::json task = nlohmann::json::parse(testing::ReadWholeFile(path));
    for (nlohmann::json& w : task["workloads"]) {
      w["axes"] = {{"M", w.value("timed", false) ? 256 : 128}, {"N", 192}, {"K", 64}};
    }
    std::ofstream(path) << task.dump(2);
  }
  ~FakeGpu() { (void)std::system(("rm -rf '" + dir + "'").c_str()); }
  std::string evaluator() const { return dir + "/fake-evaluator-pass"; }
};

// What a submission's verdict and its worker's audit record say about the compile artifact.
struct ArtifactRecord {
  std::string outcome;         // artifact_uses.outcome: the worker's report as stored.
  std::string detail;          // The report's detail.
  std::string compile_cache;   // The audit record's compile process: "artifact", "hit" or "".
  bool compiled_here = false;  // The compile process ran a compiler (it has "seconds").
  std::string verdict_class;
  std::string compiled_cubin;  // The compile stage's cubin_sha256: the module the verdict used.
};

ArtifactRecord ArtifactOf(Stack& stack, const std::string& id) {
  const std::string where = "submission_id = '" + id + "'";
  const std::string process =
      "FROM verdicts v, jsonb_array_elements((v.verdict ->> 'report_json')::jsonb -> "
      "'processes') p WHERE v." +
      where + " AND p ->> 'mode' = 'compile'";
  ArtifactRecord record;
  record.outcome = stack.Sql("SELECT outcome FROM artifact_uses WHERE " + where);
  record.detail = stack.Sql("SELECT detail FROM artifact_uses WHERE " + where);
  record.compile_cache = stack.Sql("SELECT coalesce(p ->> 'compile_cache', '') " + process);
  record.compiled_here = stack.Sql("SELECT p ? 'seconds' " + process) == "t";
  record.verdict_class = stack.Sql("SELECT verdict_class FROM verdicts WHERE " + where);
  record.compiled_cubin = stack.Sql(
      "SELECT (verdict -> 'stages' -> 0 ->> 'detail_json')::jsonb ->> 'cubin_sha256' FROM "
      "verdicts WHERE " +
      where);
  return record;
}

TEST_CASE(
    "pipeline: the GPU worker uses the compile-only worker's artifact, verifies one when told, "
    "refuses altered bytes",
    "[artifact]") {
  FakeGpu fake;
  Stack stack(/*lease_seconds=*/30, fake.tasks);
  stack.StartWorker();
  // Compiled by the compile-only worker before any GPU worker runs (a GPU worker would take
  // compile jobs of its arch too).
  const std::string first = stack.Submit("sm_90a", TaskFile("solutions/sm90a_wgmma_rs_ldmatrix.cu"),
                                         /*compile_only=*/false);
  const std::string used =
      stack.Submit("sm_90a", TaskFile("solutions/sm90a_wgmma_tma.cu"), /*compile_only=*/false);
  stack.WaitForSql("SELECT count(*) FROM compile_artifacts WHERE cubin IS NOT NULL", "2");
  const std::string producer = stack.Sql(
      "SELECT DISTINCT worker_id FROM compile_artifacts WHERE submission_id = '" + used + "'");

  // Never verifying: the first artifact is refused (this worker has compiled nothing yet, so
  // its toolchain is unknown), the second used.
  ChildProcess& unverifying = stack.StartGpuWorker(fake.evaluator(), "0");
  stack.WaitForSql(
      "SELECT count(*) FROM verdicts WHERE submission_id IN ('" + first + "', '" + used + "')",
      "2");
  const ArtifactRecord refused_first = ArtifactOf(stack, first);
  CHECK(refused_first.outcome == "refused");
  CHECK(refused_first.detail.find("compiled nothing yet") != std::string::npos);
  CHECK(refused_first.compiled_here);
  const ArtifactRecord use = ArtifactOf(stack, used);
  INFO(use.detail);
  CHECK(use.outcome == "used");
  // No second compile: the verdict's audit record names the artifact as the module's origin.
  CHECK(use.compile_cache == "artifact");
  CHECK_FALSE(use.compiled_here);
  CHECK(
      stack.Sql("SELECT (v.verdict ->> 'report_json')::jsonb #>> "
                "'{compile_artifact,producer_worker_id}' FROM verdicts v WHERE submission_id = '" +
                used + "'") == producer);
  CHECK(
      use.compiled_cubin ==
      stack.Sql("SELECT cubin_sha256 FROM compile_artifacts WHERE submission_id = '" + used + "'"));
  unverifying.Signal(SIGTERM);
  REQUIRE(unverifying.Wait(absl::Seconds(60)).has_value());

  // Bytes altered in the database after the server checked them; and an artifact verified by
  // a worker that always verifies.
  const std::string altered =
      stack.Submit("sm_90a", TaskFile("solutions/sm90a_wgmma_tma.cu"), /*compile_only=*/false);
  const std::string verified = stack.Submit(
      "sm_90a", TaskFile("solutions/sm90a_wgmma_tma_multicast.cu"), /*compile_only=*/false);
  stack.WaitForSql("SELECT count(*) FROM compile_artifacts WHERE cubin IS NOT NULL", "2");
  stack.Sql("UPDATE compile_artifacts SET cubin = cubin || '\\x00'::bytea WHERE submission_id = '" +
            altered + "' RETURNING 1");
  stack.StartGpuWorker(fake.evaluator(), "1");
  stack.WaitForSql("SELECT count(*) FROM verdicts WHERE submission_id IN ('" + altered + "', '" +
                       verified + "')",
                   "2");
  const ArtifactRecord refused = ArtifactOf(stack, altered);
  INFO(refused.detail);
  CHECK(refused.outcome == "refused");
  CHECK(refused.detail.find("does not hash to its cubin_sha256") != std::string::npos);
  CHECK(refused.compiled_here);
  // The verdict is the one the honest module gets.
  CHECK(refused.verdict_class == use.verdict_class);
  CHECK(refused.compiled_cubin == use.compiled_cubin);
  const ArtifactRecord verification = ArtifactOf(stack, verified);
  INFO(verification.detail);
  CHECK(verification.outcome == "verified_match");
  CHECK(verification.compiled_here);
  CHECK(stack.Sql("SELECT count(*) FROM workers WHERE distrusted_at IS NOT NULL") == "0");
}

}  // namespace
}  // namespace ptxbench::testing
