// Authenticator against a real PostgreSQL store: admission lanes (decided on the headers alone)
// separate tenants and, within a tenant, roles; unseen tokens share the unverified lane; a
// revocation takes a token out of its lane.
#include "server/api/auth.h"

#include <catch2/catch.hpp>
#include <string>

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

}  // namespace
}  // namespace ptxbench::api
