// The maintenance verbs of ptxbench-server (migrate, token create, health) as library
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

// `ptxbench-server health`: the server's gRPC serving status ("SERVING", "NOT_SERVING", ...).
absl::StatusOr<std::string> RunHealth(const api::HealthCheckOptions& options);

}  // namespace ptxbench::server

#endif  // PTXBENCH_SERVER_SERVER_CLI_H_
