#include "server/store/migration_runner.h"

#include <algorithm>
#include <pqxx/pqxx>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "server/store/connection_pool.h"
#include "server/store/migration_files.h"
#include "server/store/pg_error.h"
#include "server/store/queries.h"

namespace ptxbench::store::internal {
namespace {

// The audit triggers attribute what a migration changes to this actor.
constexpr char kMigrationActor[] = "system:migrate";

std::vector<MigrationFile>::const_iterator FindVersion(const std::vector<MigrationFile>& files,
                                                       int version) {
  return std::find_if(files.begin(), files.end(),
                      [&](const MigrationFile& file) { return file.version == version; });
}

}  // namespace

template <typename Step>
absl::Status MigrationRunner::InTransaction(const std::string& operation, Step&& step) {
  for (int attempt = 0;; ++attempt) {
    ASSIGN_OR_RETURN(PooledConnection connection, pool_->Acquire());
    absl::Status status;
    PgFailure failure;
    bool began = false;
    try {
      pqxx::work tx(connection.get());
      began = true;
      tx.exec_prepared(kSetActor, kMigrationActor);
      status = step(tx);
      if (status.ok()) tx.commit();
    } catch (...) {
      failure = ClassifyCurrentException(operation);
      status = failure.status;
    }
    if (failure.connection_lost || !connection.is_open()) {
      connection.Discard(status);
      // Nothing can have happened on a connection that broke before BEGIN went out.
      if (!began && attempt == 0) continue;
    }
    return status;
  }
}

absl::Status MigrationRunner::Up(const std::string& migrations_dir) {
  ASSIGN_OR_RETURN(std::vector<MigrationFile> files, ReadMigrationFiles(migrations_dir));
  if (files.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no migrations (NNNN_name.up.sql) in ", migrations_dir));
  }
  // One migration per transaction; each transaction re-reads the applied set under the
  // advisory lock, so a concurrent migrator's work is seen, never repeated.
  std::vector<std::string> checksums(files.size());
  for (bool done = false; !done;) {
    RETURN_IF_ERROR(InTransaction("MigrateUp", [&](pqxx::work& tx) -> absl::Status {
      tx.exec_prepared(kMigrationLock);
      tx.exec_prepared(kMigrationCreateTable);
      pqxx::result applied = tx.exec_prepared(kMigrationApplied);
      for (size_t i = 0; i < files.size(); ++i) {
        if (checksums[i].empty()) {
          checksums[i] =
              tx.exec_prepared1(kMigrationChecksum, files[i].up_sql)[0].as<std::string>();
        }
      }
      int newest_applied = 0;
      std::vector<int> applied_versions;
      for (const pqxx::row& row : applied) {
        const int version = row["version"].as<int>();
        const std::string name = row["name"].as<std::string>();
        newest_applied = std::max(newest_applied, version);
        applied_versions.push_back(version);
        auto file = FindVersion(files, version);
        if (file == files.end()) {
          if (version > files.back().version) {
            return absl::FailedPreconditionError(
                absl::StrCat("the database schema is at migration ", name,
                             ", newer than the newest in ", migrations_dir, " (", files.back().name,
                             "): this server is older than its database; run a newer server"));
          }
          return absl::FailedPreconditionError(absl::StrCat(
              "migration ", name, " is applied but its files are missing from ", migrations_dir));
        }
        const std::string& checksum = checksums[file - files.begin()];
        if (row["up_sha256"].as<std::string>() != checksum) {
          return absl::FailedPreconditionError(
              absl::StrCat("migration ", name, ".up.sql was edited after it was applied (sha256 ",
                           row["up_sha256"].as<std::string>(), " when applied, ", checksum,
                           " now); add a new migration instead of editing an applied one"));
        }
      }
      for (size_t i = 0; i < files.size(); ++i) {
        const MigrationFile& file = files[i];
        if (std::count(applied_versions.begin(), applied_versions.end(), file.version) > 0) {
          continue;
        }
        if (file.version < newest_applied) {
          return absl::FailedPreconditionError(
              absl::StrCat("migration ", file.name, " is not applied but a newer one (version ",
                           newest_applied, ") is; migrations must be applied in order"));
        }
        try {
          tx.exec(file.up_sql);
        } catch (...) {
          return ClassifyCurrentException(absl::StrCat("applying ", file.name, ".up.sql")).status;
        }
        tx.exec_prepared(kMigrationRecord, file.version, file.name, checksums[i]);
        return absl::OkStatus();
      }
      done = true;
      return absl::OkStatus();
    }));
  }
  return absl::OkStatus();
}

absl::Status MigrationRunner::Down(const std::string& migrations_dir, int steps) {
  if (steps < 1) {
    return absl::InvalidArgumentError(absl::StrCat("steps must be at least 1 (got ", steps, ")"));
  }
  ASSIGN_OR_RETURN(std::vector<MigrationFile> files, ReadMigrationFiles(migrations_dir));
  for (int step = 0; step < steps; ++step) {
    RETURN_IF_ERROR(InTransaction("MigrateDown", [&](pqxx::work& tx) -> absl::Status {
      tx.exec_prepared(kMigrationLock);
      tx.exec_prepared(kMigrationCreateTable);
      pqxx::result applied = tx.exec_prepared(kMigrationApplied);
      if (step == 0 && static_cast<int>(applied.size()) < steps) {
        return absl::FailedPreconditionError(absl::StrCat(
            "cannot revert ", steps, " migrations: only ", applied.size(), " are applied"));
      }
      if (applied.empty()) return absl::OkStatus();
      const pqxx::row newest = applied[applied.size() - 1];
      const int version = newest["version"].as<int>();
      const std::string name = newest["name"].as<std::string>();
      auto file = FindVersion(files, version);
      if (file == files.end()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "cannot revert migration ", name, ": ", name, ".down.sql is not in ", migrations_dir));
      }
      try {
        tx.exec(file->down_sql);
      } catch (...) {
        return ClassifyCurrentException(absl::StrCat("applying ", file->name, ".down.sql")).status;
      }
      tx.exec_prepared(kMigrationForget, version);
      return absl::OkStatus();
    }));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> MigrationRunner::Version() {
  int version = 0;
  RETURN_IF_ERROR(InTransaction("SchemaVersion", [&](pqxx::work& tx) -> absl::Status {
    version = 0;
    if (tx.exec_prepared1(kSchemaMigrationsExists)[0].as<bool>()) {
      version = tx.exec_prepared1(kSchemaVersion)[0].as<int>();
    }
    return absl::OkStatus();
  }));
  return version;
}

}  // namespace ptxbench::store::internal
