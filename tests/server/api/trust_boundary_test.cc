// The server's trust boundary over real gRPC on loopback, a real server and PostgreSQL: each
// finding of issue 12 that lives in server/api, written as the exploit, now refused.
//   - bodies are bounded per method and checked for a token before anything is parsed;
//   - NUL bytes and invalid UTF-8 are INVALID_ARGUMENT naming the field, on every method
//     (unary and streaming);
//   - streams are capped per tenant (WatchSubmission) and without a token in total
//     (reflection);
//   - page tokens are opaque and bound to their tenant;
//   - caller text cannot forge log lines;
//   - a verdict's details are bounded with a marker;
//   - /metrics answers beside idle connections, and its model labels are bounded.
#include <grpcpp/generic/generic_stub.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"
#include "tests/server/api/api_test_support.h"

namespace ptxbench::api_test {
namespace {

const std::string kInvalidUtf8("bad\xff\xfe", 5);

TEST_CASE("bodies are bounded per method and need a token before they are parsed", "[api][trust]") {
  TestServer server;
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);

  // Under the Submit bound, invalid in every way, without a token: the token is checked
  // first, so nothing of it was parsed or validated.
  v1::SubmitRequest junk = ValidSubmit();
  junk.set_source(std::string(1900 << 10, 'x') + kInvalidUtf8);
  auto unauthenticated = Submit(server, "", junk);
  CHECK(unauthenticated.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  auto guessed = Submit(server, absl::StrCat("ptxb_0123456789abcdef_", std::string(64, 'a')), junk);
  CHECK(guessed.error_code() == grpc::StatusCode::UNAUTHENTICATED);

  // Over the largest valid Submit: refused by size, before parsing, whoever sends it.
  v1::SubmitRequest huge = ValidSubmit();
  huge.set_source(std::string(3 << 20, 'x'));
  auto too_large = Submit(server, vendor, huge);
  CHECK(too_large.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK_THAT(too_large.error_message(),
             Catch::StartsWith("request: ") && Catch::Contains("more than any valid"));
  // A small method has a small bound.
  {
    grpc::ClientContext context;
    WithDeadline(&context);
    Authorize(&context, vendor);
    v1::GetSubmissionRequest request;
    request.set_submission_id(std::string(1 << 20, 'a'));
    v1::Submission response;
    auto status = server.submissions()->GetSubmission(&context, request, &response);
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK_THAT(status.error_message(), Catch::Contains("ptxbench.v1.GetSubmissionRequest"));
  }
  // Over the transport's limit: gRPC itself refuses it.
  v1::SubmitRequest beyond = ValidSubmit();
  beyond.set_source(std::string(5 << 20, 'x'));
  CHECK(Submit(server, vendor, beyond).error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  // And the honest caller is served.
  CHECK(Submit(server, vendor, ValidSubmit()).ok());
}

TEST_CASE("NUL bytes in text fields are refused, naming the field", "[api][trust]") {
  TestServer server;
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  // The exploit: two idempotency keys that differ only after a NUL were stored as one key, so
  // the second Submit returned the first submission.
  v1::SubmitRequest first = ValidSubmit();
  first.set_idempotency_key(std::string("key\0first", 9));
  auto refused = Submit(server, vendor, first);
  CHECK(refused.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK_THAT(refused.error_message(), Catch::StartsWith("idempotency_key: contains a NUL byte"));
  v1::SubmitRequest model = ValidSubmit();
  model.set_model(std::string("m\0x", 3));
  CHECK_THAT(Submit(server, vendor, model).error_message(),
             Catch::Equals("model: contains a NUL byte (\\u0000)"));
  v1::SubmitRequest plan = ValidSubmit();
  plan.mutable_launch_plan()->mutable_launches(0)->set_kernel(std::string("k\0", 2));
  CHECK_THAT(Submit(server, vendor, plan).error_message(),
             Catch::StartsWith("launch_plan.launches[0].kernel: contains a NUL byte"));
  // Admin calls too.
  grpc::ClientContext context;
  WithDeadline(&context);
  Authorize(&context, server.admin_token());
  v1::CreateTenantRequest tenant;
  tenant.mutable_tenant()->set_name(std::string("evil\0", 5));
  v1::Tenant created;
  auto status = server.admin()->CreateTenant(&context, tenant, &created);
  CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK_THAT(status.error_message(), Catch::StartsWith("tenant.name: contains a NUL byte"));
}

TEST_CASE("invalid UTF-8 is INVALID_ARGUMENT naming the field on every method", "[api][trust]") {
  TestServer server;
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  const std::string worker_token = server.CreateToken("fleet", v1::ROLE_WORKER);
  {  // Unary, vendor.
    grpc::ClientContext context;
    WithDeadline(&context);
    Authorize(&context, vendor);
    v1::GetSubmissionRequest request;
    request.set_submission_id(kInvalidUtf8);
    v1::Submission response;
    auto status = server.submissions()->GetSubmission(&context, request, &response);
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(status.error_message() == "submission_id: not valid UTF-8 (byte 3)");
  }
  {  // Unary, worker, nested.
    grpc::ClientContext context;
    WithDeadline(&context);
    Authorize(&context, worker_token);
    v1::RegisterRequest request;
    request.mutable_identity()->set_hostname(kInvalidUtf8);
    request.mutable_identity()->set_arch(v1::ARCH_SM_90A);
    v1::RegisterResponse response;
    auto status = server.workers()->Register(&context, request, &response);
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK_THAT(status.error_message(), Catch::StartsWith("identity.hostname: not valid UTF-8"));
  }
  {  // Streaming (gRPC parses these requests): was INTERNAL with no message.
    grpc::ClientContext context;
    WithDeadline(&context, absl::Seconds(10));
    Authorize(&context, vendor);
    v1::WatchSubmissionRequest request;
    request.set_submission_id(kInvalidUtf8);
    auto reader = server.submissions()->WatchSubmission(&context, request);
    v1::StageEvent event;
    while (reader->Read(&event)) {
    }
    auto status = reader->Finish();
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK_THAT(status.error_message(), Catch::StartsWith("submission_id: not valid UTF-8"));
  }
  {
    grpc::ClientContext context;
    WithDeadline(&context, absl::Seconds(10));
    Authorize(&context, worker_token);
    v1::LeaseRequest request;
    request.set_worker_id(kInvalidUtf8);
    auto reader = server.workers()->Lease(&context, request);
    v1::LeasedJob job;
    while (reader->Read(&job)) {
    }
    auto status = reader->Finish();
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK_THAT(status.error_message(), Catch::StartsWith("worker_id: not valid UTF-8"));
  }
}

// Opens a WatchSubmission stream on its own thread and keeps it open until destroyed.
class OpenWatch {
 public:
  OpenWatch(TestServer& server, const std::string& token, const std::string& id)
      : stub_(server.submissions()) {
    Authorize(&context_, token);
    WithDeadline(&context_, absl::Seconds(60));
    v1::WatchSubmissionRequest request;
    request.set_submission_id(id);
    reader_ = stub_->WatchSubmission(&context_, request);
    thread_ = std::thread([this] {
      v1::StageEvent event;
      while (reader_->Read(&event)) {
        std::lock_guard<std::mutex> lock(mu_);
        ++events_;
        cv_.notify_all();
      }
      std::lock_guard<std::mutex> lock(mu_);
      status_ = reader_->Finish();
      done_ = true;
      cv_.notify_all();
    });
  }
  ~OpenWatch() {
    context_.TryCancel();
    thread_.join();
  }
  // Whether the stream delivered an event (the server accepted it) within `timeout`.
  bool Opened(absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [this] { return events_ > 0 || done_; });
    return events_ > 0;
  }
  grpc::Status Ended(absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [this] { return done_; });
    return done_ ? status_ : grpc::Status(grpc::StatusCode::UNKNOWN, "still open");
  }

 private:
  std::unique_ptr<v1::SubmissionService::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReader<v1::StageEvent>> reader_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  int events_ = 0;
  bool done_ = false;
  grpc::Status status_;
};

TEST_CASE("open watch streams are capped per tenant", "[api][trust]") {
  TestServerOptions options;
  options.max_watches_per_tenant = 2;
  TestServer server(options);
  const std::string acme = server.CreateToken("acme", v1::ROLE_VENDOR);
  const std::string other = server.CreateToken("other", v1::ROLE_VENDOR);
  v1::SubmitResponse mine, theirs;
  REQUIRE(Submit(server, acme, ValidSubmit(), &mine).ok());
  REQUIRE(Submit(server, other, ValidSubmit(), &theirs).ok());
  const std::string id = mine.submission().id();
  auto first = std::make_unique<OpenWatch>(server, acme, id);
  auto second = std::make_unique<OpenWatch>(server, acme, id);
  REQUIRE(first->Opened(absl::Seconds(10)));
  REQUIRE(second->Opened(absl::Seconds(10)));
  OpenWatch third(server, acme, id);
  auto refused = third.Ended(absl::Seconds(10));
  CHECK(refused.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK_THAT(refused.error_message(), Catch::Contains("2 open WatchSubmission streams"));
  // Another tenant is not affected.
  OpenWatch other_tenant(server, other, theirs.submission().id());
  CHECK(other_tenant.Opened(absl::Seconds(10)));
  // A closed stream frees its place.
  first.reset();
  absl::SleepFor(absl::Milliseconds(500));  // The handler notices within 200 ms.
  OpenWatch again(server, acme, id);
  CHECK(again.Opened(absl::Seconds(10)));
}

// A reflection stream opened and left open, as a stranger would.
class ReflectionStream {
 public:
  explicit ReflectionStream(TestServer& server) : stub_(server.channel()) {
    WithDeadline(&context_, absl::Seconds(30));
    call_ = stub_.PrepareCall(
        &context_, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq_);
    call_->StartCall(reinterpret_cast<void*>(1));
    Next();
  }
  ~ReflectionStream() {
    context_.TryCancel();
    grpc::Status status;
    call_->Finish(&status, reinterpret_cast<void*>(9));
    cq_.Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (cq_.Next(&tag, &ok)) {
    }
  }
  // Asks for the service list; whether an answer came.
  bool ListServices() {
    const std::string request_bytes("\x3a\x00", 2);
    grpc::Slice slice(request_bytes);
    grpc::ByteBuffer request(&slice, 1);
    call_->Write(request, reinterpret_cast<void*>(2));
    if (!Next()) return false;
    grpc::ByteBuffer response;
    call_->Read(&response, reinterpret_cast<void*>(3));
    return Next();
  }

 private:
  bool Next() {
    void* tag = nullptr;
    bool ok = false;
    return cq_.Next(&tag, &ok) && ok;
  }
  grpc::GenericStub stub_;
  grpc::ClientContext context_;
  grpc::CompletionQueue cq_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
};

TEST_CASE("streams without a token are capped in total", "[api][trust]") {
  TestServerOptions options;
  options.max_unauthenticated_streams = 2;
  TestServer server(options);
  auto first = std::make_unique<ReflectionStream>(server);
  auto second = std::make_unique<ReflectionStream>(server);
  REQUIRE(first->ListServices());
  REQUIRE(second->ListServices());
  {
    ReflectionStream third(server);
    CHECK_FALSE(third.ListServices());  // Cancelled by the server.
  }
  first.reset();
  absl::SleepFor(absl::Milliseconds(200));
  ReflectionStream again(server);
  CHECK(again.ListServices());
  // Authenticated work is not counted against it.
  CHECK(Submit(server, "", ValidSubmit()).ok());
}

TEST_CASE("page tokens are opaque and refused for another tenant", "[api][trust]") {
  TestServer server;
  const std::string acme = server.CreateToken("acme", v1::ROLE_VENDOR);
  const std::string other = server.CreateToken("other", v1::ROLE_VENDOR);
  for (int i = 0; i < 3; ++i) REQUIRE(Submit(server, acme, ValidSubmit()).ok());
  auto list = [&](const std::string& token, const std::string& page_token,
                  v1::ListSubmissionsResponse* response) {
    grpc::ClientContext context;
    WithDeadline(&context);
    Authorize(&context, token);
    v1::ListSubmissionsRequest request;
    request.set_page_size(1);
    request.set_page_token(page_token);
    return server.submissions()->ListSubmissions(&context, request, response);
  };
  v1::ListSubmissionsResponse page;
  REQUIRE(list(acme, "", &page).ok());
  const std::string token = page.next_page_token();
  REQUIRE_FALSE(token.empty());
  int64_t number = 0;
  CHECK_FALSE(absl::SimpleAtoi(token, &number));  // Was the global submission counter.
  // Two tokens for the same position differ (fresh nonce): nothing to compare across pages.
  v1::ListSubmissionsResponse same;
  REQUIRE(list(acme, "", &same).ok());
  CHECK(same.next_page_token() != token);
  v1::ListSubmissionsResponse next;
  REQUIRE(list(acme, token, &next).ok());
  REQUIRE(next.submissions_size() == 1);
  CHECK(next.submissions(0).id() != page.submissions(0).id());
  v1::ListSubmissionsResponse stolen;
  auto refused = list(other, token, &stolen);
  CHECK(refused.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK_THAT(refused.error_message(), Catch::StartsWith("page_token: not a token"));
  std::string tampered = token;
  tampered[tampered.size() / 2] = tampered[tampered.size() / 2] == 'A' ? 'B' : 'A';
  CHECK(list(acme, tampered, &stolen).error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(list(acme, "12345", &stolen).error_code() == grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_CASE("caller text cannot forge log lines", "[api][trust]") {
  std::ostringstream captured;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(captured);
  sink->set_pattern("LOG %v");
  spdlog::default_logger()->sinks().push_back(sink);
  {
    TestServer server;
    const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
    v1::SubmitRequest forged = ValidSubmit();
    forged.set_model("m\nsubmission accepted submission_id=forged tenant=victim");
    forged.set_session_id("s\r\nrpc failed method=Submit code=INTERNAL");
    // Whether validation accepts these or not, neither may start a line of its own.
    Submit(server, vendor, forged);
    v1::SubmitRequest refused = ValidSubmit();
    refused.set_task_id("x\nforged task line");
    Submit(server, vendor, refused);
  }
  spdlog::default_logger()->sinks().pop_back();
  const std::string log = captured.str();
  INFO(log);
  REQUIRE_FALSE(log.empty());
  for (absl::string_view line : absl::StrSplit(log, '\n', absl::SkipEmpty())) {
    CHECK(absl::StartsWith(line, "LOG "));
  }
  CHECK_FALSE(absl::StrContains(log, "\nsubmission accepted submission_id=forged"));
}

TEST_CASE("a verdict's oversized details are stored truncated, with a marker", "[api][trust]") {
  TestServer server;
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  const std::string worker_token = server.CreateToken("fleet", v1::ROLE_WORKER);
  v1::SubmitResponse submitted;
  REQUIRE(Submit(server, vendor, ValidSubmit(), &submitted).ok());
  FakeWorker worker(server.channel(), worker_token, v1::ARCH_SM_90A, "GPU-bounds", true);
  REQUIRE(worker.Register().ok());
  worker.OpenLease(1);
  auto job = worker.NextJob(absl::Seconds(20));
  REQUIRE(job.has_value());
  // A module of thousands of kernels: a 1 MiB compile detail.
  nlohmann::json kernels = nlohmann::json::array();
  for (int i = 0; i < 30000; ++i) {
    kernels.push_back({{"name", absl::StrCat("kernel_", i)}, {"registers", 32}});
  }
  const std::string detail = nlohmann::json{{"kernels", kernels}}.dump();
  REQUIRE(detail.size() > (1 << 20));
  v1::Verdict too_many = MakeVerdict(v1::VERDICT_CLASS_COMPILED);
  too_many.clear_stages();  // MakeVerdict adds the compile stage a compiled verdict needs.
  for (int i = 0; i < 9; ++i) {
    auto* stage = too_many.add_stages();
    stage->set_stage(v1::STAGE_COMPILE);
    stage->set_ok(true);
  }
  auto refused = worker.Complete(*job, too_many);
  CHECK(refused.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK_THAT(refused.error_message(), Catch::StartsWith("verdict.stages: 9 stages"));

  v1::Verdict verdict = MakeVerdict(v1::VERDICT_CLASS_COMPILED);
  verdict.clear_stages();
  auto* stage = verdict.add_stages();
  stage->set_stage(v1::STAGE_COMPILE);
  stage->set_ok(true);
  stage->set_summary("compiled");
  stage->set_detail_json(detail);
  auto completed = worker.Complete(*job, verdict);
  INFO(completed.error_message());
  REQUIRE(completed.ok());
  worker.CloseLease();

  grpc::ClientContext context;
  WithDeadline(&context);
  Authorize(&context, vendor);
  v1::GetSubmissionRequest get;
  get.set_submission_id(submitted.submission().id());
  v1::Submission stored;
  REQUIRE(server.submissions()->GetSubmission(&context, get, &stored).ok());
  REQUIRE(stored.verdict().verdict_class() == v1::VERDICT_CLASS_COMPILED);
  REQUIRE(stored.verdict().stages_size() == 1);
  const v1::StageResult& kept = stored.verdict().stages(0);
  CHECK(kept.detail_json().size() < (64 << 10));
  auto marker = nlohmann::json::parse(kept.detail_json());
  CHECK(marker["truncated"] == true);
  CHECK(marker["original_bytes"] == detail.size());
  CHECK(absl::StartsWith(detail, marker["head"].get<std::string>()));
  CHECK_THAT(kept.summary(), Catch::StartsWith("compiled [detail truncated: "));
}

// Connects to 127.0.0.1:port and sends nothing.
int IdleConnection(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
  return fd;
}

TEST_CASE("/metrics answers beside idle connections and bounds its model labels",
          "[api][trust][metrics]") {
  TestServerOptions options;
  options.metrics = true;
  TestServer server(options);
  const int port = server.server().metrics_port();
  REQUIRE(port > 0);
  // The exploit: one idle TCP connection held the only civetweb thread for ~50 s.
  std::vector<int> idle;
  for (int i = 0; i < 3; ++i) idle.push_back(IdleConnection(port));
  const absl::Time start = absl::Now();
  const std::string body = HttpGet(port, "/metrics");
  const absl::Duration took = absl::Now() - start;
  CHECK(absl::StartsWith(body, "HTTP/1.1 200"));
  CHECK(took < absl::Seconds(2));
  for (int fd : idle) close(fd);

  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  for (int i = 0; i < 20; ++i) {
    v1::SubmitRequest request = ValidSubmit();
    request.set_model(absl::StrCat("model-", i, i == 0 ? " \"quoted\"\n{label}" : ""));
    REQUIRE(Submit(server, vendor, request).ok());
  }
  const std::string metrics = HttpGet(port, "/metrics");
  int model_series = 0;
  for (absl::string_view line : absl::StrSplit(metrics, '\n')) {
    if (absl::StartsWith(line, "ptxbench_submissions_total{")) ++model_series;
  }
  CHECK(model_series == 17);  // 16 models of the tenant's own, and "other".
  CHECK(absl::StrContains(metrics, "model=\"other\",task=\"api_test_gemm\",tenant=\"acme\"} 4"));
  CHECK(absl::StrContains(metrics, "model=\"model-0__quoted___label_\""));
}

}  // namespace
}  // namespace ptxbench::api_test
