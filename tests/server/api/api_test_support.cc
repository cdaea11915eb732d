#include "tests/server/api/api_test_support.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace ptxbench::api_test {
namespace fs = std::filesystem;

std::string SourceDir() {
  const char* dir = std::getenv("PTXBENCH_SOURCE_DIR");
  if (dir != nullptr && *dir != '\0') return dir;
#ifdef PTXBENCH_SOURCE_DIR_DEFAULT
  return PTXBENCH_SOURCE_DIR_DEFAULT;
#else
  return ".";
#endif
}

namespace {

void WriteFile(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

// A task for the API tests: the real GEMM task's definition (so the schema stays the
// loader's), with prompts, templates and the shared contract of our own, so that the tests do
// not depend on the catalog's content being complete.
void WriteTestTask(const fs::path& root, const std::string& id, const nlohmann::json& base,
                   bool sm100) {
  nlohmann::json task = base;
  task["id"] = id;
  task["title"] = "API test task " + id;
  if (!sm100) task["arches"].erase("sm_100a");
  task["prompts"] = {{"none", "prompts/none.md"},
                     {"templates", "prompts/templates.md"},
                     {"contract", "prompts/contract.md"}};
  task["templates"] = nlohmann::json::object();
  for (const auto& [arch, spec] : task["arches"].items()) {
    task["templates"][arch] = {"../_shared/templates/api_test.cuh"};
  }
  task["solutions"] = nlohmann::json::array();
  task["decoys"] = nlohmann::json::array();
  WriteFile(root / id / "task.json", task.dump(2));
  WriteFile(root / id / "prompts/none.md", "# {{title}}\n\nWrite a kernel for {{arch}}.\n");
  for (const char* level : {"templates", "contract"}) {
    WriteFile(root / id / "prompts" / (std::string(level) + ".md"),
              "# {{title}}\n\nWrite a kernel for {{arch}}.\n\n{{templates}}\n");
  }
}

}  // namespace

// Removes the folder when the test binary exits.
struct TemporaryFolder {
  std::string path;
  ~TemporaryFolder() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

std::string TestTasksDir() {
  static const TemporaryFolder folder = [] {
    std::string templ = (fs::temp_directory_path() / "ptxbench-api-tasks.XXXXXX").string();
    REQUIRE(mkdtemp(templ.data()) != nullptr);
    return TemporaryFolder{templ};
  }();
  static const std::string dir = [] {
    const std::string templ = folder.path;
    const fs::path root = fs::path(templ) / "tasks";
    std::ifstream in(fs::path(SourceDir()) / "tasks/gemm_n7168_k5120/task.json");
    REQUIRE(in.good());
    const nlohmann::json base = nlohmann::json::parse(in);
    WriteFile(root / "_shared/contract/submission.md", "Submit one CUDA source file.\n");
    WriteFile(root / "_shared/templates/api_test.cuh", "// API test template header.\n");
    WriteTestTask(root, kTaskId, base, /*sm100=*/true);
    WriteTestTask(root, kSm90OnlyTaskId, base, /*sm100=*/false);
    return root.string();
  }();
  return dir;
}

std::unique_ptr<testing::TestDatabase> FreshDatabase() {
  auto database = testing::TestDatabase::Create(/*migrate=*/false);
  INFO(database.status().ToString());
  REQUIRE(database.ok());
  return *std::move(database);
}

void WithDeadline(grpc::ClientContext* context, absl::Duration timeout) {
  context->set_deadline(std::chrono::system_clock::now() + absl::ToChronoNanoseconds(timeout));
}

grpc::Status Submit(TestServer& server, const std::string& token, const v1::SubmitRequest& request,
                    v1::SubmitResponse* response) {
  v1::SubmitResponse ignored;
  grpc::ClientContext context;
  WithDeadline(&context);
  Authorize(&context, token);
  return server.submissions()->Submit(&context, request, response ? response : &ignored);
}

TestServer::TestServer(const TestServerOptions& options) {
  server::ServerOptions server_options;
  server_options.listen = "127.0.0.1:0";
  server_options.metrics_listen = options.metrics ? "127.0.0.1:0" : "";
  if (options.database_url.empty()) database_ = FreshDatabase();
  server_options.database_url = database_ ? database_->url() : options.database_url;
  server_options.tasks_dir = TestTasksDir();
  server_options.migrations_dir = SourceDir() + "/migrations";
  server_options.lease_seconds = options.lease_seconds;
  server_options.limits.submissions_per_minute = options.submissions_per_minute;
  server_options.limits.max_queued = options.max_queued;
  server_options.poll_interval = options.poll_interval;
  server_options.reap_interval = options.reap_interval;
  server_options.min_client_ping_interval = options.min_client_ping_interval;
  server_options.store_pool_size = 8;
  server_options.shutdown_grace = absl::Seconds(2);
  server_options.tls = options.tls;
  server_options.max_watches_per_tenant = options.max_watches_per_tenant;
  server_options.max_unauthenticated_streams = options.max_unauthenticated_streams;
  auto server = server::Server::Create(server_options);
  INFO(server.status().ToString());
  REQUIRE(server.ok());
  server_ = *std::move(server);
  auto started = server_->Start();
  INFO(started.ToString());
  REQUIRE(started.ok());
  REQUIRE(server_->port() > 0);
  channel_ = DialTestServer(address(), options.tls.cert_file);
}

std::shared_ptr<grpc::Channel> DialTestServer(const std::string& address,
                                              const std::string& tls_ca_file) {
  DialOptions dial;
  dial.address = address;
  dial.tls_ca_file = tls_ca_file;
  auto channel = Dial(dial);
  INFO(channel.status().ToString());
  REQUIRE(channel.ok());
  return *std::move(channel);
}

TestServer::~TestServer() { server_->GracefulStop(); }

std::string TestServer::address() const { return absl::StrCat("127.0.0.1:", server_->port()); }

std::unique_ptr<v1::SubmissionService::Stub> TestServer::submissions() const {
  return v1::SubmissionService::NewStub(channel_);
}
std::unique_ptr<v1::WorkerService::Stub> TestServer::workers() const {
  return v1::WorkerService::NewStub(channel_);
}
std::unique_ptr<v1::AdminService::Stub> TestServer::admin() const {
  return v1::AdminService::NewStub(channel_);
}

const std::string& TestServer::admin_token() {
  if (admin_token_.empty()) {
    auto stub = admin();
    {
      grpc::ClientContext context;
      WithDeadline(&context);
      v1::CreateTenantRequest request;
      request.mutable_tenant()->set_name("ops");
      v1::Tenant tenant;
      auto status = stub->CreateTenant(&context, request, &tenant);
      INFO(status.error_message());
      REQUIRE(status.ok());
    }
    grpc::ClientContext context;
    WithDeadline(&context);
    v1::CreateTokenRequest request;
    request.set_tenant("ops");
    request.set_role(v1::ROLE_ADMIN);
    v1::CreateTokenResponse response;
    auto status = stub->CreateToken(&context, request, &response);
    INFO(status.error_message());
    REQUIRE(status.ok());
    admin_token_ = response.secret();
  }
  return admin_token_;
}

std::string TestServer::CreateToken(const std::string& tenant, v1::Role role, int per_minute,
                                    int max_queued) {
  const std::string admin_secret = admin_token();
  auto stub = admin();
  {
    grpc::ClientContext context;
    WithDeadline(&context);
    Authorize(&context, admin_secret);
    v1::CreateTenantRequest request;
    request.mutable_tenant()->set_name(tenant);
    request.mutable_tenant()->set_submissions_per_minute(per_minute);
    request.mutable_tenant()->set_max_queued(max_queued);
    v1::Tenant created;
    auto status = stub->CreateTenant(&context, request, &created);
    INFO(status.error_message());
    REQUIRE((status.ok() || status.error_code() == grpc::StatusCode::ALREADY_EXISTS));
  }
  grpc::ClientContext context;
  WithDeadline(&context);
  Authorize(&context, admin_secret);
  v1::CreateTokenRequest request;
  request.set_tenant(tenant);
  request.set_role(role);
  request.set_description("api test");
  v1::CreateTokenResponse response;
  auto status = stub->CreateToken(&context, request, &response);
  INFO(status.error_message());
  REQUIRE(status.ok());
  REQUIRE(response.secret().rfind("ptxb_" + response.token_id() + "_", 0) == 0);
  return response.secret();
}

v1::SubmitRequest ValidSubmit(bool full) {
  v1::SubmitRequest request;
  request.set_task_id(kTaskId);
  request.set_arch(v1::ARCH_SM_90A);
  request.set_language(v1::SOURCE_LANGUAGE_CUDA);
  request.set_source(
      "extern \"C\" __global__ void gemm(const void* a, const void* b, void* c) {}\n");
  auto* launch = request.mutable_launch_plan()->add_launches();
  launch->set_kernel("gemm");
  launch->add_grid("ceil_div(M,128)");
  launch->add_grid("ceil_div(N,128)");
  launch->add_block("128");
  launch->add_args()->set_tensor("A");
  launch->add_args()->set_tensor("B");
  launch->add_args()->set_tensor("C");
  request.set_model("test:model");
  request.set_session_id("session-1");
  request.set_turn_index(0);
  request.set_knowledge_level(v1::KNOWLEDGE_LEVEL_CONTRACT);
  request.set_scope(full ? v1::EVALUATION_SCOPE_FULL : v1::EVALUATION_SCOPE_COMPILE_ONLY);
  return request;
}

v1::Verdict MakeVerdict(v1::VerdictClass verdict_class) {
  v1::Verdict verdict;
  verdict.set_verdict_class(verdict_class);
  const bool pass = verdict_class == v1::VERDICT_CLASS_PASS;
  const bool compiled = verdict_class != v1::VERDICT_CLASS_COMPILE_ERROR;
  verdict.set_compiled(compiled);
  verdict.set_correct(pass);
  verdict.set_target_executed(pass);
  verdict.set_tic(pass);
  verdict.set_speedup(pass ? 1.25 : 0);
  verdict.set_message(pass ? "all workloads within tolerance" : "see stages");
  verdict.set_report_json(R"({"worker":"fake"})");
  // The stages a real engine reports for the class (the server checks them: result_check.h).
  auto add_stage = [&](v1::Stage stage, bool ok, const std::string& detail_json) {
    v1::StageResult* result = verdict.add_stages();
    result->set_stage(stage);
    result->set_ok(ok);
    result->set_summary(ok ? "ok (fake)" : "failed (fake)");
    result->set_detail_json(detail_json);
    result->set_seconds(0.01);
  };
  add_stage(v1::STAGE_COMPILE, compiled && verdict_class != v1::VERDICT_CLASS_PLAN_INVALID, "{}");
  if (pass) {
    add_stage(v1::STAGE_CORRECTNESS, true, "{}");
    add_stage(v1::STAGE_TARGET_INSTRUCTIONS, true, "{}");
    // 1.25 ms / 1.0 ms: above the test GEMM's roofline floor (0.56 ms on the fastest sm_90a).
    add_stage(v1::STAGE_TIMING, true,
              R"({"timing": {"result": {"candidate": {"median_ms": 1.0},
                                         "baseline": {"median_ms": 1.25}}}})");
  } else if (verdict_class == v1::VERDICT_CLASS_WRONG_RESULT) {
    add_stage(v1::STAGE_CORRECTNESS, false, "{}");
  }
  return verdict;
}

FakeWorker::FakeWorker(std::shared_ptr<grpc::Channel> channel, std::string token, v1::Arch arch,
                       std::string gpu_uuid, bool compile_only)
    : channel_(std::move(channel)),
      stub_(v1::WorkerService::NewStub(channel_)),
      token_(std::move(token)) {
  identity_.set_hostname("fake-host");
  identity_.set_arch(arch);
  identity_.set_gpu_name("NVIDIA H200");
  identity_.set_gpu_uuid(gpu_uuid);
  identity_.set_harness_version("test");
  identity_.set_compile_only(compile_only);
}

FakeWorker::~FakeWorker() {
  if (lease_thread_.joinable()) CloseLease();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_heartbeats_ = true;
    arrived_.notify_all();
  }
  if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
}

void FakeWorker::StartHeartbeats(absl::Duration interval) {
  heartbeat_thread_ = std::thread([this, interval] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!arrived_.wait_for(lock, absl::ToChronoNanoseconds(interval),
                              [this] { return stop_heartbeats_; })) {
      std::vector<v1::LeasedJob> held;
      for (const auto& [id, job] : held_) held.push_back(job);
      lock.unlock();
      v1::HeartbeatResponse response;
      Heartbeat(held, &response);
      lock.lock();
    }
  });
}

grpc::Status FakeWorker::Register() {
  grpc::ClientContext context;
  WithDeadline(&context);
  Authorize(&context, token_);
  v1::RegisterRequest request;
  *request.mutable_identity() = identity_;
  v1::RegisterResponse response;
  auto status = stub_->Register(&context, request, &response);
  if (status.ok()) worker_id_ = response.worker_id();
  return status;
}

void FakeWorker::OpenLease(int slots) {
  lease_context_ = std::make_unique<grpc::ClientContext>();
  Authorize(lease_context_.get(), token_);
  lease_done_ = false;
  lease_thread_ = std::thread([this, slots] {
    v1::LeaseRequest request;
    request.set_worker_id(worker_id_);
    request.set_slots(slots);
    auto reader = stub_->Lease(lease_context_.get(), request);
    v1::LeasedJob job;
    while (reader->Read(&job)) {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(job);
      held_[job.job_id()] = job;
      arrived_.notify_all();
    }
    grpc::Status status = reader->Finish();
    std::lock_guard<std::mutex> lock(mu_);
    lease_status_ = status;
    lease_done_ = true;
    arrived_.notify_all();
  });
}

std::optional<v1::LeasedJob> FakeWorker::NextJob(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  arrived_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                    [this] { return !jobs_.empty() || lease_done_; });
  if (jobs_.empty()) return std::nullopt;
  v1::LeasedJob job = jobs_.front();
  jobs_.pop_front();
  return job;
}

grpc::Status FakeWorker::CloseLease() {
  if (lease_context_) lease_context_->TryCancel();
  if (lease_thread_.joinable()) lease_thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  return lease_status_;
}

v1::JobLease FakeWorker::LeaseOf(const v1::LeasedJob& job, const std::string& worker_id) {
  v1::JobLease lease;
  lease.set_job_id(job.job_id());
  lease.set_worker_id(worker_id);
  lease.set_attempt(job.attempt());
  return lease;
}

grpc::Status FakeWorker::ReportStage(const v1::LeasedJob& job, v1::Stage stage, bool ok) {
  grpc::ClientContext context;
  WithDeadline(&context);
  Authorize(&context, token_);
  v1::ReportStageRequest request;
  *request.mutable_lease() = LeaseOf(job, worker_id_);
  request.mutable_result()->set_stage(stage);
  request.mutable_result()->set_ok(ok);
  request.mutable_result()->set_summary(absl::StrCat("stage ", v1::Stage_Name(stage), " done"));
  request.mutable_result()->set_detail_json(R"({"fake":true})");
  request.mutable_result()->set_seconds(0.5);
  v1::ReportStageResponse response;
  return stub_->ReportStage(&context, request, &response);
}

grpc::Status FakeWorker::Complete(const v1::LeasedJob& job, const v1::Verdict& verdict) {
  v1::CompleteRequest request;
  *request.mutable_verdict() = verdict;
  return Complete(job, std::move(request));
}

grpc::Status FakeWorker::Complete(const v1::LeasedJob& job, v1::CompleteRequest request) {
  grpc::ClientContext context;
  WithDeadline(&context);
  Authorize(&context, token_);
  *request.mutable_lease() = LeaseOf(job, worker_id_);
  v1::CompleteResponse response;
  auto status = stub_->Complete(&context, request, &response);
  std::lock_guard<std::mutex> lock(mu_);
  held_.erase(job.job_id());
  return status;
}

grpc::Status FakeWorker::Fail(const v1::LeasedJob& job, v1::FailureKind kind, bool* will_retry) {
  grpc::ClientContext context;
  WithDeadline(&context);
  Authorize(&context, token_);
  v1::FailRequest request;
  *request.mutable_lease() = LeaseOf(job, worker_id_);
  request.set_kind(kind);
  request.set_reason("fake failure");
  v1::FailResponse response;
  auto status = stub_->Fail(&context, request, &response);
  if (will_retry != nullptr) *will_retry = response.will_retry();
  std::lock_guard<std::mutex> lock(mu_);
  held_.erase(job.job_id());
  return status;
}

grpc::Status FakeWorker::Heartbeat(const std::vector<v1::LeasedJob>& held,
                                   v1::HeartbeatResponse* response) {
  grpc::ClientContext context;
  WithDeadline(&context);
  Authorize(&context, token_);
  v1::HeartbeatRequest request;
  request.set_worker_id(worker_id_);
  request.set_healthy(true);
  for (const auto& job : held) *request.add_leases() = LeaseOf(job, worker_id_);
  return stub_->Heartbeat(&context, request, response);
}

std::string HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
    const std::string request = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buffer[8192];
      ssize_t n;
      while ((n = read(fd, buffer, sizeof(buffer))) > 0) response.append(buffer, n);
    }
  }
  close(fd);
  return response;
}

void InstallSlowCommit(const testing::TestDatabase& database, const std::string& table,
                       const std::string& condition) {
  const std::string sql = absl::StrCat(
      "CREATE FUNCTION test_slow_commit_", table,
      "() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF ", condition,
      " THEN PERFORM pg_sleep(20); END IF; RETURN NULL; END $$; "
      "CREATE CONSTRAINT TRIGGER test_slow_commit AFTER INSERT ON ",
      table, " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION test_slow_commit_",
      table, "();");
  auto done = database.Sql(sql);
  INFO(done.status().ToString());
  REQUIRE(done.ok());
}

void RemoveSlowCommit(const testing::TestDatabase& database, const std::string& table) {
  REQUIRE(database.Sql(absl::StrCat("DROP TRIGGER test_slow_commit ON ", table)).ok());
}

grpc::Status CallAndLoseTheCommit(TestServer& server, const std::function<grpc::Status()>& call) {
  grpc::Status status;
  std::thread caller([&] { status = call(); });
  int ended = 0;
  for (int poll = 0; poll < 200 && ended == 0; ++poll) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto count = server.database().Scalar(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
        "WHERE datname = current_database() AND wait_event = 'PgSleep'");
    if (count.ok() && count->has_value()) ended = std::stoi(**count);
  }
  caller.join();
  INFO("sessions ended in their COMMIT: " << ended);
  REQUIRE(ended == 1);
  return status;
}

}  // namespace ptxbench::api_test
