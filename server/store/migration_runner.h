// Internal to server/store: applies and reverts the numbered migrations of a folder
// (migration_files.h) on a database, behind Store::MigrateUp, MigrateDown and SchemaVersion.
//
// Each migration runs in a transaction of its own under a transaction-level advisory lock, and
// each transaction re-reads the applied set under that lock, so two servers starting together
// apply every migration exactly once. An applied migration whose .up.sql changed since (its
// sha256 is recorded) and a database newer than the folder are refused before anything runs.
#ifndef PTXBENCH_SERVER_STORE_MIGRATION_RUNNER_H_
#define PTXBENCH_SERVER_STORE_MIGRATION_RUNNER_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ptxbench::store::internal {

class ConnectionPool;

class MigrationRunner {
 public:
  // Runs on connections of `pool`, which must outlive the runner.
  explicit MigrationRunner(ConnectionPool* pool) : pool_(pool) {}

  // Applies every NNNN_name.up.sql of `migrations_dir` not yet applied, in order.
  absl::Status Up(const std::string& migrations_dir);
  // Reverts the newest `steps` applied migrations with their .down.sql.
  absl::Status Down(const std::string& migrations_dir, int steps);
  // The newest applied version; 0 for a database never migrated.
  absl::StatusOr<int> Version();

 private:
  // Runs `step` (one transaction) on a pooled connection, replacing a connection that turns
  // out dead before anything was sent (the common case after a database restart).
  template <typename Step>
  absl::Status InTransaction(const std::string& operation, Step&& step);

  ConnectionPool* const pool_;
};

}  // namespace ptxbench::store::internal

#endif  // PTXBENCH_SERVER_STORE_MIGRATION_RUNNER_H_
