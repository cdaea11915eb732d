// ptxbench-server's command line (server_cli.h), in process, against a real PostgreSQL and a
// real server on loopback: what the binary runs, without forking it. Each verb's flags and
// option checks, its output and exit code, the serve loop's signal wait, and the maintenance
// verbs' typed requests.
#include "server/server_cli.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <future>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/build_info.h"
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

// The flags of `verb` parsed from `args`; FAILs the test when they do not parse.
ParsedArgs VerbArgs(const std::string& verb, const std::vector<std::string>& args) {
  const std::vector<FlagSpec> specs = ValueOrFail(ServerVerbFlags(verb));
  return ValueOrFail(ParseArgs(args, specs));
}

struct VerbRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

VerbRun RunVerb(const std::string& verb, const std::vector<std::string>& args) {
  const ParsedArgs parsed = VerbArgs(verb, args);
  std::ostringstream out, err;
  VerbRun run;
  run.exit_code = RunServerVerb(verb, parsed, out, err);
  run.out = out.str();
  run.err = err.str();
  return run;
}

TEST_CASE("each verb has its flags and --help; an unknown verb is named", "[server][cli]") {
  for (const char* verb : {"serve", "migrate", "token", "rejudge", "mark-hacked", "health"}) {
    INFO(verb);
    const std::vector<FlagSpec> specs = ValueOrFail(ServerVerbFlags(verb));
    CHECK(VerbArgs(verb, {"--help"}).GetBool("help"));
    CHECK(absl::StrContains(FlagHelp(specs), "--help"));
  }
  CHECK(absl::StrContains(FlagHelp(ValueOrFail(ServerVerbFlags("serve"))), "--store-pool-size"));
  CHECK(absl::StrContains(FlagHelp(ValueOrFail(ServerVerbFlags("token"))), "--role"));
  absl::StatusOr<std::vector<FlagSpec>> unknown = ServerVerbFlags("bogus");
  REQUIRE(absl::IsInvalidArgument(unknown.status()));
  CHECK(unknown.status().message() == "unknown command 'bogus'");
  // A serve flag is not a maintenance verb's.
  CHECK_FALSE(ParseArgs({"--store-pool-size", "4"}, ValueOrFail(ServerVerbFlags("migrate"))).ok());

  std::ostringstream out, err;
  CHECK(RunServerVerb("bogus", ParsedArgs(), out, err) == 2);
  CHECK(absl::StartsWith(err.str(), "ptxbench-server: unknown command 'bogus'\n"));
  CHECK(out.str().empty());
}

TEST_CASE("serve's options: defaults, and every bad value names its flag", "[server][cli]") {
  const ServerOptions defaults;
  const ServerOptions options = ValueOrFail(ServerOptionsFromFlags(VerbArgs("serve", {}), true));
  CHECK(options.listen == defaults.listen);
  CHECK(options.store_pool_size == defaults.store_pool_size);
  CHECK(options.lease_seconds == defaults.lease_seconds);
  CHECK(options.migrations_dir == SourceTreeDir("migrations"));
  CHECK(options.tasks_dir == SourceTreeDir("tasks"));

  const ServerOptions set = ValueOrFail(ServerOptionsFromFlags(
      VerbArgs("serve", {"--listen", "0.0.0.0:7000", "--metrics-listen", "off", "--store-pool-size",
                         "256", "--lease-seconds", "30", "--submissions-per-minute", "5",
                         "--max-queued", "7", "--tls-cert", "c.pem", "--tls-key", "k.pem"}),
      true));
  CHECK(set.listen == "0.0.0.0:7000");
  CHECK(set.metrics_listen.empty());  // "off": no /metrics endpoint.
  CHECK(set.store_pool_size == 256);
  CHECK(set.lease_seconds == 30);
  CHECK(set.limits.submissions_per_minute == 5);
  CHECK(set.limits.max_queued == 7);
  CHECK(set.tls.cert_file == "c.pem");
  CHECK(set.tls.key_file == "k.pem");

  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--store-pool-size", "0"}, "--store-pool-size: 1 to 256, got 0"},
      {{"--store-pool-size", "257"}, "--store-pool-size: 1 to 256, got 257"},
      {{"--store-pool-size", "many"}, "--store-pool-size: 'many' is not an integer"},
      {{"--submissions-per-minute", "0"}, "--submissions-per-minute: 1 to 2147483647, got 0"},
      {{"--max-queued", "-1"}, "--max-queued: 1 to 2147483647, got -1"},
      {{"--lease-seconds", "4294967356"}, "--lease-seconds: 1 to 2147483647, got 4294967356"},
  };
  for (const auto& [args, message] : bad) {
    absl::StatusOr<ServerOptions> refused = ServerOptionsFromFlags(VerbArgs("serve", args), true);
    INFO(refused.status().ToString());
    REQUIRE(absl::IsInvalidArgument(refused.status()));
    CHECK(refused.status().message() == message);
  }
  // The maintenance verbs read only the store's flags.
  const ServerOptions store_only = ValueOrFail(ServerOptionsFromFlags(
      VerbArgs("migrate", {"--database-url", "postgresql://x/y", "--migrations-dir", "/m"}),
      false));
  CHECK(store_only.database_url == "postgresql://x/y");
  CHECK(store_only.migrations_dir == "/m");
}

TEST_CASE("serve with a bad option says which flag and exits 2 before starting anything",
          "[server][cli]") {
  const VerbRun run = RunVerb("serve", {"--store-pool-size", "0", "--listen", "127.0.0.1:0"});
  CHECK(run.exit_code == 2);
  CHECK(run.err == "ptxbench-server: --store-pool-size: 1 to 256, got 0\n");
  CHECK(run.out.empty());
}

TEST_CASE("the serve loop prints the serving line and stops gracefully at a stop signal",
          "[server][cli]") {
  api_test::TestServer server;
  ServerOptions options;
  options.listen = "127.0.0.1:0";
  options.metrics_listen.clear();
  const std::string line = ServingLine(options, server.server());
  CHECK(line == absl::StrCat("ptxbench-server serving grpc=127.0.0.1:", server.server().port(),
                             " metrics=off tasks=", server.server().tasks_loaded(),
                             " schema_version=", server.server().schema_version()));
  CHECK(server.address() == absl::StrCat("127.0.0.1:", server.server().port()));
  options.listen = "0.0.0.0:0";  // Every interface: a client here dials loopback.
  CHECK(absl::StartsWith(
      ServingLine(options, server.server()),
      absl::StrCat("ptxbench-server serving grpc=127.0.0.1:", server.server().port(), " ")));

  // SIGUSR1 stands in for SIGTERM: blocked in the serving thread and sent to it alone, so no
  // other thread of the test process (gRPC's, which do not block it) can take it.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGUSR1);
  std::promise<pthread_t> waiting;
  std::atomic<int> stopped_by{0};
  std::thread serving([&] {
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
    waiting.set_value(pthread_self());
    stopped_by = ServeUntilSignal(server.server(), stop_signals);
  });
  const pthread_t serving_thread = waiting.get_future().get();
  api::HealthCheckOptions health;
  health.address = server.address();
  health.timeout = absl::Seconds(5);
  CHECK(ValueOrFail(RunHealth(health)) == "SERVING");  // Serving while the loop waits.
  CHECK(stopped_by == 0);
  REQUIRE(pthread_kill(serving_thread, SIGUSR1) == 0);
  serving.join();
  CHECK(stopped_by == SIGUSR1);
  // Stopped: the port no longer serves.
  absl::StatusOr<std::string> after = RunHealth(health);
  CHECK((!after.ok() || *after != "SERVING"));
}

TEST_CASE("migrate prints the schema version; bad arguments are usage errors", "[server][cli]") {
  auto database = ValueOrFail(testing::TestDatabase::Create(/*migrate=*/false));
  const std::vector<std::string> store = {"--database-url", database->url(), "--migrations-dir",
                                          testing::MigrationsDir()};
  const VerbRun up = RunVerb("migrate", store);
  INFO(up.err);
  CHECK(up.exit_code == 0);
  CHECK(up.out == absl::StrCat("schema version ", MigrationCount(), "\n"));

  std::vector<std::string> sideways = store;
  sideways.push_back("sideways");
  const VerbRun bad = RunVerb("migrate", sideways);
  CHECK(bad.exit_code == 2);
  CHECK(absl::StartsWith(bad.err,
                         "ptxbench-server migrate: migrate: expected 'up' or 'down N', got "
                         "'sideways'\n"));
  CHECK(absl::StrContains(bad.err, kServerUsage));
  CHECK(bad.out.empty());

  const VerbRun unreachable =
      RunVerb("migrate", {"--database-url", "postgresql://ptxbench@127.0.0.1:1/none",
                          "--migrations-dir", testing::MigrationsDir()});
  CHECK(unreachable.exit_code == 1);
  CHECK(absl::StrContains(unreachable.err, "ptxbench-server migrate: "));
  CHECK(absl::StrContains(unreachable.err, "127.0.0.1:1"));
}

TEST_CASE("token create prints the secret alone on stdout; its errors exit 2", "[server][cli]") {
  auto database = ValueOrFail(testing::TestDatabase::Create(/*migrate=*/false));
  const std::vector<std::string> store = {"--database-url", database->url(), "--migrations-dir",
                                          testing::MigrationsDir()};
  auto with = [&](std::vector<std::string> args) {
    args.insert(args.end(), store.begin(), store.end());
    return args;
  };
  const VerbRun minted = RunVerb("token", with({"create", "--role", "vendor", "--tenant", "acme"}));
  INFO(minted.err);
  CHECK(minted.exit_code == 0);
  CHECK(absl::StartsWith(minted.out, "ptxb_"));
  CHECK(minted.out.find('\n') == minted.out.size() - 1);  // One line: the secret.
  CHECK(absl::StrContains(minted.err,
                          " for tenant acme role vendor (the secret below is shown "
                          "once):\n"));

  const VerbRun no_role = RunVerb("token", with({"create", "--tenant", "acme"}));
  CHECK(no_role.exit_code == 2);
  CHECK(no_role.err ==
        "ptxbench-server token create: --role admin, vendor or worker is required\n");
  const VerbRun no_tenant = RunVerb("token", with({"create", "--role", "vendor"}));
  CHECK(no_tenant.exit_code == 2);  // INVALID_ARGUMENT from the minting rules.
  CHECK(absl::StartsWith(no_tenant.err, "ptxbench-server token: "));
  const VerbRun not_create = RunVerb("token", with({"delete", "--role", "worker"}));
  CHECK(not_create.exit_code == 2);
  CHECK(not_create.err == kServerUsage);
  for (const VerbRun& refused : {no_role, no_tenant, not_create}) CHECK(refused.out.empty());
}

TEST_CASE(
    "health prints the status and exits 0 only for SERVING; rejudge and mark-hacked "
    "refuse stray arguments",
    "[server][cli]") {
  api_test::TestServer server;
  const VerbRun serving = RunVerb("health", {"--server", server.address()});
  CHECK(serving.exit_code == 0);
  CHECK(serving.out == "SERVING\n");
  const VerbRun nothing = RunVerb("health", {"--server", "127.0.0.1:1", "--timeout-seconds", "1"});
  CHECK(nothing.exit_code == 1);
  CHECK(absl::StartsWith(nothing.err, "ptxbench-server health: "));
  CHECK(nothing.out.empty());
  const VerbRun bad_timeout = RunVerb("health", {"--timeout-seconds", "soon"});
  CHECK(bad_timeout.exit_code == 2);
  CHECK(bad_timeout.err == "ptxbench-server health: --timeout-seconds: 'soon' is not a number\n");

  const VerbRun rejudge = RunVerb("rejudge", {"--task", api_test::kTaskId, "stray"});
  CHECK(rejudge.exit_code == 2);
  CHECK(absl::StartsWith(rejudge.err, "ptxbench-server rejudge: takes no positional arguments\n"));
  const VerbRun mark = RunVerb("mark-hacked", {"--reason", "r"});
  CHECK(mark.exit_code == 2);
  CHECK(absl::StartsWith(mark.err, "ptxbench-server mark-hacked: needs one submission id\n"));
}

}  // namespace
}  // namespace ptxbench::server
