// SubmissionService and AdminService over real gRPC against a real server and PostgreSQL:
// authentication, roles, tenant isolation, limits, request validation, health, reflection and
// the metrics endpoint.
#include <grpcpp/generic/generic_stub.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/api/health_check.h"
#include "tests/server/api/api_test_support.h"

namespace ptxbench::api_test {
namespace {

grpc::Status ListTenants(TestServer& server, const std::string& token) {
  grpc::ClientContext context;
  WithDeadline(&context);
  Authorize(&context, token);
  v1::ListTenantsResponse response;
  return server.admin()->ListTenants(&context, v1::ListTenantsRequest(), &response);
}

TEST_CASE("loopback bootstrap ends with the first token, then tokens are required", "[api][auth]") {
  TestServer server;
  // No token exists: a loopback caller is admin of tenant "local".
  REQUIRE(ListTenants(server, "").ok());
  v1::SubmitResponse accepted;
  REQUIRE(Submit(server, "", ValidSubmit(), &accepted).ok());
  CHECK(accepted.submission().tenant() == "local");

  const std::string admin = server.admin_token();
  auto missing = ListTenants(server, "");
  CHECK(missing.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  CHECK(absl::StrContains(missing.error_message(), "authorization"));
  CHECK(ListTenants(server, "not-a-token").error_code() == grpc::StatusCode::UNAUTHENTICATED);
  // Well-formed but unknown.
  CHECK(ListTenants(server, absl::StrCat("ptxb_0123456789abcdef_", std::string(64, 'a')))
            .error_code() == grpc::StatusCode::UNAUTHENTICATED);
  CHECK(ListTenants(server, admin).ok());
}

TEST_CASE("a revoked token is refused at once", "[api][auth]") {
  TestServer server;
  const std::string admin = server.admin_token();
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  REQUIRE(Submit(server, vendor, ValidSubmit()).ok());
  grpc::ClientContext context;
  WithDeadline(&context);
  Authorize(&context, admin);
  v1::RevokeTokenRequest revoke;
  // The token id is the part between "ptxb_" and the next '_'.
  revoke.set_token_id(vendor.substr(5, vendor.find('_', 5) - 5));
  v1::RevokeTokenResponse revoked;
  REQUIRE(server.admin()->RevokeToken(&context, revoke, &revoked).ok());
  CHECK(Submit(server, vendor, ValidSubmit()).error_code() == grpc::StatusCode::UNAUTHENTICATED);
}

TEST_CASE("roles: vendors cannot administer or work, workers cannot submit", "[api][auth]") {
  TestServer server;
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  const std::string worker = server.CreateToken("fleet", v1::ROLE_WORKER);
  auto denied = ListTenants(server, vendor);
  CHECK(denied.error_code() == grpc::StatusCode::PERMISSION_DENIED);
  CHECK(absl::StrContains(denied.error_message(), "admin"));
  CHECK(Submit(server, worker, ValidSubmit()).error_code() == grpc::StatusCode::PERMISSION_DENIED);
  FakeWorker as_vendor(server.channel(), vendor, v1::ARCH_SM_90A, "GPU-vendor");
  CHECK(as_vendor.Register().error_code() == grpc::StatusCode::PERMISSION_DENIED);
  FakeWorker as_worker(server.channel(), worker, v1::ARCH_SM_90A, "GPU-worker");
  CHECK(as_worker.Register().ok());
  // An admin may call everything.
  CHECK(Submit(server, server.admin_token(), ValidSubmit()).ok());
}

TEST_CASE("a vendor sees and cancels only its own tenant's submissions", "[api][tenants]") {
  TestServer server;
  const std::string acme = server.CreateToken("acme", v1::ROLE_VENDOR);
  const std::string globex = server.CreateToken("globex", v1::ROLE_VENDOR);
  v1::SubmitResponse submitted;
  REQUIRE(Submit(server, acme, ValidSubmit(), &submitted).ok());
  const std::string id = submitted.submission().id();
  CHECK(submitted.submission().tenant() == "acme");
  CHECK(submitted.submission().state() == v1::SUBMISSION_STATE_QUEUED);
  auto stub = server.submissions();

  v1::GetSubmissionRequest get;
  get.set_submission_id(id);
  v1::Submission seen;
  {
    grpc::ClientContext context;
    Authorize(&context, globex);
    CHECK(stub->GetSubmission(&context, get, &seen).error_code() == grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext context;
    Authorize(&context, globex);
    v1::CancelSubmissionRequest cancel;
    cancel.set_submission_id(id);
    CHECK(stub->CancelSubmission(&context, cancel, &seen).error_code() ==
          grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext context;
    WithDeadline(&context, absl::Seconds(10));
    Authorize(&context, globex);
    v1::WatchSubmissionRequest watch;
    watch.set_submission_id(id);
    auto reader = stub->WatchSubmission(&context, watch);
    v1::StageEvent event;
    CHECK_FALSE(reader->Read(&event));
    CHECK(reader->Finish().error_code() == grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext context;
    Authorize(&context, globex);
    v1::ListSubmissionsResponse listed;
    REQUIRE(stub->ListSubmissions(&context, v1::ListSubmissionsRequest(), &listed).ok());
    CHECK(listed.submissions_size() == 0);
  }
  {
    grpc::ClientContext context;
    Authorize(&context, acme);
    v1::ListSubmissionsResponse listed;
    REQUIRE(stub->ListSubmissions(&context, v1::ListSubmissionsRequest(), &listed).ok());
    REQUIRE(listed.submissions_size() == 1);
    CHECK(listed.submissions(0).id() == id);
  }
  {
    grpc::ClientContext context;
    Authorize(&context, acme);
    REQUIRE(stub->GetSubmission(&context, get, &seen).ok());
    CHECK(seen.id() == id);
    CHECK(seen.task_id() == kTaskId);
    CHECK(seen.arch() == v1::ARCH_SM_90A);
    CHECK(seen.source_sha256().size() == 64);
  }
  {
    // Admins see every tenant's submissions.
    grpc::ClientContext context;
    Authorize(&context, server.admin_token());
    REQUIRE(stub->GetSubmission(&context, get, &seen).ok());
    CHECK(seen.tenant() == "acme");
  }
  {
    grpc::ClientContext context;
    Authorize(&context, acme);
    v1::CancelSubmissionRequest cancel;
    cancel.set_submission_id(id);
    REQUIRE(stub->CancelSubmission(&context, cancel, &seen).ok());
    CHECK(seen.state() == v1::SUBMISSION_STATE_CANCELLED);
  }
}

TEST_CASE("a retried Submit with the same idempotency key returns the first submission",
          "[api][submit]") {
  TestServer server;
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  v1::SubmitRequest request = ValidSubmit();
  request.set_idempotency_key("turn-7-attempt");
  v1::SubmitResponse first, second;
  REQUIRE(Submit(server, vendor, request, &first).ok());
  REQUIRE(Submit(server, vendor, request, &second).ok());
  CHECK(first.submission().id() == second.submission().id());
  grpc::ClientContext context;
  Authorize(&context, vendor);
  v1::ListSubmissionsRequest list;
  list.set_page_size(1);
  v1::ListSubmissionsResponse page;
  REQUIRE(Submit(server, vendor, ValidSubmit()).ok());
  REQUIRE(server.submissions()->ListSubmissions(&context, list, &page).ok());
  // Two submissions, one per page, newest first.
  REQUIRE(page.submissions_size() == 1);
  CHECK(page.submissions(0).id() != first.submission().id());
  REQUIRE_FALSE(page.next_page_token().empty());
  grpc::ClientContext next_context;
  Authorize(&next_context, vendor);
  list.set_page_token(page.next_page_token());
  v1::ListSubmissionsResponse next;
  REQUIRE(server.submissions()->ListSubmissions(&next_context, list, &next).ok());
  REQUIRE(next.submissions_size() == 1);
  CHECK(next.submissions(0).id() == first.submission().id());
}

TEST_CASE(
    "a Submit whose COMMIT loses the database says so: UNAVAILABLE to retry with a key, "
    "UNKNOWN without",
    "[api][submit]") {
  TestServer server;
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  InstallSlowCommit(server.database(), "submissions", "NEW.model = 'slow-commit'");
  v1::SubmitRequest request = ValidSubmit();
  request.set_model("slow-commit");

  SECTION("with an idempotency key: UNAVAILABLE, and the same request again stores it once") {
    request.set_idempotency_key("turn-3");
    const grpc::Status lost =
        CallAndLoseTheCommit(server, [&] { return Submit(server, vendor, request); });
    INFO(lost.error_code() << " " << lost.error_message());
    CHECK(lost.error_code() == grpc::StatusCode::UNAVAILABLE);
    CHECK(absl::StrContains(lost.error_message(), "same idempotency_key"));
    CHECK_FALSE(absl::StrContains(lost.error_message(), "internal error"));
    RemoveSlowCommit(server.database(), "submissions");
    v1::SubmitResponse retried;
    grpc::Status again;
    for (int attempt = 0; attempt < 20; ++attempt) {
      again = Submit(server, vendor, request, &retried);
      if (again.error_code() != grpc::StatusCode::UNAVAILABLE) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    INFO(again.error_message());
    REQUIRE(again.ok());
    v1::SubmitResponse third;
    REQUIRE(Submit(server, vendor, request, &third).ok());
    CHECK(third.submission().id() == retried.submission().id());
    CHECK(server.database()
              .Scalar("SELECT count(*) FROM submissions WHERE idempotency_key = 'turn-3'")
              .value_or(std::nullopt) == std::optional<std::string>("1"));
  }
  SECTION("without one: UNKNOWN, saying to look rather than an internal error") {
    const grpc::Status lost =
        CallAndLoseTheCommit(server, [&] { return Submit(server, vendor, request); });
    INFO(lost.error_code() << " " << lost.error_message());
    CHECK(lost.error_code() == grpc::StatusCode::UNKNOWN);
    CHECK(absl::StrContains(lost.error_message(), "may or may not be stored"));
    CHECK(absl::StrContains(lost.error_message(), "ListSubmissions"));
    // The caller's message names no database: the detail stays in the server's log.
    CHECK_FALSE(absl::StrContains(lost.error_message(), server.database().name()));
    CHECK(server.database().Scalar("SELECT count(*) FROM submissions").value_or(std::nullopt) ==
          std::optional<std::string>("0"));
  }
}

TEST_CASE("per-tenant submissions per minute are limited", "[api][limits]") {
  TestServer server;
  const std::string vendor = server.CreateToken("bursty", v1::ROLE_VENDOR, /*per_minute=*/3);
  for (int i = 0; i < 3; ++i) REQUIRE(Submit(server, vendor, ValidSubmit()).ok());
  auto refused = Submit(server, vendor, ValidSubmit());
  CHECK(refused.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK(absl::StrContains(refused.error_message(), "per minute"));
  // Another tenant is not affected.
  CHECK(Submit(server, server.CreateToken("calm", v1::ROLE_VENDOR), ValidSubmit()).ok());
}

TEST_CASE("per-tenant unfinished submissions are limited", "[api][limits]") {
  TestServer server;
  const std::string vendor =
      server.CreateToken("hoarder", v1::ROLE_VENDOR, /*per_minute=*/0, /*max_queued=*/2);
  v1::SubmitResponse first;
  REQUIRE(Submit(server, vendor, ValidSubmit(), &first).ok());
  REQUIRE(Submit(server, vendor, ValidSubmit()).ok());
  auto refused = Submit(server, vendor, ValidSubmit());
  CHECK(refused.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK(absl::StrContains(refused.error_message(), "unfinished"));
  // Cancelling one frees a place.
  grpc::ClientContext context;
  Authorize(&context, vendor);
  v1::CancelSubmissionRequest cancel;
  cancel.set_submission_id(first.submission().id());
  v1::Submission cancelled;
  REQUIRE(server.submissions()->CancelSubmission(&context, cancel, &cancelled).ok());
  CHECK(Submit(server, vendor, ValidSubmit()).ok());
}

TEST_CASE("every Submit validation error is INVALID_ARGUMENT naming its field",
          "[api][validation]") {
  TestServer server;
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  struct Case {
    const char* what;
    std::function<void(v1::SubmitRequest&)> mutate;
    std::string expected_prefix;
  };
  const std::vector<Case> cases = {
      {"missing task", [](auto& r) { r.clear_task_id(); }, "task_id: required"},
      {"unknown task", [](auto& r) { r.set_task_id("no_such_task"); }, "task_id: unknown task"},
      {"unspecified arch", [](auto& r) { r.set_arch(v1::ARCH_UNSPECIFIED); }, "arch: required"},
      {"unknown arch value", [](auto& r) { r.set_arch(static_cast<v1::Arch>(9)); },
       "arch: unknown value 9"},
      {"arch not defined for the task",
       [](auto& r) {
         r.set_task_id(kSm90OnlyTaskId);
         r.set_arch(v1::ARCH_SM_100A);
       },
       "arch: task 'api_test_sm90_only' is not defined for sm_100a"},
      {"unknown language", [](auto& r) { r.set_language(static_cast<v1::SourceLanguage>(7)); },
       "language: unknown value 7"},
      {"empty source", [](auto& r) { r.clear_source(); }, "source: required"},
      {"oversized source", [](auto& r) { r.set_source(std::string((1 << 20) + 1, 'x')); },
       "source: 1048577 bytes exceeds the 1 MiB limit"},
      // Refused before parsing: no valid Submit is this large (rpc.h).
      {"source far over the limit", [](auto& r) { r.set_source(std::string(3 << 20, 'x')); },
       "request: 3145843 bytes, more than any valid ptxbench.v1.SubmitRequest can be"},
      {"no launches", [](auto& r) { r.mutable_launch_plan()->clear_launches(); },
       "launch_plan.launches: missing"},
      {"empty kernel name",
       [](auto& r) { r.mutable_launch_plan()->mutable_launches(0)->clear_kernel(); },
       "launch_plan.launches[0].kernel: missing"},
      {"four grid dimensions",
       [](auto& r) {
         auto* launch = r.mutable_launch_plan()->mutable_launches(0);
         launch->add_grid("1");
         launch->add_grid("1");
       },
       "launch_plan.launches[0].grid: has 4 entries; 1 to 3 are allowed"},
      {"no block", [](auto& r) { r.mutable_launch_plan()->mutable_launches(0)->clear_block(); },
       "launch_plan.launches[0].block: missing"},
      {"empty grid expression",
       [](auto& r) { r.mutable_launch_plan()->mutable_launches(0)->set_grid(0, ""); },
       "launch_plan.launches[0].grid[0]: empty expression"},
      {"argument without kind",
       [](auto& r) { r.mutable_launch_plan()->mutable_launches(0)->add_args(); },
       "launch_plan.launches[0].args[3]: an argument is an object with exactly one key"},
      {"bad swizzle",
       [](auto& r) {
         auto* map = r.mutable_launch_plan()->add_tensor_maps();
         map->set_name("a_map");
         map->set_tensor("A");
         map->add_box("64");
         map->set_swizzle("96B");
       },
       "launch_plan.tensor_maps[0].swizzle: '96B' is not one of"},
      {"negative turn", [](auto& r) { r.set_turn_index(-1); }, "turn_index: must be >= 0, got -1"},
      {"unspecified knowledge level",
       [](auto& r) { r.set_knowledge_level(v1::KNOWLEDGE_LEVEL_UNSPECIFIED); },
       "knowledge_level: required"},
      {"unknown scope", [](auto& r) { r.set_scope(static_cast<v1::EvaluationScope>(5)); },
       "scope: unknown value 5"},
      {"oversized model", [](auto& r) { r.set_model(std::string(300, 'm')); },
       "model: 300 bytes exceeds"},
      {"oversized session", [](auto& r) { r.set_session_id(std::string(257, 's')); },
       "session_id: 257 bytes exceeds"},
      {"oversized idempotency key", [](auto& r) { r.set_idempotency_key(std::string(1000, 'k')); },
       "idempotency_key: 1000 bytes exceeds"},
  };
  // One server for every case (a SECTION would start one per case).
  for (const auto& c : cases) {
    v1::SubmitRequest request = ValidSubmit();
    c.mutate(request);
    auto status = Submit(server, vendor, request);
    INFO(c.what << ": " << status.error_message());
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(absl::StartsWith(status.error_message(), c.expected_prefix));
  }
  // Nothing invalid was stored.
  grpc::ClientContext context;
  Authorize(&context, vendor);
  v1::ListSubmissionsResponse listed;
  REQUIRE(
      server.submissions()->ListSubmissions(&context, v1::ListSubmissionsRequest(), &listed).ok());
  CHECK(listed.submissions_size() == 0);
}

TEST_CASE("other requests name their invalid fields", "[api][validation]") {
  TestServer server;
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  auto stub = server.submissions();
  {
    grpc::ClientContext context;
    Authorize(&context, vendor);
    v1::GetSubmissionRequest request;
    request.set_submission_id("'; drop table submissions; --");
    v1::Submission response;
    auto status = stub->GetSubmission(&context, request, &response);
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(absl::StartsWith(status.error_message(), "submission_id:"));
  }
  {
    grpc::ClientContext context;
    Authorize(&context, vendor);
    v1::GetSubmissionRequest request;
    request.set_submission_id("00000000-0000-0000-0000-000000000000");
    v1::Submission response;
    CHECK(stub->GetSubmission(&context, request, &response).error_code() ==
          grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext context;
    Authorize(&context, vendor);
    v1::ListSubmissionsRequest request;
    request.set_page_size(501);
    v1::ListSubmissionsResponse response;
    auto status = stub->ListSubmissions(&context, request, &response);
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(absl::StartsWith(status.error_message(), "page_size:"));
  }
  {
    grpc::ClientContext context;
    Authorize(&context, vendor);
    v1::GetTaskRequest request;
    request.set_task_id(kTaskId);
    request.set_arch(v1::ARCH_SM_90A);
    v1::GetTaskResponse response;
    auto status = stub->GetTask(&context, request, &response);
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(absl::StartsWith(status.error_message(), "knowledge_level: required"));
  }
  const std::string admin = server.admin_token();
  {
    grpc::ClientContext context;
    Authorize(&context, admin);
    v1::CreateTenantRequest request;
    request.mutable_tenant()->set_name("Bad Name!");
    v1::Tenant response;
    auto status = server.admin()->CreateTenant(&context, request, &response);
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(absl::StartsWith(status.error_message(), "tenant.name:"));
  }
  {
    grpc::ClientContext context;
    Authorize(&context, admin);
    v1::CreateTokenRequest request;
    request.set_tenant("acme");
    v1::CreateTokenResponse response;
    auto status = server.admin()->CreateToken(&context, request, &response);
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(absl::StartsWith(status.error_message(), "role: required"));
  }
  {
    grpc::ClientContext context;
    Authorize(&context, admin);
    v1::CreateTokenRequest request;
    request.set_tenant("nobody");
    request.set_role(v1::ROLE_VENDOR);
    v1::CreateTokenResponse response;
    auto status = server.admin()->CreateToken(&context, request, &response);
    CHECK(status.error_code() == grpc::StatusCode::NOT_FOUND);
    CHECK(absl::StartsWith(status.error_message(), "tenant:"));
  }
}

TEST_CASE("ListTasks and GetTask serve the catalog with rendered prompts", "[api][tasks]") {
  TestServer server;
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  auto stub = server.submissions();
  grpc::ClientContext list_context;
  Authorize(&list_context, vendor);
  v1::ListTasksResponse tasks;
  REQUIRE(stub->ListTasks(&list_context, v1::ListTasksRequest(), &tasks).ok());
  bool found = false;
  for (const auto& task : tasks.tasks()) {
    if (task.id() != kTaskId) continue;
    found = true;
    CHECK(task.version_hash().size() == 64);
    CHECK(task.arches_size() == 2);
    CHECK(task.target_families_size() > 0);
  }
  CHECK(found);

  grpc::ClientContext context;
  Authorize(&context, vendor);
  v1::GetTaskRequest request;
  request.set_task_id(kTaskId);
  request.set_arch(v1::ARCH_SM_90A);
  request.set_knowledge_level(v1::KNOWLEDGE_LEVEL_TEMPLATES);
  v1::GetTaskResponse response;
  auto status = stub->GetTask(&context, request, &response);
  INFO(status.error_message());
  REQUIRE(status.ok());
  CHECK(response.task().id() == kTaskId);
  CHECK(absl::StrContains(response.prompt(), "sm_90a"));
  CHECK_FALSE(absl::StrContains(response.prompt(), "{{"));
  CHECK(absl::StrContains(response.definition_json(), "\"workloads\""));
  CHECK(response.templates_size() > 0);
}

TEST_CASE("the health service reports SERVING and reflection lists the services", "[api][health]") {
  TestServer server;
  api::HealthCheckOptions health;
  health.address = server.address();
  auto serving = api::CheckHealth(health);
  REQUIRE(serving.ok());
  CHECK(*serving == "SERVING");

  // grpc.reflection.v1alpha ServerReflectionRequest{list_services: ""} is field 7, empty.
  grpc::GenericStub stub(server.channel());
  grpc::ClientContext context;
  WithDeadline(&context, absl::Seconds(10));
  grpc::CompletionQueue cq;
  auto call = stub.PrepareCall(
      &context, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  REQUIRE(call != nullptr);
  void* tag = nullptr;
  bool ok = false;
  call->StartCall(reinterpret_cast<void*>(1));
  REQUIRE((cq.Next(&tag, &ok) && ok));
  const std::string request_bytes("\x3a\x00", 2);
  grpc::Slice slice(request_bytes);
  grpc::ByteBuffer request(&slice, 1);
  call->Write(request, reinterpret_cast<void*>(2));
  REQUIRE((cq.Next(&tag, &ok) && ok));
  call->WritesDone(reinterpret_cast<void*>(3));
  REQUIRE((cq.Next(&tag, &ok) && ok));
  grpc::ByteBuffer response;
  call->Read(&response, reinterpret_cast<void*>(4));
  REQUIRE((cq.Next(&tag, &ok) && ok));
  std::vector<grpc::Slice> slices;
  REQUIRE(response.Dump(&slices).ok());
  std::string bytes;
  for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  CHECK(absl::StrContains(bytes, "ptxbench.v1.SubmissionService"));
  CHECK(absl::StrContains(bytes, "ptxbench.v1.WorkerService"));
  CHECK(absl::StrContains(bytes, "ptxbench.v1.AdminService"));
  CHECK(absl::StrContains(bytes, "grpc.health.v1.Health"));
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  REQUIRE(cq.Next(&tag, &ok));
  CHECK(status.ok());
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }

  server.server().GracefulStop();
  auto stopped = api::CheckHealth(health);
  CHECK_FALSE((stopped.ok() && *stopped == "SERVING"));
}

TEST_CASE("a source that is not UTF-8 is refused without harm", "[api][validation]") {
  TestServer server;
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  v1::SubmitRequest request = ValidSubmit();
  request.set_source("__global__ void k() {}\n// \xc3\x28 broken\n");
  auto status = Submit(server, vendor, request);
  // The C++ client sends the bytes (protobuf only logs an error); the server names the field.
  CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(status.error_message() == "source: not valid UTF-8 (byte 26)");
  // Also deep inside the launch plan, with the path of the repeated fields.
  request = ValidSubmit();
  request.mutable_launch_plan()->mutable_launches(0)->set_grid(1, "N\xff");
  status = Submit(server, vendor, request);
  CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(status.error_message() == "launch_plan.launches[0].grid[1]: not valid UTF-8 (byte 1)");
  // Nothing was stored and the server still serves.
  grpc::ClientContext context;
  Authorize(&context, vendor);
  v1::ListSubmissionsResponse listed;
  REQUIRE(
      server.submissions()->ListSubmissions(&context, v1::ListSubmissionsRequest(), &listed).ok());
  CHECK(listed.submissions_size() == 0);
  CHECK(Submit(server, vendor, ValidSubmit()).ok());
}

// A self-signed certificate for 127.0.0.1, made with the openssl command line tool.
struct TestCertificate {
  std::string dir;
  std::string cert;
  std::string key;
};

TestCertificate MakeCertificate() {
  std::string templ = "/tmp/ptxbench-tls.XXXXXX";
  REQUIRE(mkdtemp(templ.data()) != nullptr);
  TestCertificate made{templ, templ + "/cert.pem", templ + "/key.pem"};
  const std::string command = absl::StrCat(
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
      "-addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout ",
      made.key, " -out ", made.cert, " >/dev/null 2>&1");
  REQUIRE(std::system(command.c_str()) == 0);
  return made;
}

TEST_CASE("TLS: the server speaks only TLS, and with a client CA only to holders of a certificate",
          "[api][tls]") {
  const TestCertificate certificate = MakeCertificate();
  api::HealthCheckOptions health;
  {
    TestServerOptions options;
    options.tls.cert_file = certificate.cert;
    options.tls.key_file = certificate.key;
    TestServer server(options);
    health.address = server.address();
    health.timeout = absl::Seconds(3);
    // Plaintext is refused.
    CHECK_FALSE(api::CheckHealth(health).ok());
    health.tls_ca_file = certificate.cert;
    auto serving = api::CheckHealth(health);
    INFO(serving.status().ToString());
    REQUIRE(serving.ok());
    CHECK(*serving == "SERVING");
    // The API answers over TLS (loopback bootstrap: no token yet).
    CHECK(ListTenants(server, "").ok());
  }
  TestServerOptions options;
  options.tls.cert_file = certificate.cert;
  options.tls.key_file = certificate.key;
  options.tls.client_ca_file = certificate.cert;
  TestServer server(options);
  health.address = server.address();
  // A TLS client without a certificate is refused during the handshake.
  CHECK_FALSE(api::CheckHealth(health).ok());
  // One presenting a certificate the client CA signed is served.
  std::ifstream cert_in(certificate.cert), key_in(certificate.key);
  std::stringstream cert_pem, key_pem;
  cert_pem << cert_in.rdbuf();
  key_pem << key_in.rdbuf();
  // Its own credentials rather than Dial's: Dial presents no client certificate.
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = cert_pem.str();
  ssl.pem_cert_chain = cert_pem.str();
  ssl.pem_private_key = key_pem.str();
  auto channel = grpc::CreateChannel(server.address(), grpc::SslCredentials(ssl));
  grpc::ClientContext context;
  WithDeadline(&context, absl::Seconds(10));
  v1::ListTenantsResponse tenants;
  auto status =
      v1::AdminService::NewStub(channel)->ListTenants(&context, v1::ListTenantsRequest(), &tenants);
  INFO(status.error_message());
  CHECK(status.ok());
  std::filesystem::remove_all(certificate.dir);
}

TEST_CASE("the metrics endpoint serves every family", "[api][metrics]") {
  TestServerOptions options;
  options.metrics = true;
  TestServer server(options);
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  REQUIRE(Submit(server, vendor, ValidSubmit()).ok());
  // A cancellation is a final verdict too: it makes the verdict family appear.
  v1::SubmitResponse cancelled;
  REQUIRE(Submit(server, vendor, ValidSubmit(), &cancelled).ok());
  {
    grpc::ClientContext context;
    Authorize(&context, vendor);
    v1::CancelSubmissionRequest cancel;
    cancel.set_submission_id(cancelled.submission().id());
    v1::Submission response;
    REQUIRE(server.submissions()->CancelSubmission(&context, cancel, &response).ok());
  }
  REQUIRE(server.server().metrics_port() > 0);
  const std::string body = HttpGet(server.server().metrics_port(), "/metrics");
  INFO(body);
  CHECK(absl::StartsWith(body, "HTTP/1.1 200"));
  for (const char* family :
       {"ptxbench_queue_depth", "ptxbench_queue_oldest_job_age_seconds", "ptxbench_workers",
        "ptxbench_lease_latency_seconds", "ptxbench_rpc_duration_seconds",
        "ptxbench_submissions_total", "ptxbench_verdicts_total", "ptxbench_store_up 1"}) {
    CHECK(absl::StrContains(body, family));
  }
  CHECK(absl::StrContains(body, "ptxbench_queue_depth{arch=\"sm_90a\",kind=\"compile\"} 1"));
  CHECK(absl::StrContains(body,
                          "ptxbench_submissions_total{arch=\"sm_90a\",model=\"test:model\",task="
                          "\"api_test_gemm\",tenant=\"acme\"} 2"));
  CHECK(absl::StrContains(body,
                          "ptxbench_rpc_duration_seconds_count{code=\"OK\",method=\"Submit\"} 2"));
  CHECK(absl::StrContains(body, "verdict_class=\"cancelled\"} 1"));
  CHECK(absl::StrContains(body, "ptxbench_workers{state=\"active\"} 0"));
}

}  // namespace
}  // namespace ptxbench::api_test
