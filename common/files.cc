#include "common/files.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ptxbench {
namespace {

std::string CannotRead(std::string_view what, const std::string& path, std::string_view why) {
  return absl::StrCat(std::string(what), ": cannot read ", path, ": ", std::string(why));
}

absl::Status ErrnoStatus(int error, const std::string& path, std::string_view what) {
  const std::string message = CannotRead(what, path, strerror(error));
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

std::string_view KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "is a directory";
  if (S_ISFIFO(mode)) return "is a FIFO, not a regular file";
  if (S_ISSOCK(mode)) return "is a socket, not a regular file";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "is a device, not a regular file";
  return "is not a regular file";
}

class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  ~FdCloser() { close(fd_); }

 private:
  int fd_;
};

// `expected_size`: what fstat said for a regular file, reserved up front so that reading a
// large tensor or cubin does not copy it again at every doubling of the string.
absl::StatusOr<std::string> ReadToEnd(int fd, const std::string& path, std::string_view what,
                                      const ReadLimits& limits, size_t expected_size) {
  std::string bytes;
  bytes.reserve(std::min(expected_size, limits.max_bytes));
  char buffer[1 << 16];
  while (true) {
    const ssize_t got = read(fd, buffer, sizeof(buffer));
    if (got < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, path, what);
    }
    if (got == 0) break;
    if (bytes.size() + static_cast<size_t>(got) > limits.max_bytes) {
      if (limits.truncate_at_limit) {
        bytes.append(buffer, limits.max_bytes - bytes.size());
        break;
      }
      return absl::FailedPreconditionError(CannotRead(
          what, path, absl::StrCat("larger than the limit of ", limits.max_bytes, " bytes")));
    }
    bytes.append(buffer, static_cast<size_t>(got));
  }
  return bytes;
}

}  // namespace

absl::StatusOr<std::string> ReadFdToString(int fd, const std::string& path, std::string_view what,
                                           const ReadLimits& limits) {
  return ReadToEnd(fd, path, what, limits, /*expected_size=*/0);
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path, std::string_view what,
                                             const ReadLimits& limits) {
  if (path.empty())
    return absl::InvalidArgumentError(absl::StrCat(std::string(what), ": no file named"));
  // O_NONBLOCK: opening a FIFO without a writer would otherwise block here, before the type
  // check below can refuse it. A pipe the caller allows is opened blocking, so that the open
  // waits for its writer as `cat` would (opened non-blocking, it reads as empty until then).
  struct stat before {};
  const bool wait_for_writer =
      limits.allow_pipes && stat(path.c_str(), &before) == 0 && S_ISFIFO(before.st_mode);
  const int fd =
      open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | (wait_for_writer ? 0 : O_NONBLOCK));
  if (fd < 0) return ErrnoStatus(errno, path, what);
  const FdCloser closer(fd);
  struct stat st {};
  if (fstat(fd, &st) != 0) return ErrnoStatus(errno, path, what);
  const bool pipe_allowed = limits.allow_pipes && S_ISFIFO(st.st_mode);
  if (!S_ISREG(st.st_mode) && !pipe_allowed) {
    return absl::InvalidArgumentError(CannotRead(what, path, KindOf(st.st_mode)));
  }
  // A regular file over the limit is refused before reading it (a /proc file reports size 0
  // and is bounded by the read loop instead).
  if (S_ISREG(st.st_mode) && !limits.truncate_at_limit &&
      static_cast<size_t>(st.st_size) > limits.max_bytes) {
    return absl::FailedPreconditionError(CannotRead(
        what, path,
        absl::StrCat(st.st_size, " bytes, larger than the limit of ", limits.max_bytes, " bytes")));
  }
  return ReadToEnd(fd, path, what, limits, static_cast<size_t>(st.st_size));
}

std::string ReadFileOrEmpty(const std::string& path, size_t max_bytes) {
  absl::StatusOr<std::string> bytes =
      ReadFileToString(path, "file", {.max_bytes = max_bytes, .truncate_at_limit = true});
  return bytes.ok() ? *std::move(bytes) : std::string();
}

}  // namespace ptxbench
