// Database-level helpers outside any Store: connection strings, creating and dropping
// databases, and running ad-hoc SQL. Used by the embedded PostgreSQL (it creates the
// 'ptxbench' database), by the test fixture (a fresh database per test) and by operators'
// tooling. Like the Store, they keep libpqxx inside server/store/*.cc.
#ifndef PTXBENCH_SERVER_STORE_DATABASE_H_
#define PTXBENCH_SERVER_STORE_DATABASE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ptxbench::store {

// Returns `url` pointing at database `database` instead. Accepts both forms libpq accepts:
// URIs ("postgresql://user@127.0.0.1:5432/postgres?sslmode=disable") and keyword/value
// strings ("host=127.0.0.1 dbname=postgres"). The result is a keyword/value string.
// INVALID_ARGUMENT when libpq cannot parse `url`.
absl::StatusOr<std::string> WithDatabaseName(const std::string& url, const std::string& database);

// "user@host:port/database" for logs and error messages; never includes the password.
std::string DescribeDatabaseUrl(const std::string& url);

// Creates database `name` on the server `server_url` points at (any database of it).
// ALREADY_EXISTS when it exists.
absl::Status CreateDatabase(const std::string& server_url, const std::string& name);
// Creates database `name` unless it exists; returns whether it created it.
absl::StatusOr<bool> EnsureDatabase(const std::string& server_url, const std::string& name);
// Drops database `name` if it exists, disconnecting its sessions (DROP ... WITH (FORCE)).
absl::Status DropDatabase(const std::string& server_url, const std::string& name);

// The result of RunSql: the last statement's columns and rows; NULL is nullopt.
struct SqlResult {
  std::vector<std::string> columns;
  std::vector<std::vector<std::optional<std::string>>> rows;
  int64_t affected_rows = 0;
};

// Runs `sql` (one or more statements separated by ';') in one transaction on a connection of
// its own. Errors are mapped like the Store's (server/store/store.h).
absl::StatusOr<SqlResult> RunSql(const std::string& url, const std::string& sql);

}  // namespace ptxbench::store

#endif  // PTXBENCH_SERVER_STORE_DATABASE_H_
