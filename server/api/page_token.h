// ListSubmissions page tokens as callers see them: opaque and bound to the tenant they were
// issued to.
//
// The store's own token is the position in the global submission sequence, so a vendor
// paging its own list learned how many submissions every tenant had made meanwhile (issue 12,
// "Low"). The API seals it: AES-256-GCM under a key derived (HMAC-SHA256 with a label of its
// own) from the deployment's database URL, which every replica of one deployment shares and
// callers never see, with the tenant's name as associated data. A token is then unreadable,
// unforgeable, and refused for any other tenant; after the database credentials change, old
// tokens are refused and the list starts again from the top.
#ifndef PTXBENCH_SERVER_API_PAGE_TOKEN_H_
#define PTXBENCH_SERVER_API_PAGE_TOKEN_H_

#include <array>
#include <string>

#include "absl/status/statusor.h"

namespace ptxbench::api {

class PageTokens {
 public:
  // `secret`: the deployment's shared secret (the database URL).
  explicit PageTokens(const std::string& secret);

  // base64url("1" + nonce + ciphertext + tag); "" for "".
  std::string Seal(const std::string& tenant, const std::string& store_token) const;
  // The store's token; "" for "". INVALID_ARGUMENT "page_token: ..." for anything this
  // deployment did not issue to `tenant`.
  absl::StatusOr<std::string> Open(const std::string& tenant, const std::string& token) const;

 private:
  std::array<unsigned char, 32> key_{};
};

}  // namespace ptxbench::api

#endif  // PTXBENCH_SERVER_API_PAGE_TOKEN_H_
