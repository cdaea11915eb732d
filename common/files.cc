#include "common/files.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ptxbench {
namespace {

absl::Status ErrnoStatus(int error, const std::string& path, std::string_view what) {
  const std::string message =
      absl::StrCat("reading ", std::string(what), " ", path, ": ", strerror(error));
  switch (error) {
    case ENOENT:
    case ENOTDIR:
    case ESRCH:  // a /proc entry whose process is gone
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    case EISDIR:
      return absl::InvalidArgumentError(message);
    default:
      return absl::UnavailableError(message);
  }
}

}  // namespace

absl::StatusOr<std::string> ReadFileToString(const std::string& path, std::string_view what,
                                             const ReadLimits& limits) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return ErrnoStatus(errno, path, what);
  std::string bytes;
  char buffer[1 << 16];
  while (true) {
    const ssize_t got = read(fd, buffer, sizeof(buffer));
    if (got < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      close(fd);
      return ErrnoStatus(error, path, what);
    }
    if (got == 0) break;
    if (bytes.size() + static_cast<size_t>(got) > limits.max_bytes) {
      if (limits.truncate_at_limit) {
        bytes.append(buffer, limits.max_bytes - bytes.size());
        break;
      }
      close(fd);
      return absl::FailedPreconditionError(absl::StrCat("reading ", std::string(what), " ", path,
                                                        ": larger than the limit of ",
                                                        limits.max_bytes, " bytes"));
    }
    bytes.append(buffer, static_cast<size_t>(got));
  }
  close(fd);
  return bytes;
}

std::string ReadFileOrEmpty(const std::string& path, size_t max_bytes) {
  absl::StatusOr<std::string> bytes =
      ReadFileToString(path, "file", {.max_bytes = max_bytes, .truncate_at_limit = true});
  return bytes.ok() ? *std::move(bytes) : std::string();
}

}  // namespace ptxbench
