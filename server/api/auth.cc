#include "server/api/auth.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <array>
#include <iterator>
#include <stdexcept>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "proto/wire_names.h"
#include "server/api/retry_pushback.h"

namespace ptxbench::api {
namespace {

constexpr char kBearerPrefix[] = "Bearer ";
constexpr char kTokenPrefix[] = "ptxb_";
constexpr size_t kTokenIdBytes = 8;  // 16 hex characters: collisions are irrelevant.
constexpr size_t kSecretBytes = 32;  // 256 bits of secret.

std::string Hex(const unsigned char* data, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (size_t i = 0; i < size; ++i) {
    out.push_back(kDigits[data[i] >> 4]);
    out.push_back(kDigits[data[i] & 0xf]);
  }
  return out;
}

std::string RandomHex(size_t bytes) {
  std::array<unsigned char, 64> buffer{};
  if (bytes > buffer.size() || RAND_bytes(buffer.data(), static_cast<int>(bytes)) != 1) {
    // Without randomness no secret can be made safely; this is not recoverable.
    throw std::runtime_error("RAND_bytes failed: no entropy for a token secret");
  }
  return Hex(buffer.data(), bytes);
}

// A verified token is remembered for lane decisions until this many are; then the map starts
// over (the next call of each token runs once in the unverified lane and is remembered again).
constexpr size_t kMaxKnownLanes = 100000;
// How long a caller refused for too many unverified lookups is told to wait: a lookup is one
// indexed query (about 1 ms on the test machine), so the slots are free again well before.
constexpr absl::Duration kLookupPushback = absl::Milliseconds(200);

bool IsLowerHex(const std::string& text) {
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return !text.empty();
}

}  // namespace

absl::StatusOr<Role> RoleFromWire(v1::Role role) {
  switch (role) {
    case v1::ROLE_VENDOR:
      return Role::kVendor;
    case v1::ROLE_WORKER:
      return Role::kWorker;
    case v1::ROLE_ADMIN:
      return Role::kAdmin;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("role: ", role, " is not one of vendor, worker, admin"));
  }
}

v1::Role RoleToWire(Role role) {
  switch (role) {
    case Role::kVendor:
      return v1::ROLE_VENDOR;
    case Role::kWorker:
      return v1::ROLE_WORKER;
    case Role::kAdmin:
      return v1::ROLE_ADMIN;
  }
  return v1::ROLE_UNSPECIFIED;
}

std::string RoleText(Role role) { return wire::RoleName(RoleToWire(role)); }

std::string Sha256Hex(const std::string& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(data.data(), data.size(), digest, &size, EVP_sha256(), nullptr);
  return Hex(digest, size);
}

GeneratedToken GenerateToken() {
  GeneratedToken token;
  token.token_id = RandomHex(kTokenIdBytes);
  token.token = absl::StrCat(kTokenPrefix, token.token_id, "_", RandomHex(kSecretBytes));
  token.sha256 = Sha256Hex(token.token);
  return token;
}

bool IsLoopbackPeer(const std::string& peer) {
  return absl::StartsWith(peer, "ipv4:127.") || absl::StartsWith(peer, "ipv6:[::1]") ||
         absl::StartsWith(peer, "ipv6:[::ffff:127.") || absl::StartsWith(peer, "unix:");
}

absl::Status RequireRole(const Caller& caller, std::initializer_list<Role> roles) {
  if (caller.role == Role::kAdmin) return absl::OkStatus();
  std::string wanted;
  for (Role role : roles) {
    if (role == caller.role) return absl::OkStatus();
    absl::StrAppend(&wanted, wanted.empty() ? "" : " or ", RoleText(role));
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "this call needs a ", wanted, " token; the caller's token has role ", RoleText(caller.role)));
}

std::string Caller::Actor() const {
  switch (role) {
    case Role::kAdmin:
      return absl::StrCat("admin:", token_id.empty() ? "loopback" : token_id);
    case Role::kWorker:
      return absl::StrCat("worker:", token_id);
    case Role::kVendor:
      return absl::StrCat("tenant:", tenant);
  }
  return "unknown";
}

Authenticator::Authenticator(store::Store* store, Options options)
    : store_(store), options_(options) {}

absl::StatusOr<bool> Authenticator::BootstrapMode() {
  std::lock_guard<std::mutex> lock(mu_);
  if (tokens_exist_) return false;
  const absl::Time now = absl::Now();
  if (now < next_token_count_check_) return true;
  auto count = store_->CountTokens();
  if (!count.ok()) return count.status();
  if (*count > 0) {
    tokens_exist_ = true;
    return false;
  }
  // A token made by `ptxbench-server token create` in another process is seen within 1 s.
  next_token_count_check_ = now + absl::Seconds(1);
  return true;
}

namespace {

// The token of an "authorization: Bearer ptxb_<id>_<secret>" value; UNAUTHENTICATED naming
// what is wrong with its shape.
absl::StatusOr<std::string> BearerToken(const std::string& authorization) {
  if (authorization.empty()) {
    return absl::UnauthenticatedError("missing 'authorization: Bearer ptxb_...' metadata");
  }
  if (!absl::StartsWith(authorization, kBearerPrefix)) {
    return absl::UnauthenticatedError("authorization: expected 'Bearer ptxb_<id>_<secret>'");
  }
  const std::string token =
      std::string(absl::StripAsciiWhitespace(authorization.substr(sizeof(kBearerPrefix) - 1)));
  // Shape check before hashing: "ptxb_" + 16 hex + "_" + 64 hex.
  const size_t id_end = token.find('_', sizeof(kTokenPrefix) - 1);
  if (!absl::StartsWith(token, kTokenPrefix) || id_end == std::string::npos ||
      !IsLowerHex(token.substr(sizeof(kTokenPrefix) - 1, id_end - (sizeof(kTokenPrefix) - 1))) ||
      !IsLowerHex(token.substr(id_end + 1))) {
    return absl::UnauthenticatedError(
        "authorization: malformed token (expected ptxb_<id>_<secret>)");
  }
  return token;
}

// By role too: a tenant's vendors flooding Submit must not delay the same tenant's workers.
std::string LaneOf(const store::TokenRow& row) {
  return row.tenant.empty() ? absl::StrCat(wire::RoleName(row.role), ":token:", row.token_id)
                            : absl::StrCat(wire::RoleName(row.role), ":tenant:", row.tenant);
}

}  // namespace

Authenticator::LaneDecision Authenticator::Lane(const std::string& authorization,
                                                const std::string& peer) {
  bool tokens_exist = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    tokens_exist = tokens_exist_;
  }
  if (!tokens_exist) {
    // Possibly bootstrap mode (only the store can say): loopback callers are its admin,
    // anyone else is refused by Authenticate.
    return {absl::OkStatus(),
            IsLoopbackPeer(peer) ? absl::StrCat("admin:tenant:", kLocalTenant) : ""};
  }
  auto token = BearerToken(authorization);
  if (!token.ok()) return {token.status(), ""};
  const std::string hash = Sha256Hex(*token);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = known_lanes_.find(hash);
  return {absl::OkStatus(), it == known_lanes_.end() ? "" : it->second.lane};
}

absl::StatusOr<Caller> Authenticator::Authenticate(const std::string& authorization,
                                                   const std::string& peer) {
  auto bootstrap = BootstrapMode();
  if (!bootstrap.ok()) return bootstrap.status();
  if (*bootstrap) {
    if (!IsLoopbackPeer(peer)) {
      return absl::UnauthenticatedError(
          "no API token exists yet, so only loopback clients are accepted; create one with "
          "`ptxbench-server token create --tenant T --role admin`");
    }
    return Caller{kLocalTenant, Role::kAdmin, ""};
  }
  ASSIGN_OR_RETURN(const std::string token, BearerToken(authorization));
  const std::string hash = Sha256Hex(token);
  absl::StatusOr<store::TokenRow> row = absl::UnknownError("not looked up");
  {
    std::unique_lock<std::mutex> lock(mu_);
    auto it = cache_.find(hash);
    if (it != cache_.end()) {
      if (it->second.expires > absl::Now()) {
        const auto& cached = it->second.token;
        auto role = RoleFromWire(cached.role);
        if (role.ok()) return Caller{cached.tenant, *role, cached.token_id};
      }
      cache_.erase(it);
    }
    if (auto in_flight = lookups_.find(hash); in_flight != lookups_.end()) {
      // Another call with this token is asking the store: its answer is this call's too.
      std::shared_ptr<Lookup> lookup = in_flight->second;
      looked_up_.wait(lock, [&] { return lookup->done; });
      row = lookup->row;
    } else {
      // A token never verified costs a store lookup; guessers on the streaming calls (which
      // do not pass the admission lanes) share this many at once, then are refused at once.
      const bool known = known_lanes_.count(hash) > 0;
      if (!known && unverified_lookups_ >= kMaxUnverifiedLookups) {
        return RetryShortly(
            absl::ResourceExhaustedError(
                "too many calls with tokens this server has not verified yet; retry shortly"),
            kLookupPushback);
      }
      if (!known) ++unverified_lookups_;
      auto lookup = std::make_shared<Lookup>();
      lookups_[hash] = lookup;
      const uint64_t revocations = revocations_;
      lock.unlock();
      row = store_->FindTokenBySecretHash(hash);
      lock.lock();
      if (!known) --unverified_lookups_;
      lookup->row = row;
      lookup->done = true;
      lookups_.erase(hash);
      looked_up_.notify_all();
      if (row.ok() && !row->revoked && RoleFromWire(row->role).ok() &&
          revocations == revocations_) {
        cache_[hash] = CachedToken{*row, absl::Now() + options_.cache_ttl};
        if (known_lanes_.size() >= kMaxKnownLanes) known_lanes_.clear();
        known_lanes_[hash] = KnownLane{LaneOf(*row), row->token_id};
      }
    }
  }
  if (absl::IsNotFound(row.status())) {
    return absl::UnauthenticatedError("authorization: unknown or revoked token");
  }
  if (!row.ok()) return row.status();
  if (row->revoked) return absl::UnauthenticatedError("authorization: unknown or revoked token");
  auto role = RoleFromWire(row->role);
  if (!role.ok()) {
    return absl::InternalError(
        absl::StrCat("token ", row->token_id, " has unknown role ", row->role));
  }
  return Caller{row->tenant, *role, row->token_id};
}

void Authenticator::OnTokenCreated() {
  std::lock_guard<std::mutex> lock(mu_);
  tokens_exist_ = true;
}

void Authenticator::OnTokenRevoked(const std::string& token_id) {
  std::lock_guard<std::mutex> lock(mu_);
  ++revocations_;
  for (auto it = cache_.begin(); it != cache_.end();) {
    it = it->second.token.token_id == token_id ? cache_.erase(it) : std::next(it);
  }
  for (auto it = known_lanes_.begin(); it != known_lanes_.end();) {
    it = it->second.token_id == token_id ? known_lanes_.erase(it) : std::next(it);
  }
}

}  // namespace ptxbench::api
