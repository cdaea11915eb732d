// Minting API tokens: the one function every path that creates a token goes through
// (AdminService.CreateToken and `ptxbench-server token create`), so that a token has the same
// shape, the same rules and the same audit record whichever way it was made.
//
// Rules: the role is required (vendor, worker or admin); a vendor token belongs to a tenant
// that exists (the machine's own operator, with create_tenant, may have it created); worker
// and admin tokens may name a tenant or none; the description is at most 256 bytes of UTF-8.
// The secret is 256 random bits, shown once; only its sha256 is stored (auth.h).
#ifndef PTXBENCH_SERVER_API_TOKENS_H_
#define PTXBENCH_SERVER_API_TOKENS_H_

#include <string>

#include "absl/status/statusor.h"
#include "server/store/store.h"

namespace ptxbench::api {

struct MintTokenRequest {
  std::string tenant;  // Required for vendor tokens.
  v1::Role role = v1::ROLE_UNSPECIFIED;
  std::string description;
  std::string actor;  // Who asks, for the audit log ("admin:<token_id>"); empty = "admin".
  // Create the tenant when it does not exist (default limits). Only the operator's command
  // line sets this; the admin API makes tenants with CreateTenant, so that a typo in a tenant
  // name is an error rather than a new tenant.
  bool create_tenant = false;
};

struct MintedToken {
  std::string token_id;
  std::string secret;  // "ptxb_<id>_<secret>": the bearer token, shown once.
  std::string tenant;
  v1::Role role = v1::ROLE_UNSPECIFIED;
};

// INVALID_ARGUMENT naming the field for a request that breaks the rules above, NOT_FOUND for
// a tenant that does not exist (without create_tenant); store errors as they come.
absl::StatusOr<MintedToken> MintToken(store::Store& store, const MintTokenRequest& request);

}  // namespace ptxbench::api

#endif  // PTXBENCH_SERVER_API_TOKENS_H_
