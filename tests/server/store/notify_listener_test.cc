// The shared LISTEN connection against a real PostgreSQL: NOTIFY moves the right counter,
// a killed connection and an outage are survived (waiters are woken to poll), Reconnect()
// skips the backoff.
#include "server/store/notify_listener.h"

#include <catch2/catch.hpp>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/support/pg_fixture.h"
#include "tests/support/status_testing.h"

namespace ptxbench::store::internal {
namespace {

using ::ptxbench::testing::PgFixture;
using ::ptxbench::testing::ValueOrFail;

void Notify(const testing::TestDatabase& database, const std::string& channel) {
  REQUIRE_OK(database.Sql(absl::StrCat("SELECT pg_notify('", channel, "', 'test')")));
}

// Polls `condition` every 10 ms for up to `limit`.
template <typename Condition>
bool Eventually(Condition condition, absl::Duration limit = absl::Seconds(10)) {
  const absl::Time deadline = absl::Now() + limit;
  while (absl::Now() < deadline) {
    if (condition()) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return condition();
}

void KillListener(const testing::TestDatabase& database) {
  REQUIRE_OK(
      database.Sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = "
                   "current_database() AND pid <> pg_backend_pid() AND query LIKE 'LISTEN%'"));
}

TEST_CASE_METHOD(PgFixture, "a NOTIFY moves its channel's counter and wakes its waiters only",
                 "[store][listener]") {
  NotifyListener listener(database_url());
  const uint64_t queue = listener.Count(NotifyListener::kQueue);
  const uint64_t events = listener.Count(NotifyListener::kEvents);
  REQUIRE(listener.listening());
  REQUIRE(listener.connections() == 1);

  // Nothing happens: the wait ends at its timeout.
  const absl::Time quiet = absl::Now();
  REQUIRE_FALSE(listener.WaitForChange(NotifyListener::kQueue, queue, absl::Milliseconds(150)));
  REQUIRE(absl::Now() - quiet >= absl::Milliseconds(140));

  bool woken = false;
  std::thread waiter(
      [&] { woken = listener.WaitForChange(NotifyListener::kEvents, events, absl::Seconds(10)); });
  absl::SleepFor(absl::Milliseconds(50));
  Notify(database(), kEventsChannel);
  waiter.join();
  REQUIRE(woken);
  REQUIRE(listener.Count(NotifyListener::kQueue) == queue);
  REQUIRE(listener.Count(NotifyListener::kEvents) > events);

  Notify(database(), kQueueChannel);
  REQUIRE(listener.WaitForChange(NotifyListener::kQueue, queue, absl::Seconds(10)));
}

TEST_CASE_METHOD(PgFixture, "the listener reconnects after its connection dies and wakes waiters",
                 "[store][listener]") {
  NotifyListener listener(database_url());
  const uint64_t seen = listener.Count(NotifyListener::kQueue);
  KillListener(database());
  // Notifications may have been missed while it was away: waiters are woken to poll.
  REQUIRE(listener.WaitForChange(NotifyListener::kQueue, seen, absl::Seconds(10)));
  REQUIRE(Eventually([&] { return listener.connections() == 2 && listener.listening(); }));
  // LISTEN is in effect again.
  const uint64_t after = listener.Count(NotifyListener::kQueue);
  Notify(database(), kQueueChannel);
  REQUIRE(listener.WaitForChange(NotifyListener::kQueue, after, absl::Seconds(10)));
}

TEST_CASE_METHOD(PgFixture, "through an outage the listener keeps trying; Reconnect skips the wait",
                 "[store][listener]") {
  NotifyListener listener(database_url());
  const uint64_t seen = listener.Count(NotifyListener::kEvents);
  REQUIRE_OK(database().SetReachable(false));
  REQUIRE(Eventually([&] { return !listener.listening(); }));
  // Let its backoff grow past a second (100 ms doubling: 100+200+400+800 ms of failures).
  absl::SleepFor(absl::Milliseconds(1600));
  REQUIRE_FALSE(listener.listening());
  REQUIRE_OK(database().SetReachable(true));
  const absl::Time asked = absl::Now();
  listener.Reconnect();
  REQUIRE(Eventually([&] { return listener.listening(); }));
  // Sooner than the backoff (1.6 s now) would have allowed.
  CHECK(absl::Now() - asked < absl::Milliseconds(800));
  REQUIRE(listener.Count(NotifyListener::kEvents) != seen);
  const uint64_t after = listener.Count(NotifyListener::kEvents);
  Notify(database(), kEventsChannel);
  REQUIRE(listener.WaitForChange(NotifyListener::kEvents, after, absl::Seconds(10)));
}

TEST_CASE_METHOD(PgFixture, "Reconnect on a healthy listener re-establishes LISTEN at once",
                 "[store][listener]") {
  NotifyListener listener(database_url());
  const uint64_t seen = listener.Count(NotifyListener::kQueue);
  listener.Reconnect();
  REQUIRE(Eventually([&] { return listener.connections() == 2 && listener.listening(); }));
  REQUIRE(listener.Count(NotifyListener::kQueue) != seen);
  const uint64_t after = listener.Count(NotifyListener::kQueue);
  Notify(database(), kQueueChannel);
  REQUIRE(listener.WaitForChange(NotifyListener::kQueue, after, absl::Seconds(10)));
}

}  // namespace
}  // namespace ptxbench::store::internal
