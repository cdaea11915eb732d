// Authenticator against a real PostgreSQL store: admission lanes (decided on the headers alone)
// separate tenants and, within a tenant, roles; unseen tokens share the unverified lane; a
// revocation takes a token out of its lane. Through a real server over loopback: the calls of
// one token whose cache entry expired share one store lookup (all served), while a flood of
// invented tokens is still held to kMaxUnverifiedLookups lookups at once, refused with a
// "retry shortly" pushback past that, and cannot make a real token's refresh fail.
#include "server/api/auth.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "proto/dial.h"
#include "tests/server/api/api_test_support.h"
#include "tests/support/pg_fixture.h"

namespace ptxbench::api {
namespace {

constexpr char kPeer[] = "ipv4:10.1.2.3:5000";  // Not loopback: no bootstrap shortcut.

std::string Bearer(const GeneratedToken& token) { return "Bearer " + token.token; }

GeneratedToken MakeToken(store::Store& store, const std::string& tenant, v1::Role role) {
  GeneratedToken token = GenerateToken();
  store::TokenRow row;
  row.token_id = token.token_id;
  row.tenant = tenant;
  row.role = role;
  REQUIRE(store.CreateToken(row, token.sha256).ok());
  return token;
}

TEST_CASE_METHOD(testing::PgFixture, "lanes separate tenants and, within a tenant, roles",
                 "[auth]") {
  auto store = ConnectStore();
  for (const char* tenant : {"acme", "rival"}) {
    store::TenantRow row;
    row.name = tenant;
    REQUIRE(store->CreateTenant(row).ok());
  }
  const GeneratedToken acme_vendor = MakeToken(*store, "acme", v1::ROLE_VENDOR);
  const GeneratedToken acme_vendor_2 = MakeToken(*store, "acme", v1::ROLE_VENDOR);
  const GeneratedToken acme_worker = MakeToken(*store, "acme", v1::ROLE_WORKER);
  const GeneratedToken rival_vendor = MakeToken(*store, "rival", v1::ROLE_VENDOR);
  const GeneratedToken shared_worker = MakeToken(*store, "", v1::ROLE_WORKER);

  Authenticator auth(store.get(), {});
  auth.OnTokenCreated();

  // Before verification every well-formed token is in the unverified lane ("").
  for (const auto* token : {&acme_vendor, &acme_worker, &rival_vendor, &shared_worker}) {
    const auto decision = auth.Lane(Bearer(*token), kPeer);
    CHECK(decision.refusal.ok());
    CHECK(decision.lane.empty());
  }
  for (const auto* token :
       {&acme_vendor, &acme_vendor_2, &acme_worker, &rival_vendor, &shared_worker}) {
    REQUIRE(auth.Authenticate(Bearer(*token), kPeer).ok());
  }
  const std::string vendor_lane = auth.Lane(Bearer(acme_vendor), kPeer).lane;
  const std::string worker_lane = auth.Lane(Bearer(acme_worker), kPeer).lane;
  const std::string rival_lane = auth.Lane(Bearer(rival_vendor), kPeer).lane;
  const std::string shared_worker_lane = auth.Lane(Bearer(shared_worker), kPeer).lane;
  CHECK(vendor_lane == "vendor:tenant:acme");
  // Two vendor tokens of one tenant share its lane: minting more tokens buys no more threads.
  CHECK(auth.Lane(Bearer(acme_vendor_2), kPeer).lane == vendor_lane);
  // A tenant's vendors flooding Submit must not delay the same tenant's workers.
  CHECK(worker_lane == "worker:tenant:acme");
  CHECK(rival_lane == "vendor:tenant:rival");
  CHECK(shared_worker_lane == "worker:token:" + shared_worker.token_id);

  SECTION("a revoked token leaves its lane") {
    REQUIRE(store->RevokeToken(acme_vendor.token_id).ok());
    auth.OnTokenRevoked(acme_vendor.token_id);
    CHECK(auth.Lane(Bearer(acme_vendor), kPeer).lane.empty());
    CHECK_FALSE(auth.Authenticate(Bearer(acme_vendor), kPeer).ok());
    CHECK(auth.Lane(Bearer(acme_vendor_2), kPeer).lane == vendor_lane);
  }
  SECTION("a malformed or missing token is refused on its headers") {
    CHECK(absl::IsUnauthenticated(auth.Lane("Bearer ptxb_nothex_zz", kPeer).refusal));
    CHECK(absl::IsUnauthenticated(auth.Lane("", kPeer).refusal));
  }
  SECTION("an unknown well-formed token stays unverified") {
    const GeneratedToken stranger = GenerateToken();
    CHECK(absl::IsUnauthenticated(auth.Authenticate(Bearer(stranger), kPeer).status()));
    CHECK(auth.Lane(Bearer(stranger), kPeer).lane.empty());
  }
}

// Holds an ACCESS EXCLUSIVE lock on api_tokens for `hold` on a thread of its own, so that
// every token lookup waits in the store where the test can count it (pg_stat_activity).
class TokenTableLock {
 public:
  TokenTableLock(const testing::TestDatabase& database, absl::Duration hold) : database_(database) {
    thread_ = std::thread([this, hold] {
      locked_ = database_
                    .Sql(absl::StrCat("LOCK TABLE api_tokens IN ACCESS EXCLUSIVE MODE; "
                                      "SELECT pg_sleep(",
                                      absl::ToDoubleSeconds(hold), ")"))
                    .ok();
    });
    // Until the lock is granted.
    const absl::Time until = absl::Now() + absl::Seconds(10);
    while (absl::Now() < until && Count("SELECT count(*) FROM pg_locks l JOIN pg_class c ON "
                                        "c.oid = l.relation WHERE c.relname = 'api_tokens' AND "
                                        "l.mode = 'AccessExclusiveLock' AND l.granted") < 1) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    REQUIRE(Count("SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
                  "WHERE c.relname = 'api_tokens' AND l.mode = 'AccessExclusiveLock' AND "
                  "l.granted") == 1);
  }
  ~TokenTableLock() { Release(); }

  void Release() {
    if (thread_.joinable()) thread_.join();
  }
  bool locked() const { return locked_; }

  // Store queries waiting for the lock now: the lookups that reached the store.
  int WaitingLookups() const {
    return Count(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND "
        "wait_event_type = 'Lock' AND pid <> pg_backend_pid()");
  }
  // The most WaitingLookups seen over `window`.
  int MostWaitingOver(absl::Duration window) const {
    int most = 0;
    for (const absl::Time until = absl::Now() + window; absl::Now() < until;) {
      most = std::max(most, WaitingLookups());
      absl::SleepFor(absl::Milliseconds(20));
    }
    return most;
  }

 private:
  int Count(const std::string& sql) const {
    auto value = database_.Scalar(sql);
    REQUIRE(value.ok());
    return std::stoi(value->value_or("0"));
  }

  const testing::TestDatabase& database_;
  std::thread thread_;
  std::atomic<bool> locked_{false};
};

grpc::Status ListTasks(api_test::TestServer& server, const std::string& token) {
  grpc::ClientContext context;
  api_test::WithDeadline(&context);
  Authorize(&context, token);
  v1::ListTasksResponse response;
  return server.submissions()->ListTasks(&context, v1::ListTasksRequest(), &response);
}

// A token's cache entry lasts Authenticator::Options::cache_ttl (5 s, the server's default).
void WaitForCacheExpiry() {
  absl::SleepFor(Authenticator::Options{}.cache_ttl + absl::Milliseconds(200));
}

TEST_CASE("16 concurrent calls of one token whose cache entry expired share one lookup, all served",
          "[auth][api]") {
  api_test::TestServer server;
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  REQUIRE(ListTasks(server, vendor).ok());  // Verified and cached, in its tenant's lane.
  WaitForCacheExpiry();

  TokenTableLock lock(server.database(), absl::Seconds(1.5));
  std::vector<grpc::Status> statuses(16);
  std::vector<std::thread> calls;
  for (size_t i = 0; i < statuses.size(); ++i) {
    calls.emplace_back([&, i] { statuses[i] = ListTasks(server, vendor); });
  }
  // Before: each of the lane's 8 running calls looked the token up (4 at most, the other 4
  // refused RESOURCE_EXHAUSTED). Now one lookup waits in the store and the others wait for it.
  CHECK(lock.MostWaitingOver(absl::Milliseconds(600)) == 1);
  for (std::thread& call : calls) call.join();
  lock.Release();
  CHECK(lock.locked());
  for (const grpc::Status& status : statuses) {
    INFO(status.error_message());
    CHECK(status.ok());
  }
}

TEST_CASE("a flood of invented tokens is held to a few lookups and cannot fail a real token",
          "[auth][api]") {
  api_test::TestServer server;
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  REQUIRE(ListTasks(server, vendor).ok());
  WaitForCacheExpiry();

  TokenTableLock lock(server.database(), absl::Seconds(1.5));
  // WatchSubmission streams pass no admission lane: they reach Authenticate at once, as a
  // guesser's would.
  constexpr int kInvented = 16;
  std::vector<grpc::Status> invented(kInvented);
  std::vector<std::string> pushbacks(kInvented);
  std::vector<std::thread> calls;
  calls.reserve(kInvented + 4);
  for (int i = 0; i < kInvented; ++i) {
    calls.emplace_back([&, i] {
      grpc::ClientContext context;
      api_test::WithDeadline(&context);
      Authorize(&context, GenerateToken().token);
      v1::WatchSubmissionRequest request;
      request.set_submission_id("00000000-0000-4000-8000-000000000000");
      auto reader = server.submissions()->WatchSubmission(&context, request);
      v1::StageEvent event;
      while (reader->Read(&event)) {
      }
      invented[i] = reader->Finish();
      auto it = context.GetServerTrailingMetadata().find(kRetryPushbackMetadata);
      if (it != context.GetServerTrailingMetadata().end()) {
        pushbacks[i] = std::string(it->second.data(), it->second.size());
      }
    });
  }
  // The real token's refresh during the flood: not counted against the invented tokens' slots.
  std::vector<grpc::Status> real(4);
  for (size_t i = 0; i < real.size(); ++i) {
    calls.emplace_back([&, i] { real[i] = ListTasks(server, vendor); });
  }
  const int most_waiting = lock.MostWaitingOver(absl::Milliseconds(600));
  for (std::thread& call : calls) call.join();
  lock.Release();
  INFO("lookups waiting in the store at most: " << most_waiting);
  CHECK(most_waiting <= kMaxUnverifiedLookups + 1);  // The invented ones' slots + the real one.
  int refused = 0;
  int unknown = 0;
  for (int i = 0; i < kInvented; ++i) {
    INFO(invented[i].error_message());
    if (invented[i].error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++refused;
      CHECK(pushbacks[i] == "200");  // Marked "retry shortly", 200 ms.
    } else {
      CHECK(invented[i].error_code() == grpc::StatusCode::UNAUTHENTICATED);
      CHECK(pushbacks[i].empty());
      ++unknown;
    }
  }
  CHECK(unknown <= kMaxUnverifiedLookups);
  CHECK(refused >= kInvented - kMaxUnverifiedLookups);
  for (const grpc::Status& status : real) {
    INFO(status.error_message());
    CHECK(status.ok());
  }
}

}  // namespace
}  // namespace ptxbench::api
