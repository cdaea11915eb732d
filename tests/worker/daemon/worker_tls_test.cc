// The worker daemon over TLS with a private CA, configured exactly as ptxbench-worker's flags
// configure it (ParseWorkerFlags): before the Dial change, --tls-ca was accepted and ignored,
// the worker trusted only the system roots, and it could not register with such a server. Here
// a real server (TLS, certificate signed by a CA made at test time) takes a submission, the
// worker leases the compile job over TLS and completes it.
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "proto/dial.h"
#include "tests/server/api/api_test_support.h"
#include "tests/support/test_ca.h"
#include "worker/daemon/job_executor.h"
#include "worker/daemon/worker.h"
#include "worker/daemon/worker_main.h"

namespace ptxbench::worker {
namespace {

// Compiles nothing: every job gets a clean compile verdict.
class CompiledExecutor : public JobExecutor {
 public:
  ExecutorIdentity Identity() const override {
    ExecutorIdentity identity;
    identity.harness_version = "tls-test";
    return identity;
  }
  absl::StatusOr<Verdict> Run(const JobSpec& job, const StageCallback&,
                              const std::atomic<bool>&) override {
    ++runs;
    Verdict verdict;
    verdict.verdict_class = VerdictClass::kCompiled;
    verdict.compiled = true;
    // The server takes a compiled verdict only with its passed compile stage (result_check.h).
    StageReport compile;
    compile.stage = Stage::kCompile;
    compile.ok = true;
    compile.summary = "compiled (TLS test)";
    verdict.stages.push_back(compile);
    verdict.message = "compiled by the TLS test executor (" + job.task_id + ")";
    return verdict;
  }
  absl::Status HealthProbe() override { return absl::OkStatus(); }
  std::atomic<int> runs{0};
};

struct TlsServer {
  testing::TestCa ca;
  std::unique_ptr<api_test::TestServer> server;
  TlsServer() {
    api_test::TestServerOptions options;
    options.tls.cert_file = ca.server_cert();
    options.tls.key_file = ca.server_key();
    server = std::make_unique<api_test::TestServer>(options);
  }
};

WorkerConfig Flags(const std::vector<std::string>& args) {
  std::ostringstream warnings;
  auto config = ParseWorkerFlags(args, warnings);
  INFO(config.status().ToString());
  REQUIRE(config.ok());
  return *config;
}

TEST_CASE("worker: --tls-ca makes a private CA's server trusted, and a job runs over TLS") {
  TlsServer tls;
  const WorkerConfig config =
      Flags({"--server", tls.server->address(), "--tls-ca", tls.ca.ca_cert(), "--compile-only",
             "--hostname", "tls-test-worker"});
  CHECK(config.worker.tls);
  CHECK(config.worker.tls_ca_file == tls.ca.ca_cert());
  auto executor = std::make_unique<CompiledExecutor>();
  CompiledExecutor* runs = executor.get();
  auto worker = Worker::Create(config.worker, std::move(executor));
  REQUIRE(worker.ok());
  absl::Status started = (*worker)->Start();
  INFO(started.ToString());
  REQUIRE(started.ok());
  CHECK_FALSE((*worker)->worker_id().empty());

  // A vendor's submission over the same kind of channel; the worker compiles it.
  DialOptions dial;
  dial.address = tls.server->address();
  dial.tls_ca_file = tls.ca.ca_cert();
  auto channel = Dial(dial);
  REQUIRE(channel.ok());
  auto stub = v1::SubmissionService::NewStub(*channel);
  v1::SubmitResponse submitted;
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    grpc::Status status = stub->Submit(&context, api_test::ValidSubmit(), &submitted);
    INFO(status.error_message());
    REQUIRE(status.ok());
  }
  v1::Submission submission;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    grpc::ClientContext context;
    v1::GetSubmissionRequest request;
    request.set_submission_id(submitted.submission().id());
    REQUIRE(stub->GetSubmission(&context, request, &submission).ok());
    if (submission.state() == v1::SUBMISSION_STATE_FINISHED) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  CHECK(submission.state() == v1::SUBMISSION_STATE_FINISHED);
  CHECK(submission.verdict().verdict_class() == v1::VERDICT_CLASS_COMPILED);
  CHECK(absl::StrContains(submission.verdict().message(), "TLS test executor"));
  CHECK(runs->runs >= 1);
  (*worker)->GracefulStop();
  (*worker)->Wait();
}

TEST_CASE("worker: without the private CA (system roots, or another CA) it cannot register") {
  TlsServer tls;
  const testing::TestCa other;
  for (const std::vector<std::string>& trust :
       {std::vector<std::string>{"--tls"}, std::vector<std::string>{"--tls-ca", other.ca_cert()}}) {
    std::vector<std::string> args = {"--server", tls.server->address(), "--compile-only"};
    args.insert(args.end(), trust.begin(), trust.end());
    WorkerConfig config = Flags(args);
    config.worker.reconnect_backoff_max = absl::Milliseconds(20);  // Fail fast.
    auto worker = Worker::Create(config.worker, std::make_unique<CompiledExecutor>());
    REQUIRE(worker.ok());
    absl::Status started = (*worker)->Start();
    CHECK(absl::IsUnavailable(started));
    CHECK(absl::StrContains(started.message(), "registering with"));
  }
}

TEST_CASE("worker flags: the token from a file, defaults shared with the server and client") {
  const testing::ScopedTempDir dir;
  const std::string token_file = dir.path() + "/token";
  std::ofstream(token_file) << "ptxb_worker_secret\n";
  unsetenv("PTXBENCH_SERVER");
  unsetenv("PTXBENCH_TOKEN");
  unsetenv("PTXBENCH_TOKEN_FILE");
  const WorkerConfig config = Flags({"--token-file", token_file, "--compile-only"});
  CHECK(config.worker.token == "ptxb_worker_secret");
  CHECK(config.worker.server == kDefaultServerAddress);
  CHECK_FALSE(config.worker.tls);
  // ./tasks when there is one, else the source tree's: the server's default too.
  CHECK(absl::EndsWith(config.executor.tasks_dir, "tasks"));
  std::ostringstream warnings;
  CHECK_FALSE(ParseWorkerFlags({"--gpu", "-1"}, warnings).ok());
  // The GPU pipeline: 1 unless asked, 2 at most, never on a compile-only worker.
  CHECK(config.worker.gpu_pipeline == 1);
  CHECK(config.executor.gpu_pipeline == 1);
  const WorkerConfig pipelined = Flags({"--token-file", token_file, "--gpu-pipeline", "2"});
  CHECK(pipelined.worker.gpu_pipeline == 2);
  CHECK(pipelined.executor.gpu_pipeline == 2);
  CHECK_FALSE(ParseWorkerFlags({"--gpu-pipeline", "3"}, warnings).ok());
  CHECK_FALSE(ParseWorkerFlags({"--gpu-pipeline", "0"}, warnings).ok());
  CHECK_FALSE(ParseWorkerFlags({"--compile-only", "--gpu-pipeline", "2"}, warnings).ok());
  CHECK_FALSE(ParseWorkerFlags({"--bogus"}, warnings).ok());
  CHECK_FALSE(ParseWorkerFlags({"stray"}, warnings).ok());
  CHECK(ParseWorkerFlags({"--token", "ptxb_visible"}, warnings).ok());
  CHECK(absl::StrContains(warnings.str(), "--token is visible"));
  // The fair baseline: on by default, the first heuristic by name, a misspelling refused naming
  // the choices.
  CHECK(config.executor.baseline_selection == gpu::BaselineSelection::kFastest);
  CHECK(Flags({"--token-file", token_file, "--baseline", "first_heuristic"})
            .executor.baseline_selection == gpu::BaselineSelection::kFirstHeuristic);
  auto misspelt = ParseWorkerFlags({"--token-file", token_file, "--baseline", "best"}, warnings);
  REQUIRE_FALSE(misspelt.ok());
  CHECK(absl::StrContains(misspelt.status().message(), "first_heuristic, fastest"));
}

}  // namespace
}  // namespace ptxbench::worker
