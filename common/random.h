// Random bytes from the kernel's generator, as lower-case hex: idempotency keys, the embedded
// cluster's password. getrandom(2) rather than reading /dev/urandom: no file to open (a chroot
// or container without /dev has none) and no std::ifstream, whose filebuf throws on a read
// error (common/files.h).
#ifndef PTXBENCH_COMMON_RANDOM_H_
#define PTXBENCH_COMMON_RANDOM_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace ptxbench {

// 2 * `bytes` characters of [0-9a-f] (safe inside a SQL literal or a URL). kInternal naming
// the reason when the kernel cannot give them (getrandom missing: Linux before 3.17).
absl::StatusOr<std::string> RandomHex(size_t bytes);

}  // namespace ptxbench

#endif  // PTXBENCH_COMMON_RANDOM_H_
