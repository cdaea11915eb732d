// ptxbench-server's maintenance verbs (server_cli.h), in process, against a real PostgreSQL
// and a real server on loopback: what the binary runs, without forking it.
#include "server/server_cli.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/api/auth.h"
#include "server/api/tokens.h"
#include "server/store/store.h"
#include "tests/server/api/api_test_support.h"
#include "tests/support/pg_fixture.h"
#include "tests/support/status_testing.h"

namespace ptxbench::server {
namespace {

using ::ptxbench::testing::ValueOrFail;

ServerOptions OptionsFor(const testing::TestDatabase& database) {
  ServerOptions options;
  options.database_url = database.url();
  options.migrations_dir = testing::MigrationsDir();
  options.store_pool_size = 2;
  return options;
}

int MigrationCount() {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(testing::MigrationsDir())) {
    if (entry.path().string().size() > 7 &&
        entry.path().string().substr(entry.path().string().size() - 7) == ".up.sql") {
      ++count;
    }
  }
  return count;
}

TEST_CASE("migrate's arguments: up, down N, nothing else", "[server][cli]") {
  CHECK(ValueOrFail(ParseMigrateArgs({})).direction == MigrateRequest::Direction::kUp);
  CHECK(ValueOrFail(ParseMigrateArgs({"up"})).direction == MigrateRequest::Direction::kUp);
  MigrateRequest down = ValueOrFail(ParseMigrateArgs({"down", "2"}));
  CHECK(down.direction == MigrateRequest::Direction::kDown);
  CHECK(down.steps == 2);
  for (const std::vector<std::string>& bad :
       std::vector<std::vector<std::string>>{{"down"},
                                             {"down", "0"},
                                             {"down", "two"},
                                             {"down", "1", "2"},
                                             {"sideways"},
                                             {"up", "1"}}) {
    absl::StatusOr<MigrateRequest> parsed = ParseMigrateArgs(bad);
    INFO(parsed.status().ToString());
    CHECK(absl::IsInvalidArgument(parsed.status()));
  }
}

TEST_CASE("migrate applies, reverts and reports the schema version", "[server][cli]") {
  auto database = ValueOrFail(testing::TestDatabase::Create(/*migrate=*/false));
  const ServerOptions options = OptionsFor(*database);
  const int newest = MigrationCount();
  REQUIRE(ValueOrFail(RunMigrate(options, {})) == newest);
  REQUIRE(ValueOrFail(RunMigrate(options, {})) == newest);  // Nothing left to do.
  REQUIRE(ValueOrFail(RunMigrate(options, ValueOrFail(ParseMigrateArgs({"down", "2"})))) ==
          newest - 2);
  REQUIRE(ValueOrFail(RunMigrate(options, {})) == newest);

  ServerOptions no_files = options;
  no_files.migrations_dir = "/nonexistent/migrations";
  REQUIRE_STATUS(RunMigrate(no_files, {}), absl::StatusCode::kNotFound);
  ServerOptions nowhere = options;
  nowhere.database_url = "postgresql://ptxbench:hunter2@127.0.0.1:1/none";
  absl::StatusOr<int> unreachable = RunMigrate(nowhere, {});
  REQUIRE(absl::IsUnavailable(unreachable.status()));
  REQUIRE_THAT(std::string(unreachable.status().message()), Catch::Contains("127.0.0.1:1"));
  REQUIRE_THAT(std::string(unreachable.status().message()), !Catch::Contains("hunter2"));
}

TEST_CASE("token create mints a token that authenticates, on a database never migrated",
          "[server][cli]") {
  auto database = ValueOrFail(testing::TestDatabase::Create(/*migrate=*/false));
  const ServerOptions options = OptionsFor(*database);
  api::MintTokenRequest request;
  request.tenant = "acme";
  request.role = v1::ROLE_VENDOR;
  const api::MintedToken vendor = ValueOrFail(RunTokenCreate(options, request));
  REQUIRE(vendor.secret.rfind(absl::StrCat("ptxb_", vendor.token_id, "_"), 0) == 0);
  REQUIRE(vendor.tenant == "acme");

  // A worker token needs no tenant; a vendor token does; the role is required.
  api::MintTokenRequest worker_request;
  worker_request.role = v1::ROLE_WORKER;
  const api::MintedToken worker = ValueOrFail(RunTokenCreate(options, worker_request));
  api::MintTokenRequest no_tenant;
  no_tenant.role = v1::ROLE_VENDOR;
  REQUIRE_STATUS(RunTokenCreate(options, no_tenant), absl::StatusCode::kInvalidArgument);
  api::MintTokenRequest no_role;
  no_role.tenant = "acme";
  REQUIRE_STATUS(RunTokenCreate(options, no_role), absl::StatusCode::kInvalidArgument);
  api::MintTokenRequest bad_name = request;
  bad_name.tenant = "Not A Tenant";
  REQUIRE_STATUS(RunTokenCreate(options, bad_name), absl::StatusCode::kInvalidArgument);

  // The secrets authenticate (from another machine: bootstrap mode is over) with their role.
  store::StoreOptions store_options;
  store_options.database_url = database->url();
  auto store = ValueOrFail(store::Store::Connect(store_options));
  api::Authenticator auth(store.get(), {});
  api::Caller caller =
      ValueOrFail(auth.Authenticate(absl::StrCat("Bearer ", vendor.secret), "ipv4:10.1.2.3:5"));
  REQUIRE(caller.role == api::Role::kVendor);
  REQUIRE(caller.tenant == "acme");
  REQUIRE(caller.token_id == vendor.token_id);
  REQUIRE(ValueOrFail(auth.Authenticate(absl::StrCat("Bearer ", worker.secret), "ipv4:10.1.2.3:5"))
              .role == api::Role::kWorker);
  // The audit log names the command line as the actor.
  std::vector<store::AuditRow> audit =
      ValueOrFail(store->ListAuditLog(store::AuditEntity::kToken, vendor.token_id));
  REQUIRE(audit.size() == 1);
  REQUIRE(audit[0].actor == "admin:command-line");
  REQUIRE(ValueOrFail(store->GetTenant("acme")).name == "acme");
}

TEST_CASE("the admin API and the command line mint by the same rules", "[server][cli]") {
  auto database = ValueOrFail(testing::TestDatabase::Create());
  store::StoreOptions store_options;
  store_options.database_url = database->url();
  auto store = ValueOrFail(store::Store::Connect(store_options));
  // Without create_tenant (the admin API) a missing tenant is NOT_FOUND, never created.
  api::MintTokenRequest request;
  request.tenant = "initech";
  request.role = v1::ROLE_VENDOR;
  absl::StatusOr<api::MintedToken> missing = api::MintToken(*store, request);
  REQUIRE(absl::IsNotFound(missing.status()));
  REQUIRE_THAT(std::string(missing.status().message()), Catch::StartsWith("tenant:"));
  REQUIRE_STATUS(store->GetTenant("initech"), absl::StatusCode::kNotFound);
  request.description = std::string(300, 'x');
  request.create_tenant = true;
  REQUIRE_STATUS(api::MintToken(*store, request), absl::StatusCode::kInvalidArgument);
  request.description = "ok";
  REQUIRE(ValueOrFail(api::MintToken(*store, request)).tenant == "initech");
}

TEST_CASE("health reports the serving status of a running server and fails on none",
          "[server][cli]") {
  api_test::TestServer server;
  api::HealthCheckOptions options;
  options.address = server.address();
  REQUIRE(ValueOrFail(RunHealth(options)) == "SERVING");
  options.address = "127.0.0.1:1";
  options.timeout = absl::Seconds(2);
  REQUIRE_FALSE(RunHealth(options).ok());
  options.address.clear();
  REQUIRE_STATUS(RunHealth(options), absl::StatusCode::kInvalidArgument);
}

// Serves the open round of `id` with `worker`: compile, then evaluate ending in
// `verdict_class`.
void JudgeRound(api_test::FakeWorker& worker, const std::string& id,
                v1::VerdictClass verdict_class) {
  for (v1::JobKind kind : {v1::JOB_KIND_COMPILE, v1::JOB_KIND_EVALUATE}) {
    auto job = worker.NextJob(absl::Seconds(15));
    REQUIRE(job.has_value());
    REQUIRE(job->submission_id() == id);
    REQUIRE(job->kind() == kind);
    REQUIRE(worker
                .Complete(*job, api_test::MakeVerdict(kind == v1::JOB_KIND_COMPILE
                                                          ? v1::VERDICT_CLASS_COMPILED
                                                          : verdict_class))
                .ok());
  }
}

TEST_CASE("rejudge and mark-hacked act on the store a running server serves", "[server][cli]") {
  api_test::TestServer server;
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  api_test::FakeWorker worker(server.channel(), server.CreateToken("fleet", v1::ROLE_WORKER),
                              v1::ARCH_SM_90A, "GPU-cli");
  REQUIRE(worker.Register().ok());
  worker.OpenLease(1);
  v1::SubmitResponse submitted;
  REQUIRE(api_test::Submit(server, vendor, api_test::ValidSubmit(/*full=*/true), &submitted).ok());
  const std::string id = submitted.submission().id();
  JudgeRound(worker, id, v1::VERDICT_CLASS_PASS);

  ServerOptions options = OptionsFor(server.database());
  options.tasks_dir = api_test::TestTasksDir();
  RejudgeCommand command;
  command.tasks = "no_such_task";
  absl::StatusOr<std::vector<std::string>> unknown = RunRejudge(options, command);
  REQUIRE(absl::IsInvalidArgument(unknown.status()));
  REQUIRE_THAT(std::string(unknown.status().message()),
               Catch::Contains("unknown task 'no_such_task'"));
  command.tasks = absl::StrCat(api_test::kTaskId, ",");
  command.harness_older_than = "0.2.x";
  REQUIRE_STATUS(RunRejudge(options, command), absl::StatusCode::kInvalidArgument);
  command.harness_older_than = "0.2.0";
  command.reason = "cli test";
  REQUIRE(ValueOrFail(RunRejudge(options, command)) == std::vector<std::string>{id});

  // The running server's worker is woken by the queue's NOTIFY and judges the new round.
  JudgeRound(worker, id, v1::VERDICT_CLASS_WRONG_RESULT);
  auto store = ValueOrFail(store::Store::Connect([&] {
    store::StoreOptions store_options;
    store_options.database_url = server.database().url();
    return store_options;
  }()));
  store::SubmissionRow row = ValueOrFail(store->GetSubmission(id, ""));
  REQUIRE(row.verdict->verdict_class == v1::VERDICT_CLASS_WRONG_RESULT);
  REQUIRE(row.judging_round == 1);
  REQUIRE(row.superseded_verdicts == 1);

  MarkHackedCommand mark;
  mark.submission_id = id;
  REQUIRE_STATUS(RunMarkHacked(options, mark), absl::StatusCode::kInvalidArgument);  // No reason.
  mark.reason = "skips the reduction";
  store::SubmissionRow marked = ValueOrFail(RunMarkHacked(options, mark));
  REQUIRE(marked.hacked->by == "admin:command-line");
  REQUIRE_STATUS(RunMarkHacked(options, mark), absl::StatusCode::kAlreadyExists);
  mark.unmark = true;
  REQUIRE_FALSE(ValueOrFail(RunMarkHacked(options, mark)).hacked.has_value());
}

}  // namespace
}  // namespace ptxbench::server
