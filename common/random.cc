#include "common/random.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include <vector>

#include "absl/strings/str_cat.h"

namespace ptxbench {

absl::StatusOr<std::string> RandomHex(size_t bytes) {
  std::vector<unsigned char> random(bytes);
  size_t filled = 0;
  while (filled < bytes) {
    // Without GRND_RANDOM or GRND_NONBLOCK: blocks only until the pool is first initialised at
    // boot, and large requests may return fewer bytes (or EINTR), hence the loop.
    const ssize_t got = getrandom(random.data() + filled, bytes - filled, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("getrandom: ", strerror(errno)));
    }
    filled += static_cast<size_t>(got);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * bytes);
  for (unsigned char byte : random) {
    hex += kHex[byte >> 4];
    hex += kHex[byte & 15];
  }
  return hex;
}

}  // namespace ptxbench
