#include "common/status.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace ptxbench {

absl::Status Annotate(const absl::Status& status, std::string_view context) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat(std::string(context), ": ", std::string(status.message())));
}

}  // namespace ptxbench
