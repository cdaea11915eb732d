#include "server/server_cli.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"

namespace ptxbench::server {

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

absl::StatusOr<std::string> RunHealth(const api::HealthCheckOptions& options) {
  if (options.address.empty()) return absl::InvalidArgumentError("server: required");
  return api::CheckHealth(options);
}

}  // namespace ptxbench::server
