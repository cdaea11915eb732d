// The connection pool and the reachability signal, against a real PostgreSQL (a fresh
// database per test case, tests/support); outages are real too: the database refuses new
// connections and its sessions are ended (TestDatabase::SetReachable).
#include "server/store/connection_pool.h"

#include <catch2/catch.hpp>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/store/store.h"
#include "tests/support/pg_fixture.h"
#include "tests/support/status_testing.h"

namespace ptxbench::store::internal {
namespace {

using ::ptxbench::testing::PgFixture;
using ::ptxbench::testing::ValueOrFail;

// Sessions on the test database other than the one asking.
int Sessions(const testing::TestDatabase& database) {
  return std::stoi(
      ValueOrFail(database.Scalar("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                                  "current_database() AND pid <> pg_backend_pid()"))
          .value());
}

// Sessions once the server side has caught up with closes: a backend exits a moment after its
// client closed the socket, so right after DropIdle pg_stat_activity may still list it (seen
// once on 2 loaded cores: 1 == 0). Waits up to 5 s for `expected`, then returns what it sees.
int SessionsSettledAt(const testing::TestDatabase& database, int expected) {
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  int seen = Sessions(database);
  while (seen != expected && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
    seen = Sessions(database);
  }
  return seen;
}

TEST_CASE_METHOD(PgFixture, "the pool opens at most its size and hands a returned connection on",
                 "[store][pool]") {
  ConnectionPool pool(database_url(), {2, absl::Milliseconds(300)});
  REQUIRE(pool.open_connections() == 0);
  std::optional<PooledConnection> first = ValueOrFail(pool.Acquire());
  std::optional<PooledConnection> second = ValueOrFail(pool.Acquire());
  REQUIRE(pool.open_connections() == 2);
  REQUIRE(Sessions(database()) == 2);

  // A third caller waits acquire_timeout and is told why.
  const absl::Time asked = absl::Now();
  absl::StatusOr<PooledConnection> third = pool.Acquire();
  REQUIRE(absl::IsUnavailable(third.status()));
  REQUIRE_THAT(std::string(third.status().message()), Catch::Contains("stayed busy"));
  REQUIRE(absl::Now() - asked >= absl::Milliseconds(290));

  // A waiter is served as soon as a connection comes back, and gets that very connection.
  std::optional<PooledConnection> waited;
  std::thread waiter([&] { waited.emplace(ValueOrFail(pool.Acquire())); });
  absl::SleepFor(absl::Milliseconds(50));
  pqxx::connection* returned = &first->get();
  first.reset();
  waiter.join();
  REQUIRE(&waited->get() == returned);
  REQUIRE(pool.open_connections() == 2);
  REQUIRE(Sessions(database()) == 2);
}

TEST_CASE_METHOD(PgFixture, "a discarded connection frees its slot and DropIdle closes idle ones",
                 "[store][pool]") {
  ConnectionPool pool(database_url(), {2, absl::Seconds(5)});
  {
    PooledConnection connection = ValueOrFail(pool.Acquire());
    REQUIRE(connection.is_open());
    connection.Discard(absl::OkStatus());
    REQUIRE_FALSE(connection.is_open());
  }
  REQUIRE(pool.open_connections() == 0);
  REQUIRE(pool.reachability().reachable);  // Discarding for no failure says nothing about it.
  {
    PooledConnection a = ValueOrFail(pool.Acquire());
    PooledConnection b = ValueOrFail(pool.Acquire());
  }
  REQUIRE(pool.idle_connections() == 2);
  REQUIRE(Sessions(database()) == 2);
  pool.DropIdle();
  REQUIRE(pool.idle_connections() == 0);
  REQUIRE(pool.open_connections() == 0);
  REQUIRE(SessionsSettledAt(database(), 0) == 0);
  // And the pool opens fresh ones afterwards.
  PooledConnection again = ValueOrFail(pool.Acquire());
  REQUIRE(again.is_open());
}

TEST_CASE("an unreachable database is UNAVAILABLE, named, and recorded as unreachable",
          "[store][pool]") {
  ConnectionPool pool("host=127.0.0.1 port=1 user=ptxbench password=hunter2 dbname=none",
                      {2, absl::Seconds(5)});
  REQUIRE_FALSE(pool.reachability().reachable);
  REQUIRE(pool.reachability().last_error == "not connected yet");
  absl::StatusOr<PooledConnection> connection = pool.Acquire();
  REQUIRE(absl::IsUnavailable(connection.status()));
  const std::string message(connection.status().message());
  REQUIRE_THAT(message, Catch::Contains("ptxbench@127.0.0.1:1/none"));
  REQUIRE_THAT(message, !Catch::Contains("hunter2"));
  REQUIRE(pool.open_connections() == 0);  // The failed attempt gave its slot back.
  const StoreReachability reachability = pool.reachability();
  REQUIRE_FALSE(reachability.reachable);
  REQUIRE_THAT(reachability.last_error, Catch::Contains("127.0.0.1:1"));
}

TEST_CASE_METHOD(PgFixture, "the store notices an outage, reports it, and reconnects by itself",
                 "[store][pool]") {
  StoreOptions options;
  options.pool_size = 2;
  auto store = ConnectStore(options);
  REQUIRE(store->Reachability().reachable);
  const absl::Time connected_since = store->Reachability().since;
  REQUIRE_OK(store->Ping());

  REQUIRE_OK(database().SetReachable(false));
  // The pooled connection is dead and no new one can be opened: UNAVAILABLE, recorded.
  REQUIRE_STATUS(store->Ping(), absl::StatusCode::kUnavailable);
  StoreReachability down = store->Reachability();
  REQUIRE_FALSE(down.reachable);
  REQUIRE(down.since >= connected_since);
  REQUIRE_FALSE(down.last_error.empty());
  REQUIRE_STATUS(store->ListTenants(), absl::StatusCode::kUnavailable);
  REQUIRE_FALSE(store->Reachability().reachable);

  REQUIRE_OK(database().SetReachable(true));
  // No Reconnect() needed: the next call opens a connection.
  REQUIRE(ValueOrFail(store->ListTenants()).empty());
  StoreReachability up = store->Reachability();
  REQUIRE(up.reachable);
  REQUIRE(up.since >= down.since);
  REQUIRE(up.last_error.empty());
}

}  // namespace
}  // namespace ptxbench::store::internal
