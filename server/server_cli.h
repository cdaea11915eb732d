// The maintenance verbs of ptxbench-server (migrate, token create, rejudge, mark-hacked,
// health) as library
// functions: server/main.cc parses the command line into these requests and prints what they
// return, so that the tests run exactly the code the binary runs, in process.
#ifndef PTXBENCH_SERVER_SERVER_CLI_H_
#define PTXBENCH_SERVER_SERVER_CLI_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/api/health_check.h"
#include "server/api/tokens.h"
#include "server/server.h"
#include "server/store/store.h"

namespace ptxbench::server {

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
