// Internal to server/store: rewriting libpq connection strings (implemented in database.cc).
#ifndef PTXBENCH_SERVER_STORE_CONNINFO_H_
#define PTXBENCH_SERVER_STORE_CONNINFO_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ptxbench::store::internal {

struct ConninfoParameter {
  std::string keyword;  // A libpq keyword: "dbname", "connect_timeout", ...
  std::string value;
  bool only_if_unset = false;  // Keep the caller's value when the URL already has one.
};

// Parses `url` (URI or keyword/value form), applies `parameters` and returns a keyword/value
// connection string. INVALID_ARGUMENT when libpq cannot parse `url` or does not know a keyword.
absl::StatusOr<std::string> RewriteConninfo(const std::string& url,
                                            const std::vector<ConninfoParameter>& parameters);

}  // namespace ptxbench::store::internal

#endif  // PTXBENCH_SERVER_STORE_CONNINFO_H_
