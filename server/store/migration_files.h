// Internal to server/store: finds the numbered migrations of a folder. Kept apart from the
// Store so that malformed folders are diagnosed without a database.
#ifndef PTXBENCH_SERVER_STORE_MIGRATION_FILES_H_
#define PTXBENCH_SERVER_STORE_MIGRATION_FILES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ptxbench::store::internal {

struct MigrationFile {
  int version = 0;       // NNNN, > 0.
  std::string name;      // "0001_initial".
  std::string up_sql;    // Contents of NNNN_name.up.sql.
  std::string down_sql;  // Contents of NNNN_name.down.sql.
};

// Reads every NNNN_name.up.sql / NNNN_name.down.sql pair of `dir`, ordered by version.
// INVALID_ARGUMENT names the file when a .sql file does not follow the pattern, a version
// appears twice, or one half of a pair is missing; NOT_FOUND when `dir` is not a folder.
absl::StatusOr<std::vector<MigrationFile>> ReadMigrationFiles(const std::string& dir);

}  // namespace ptxbench::store::internal

#endif  // PTXBENCH_SERVER_STORE_MIGRATION_FILES_H_
