// Migrations (migration_runner.h, through the Store and directly): up, down, up again on a real
// database; concurrent migrators; the folder's shape and an applied migration's integrity are
// checked before anything runs; dead and unreachable databases.
#include "server/store/migration_runner.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/store/connection_pool.h"
#include "server/store/store.h"
#include "tests/support/pg_fixture.h"
#include "tests/support/status_testing.h"

namespace ptxbench::store {
namespace {

namespace fs = std::filesystem;
using ::ptxbench::testing::MigrationsDir;
using ::ptxbench::testing::TestDatabase;
using ::ptxbench::testing::ValueOrFail;

TenantRow AcmeTenant() {
  TenantRow tenant;
  tenant.name = "acme";
  return tenant;
}

std::unique_ptr<TestDatabase> EmptyDatabase() {
  return ValueOrFail(TestDatabase::Create(/*migrate=*/false));
}

std::unique_ptr<Store> Connect(const TestDatabase& database) {
  StoreOptions options;
  options.database_url = database.url();
  options.pool_size = 2;
  return ValueOrFail(Store::Connect(options));
}

bool TableExists(const TestDatabase& database, const std::string& table) {
  return ValueOrFail(database.Scalar(absl::StrCat("SELECT to_regclass('", table, "') IS NOT NULL")))
             .value() == "t";
}

// The newest migration of the folder: NNNN of its last NNNN_name.up.sql, and its name.
std::pair<int, std::string> Newest() {
  std::pair<int, std::string> newest{0, ""};
  for (const auto& entry : fs::directory_iterator(MigrationsDir())) {
    const std::string name = entry.path().filename().string();
    const size_t suffix = name.rfind(".up.sql");
    if (suffix == std::string::npos) continue;
    const int version = std::stoi(name.substr(0, 4));
    if (version > newest.first) newest = {version, name.substr(0, suffix)};
  }
  return newest;
}
const int kNewest = Newest().first;

// A private copy of the migrations folder to damage.
std::string CopyOfMigrations() {
  const fs::path copy =
      fs::temp_directory_path() / absl::StrCat("ptxbench-migrations-", getpid(), "-", std::rand());
  fs::create_directories(copy);
  for (const auto& entry : fs::directory_iterator(MigrationsDir())) {
    fs::copy_file(entry.path(), copy / entry.path().filename());
  }
  return copy.string();
}

TEST_CASE("migrations go up then down then up again", "[store][migrations]") {
  auto database = EmptyDatabase();
  auto store = Connect(*database);
  REQUIRE(ValueOrFail(store->SchemaVersion()) == 0);
  // Before migrating, the store says what is missing.
  absl::Status unmigrated = store->CreateTenant(AcmeTenant());
  REQUIRE(absl::IsFailedPrecondition(unmigrated));
  REQUIRE_THAT(std::string(unmigrated.message()), Catch::Contains("migrate"));

  REQUIRE_OK(store->MigrateUp(MigrationsDir()));
  REQUIRE(ValueOrFail(store->SchemaVersion()) == kNewest);
  REQUIRE(TableExists(*database, "jobs"));
  REQUIRE(TableExists(*database, "audit_log"));
  REQUIRE_OK(store->MigrateUp(MigrationsDir()));  // Nothing left to do.
  REQUIRE(ValueOrFail(store->SchemaVersion()) == kNewest);
  REQUIRE(ValueOrFail(database->Scalar("SELECT count(*) FROM schema_migrations")).value() ==
          std::to_string(kNewest));

  REQUIRE_OK(store->MigrateDown(MigrationsDir(), kNewest - 2));  // Back to 0002_audit_log.
  REQUIRE(ValueOrFail(store->SchemaVersion()) == 2);
  REQUIRE(TableExists(*database, "audit_log"));
  REQUIRE_OK(store->MigrateDown(MigrationsDir(), 1));
  REQUIRE(ValueOrFail(store->SchemaVersion()) == 1);
  REQUIRE_FALSE(TableExists(*database, "audit_log"));
  REQUIRE(TableExists(*database, "jobs"));
  REQUIRE_OK(store->MigrateDown(MigrationsDir(), 1));
  REQUIRE(ValueOrFail(store->SchemaVersion()) == 0);
  REQUIRE_FALSE(TableExists(*database, "jobs"));
  REQUIRE_FALSE(TableExists(*database, "tenants"));
  // Only what was applied can be reverted.
  REQUIRE_STATUS(store->MigrateDown(MigrationsDir(), 1), absl::StatusCode::kFailedPrecondition);
  REQUIRE_STATUS(store->MigrateDown(MigrationsDir(), 0), absl::StatusCode::kInvalidArgument);

  REQUIRE_OK(store->MigrateUp(MigrationsDir()));
  REQUIRE(ValueOrFail(store->SchemaVersion()) == kNewest);
  // The schema works after the round trip, triggers included.
  REQUIRE_OK(store->CreateTenant(AcmeTenant()));
  REQUIRE(ValueOrFail(store->ListAuditLog(AuditEntity::kTenant, "acme")).size() == 1);
  REQUIRE_OK(store->MigrateDown(MigrationsDir(), kNewest));
  REQUIRE(ValueOrFail(store->SchemaVersion()) == 0);
}

TEST_CASE("servers migrating at the same time apply each migration once", "[store][migrations]") {
  auto database = EmptyDatabase();
  constexpr int kServers = 4;
  std::vector<std::unique_ptr<Store>> stores;
  for (int i = 0; i < kServers; ++i) stores.push_back(Connect(*database));
  std::vector<absl::Status> results(kServers);
  std::vector<std::thread> threads;
  for (int i = 0; i < kServers; ++i) {
    threads.emplace_back([&, i] { results[i] = stores[i]->MigrateUp(MigrationsDir()); });
  }
  for (std::thread& thread : threads) thread.join();
  for (const absl::Status& status : results) REQUIRE_OK(status);
  REQUIRE(ValueOrFail(database->Scalar("SELECT count(*) FROM schema_migrations")).value() ==
          std::to_string(kNewest));
  REQUIRE(ValueOrFail(stores[0]->SchemaVersion()) == kNewest);
}

TEST_CASE("a damaged migrations folder or an edited migration is refused", "[store][migrations]") {
  auto database = EmptyDatabase();
  auto store = Connect(*database);
  const std::string copy = CopyOfMigrations();

  SECTION("an edited, already applied migration") {
    REQUIRE_OK(store->MigrateUp(copy));
    std::ofstream(fs::path(copy) / "0001_initial.up.sql", std::ios::app) << "\n-- edited\n";
    absl::Status status = store->MigrateUp(copy);
    REQUIRE(absl::IsFailedPrecondition(status));
    REQUIRE_THAT(std::string(status.message()), Catch::Contains("0001_initial.up.sql was edited"));
  }
  SECTION("a migration without its down file") {
    fs::remove(fs::path(copy) / "0002_audit_log.down.sql");
    absl::Status status = store->MigrateUp(copy);
    REQUIRE(absl::IsInvalidArgument(status));
    REQUIRE_THAT(std::string(status.message()), Catch::Contains("0002_audit_log"));
    REQUIRE(ValueOrFail(store->SchemaVersion()) == 0);
  }
  SECTION("a file that does not follow the naming pattern") {
    std::ofstream(fs::path(copy) / "3_fix.sql") << "SELECT 1;";
    REQUIRE_STATUS(store->MigrateUp(copy), absl::StatusCode::kInvalidArgument);
  }
  SECTION("a database newer than the server's migrations") {
    REQUIRE_OK(store->MigrateUp(copy));
    fs::remove(fs::path(copy) / (Newest().second + ".up.sql"));
    fs::remove(fs::path(copy) / (Newest().second + ".down.sql"));
    absl::Status status = store->MigrateUp(copy);
    REQUIRE(absl::IsFailedPrecondition(status));
    REQUIRE_THAT(std::string(status.message()), Catch::Contains("older than its database"));
  }
  SECTION("a migration that fails is rolled back entirely") {
    std::ofstream(fs::path(copy) / "9999_broken.up.sql")
        << "CREATE TABLE half_done (id int);\nSELECT no_such_function();\n";
    std::ofstream(fs::path(copy) / "9999_broken.down.sql") << "DROP TABLE half_done;\n";
    absl::Status status = store->MigrateUp(copy);
    REQUIRE_FALSE(status.ok());
    REQUIRE_THAT(std::string(status.message()), Catch::Contains("9999_broken.up.sql"));
    REQUIRE(ValueOrFail(store->SchemaVersion()) == kNewest);
    REQUIRE_FALSE(TableExists(*database, "half_done"));
  }
  REQUIRE_STATUS(store->MigrateUp("/nonexistent/migrations"), absl::StatusCode::kNotFound);
  fs::remove_all(copy);
}

TEST_CASE("the runner replaces a dead connection and names an unreachable database",
          "[store][migrations]") {
  auto database = EmptyDatabase();
  internal::ConnectionPool pool(database->url(), {1, absl::Seconds(5)});
  internal::MigrationRunner runner(&pool);
  REQUIRE(ValueOrFail(runner.Version()) == 0);
  // The pooled connection dies (a database restart): the runner opens another and goes on.
  REQUIRE_OK(
      database->Sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = "
                    "current_database() AND pid <> pg_backend_pid()"));
  REQUIRE_OK(runner.Up(MigrationsDir()));
  REQUIRE(std::to_string(ValueOrFail(runner.Version())) ==
          ValueOrFail(database->Scalar("SELECT max(version) FROM schema_migrations")).value());
  REQUIRE(TableExists(*database, "jobs"));

  internal::ConnectionPool nowhere("host=127.0.0.1 port=1 dbname=nowhere", {1, absl::Seconds(5)});
  absl::Status status = internal::MigrationRunner(&nowhere).Up(MigrationsDir());
  REQUIRE(absl::IsUnavailable(status));
  REQUIRE_THAT(std::string(status.message()), Catch::Contains("127.0.0.1:1/nowhere"));
}

}  // namespace
}  // namespace ptxbench::store
