// Bearer-token authentication and role checks for every API call.
//
// A token reads "ptxb_<id>_<secret>" and travels as `authorization: Bearer <token>`. Only the
// sha256 of the whole token is stored, so a database dump grants nothing. Roles are vendor,
// worker and admin; an admin may call every service.
//
// Bootstrapping: while the store holds no token at all, the server cannot know any caller, so
// it accepts loopback peers only and treats them as admin of tenant "local" (the operator on
// the machine itself); everything else is UNAUTHENTICATED. The first token created ends that
// mode for good in this process.
#ifndef PTXBENCH_SERVER_API_AUTH_H_
#define PTXBENCH_SERVER_API_AUTH_H_

#include <condition_variable>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/store/store.h"

namespace ptxbench::api {

enum class Role { kVendor, kWorker, kAdmin };
// The wire's and the store's v1::Role; INVALID_ARGUMENT for UNSPECIFIED or an unknown value.
absl::StatusOr<Role> RoleFromWire(v1::Role role);
v1::Role RoleToWire(Role role);
std::string RoleText(Role role);  // "vendor", "worker", "admin" (proto/wire_names.h).

// The tenant that loopback callers act as while no token exists.
inline constexpr char kLocalTenant[] = "local";

struct Caller {
  std::string tenant;
  Role role = Role::kVendor;
  std::string token_id;  // Empty for the loopback bootstrap caller.

  // The tenant filter for reads: admins see every tenant ("" to the store).
  std::string VisibleTenant() const { return role == Role::kAdmin ? "" : tenant; }
  // Who acted, for the store's audit log: "admin:<token_id>", "tenant:<name>",
  // "worker:<token_id>"; the loopback bootstrap caller is "admin:loopback".
  std::string Actor() const;
};

// A freshly generated token. `token` is shown to its owner once; only `sha256` is stored.
struct GeneratedToken {
  std::string token_id;
  std::string token;   // "ptxb_<id>_<secret>".
  std::string sha256;  // Lower-case hex.
};
GeneratedToken GenerateToken();

// Lower-case hex sha256 of `data`.
std::string Sha256Hex(const std::string& data);

// Whether a gRPC peer string ("ipv4:127.0.0.1:5000", "ipv6:[::1]:5000", "unix:...") is this
// machine.
bool IsLoopbackPeer(const std::string& peer);

// PERMISSION_DENIED unless the caller holds one of `roles` (admin always passes).
absl::Status RequireRole(const Caller& caller, std::initializer_list<Role> roles);

class Authenticator {
 public:
  struct Options {
    // How long a verified token is trusted without asking the store again. A revocation
    // through this server takes effect at once; one through another replica within this
    // period. 5 s keeps the token lookup off the hot Complete/ReportStage path (one indexed
    // query saved per call) while a leaked token stays usable at most 5 s after revocation.
    absl::Duration cache_ttl = absl::Seconds(5);
  };

  Authenticator(store::Store* store, Options options);

  // `authorization` is the metadata value ("" when absent); `peer` is the gRPC peer string.
  // UNAUTHENTICATED for a missing, malformed, unknown or revoked token.
  //
  // A token not in the cache costs one store lookup, and only one at a time: concurrent calls
  // with the same token wait for the lookup in flight (single flight per token), so the 16
  // calls of a `ptxbench run --concurrency 16` whose cache entry just expired cost one query
  // and are all served. Lookups of tokens this server never verified (possibly guesses: every
  // one costs a hash and a query) are at most kMaxUnverifiedLookups at once; past that a call
  // is refused RESOURCE_EXHAUSTED marked RetryShortly (retry_pushback.h). Refreshes of tokens
  // verified before do not count against that limit (there are only as many as real tokens,
  // one lookup each), so a flood of invented tokens cannot make the real ones fail.
  absl::StatusOr<Caller> Authenticate(const std::string& authorization, const std::string& peer);

  // Which admission lane (admission.h) a call belongs to, decided without asking the store,
  // so that a call can be refused or queued on its headers alone, before its body is read.
  // `refusal` is UNAUTHENTICATED for a missing or malformed token, which no lookup could make
  // valid; otherwise `lane` is "<role>:tenant:<name>" (or "<role>:token:<id>" for a token
  // without tenant) for a token this server has verified before, the loopback bootstrap
  // caller's, or "" (the unverified lane) for a token it has not seen: possibly a guess, so
  // its calls share a few threads. Not an authentication: the call still runs Authenticate, which
  // may refuse a token revoked meanwhile.
  struct LaneDecision {
    absl::Status refusal;
    std::string lane;
  };
  LaneDecision Lane(const std::string& authorization, const std::string& peer);

  // Call after a token was created or revoked through this server.
  void OnTokenCreated();
  void OnTokenRevoked(const std::string& token_id);

  // Whether the server is still in loopback bootstrap mode (no token in the store).
  absl::StatusOr<bool> BootstrapMode();

 private:
  struct CachedToken {
    store::TokenRow token;
    absl::Time expires;
  };
  // A store lookup in flight, which later calls with the same token wait for.
  struct Lookup {
    bool done = false;
    absl::StatusOr<store::TokenRow> row;
  };

  store::Store* store_;
  Options options_;
  std::mutex mu_;
  bool tokens_exist_ = false;                 // Once true, stays true.
  absl::Time next_token_count_check_;         // Rate-limits CountTokens in bootstrap mode.
  std::map<std::string, CachedToken> cache_;  // Keyed by sha256.
  // Lanes of tokens verified once (by sha256; see Lane). Only tokens found in the store get
  // here, so a stranger cannot grow it; revocations remove their entry.
  struct KnownLane {
    std::string lane;
    std::string token_id;
  };
  std::map<std::string, KnownLane> known_lanes_;
  std::map<std::string, std::shared_ptr<Lookup>> lookups_;  // In flight, by sha256.
  std::condition_variable looked_up_;                       // A lookup finished.
  int unverified_lookups_ = 0;  // Lookups in flight of tokens not in known_lanes_.
  // Counts revocations, so that a lookup that overlapped one caches nothing it read before.
  uint64_t revocations_ = 0;
};

// Store lookups of tokens never verified, in flight at once (Authenticate).
inline constexpr int kMaxUnverifiedLookups = 4;

}  // namespace ptxbench::api

#endif  // PTXBENCH_SERVER_API_AUTH_H_
