// ptxbench-server's command line as library functions: each verb's flags (ServerVerbFlags),
// the options they give (ServerOptionsFromFlags), the serve loop (BlockStopSignals,
// ServeUntilSignal) and each verb's output and exit code (RunServerVerb), with the maintenance
// verbs (migrate, token create, rejudge, mark-hacked, health) below as typed requests.
// server/main.cc only splits off the verb and parses the flags, so that the tests run exactly
// the code the binary runs, in process.
#ifndef PTXBENCH_SERVER_SERVER_CLI_H_
#define PTXBENCH_SERVER_SERVER_CLI_H_

#include <signal.h>

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/cli_args.h"
#include "server/api/health_check.h"
#include "server/api/tokens.h"
#include "server/server.h"
#include "server/store/store.h"

namespace ptxbench::server {

// The usage lines of every verb, for --help and usage errors.
extern const char kServerUsage[];

// The flags of `verb` (serve, migrate, token, rejudge, mark-hacked, health; each with --help),
// or INVALID_ARGUMENT "unknown command 'x'".
absl::StatusOr<std::vector<FlagSpec>> ServerVerbFlags(const std::string& verb);

// The ServerOptions the parsed flags of a verb ask for: the store's (--database-url or
// PTXBENCH_DATABASE_URL, --data-dir, ...) and, with `serve`, the serving ones. A bad value is
// INVALID_ARGUMENT naming its flag: "--store-pool-size: 1 to 256, got 0".
absl::StatusOr<ServerOptions> ServerOptionsFromFlags(const ParsedArgs& args, bool serve);

// The one line ptxbench-server prints on stdout once it serves, for scripts and tests that
// bind port 0: "ptxbench-server serving grpc=127.0.0.1:PORT metrics=127.0.0.1:PORT|off
// tasks=N schema_version=V". An address the server listens on for every interface is given as
// 127.0.0.1, the address a client on the same machine dials.
std::string ServingLine(const ServerOptions& options, const Server& server);

// Blocks SIGINT and SIGTERM in the calling thread and returns the set. Called before any
// thread starts, so that every thread inherits the mask and the two signals reach only
// ServeUntilSignal's sigwait, never a handler or a gRPC thread.
sigset_t BlockStopSignals();

// Waits for one of `stop_signals` (blocked in the calling thread, and in every other thread
// unless sent to this one), then stops `server` gracefully (Server::GracefulStop). Returns
// the signal's number.
int ServeUntilSignal(Server& server, const sigset_t& stop_signals);

// Runs `verb` with the flags ServerVerbFlags(verb) parsed: what scripts read (the serving line,
// a token's secret, the schema version, re-queued ids, the health status) on `out`, messages on
// `err`. The exit code: 0 done, 1 failed (or the server's health is not SERVING), 2 a usage or
// input error. `serve` blocks the stop signals and returns after one arrived.
int RunServerVerb(const std::string& verb, const ParsedArgs& args, std::ostream& out,
                  std::ostream& err);

struct MigrateRequest {
  enum class Direction { kUp, kDown };
  Direction direction = Direction::kUp;
  int steps = 0;  // kDown: how many of the newest applied migrations to revert (>= 1).
};

// The positional arguments of `migrate`: none or "up", or "down N" with N >= 1.
// INVALID_ARGUMENT saying what is expected otherwise.
absl::StatusOr<MigrateRequest> ParseMigrateArgs(const std::vector<std::string>& positional);

// `ptxbench-server migrate`: on the store `options` names (database_url, or the embedded
// cluster under data_dir, started for the command and stopped after), applies or reverts the
// migrations of options.migrations_dir; returns the schema version afterwards.
absl::StatusOr<int> RunMigrate(const ServerOptions& options, const MigrateRequest& request);

// `ptxbench-server token create`: migrates the store (a first token may be made before the
// server ever ran) and mints the token with api::MintToken, creating the tenant when missing
// (the operator on the machine is trusted with that; the admin API is not).
absl::StatusOr<api::MintedToken> RunTokenCreate(const ServerOptions& options,
                                                api::MintTokenRequest request);

// `ptxbench-server rejudge --task A[,B...] [--harness-older-than X] [--submission ID[,ID...]]
// [--reason R]`: the flags' values, split at commas.
struct RejudgeCommand {
  std::string tasks;  // Comma-separated task ids; required.
  std::string harness_older_than;
  std::string submissions;  // Comma-separated submission ids; optional.
  std::string reason;
};
// Opens the store of `options` (migrated: re-judging needs 0009), refuses a task that is not
// in the catalog under options.tasks_dir (INVALID_ARGUMENT "--task: unknown task 'x'"), and
// opens a new judging round for the matching finished submissions (store::Store::Rejudge; a
// running server's workers are woken by the queue's NOTIFY). Returns the re-queued ids.
absl::StatusOr<std::vector<std::string>> RunRejudge(const ServerOptions& options,
                                                    const RejudgeCommand& command);

// `ptxbench-server mark-hacked ID --reason R` and `mark-hacked ID --unmark`: marks (or lifts
// the mark of) one submission, as "admin:command-line" in the audit log. Returns the
// submission as stored after the change.
struct MarkHackedCommand {
  std::string submission_id;
  std::string reason;  // Required unless unmark.
  bool unmark = false;
};
absl::StatusOr<store::SubmissionRow> RunMarkHacked(const ServerOptions& options,
                                                   const MarkHackedCommand& command);

// `ptxbench-server health`: the server's gRPC serving status ("SERVING", "NOT_SERVING", ...).
absl::StatusOr<std::string> RunHealth(const api::HealthCheckOptions& options);

}  // namespace ptxbench::server

#endif  // PTXBENCH_SERVER_SERVER_CLI_H_
