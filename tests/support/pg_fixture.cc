#include "tests/support/pg_fixture.h"

#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace ptxbench::testing {
namespace {

constexpr char kHowToRun[] =
    "PTXBENCH_TEST_DATABASE_URL is not set. Tests that need PostgreSQL run through scripts/test "
    "(or: source scripts/lib/test-postgres.sh && test_postgres_start, then ctest), which "
    "starts a throw-away cluster and exports the variable";

std::string UniqueDatabaseName() {
  static std::atomic<int> counter{0};
  std::random_device random;
  return absl::StrCat("ptxbench_test_", getpid(), "_", counter++, "_", random() % 1000000);
}

}  // namespace

std::string MigrationsDir() {
  const char* source_dir = std::getenv("PTXBENCH_SOURCE_DIR");
  return absl::StrCat(
      source_dir != nullptr && *source_dir != '\0' ? source_dir : PTXBENCH_DEFAULT_SOURCE_DIR,
      "/migrations");
}

absl::StatusOr<std::unique_ptr<TestDatabase>> TestDatabase::Create(bool migrate) {
  const char* server_url = std::getenv("PTXBENCH_TEST_DATABASE_URL");
  if (server_url == nullptr || *server_url == '\0') {
    return absl::FailedPreconditionError(kHowToRun);
  }
  std::unique_ptr<TestDatabase> database(new TestDatabase());
  database->server_url_ = server_url;
  database->name_ = UniqueDatabaseName();
  RETURN_IF_ERROR(store::CreateDatabase(database->server_url_, database->name_));
  ASSIGN_OR_RETURN(database->url_, store::WithDatabaseName(server_url, database->name_));
  if (migrate) {
    store::StoreOptions options;
    options.database_url = database->url_;
    options.pool_size = 1;
    ASSIGN_OR_RETURN(auto migrator, store::Store::Connect(options));
    RETURN_IF_ERROR(Annotate(migrator->MigrateUp(MigrationsDir()), "migrating the test database"));
  }
  return database;
}

TestDatabase::~TestDatabase() {
  absl::Status dropped = store::DropDatabase(server_url_, name_);
  // A leaked database only costs disk on a throw-away cluster; say so, do not throw.
  if (!dropped.ok()) WARN("could not drop test database: " << dropped.message());
}

absl::StatusOr<store::SqlResult> TestDatabase::Sql(const std::string& sql) const {
  return store::RunSql(url_, sql);
}

absl::StatusOr<std::optional<std::string>> TestDatabase::Scalar(const std::string& sql) const {
  ASSIGN_OR_RETURN(store::SqlResult result, Sql(sql));
  if (result.rows.empty() || result.rows[0].empty()) {
    return absl::NotFoundError(absl::StrCat("no row from: ", sql));
  }
  return result.rows[0][0];
}

absl::Status TestDatabase::SetReachable(bool reachable) const {
  // Run from the server's own database: this one may refuse connections.
  RETURN_IF_ERROR(
      store::RunSql(server_url_, absl::StrCat("ALTER DATABASE ", name_, " ALLOW_CONNECTIONS ",
                                              reachable ? "true" : "false"))
          .status());
  if (reachable) return absl::OkStatus();
  return store::RunSql(server_url_, absl::StrCat("SELECT count(pg_terminate_backend(pid)) FROM "
                                                 "pg_stat_activity WHERE datname = '",
                                                 name_, "'"))
      .status();
}

PgFixture::PgFixture() {
  auto database = TestDatabase::Create();
  if (!database.ok()) FAIL(database.status().ToString());
  database_ = *std::move(database);
}

PgFixture::~PgFixture() = default;

std::unique_ptr<store::Store> PgFixture::ConnectStore(store::StoreOptions options) {
  options.database_url = database_->url();
  auto store = store::Store::Connect(options);
  if (!store.ok()) FAIL("connecting a Store to the test database: " << store.status().ToString());
  return *std::move(store);
}

}  // namespace ptxbench::testing
