#include "server/server_cli.h"

#include <pthread.h>

#include <climits>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/build_info.h"
#include "common/status.h"
#include "common/task.h"
#include "proto/wire_names.h"
#include "spdlog/spdlog.h"

namespace ptxbench::server {

const char kServerUsage[] =
    "usage: ptxbench-server [serve] [flags]\n"
    "       ptxbench-server migrate [up | down N] [flags]\n"
    "       ptxbench-server token create --role admin|vendor|worker [--tenant T] [flags]\n"
    "       ptxbench-server rejudge --task A[,B] [--harness-older-than X] [--submission ID[,ID]]\n"
    "       ptxbench-server mark-hacked ID (--reason R | --unmark) [flags]\n"
    "       ptxbench-server health [--server HOST:PORT] [--tls-ca FILE]\n"
    "       ptxbench-server --version\n";

namespace {

std::vector<FlagSpec> StoreFlags() {
  return {
      {"database-url", true,
       "PostgreSQL URL; empty: embedded PostgreSQL under --data-dir "
       "(env PTXBENCH_DATABASE_URL)"},
      {"data-dir", true, "state folder (embedded PostgreSQL)", "./var/ptxbench"},
      {"pg-bin-dir", true, "PostgreSQL binaries for the embedded cluster"},
      {"migrations-dir", true, "schema migrations", "<source>/migrations"},
      {"help", false, "print this help"},
  };
}

std::vector<FlagSpec> ServeFlags() {
  std::vector<FlagSpec> flags = StoreFlags();
  const ServerOptions defaults;
  const std::vector<FlagSpec> more = {
      {"listen", true, "gRPC address (port 0 picks one)", defaults.listen},
      {"metrics-listen", true, "Prometheus /metrics address; 'off' for none",
       defaults.metrics_listen},
      {"tasks-dir", true, "task catalog", "<source>/tasks"},
      {"tls-cert", true, "PEM certificate chain; TLS when set with --tls-key"},
      {"tls-key", true, "PEM private key"},
      {"tls-client-ca", true, "PEM CA; clients must present a certificate it signed"},
      {"lease-seconds", true, "job lease length", std::to_string(defaults.lease_seconds)},
      {"submissions-per-minute", true, "default per-tenant submission rate",
       std::to_string(defaults.limits.submissions_per_minute)},
      {"max-queued", true, "default per-tenant unfinished submissions",
       std::to_string(defaults.limits.max_queued)},
      {"store-pool-size", true, "database connections", std::to_string(defaults.store_pool_size)},
      {"log-level", true, "trace, debug, info, warn, error", "info"},
  };
  flags.insert(flags.end(), more.begin(), more.end());
  return flags;
}

// The integer flag `name` (or `fallback` when absent) within [min, max]; errors name the flag.
// The bounds keep a value from wrapping when it is narrowed to the options' int.
absl::StatusOr<int> IntFlag(const ParsedArgs& args, const std::string& name, int fallback,
                            int64_t min, int64_t max) {
  ASSIGN_OR_RETURN(int64_t value, args.GetInt(name, fallback));
  if (value < min || value > max) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, ": ", min, " to ", max, ", got ", value));
  }
  return static_cast<int>(value);
}

// host:port as a client dials it, from the listen address and the bound port.
std::string DialAddress(const std::string& listen, int port) {
  std::string host = listen.substr(0, listen.rfind(':'));
  if (host.empty() || host == "0.0.0.0" || host == "[::]") host = "127.0.0.1";
  return absl::StrCat(host, ":", port);
}

}  // namespace

absl::StatusOr<std::vector<FlagSpec>> ServerVerbFlags(const std::string& verb) {
  if (verb == "serve") return ServeFlags();
  std::vector<FlagSpec> specs = StoreFlags();
  if (verb == "migrate") return specs;
  if (verb == "token") {
    specs.push_back(
        {"tenant", true, "tenant the token belongs to (created if missing; required for vendor)"});
    specs.push_back({"role", true, "admin, vendor or worker"});
    specs.push_back({"description", true, "what the token is for"});
    return specs;
  }
  if (verb == "rejudge") {
    specs.push_back({"tasks-dir", true, "the task catalog the task ids must be in"});
    specs.push_back({"task", true, "task ids to re-judge, comma-separated (required)"});
    specs.push_back({"harness-older-than", true,
                     "only verdicts of an older engine (dotted numeric, e.g. 0.2.0)"});
    specs.push_back({"submission", true, "only these submission ids, comma-separated"});
    specs.push_back({"reason", true, "recorded with each superseded verdict"});
    return specs;
  }
  if (verb == "mark-hacked") {
    specs.push_back({"reason", true, "what the kernel does to game the harness"});
    specs.push_back({"unmark", false, "lift the mark instead"});
    return specs;
  }
  if (verb == "health") {
    return std::vector<FlagSpec>{
        {"server", true, "server address", "127.0.0.1:50051"},
        {"tls-ca", true, "PEM CA of the server's certificate; plaintext when empty"},
        {"timeout-seconds", true, "deadline of the check", "5"},
        {"help", false, "print this help"}};
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown command '", verb, "'"));
}

absl::StatusOr<ServerOptions> ServerOptionsFromFlags(const ParsedArgs& args, bool serve) {
  ServerOptions options;
  options.database_url = args.GetOrEnv("database-url", "PTXBENCH_DATABASE_URL");
  options.data_dir = args.Get("data-dir", options.data_dir);
  options.pg_bin_dir = args.Get("pg-bin-dir");
  options.migrations_dir =
      args.Has("migrations-dir") ? args.Get("migrations-dir") : SourceTreeDir("migrations");
  options.tasks_dir = args.Has("tasks-dir") ? args.Get("tasks-dir") : SourceTreeDir("tasks");
  if (!serve) return options;
  options.listen = args.Get("listen", options.listen);
  options.metrics_listen = args.Get("metrics-listen", options.metrics_listen);
  if (options.metrics_listen == "off") options.metrics_listen.clear();
  options.tls.cert_file = args.Get("tls-cert");
  options.tls.key_file = args.Get("tls-key");
  options.tls.client_ca_file = args.Get("tls-client-ca");
  ASSIGN_OR_RETURN(options.lease_seconds,
                   IntFlag(args, "lease-seconds", options.lease_seconds, 1, INT_MAX));
  ASSIGN_OR_RETURN(
      options.limits.submissions_per_minute,
      IntFlag(args, "submissions-per-minute", options.limits.submissions_per_minute, 1, INT_MAX));
  ASSIGN_OR_RETURN(options.limits.max_queued,
                   IntFlag(args, "max-queued", options.limits.max_queued, 1, INT_MAX));
  ASSIGN_OR_RETURN(options.store_pool_size,
                   IntFlag(args, "store-pool-size", options.store_pool_size, 1, 256));
  return options;
}

std::string ServingLine(const ServerOptions& options, const Server& server) {
  return absl::StrCat(
      "ptxbench-server serving grpc=", DialAddress(options.listen, server.port()), " metrics=",
      server.metrics_port() != 0 ? DialAddress(options.metrics_listen, server.metrics_port())
                                 : "off",
      " tasks=", server.tasks_loaded(), " schema_version=", server.schema_version());
}

sigset_t BlockStopSignals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  return stop_signals;
}

int ServeUntilSignal(Server& server, const sigset_t& stop_signals) {
  int signal_number = 0;
  while (sigwait(&stop_signals, &signal_number) != 0) {
  }
  spdlog::info("signal {} received; stopping", signal_number);
  server.GracefulStop();
  return signal_number;
}

absl::StatusOr<MigrateRequest> ParseMigrateArgs(const std::vector<std::string>& positional) {
  MigrateRequest request;
  if (positional.empty() || (positional.size() == 1 && positional[0] == "up")) return request;
  if (positional[0] == "down") {
    int steps = 0;
    if (positional.size() != 2 || !absl::SimpleAtoi(positional[1], &steps) || steps < 1) {
      return absl::InvalidArgumentError("migrate down: needs a step count >= 1 (migrate down N)");
    }
    request.direction = MigrateRequest::Direction::kDown;
    request.steps = steps;
    return request;
  }
  return absl::InvalidArgumentError(absl::StrCat("migrate: expected 'up' or 'down N', got '",
                                                 absl::StrJoin(positional, " "), "'"));
}

absl::StatusOr<int> RunMigrate(const ServerOptions& options, const MigrateRequest& request) {
  if (options.migrations_dir.empty()) {
    return absl::InvalidArgumentError("migrations_dir: required");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<StoreHandle> handle, StoreHandle::Open(options));
  store::Store* store = handle->store();
  RETURN_IF_ERROR(request.direction == MigrateRequest::Direction::kUp
                      ? store->MigrateUp(options.migrations_dir)
                      : store->MigrateDown(options.migrations_dir, request.steps));
  return store->SchemaVersion();
}

absl::StatusOr<api::MintedToken> RunTokenCreate(const ServerOptions& options,
                                                api::MintTokenRequest request) {
  if (options.migrations_dir.empty()) {
    return absl::InvalidArgumentError("migrations_dir: required");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<StoreHandle> handle, StoreHandle::Open(options));
  store::Store* store = handle->store();
  RETURN_IF_ERROR(Annotate(store->MigrateUp(options.migrations_dir), "migrating the schema"));
  request.create_tenant = true;
  if (request.actor.empty()) request.actor = "admin:command-line";
  if (request.description.empty()) request.description = "created by ptxbench-server token create";
  return api::MintToken(*store, request);
}

namespace {

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> items;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    items.emplace_back(absl::StripAsciiWhitespace(item));
  }
  return items;
}

constexpr char kCommandLineActor[] = "admin:command-line";

}  // namespace

absl::StatusOr<std::vector<std::string>> RunRejudge(const ServerOptions& options,
                                                    const RejudgeCommand& command) {
  if (options.migrations_dir.empty()) {
    return absl::InvalidArgumentError("migrations_dir: required");
  }
  store::RejudgeFilter filter;
  filter.task_ids = SplitList(command.tasks);
  if (filter.task_ids.empty()) {
    return absl::InvalidArgumentError("--task: name at least one task to re-judge");
  }
  // A typo would otherwise re-judge nothing and look like success.
  absl::StatusOr<TaskCatalog> catalog = TaskCatalog::Load(options.tasks_dir);
  if (!catalog.ok()) return Annotate(catalog.status(), "loading --tasks-dir");
  for (const std::string& task_id : filter.task_ids) {
    const Task* task = catalog->Find(task_id);
    if (task == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--task: unknown task '", task_id, "' (not in the catalog at ", options.tasks_dir, ")"));
    }
    filter.task_version_hashes[task_id] = task->version_hash;
  }
  filter.harness_older_than = command.harness_older_than;
  filter.submission_ids = SplitList(command.submissions);
  filter.reason = command.reason;
  ASSIGN_OR_RETURN(std::unique_ptr<StoreHandle> handle, StoreHandle::Open(options));
  store::Store* store = handle->store();
  RETURN_IF_ERROR(Annotate(store->MigrateUp(options.migrations_dir), "migrating the schema"));
  ASSIGN_OR_RETURN(store::RejudgeResult result, store->Rejudge(filter, kCommandLineActor));
  return result.submission_ids;
}

absl::StatusOr<store::SubmissionRow> RunMarkHacked(const ServerOptions& options,
                                                   const MarkHackedCommand& command) {
  if (options.migrations_dir.empty()) {
    return absl::InvalidArgumentError("migrations_dir: required");
  }
  if (command.submission_id.empty()) {
    return absl::InvalidArgumentError("mark-hacked: the submission id is required");
  }
  if (!command.unmark && command.reason.empty()) {
    return absl::InvalidArgumentError("--reason: say why the submission is hacked");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<StoreHandle> handle, StoreHandle::Open(options));
  store::Store* store = handle->store();
  RETURN_IF_ERROR(Annotate(store->MigrateUp(options.migrations_dir), "migrating the schema"));
  return command.unmark
             ? store->UnmarkHacked(command.submission_id, kCommandLineActor)
             : store->MarkHacked(command.submission_id, command.reason, kCommandLineActor);
}

absl::StatusOr<std::string> RunHealth(const api::HealthCheckOptions& options) {
  if (options.address.empty()) return absl::InvalidArgumentError("server: required");
  return api::CheckHealth(options);
}

namespace {

int Serve(const ParsedArgs& args, std::ostream& out, std::ostream& err) {
  spdlog::set_level(spdlog::level::from_str(args.Get("log-level", "info")));
  absl::StatusOr<ServerOptions> options = ServerOptionsFromFlags(args, /*serve=*/true);
  if (!options.ok()) {
    err << "ptxbench-server: " << options.status().message() << "\n";
    return 2;
  }
  const sigset_t stop_signals = BlockStopSignals();
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Create(*options);
  if (!server.ok()) {
    spdlog::error("startup failed: {}", server.status().ToString());
    return 1;
  }
  if (absl::Status started = (*server)->Start(); !started.ok()) {
    spdlog::error("startup failed: {}", started.ToString());
    return 1;
  }
  out << ServingLine(*options, **server) << std::endl;
  ServeUntilSignal(**server, stop_signals);
  return 0;
}

int Migrate(const ParsedArgs& args, std::ostream& out, std::ostream& err) {
  absl::StatusOr<ServerOptions> options = ServerOptionsFromFlags(args, /*serve=*/false);
  absl::StatusOr<MigrateRequest> request = ParseMigrateArgs(args.positional());
  if (!options.ok() || !request.ok()) {
    err << "ptxbench-server migrate: "
        << (options.ok() ? request.status() : options.status()).message() << "\n"
        << kServerUsage;
    return 2;
  }
  absl::StatusOr<int> version = RunMigrate(*options, *request);
  if (!version.ok()) {
    err << "ptxbench-server migrate: " << version.status() << "\n";
    return 1;
  }
  out << "schema version " << *version << "\n";
  return 0;
}

int TokenCreate(const ParsedArgs& args, std::ostream& out, std::ostream& err) {
  if (args.positional().size() != 1 || args.positional()[0] != "create") {
    err << kServerUsage;
    return 2;
  }
  absl::StatusOr<ServerOptions> options = ServerOptionsFromFlags(args, /*serve=*/false);
  if (!options.ok()) {
    err << "ptxbench-server token: " << options.status().message() << "\n";
    return 2;
  }
  api::MintTokenRequest request;
  request.tenant = args.Get("tenant");
  absl::StatusOr<v1::Role> role = wire::ParseRole(args.Get("role"));
  if (!role.ok()) {
    err << "ptxbench-server token create: --role admin, vendor or worker is required\n";
    return 2;
  }
  request.role = *role;
  request.description = args.Get("description");
  absl::StatusOr<api::MintedToken> token = RunTokenCreate(*options, request);
  if (!token.ok()) {
    err << "ptxbench-server token: " << token.status() << "\n";
    return absl::IsInvalidArgument(token.status()) ? 2 : 1;
  }
  err << "token " << token->token_id << " for tenant "
      << (token->tenant.empty() ? "(none)" : token->tenant) << " role "
      << wire::RoleName(token->role) << " (the secret below is shown once):\n";
  out << token->secret << "\n";
  return 0;
}

int Rejudge(const ParsedArgs& args, std::ostream& out, std::ostream& err) {
  absl::StatusOr<ServerOptions> options = ServerOptionsFromFlags(args, /*serve=*/false);
  if (!options.ok() || !args.positional().empty()) {
    err << "ptxbench-server rejudge: "
        << (options.ok() ? "takes no positional arguments" : options.status().message()) << "\n"
        << kServerUsage;
    return 2;
  }
  RejudgeCommand command;
  command.tasks = args.Get("task");
  command.harness_older_than = args.Get("harness-older-than");
  command.submissions = args.Get("submission");
  command.reason = args.Get("reason");
  absl::StatusOr<std::vector<std::string>> ids = RunRejudge(*options, command);
  if (!ids.ok()) {
    err << "ptxbench-server rejudge: " << ids.status() << "\n";
    return absl::IsInvalidArgument(ids.status()) ? 2 : 1;
  }
  err << ids->size() << " submission(s) re-queued for a new judging round\n";
  for (const std::string& id : *ids) out << id << "\n";
  return 0;
}

int MarkHacked(const ParsedArgs& args, std::ostream& out, std::ostream& err) {
  absl::StatusOr<ServerOptions> options = ServerOptionsFromFlags(args, /*serve=*/false);
  if (!options.ok() || args.positional().size() != 1) {
    err << "ptxbench-server mark-hacked: "
        << (options.ok() ? "needs one submission id" : options.status().message()) << "\n"
        << kServerUsage;
    return 2;
  }
  MarkHackedCommand command;
  command.submission_id = args.positional()[0];
  command.reason = args.Get("reason");
  command.unmark = args.GetBool("unmark");
  absl::StatusOr<store::SubmissionRow> row = RunMarkHacked(*options, command);
  if (!row.ok()) {
    err << "ptxbench-server mark-hacked: " << row.status() << "\n";
    return absl::IsInvalidArgument(row.status()) ? 2 : 1;
  }
  out << row->id
      << (row->hacked.has_value() ? " hacked: " + row->hacked->reason
                                  : std::string(" not marked hacked"))
      << "\n";
  return 0;
}

int Health(const ParsedArgs& args, std::ostream& out, std::ostream& err) {
  api::HealthCheckOptions options;
  options.address = args.Get("server", "127.0.0.1:50051");
  options.tls_ca_file = args.Get("tls-ca");
  absl::StatusOr<double> timeout = args.GetDouble("timeout-seconds", 5);
  if (!timeout.ok()) {
    err << "ptxbench-server health: " << timeout.status().message() << "\n";
    return 2;
  }
  options.timeout = absl::Seconds(*timeout);
  absl::StatusOr<std::string> status = RunHealth(options);
  if (!status.ok()) {
    err << "ptxbench-server health: " << status.status().message() << "\n";
    return 1;
  }
  out << *status << "\n";
  return *status == "SERVING" ? 0 : 1;
}

}  // namespace

int RunServerVerb(const std::string& verb, const ParsedArgs& args, std::ostream& out,
                  std::ostream& err) {
  if (verb == "serve") return Serve(args, out, err);
  if (verb == "migrate") return Migrate(args, out, err);
  if (verb == "token") return TokenCreate(args, out, err);
  if (verb == "rejudge") return Rejudge(args, out, err);
  if (verb == "mark-hacked") return MarkHacked(args, out, err);
  if (verb == "health") return Health(args, out, err);
  err << "ptxbench-server: unknown command '" << verb << "'\n" << kServerUsage;
  return 2;
}

}  // namespace ptxbench::server
