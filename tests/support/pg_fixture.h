// PostgreSQL for tests: a fresh, uniquely named, migrated database per test, created on the
// throw-away cluster that scripts/lib/test-postgres.sh starts (scripts/test does this) and
// dropped when the test ends.
//
//   TEST_CASE_METHOD(ptxbench::testing::PgFixture, "something about the store") {
//     auto store = ConnectStore();
//     ...
//   }
//
// Without PTXBENCH_TEST_DATABASE_URL the test FAILS (never skips) and says how to run it.
#ifndef PTXBENCH_TESTS_SUPPORT_PG_FIXTURE_H_
#define PTXBENCH_TESTS_SUPPORT_PG_FIXTURE_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "server/store/database.h"
#include "server/store/store.h"

namespace ptxbench::testing {

// The repository's migrations folder: $PTXBENCH_SOURCE_DIR/migrations (ptxbench_add_test sets
// the variable for ctest), else the source folder this binary was built from.
std::string MigrationsDir();

// A database that exists for the lifetime of the object.
class TestDatabase {
 public:
  // Creates "ptxbench_test_<pid>_<n>_<random>" on the server of PTXBENCH_TEST_DATABASE_URL
  // and, when `migrate`, applies every migration. FAILED_PRECONDITION (with the message to run
  // through scripts/test) when the variable is unset.
  static absl::StatusOr<std::unique_ptr<TestDatabase>> Create(bool migrate = true);
  ~TestDatabase();  // Drops the database, disconnecting whoever is still connected.

  const std::string& url() const { return url_; }
  const std::string& name() const { return name_; }

  // Runs SQL on this database (for assertions on rows no Store method returns).
  absl::StatusOr<store::SqlResult> Sql(const std::string& sql) const;
  // The single value of a one-row, one-column query; NOT_FOUND for no row, nullopt for NULL.
  absl::StatusOr<std::optional<std::string>> Scalar(const std::string& sql) const;

  // A database outage as clients see one, without stopping the shared cluster: false refuses
  // new connections to this database (ALTER DATABASE ... ALLOW_CONNECTIONS false) and ends
  // every session on it; true lets clients connect again.
  absl::Status SetReachable(bool reachable) const;

 private:
  TestDatabase() = default;
  std::string server_url_;
  std::string name_;
  std::string url_;
};

// Catch2 fixture: a migrated TestDatabase per test case; FAILs the test when it cannot.
class PgFixture {
 public:
  PgFixture();
  virtual ~PgFixture();

  const std::string& database_url() const { return database_->url(); }
  TestDatabase& database() { return *database_; }

  // A Store on this database. Options other than database_url are taken from `options`.
  // FAILs the test when it cannot connect.
  std::unique_ptr<store::Store> ConnectStore(store::StoreOptions options = {});

 private:
  std::unique_ptr<TestDatabase> database_;
};

}  // namespace ptxbench::testing

#endif  // PTXBENCH_TESTS_SUPPORT_PG_FIXTURE_H_
