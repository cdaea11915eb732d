#include "server/api/tokens.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "proto/wire_names.h"
#include "server/api/auth.h"
#include "server/api/validate.h"

namespace ptxbench::api {

absl::StatusOr<MintedToken> MintToken(store::Store& store, const MintTokenRequest& request) {
  if (wire::RoleName(request.role).empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("role: required (vendor, worker or admin), got ", request.role));
  }
  if (request.tenant.empty()) {
    if (request.role == v1::ROLE_VENDOR) {
      return absl::InvalidArgumentError("tenant: required for a vendor token");
    }
  } else {
    RETURN_IF_ERROR(ValidateTenantName(request.tenant, "tenant"));
  }
  RETURN_IF_ERROR(ValidateOptionalText(request.description, "description", kMaxShortTextBytes));
  if (!request.tenant.empty()) {
    auto tenant = store.GetTenant(request.tenant);
    if (absl::IsNotFound(tenant.status()) && request.create_tenant) {
      store::TenantRow row;
      row.name = request.tenant;
      absl::Status created = store.CreateTenant(row, request.actor);
      // Created meanwhile by someone else: it exists, which is what was asked.
      if (!created.ok() && !absl::IsAlreadyExists(created)) return created;
    } else if (absl::IsNotFound(tenant.status())) {
      return absl::NotFoundError(
          absl::StrCat("tenant: '", request.tenant, "' does not exist; CreateTenant first"));
    } else if (!tenant.ok()) {
      return tenant.status();
    }
  }
  const GeneratedToken token = GenerateToken();
  store::TokenRow row;
  row.token_id = token.token_id;
  row.tenant = request.tenant;
  row.role = request.role;
  row.description = request.description;
  RETURN_IF_ERROR(store.CreateToken(row, token.sha256, request.actor));
  MintedToken minted;
  minted.token_id = token.token_id;
  minted.secret = token.token;
  minted.tenant = request.tenant;
  minted.role = request.role;
  return minted;
}

}  // namespace ptxbench::api
