#include "server/server_cli.h"

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
#include "common/status.h"
#include "common/task.h"

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

}  // namespace ptxbench::server
