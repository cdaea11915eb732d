// ptxbench-server: parses the command line and calls the Server library: server/server.h to
// serve, server/server_cli.h for the maintenance verbs.
//
//   ptxbench-server [serve] [--listen 127.0.0.1:50051] [--database-url URL] ...
//   ptxbench-server migrate [up | down N] [--database-url URL]
//   ptxbench-server token create --role admin|vendor|worker [--tenant T] [--description D]
//   ptxbench-server health [--server 127.0.0.1:50051] [--tls-ca ca.pem]
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/build_info.h"
#include "common/cli_args.h"
#include "common/status.h"
#include "proto/wire_names.h"
#include "server/server.h"
#include "server/server_cli.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace ptxbench::server {
namespace {

constexpr char kUsage[] =
    "usage: ptxbench-server [serve] [flags]\n"
    "       ptxbench-server migrate [up | down N] [flags]\n"
    "       ptxbench-server token create --role admin|vendor|worker [--tenant T] [flags]\n"
    "       ptxbench-server rejudge --task A[,B] [--harness-older-than X] [--submission ID[,ID]]\n"
    "       ptxbench-server mark-hacked ID (--reason R | --unmark) [flags]\n"
    "       ptxbench-server health [--server HOST:PORT] [--tls-ca FILE]\n"
    "       ptxbench-server --version\n";

// A folder of the source tree (tasks/, migrations/): ./<name> when run from a checkout, else
// the checkout this binary was built from.
std::string DefaultDir(const std::string& name) {
  if (std::filesystem::is_directory(name)) return std::filesystem::absolute(name).string();
#ifdef PTXBENCH_SOURCE_DIR
  std::string built_from = absl::StrCat(PTXBENCH_SOURCE_DIR, "/", name);
  if (std::filesystem::is_directory(built_from)) return built_from;
#endif
  return name;
}

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
  auto flags = StoreFlags();
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

absl::StatusOr<ServerOptions> OptionsFrom(const ParsedArgs& args, bool serve) {
  ServerOptions options;
  options.database_url = args.GetOrEnv("database-url", "PTXBENCH_DATABASE_URL");
  options.data_dir = args.Get("data-dir", options.data_dir);
  options.pg_bin_dir = args.Get("pg-bin-dir");
  options.migrations_dir =
      args.Has("migrations-dir") ? args.Get("migrations-dir") : DefaultDir("migrations");
  options.tasks_dir = args.Has("tasks-dir") ? args.Get("tasks-dir") : DefaultDir("tasks");
  if (!serve) return options;
  options.listen = args.Get("listen", options.listen);
  options.metrics_listen = args.Get("metrics-listen", options.metrics_listen);
  if (options.metrics_listen == "off") options.metrics_listen.clear();
  options.tls.cert_file = args.Get("tls-cert");
  options.tls.key_file = args.Get("tls-key");
  options.tls.client_ca_file = args.Get("tls-client-ca");
  ASSIGN_OR_RETURN(int64_t lease_seconds, args.GetInt("lease-seconds", options.lease_seconds));
  ASSIGN_OR_RETURN(int64_t per_minute,
                   args.GetInt("submissions-per-minute", options.limits.submissions_per_minute));
  ASSIGN_OR_RETURN(int64_t max_queued, args.GetInt("max-queued", options.limits.max_queued));
  ASSIGN_OR_RETURN(int64_t pool, args.GetInt("store-pool-size", options.store_pool_size));
  if (pool < 1 || pool > 256) {
    return absl::InvalidArgumentError(absl::StrCat("store-pool-size: 1 to 256, got ", pool));
  }
  if (per_minute < 1 || max_queued < 1) {
    return absl::InvalidArgumentError("submissions-per-minute, max-queued: must be >= 1");
  }
  options.lease_seconds = static_cast<int>(lease_seconds);
  options.limits.submissions_per_minute = static_cast<int>(per_minute);
  options.limits.max_queued = static_cast<int>(max_queued);
  options.store_pool_size = static_cast<int>(pool);
  return options;
}

// host:port as a client dials it, from the listen address and the bound port.
std::string DialAddress(const std::string& listen, int port) {
  std::string host = listen.substr(0, listen.rfind(':'));
  if (host.empty() || host == "0.0.0.0" || host == "[::]") host = "127.0.0.1";
  return absl::StrCat(host, ":", port);
}

int Serve(const ParsedArgs& args) {
  const std::string level = args.Get("log-level", "info");
  spdlog::set_level(spdlog::level::from_str(level));
  auto options = OptionsFrom(args, /*serve=*/true);
  if (!options.ok()) {
    std::cerr << "ptxbench-server: " << options.status().message() << "\n";
    return 2;
  }
  // SIGINT/SIGTERM are taken by sigwait below, never by a handler: block them before any
  // thread starts so that every thread inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto server = Server::Create(*options);
  if (!server.ok()) {
    spdlog::error("startup failed: {}", server.status().ToString());
    return 1;
  }
  auto started = (*server)->Start();
  if (!started.ok()) {
    spdlog::error("startup failed: {}", started.ToString());
    return 1;
  }
  // One machine-readable line for scripts and tests that bind port 0.
  std::printf("ptxbench-server serving grpc=%s metrics=%s tasks=%d schema_version=%d\n",
              DialAddress(options->listen, (*server)->port()).c_str(),
              (*server)->metrics_port()
                  ? DialAddress(options->metrics_listen, (*server)->metrics_port()).c_str()
                  : "off",
              (*server)->tasks_loaded(), (*server)->schema_version());
  std::fflush(stdout);
  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  spdlog::info("signal {} received; stopping", signal_number);
  (*server)->GracefulStop();
  return 0;
}

int Migrate(const ParsedArgs& args) {
  auto options = OptionsFrom(args, /*serve=*/false);
  auto request = ParseMigrateArgs(args.positional());
  if (!options.ok() || !request.ok()) {
    std::cerr << "ptxbench-server migrate: "
              << (options.ok() ? request.status() : options.status()).message() << "\n"
              << kUsage;
    return 2;
  }
  auto version = RunMigrate(*options, *request);
  if (!version.ok()) {
    std::cerr << "ptxbench-server migrate: " << version.status() << "\n";
    return 1;
  }
  std::cout << "schema version " << *version << "\n";
  return 0;
}

int TokenCreate(const ParsedArgs& args) {
  if (args.positional().size() != 1 || args.positional()[0] != "create") {
    std::cerr << kUsage;
    return 2;
  }
  auto options = OptionsFrom(args, /*serve=*/false);
  if (!options.ok()) {
    std::cerr << "ptxbench-server token: " << options.status().message() << "\n";
    return 2;
  }
  api::MintTokenRequest request;
  request.tenant = args.Get("tenant");
  auto role = wire::ParseRole(args.Get("role"));
  if (!role.ok()) {
    std::cerr << "ptxbench-server token create: --role admin, vendor or worker is required\n";
    return 2;
  }
  request.role = *role;
  request.description = args.Get("description");
  auto token = RunTokenCreate(*options, request);
  if (!token.ok()) {
    std::cerr << "ptxbench-server token: " << token.status() << "\n";
    return absl::IsInvalidArgument(token.status()) ? 2 : 1;
  }
  std::cerr << "token " << token->token_id << " for tenant "
            << (token->tenant.empty() ? "(none)" : token->tenant) << " role "
            << wire::RoleName(token->role) << " (the secret below is shown once):\n";
  std::cout << token->secret << "\n";
  return 0;
}

int Rejudge(const ParsedArgs& args) {
  auto options = OptionsFrom(args, /*serve=*/false);
  if (!options.ok() || !args.positional().empty()) {
    std::cerr << "ptxbench-server rejudge: "
              << (options.ok() ? "takes no positional arguments" : options.status().message())
              << "\n"
              << kUsage;
    return 2;
  }
  RejudgeCommand command;
  command.tasks = args.Get("task");
  command.harness_older_than = args.Get("harness-older-than");
  command.submissions = args.Get("submission");
  command.reason = args.Get("reason");
  auto ids = RunRejudge(*options, command);
  if (!ids.ok()) {
    std::cerr << "ptxbench-server rejudge: " << ids.status() << "\n";
    return absl::IsInvalidArgument(ids.status()) ? 2 : 1;
  }
  std::cerr << ids->size() << " submission(s) re-queued for a new judging round\n";
  for (const std::string& id : *ids) std::cout << id << "\n";
  return 0;
}

int MarkHacked(const ParsedArgs& args) {
  auto options = OptionsFrom(args, /*serve=*/false);
  if (!options.ok() || args.positional().size() != 1) {
    std::cerr << "ptxbench-server mark-hacked: "
              << (options.ok() ? "needs one submission id" : options.status().message()) << "\n"
              << kUsage;
    return 2;
  }
  MarkHackedCommand command;
  command.submission_id = args.positional()[0];
  command.reason = args.Get("reason");
  command.unmark = args.GetBool("unmark");
  auto row = RunMarkHacked(*options, command);
  if (!row.ok()) {
    std::cerr << "ptxbench-server mark-hacked: " << row.status() << "\n";
    return absl::IsInvalidArgument(row.status()) ? 2 : 1;
  }
  std::cout << row->id
            << (row->hacked.has_value() ? " hacked: " + row->hacked->reason
                                        : std::string(" not marked hacked"))
            << "\n";
  return 0;
}

int Health(const ParsedArgs& args) {
  api::HealthCheckOptions options;
  options.address = args.Get("server", "127.0.0.1:50051");
  options.tls_ca_file = args.Get("tls-ca");
  auto timeout = args.GetDouble("timeout-seconds", 5);
  if (!timeout.ok()) {
    std::cerr << "ptxbench-server health: " << timeout.status().message() << "\n";
    return 2;
  }
  options.timeout = absl::Seconds(*timeout);
  auto status = RunHealth(options);
  if (!status.ok()) {
    std::cerr << "ptxbench-server health: " << status.status().message() << "\n";
    return 1;
  }
  std::cout << *status << "\n";
  return *status == "SERVING" ? 0 : 1;
}

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && (args[0] == "--version" || args[0] == "version")) {
    std::cout << VersionLine("ptxbench-server") << "\n";
    return 0;
  }
  std::string verb = "serve";
  if (!args.empty() && !absl::StartsWith(args[0], "-")) {
    verb = args[0];
    args.erase(args.begin());
  }
  std::vector<FlagSpec> specs;
  if (verb == "serve") {
    specs = ServeFlags();
  } else if (verb == "migrate") {
    specs = StoreFlags();
  } else if (verb == "token") {
    specs = StoreFlags();
    specs.push_back(
        {"tenant", true, "tenant the token belongs to (created if missing; required for vendor)"});
    specs.push_back({"role", true, "admin, vendor or worker"});
    specs.push_back({"description", true, "what the token is for"});
  } else if (verb == "rejudge") {
    specs = StoreFlags();
    specs.push_back({"tasks-dir", true, "the task catalog the task ids must be in"});
    specs.push_back({"task", true, "task ids to re-judge, comma-separated (required)"});
    specs.push_back({"harness-older-than", true,
                     "only verdicts of an older engine (dotted numeric, e.g. 0.2.0)"});
    specs.push_back({"submission", true, "only these submission ids, comma-separated"});
    specs.push_back({"reason", true, "recorded with each superseded verdict"});
  } else if (verb == "mark-hacked") {
    specs = StoreFlags();
    specs.push_back({"reason", true, "what the kernel does to game the harness"});
    specs.push_back({"unmark", false, "lift the mark instead"});
  } else if (verb == "health") {
    specs = {{"server", true, "server address", "127.0.0.1:50051"},
             {"tls-ca", true, "PEM CA of the server's certificate; plaintext when empty"},
             {"timeout-seconds", true, "deadline of the check", "5"},
             {"help", false, "print this help"}};
  } else {
    std::cerr << "ptxbench-server: unknown command '" << verb << "'\n" << kUsage;
    return 2;
  }
  auto parsed = ParseArgs(args, specs);
  if (!parsed.ok()) {
    std::cerr << "ptxbench-server " << verb << ": " << parsed.status().message() << "\n"
              << kUsage << FlagHelp(specs);
    return 2;
  }
  if (parsed->GetBool("help")) {
    std::cout << kUsage << FlagHelp(specs);
    return 0;
  }
  // Logs go to stderr: stdout carries only what scripts read (the "serving" line, a token's
  // secret, the schema version, the health status). The maintenance commands log warnings
  // and errors only.
  spdlog::set_default_logger(spdlog::stderr_color_mt("ptxbench-server"));
  spdlog::set_level(spdlog::level::warn);
  if (verb == "serve") return Serve(*parsed);
  if (verb == "migrate") return Migrate(*parsed);
  if (verb == "token") return TokenCreate(*parsed);
  if (verb == "rejudge") return Rejudge(*parsed);
  if (verb == "mark-hacked") return MarkHacked(*parsed);
  return Health(*parsed);
}

}  // namespace
}  // namespace ptxbench::server

int main(int argc, char** argv) { return ptxbench::server::Main(argc, argv); }
