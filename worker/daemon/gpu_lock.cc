#include "worker/daemon/gpu_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ptxbench::worker {
namespace {

// A GPU UUID is "GPU-" and hex groups; anything else could name a path outside `dir`.
bool PlainKey(const std::string& key) {
  if (key.empty() || key.size() > 128) return false;
  for (char c : key) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return false;
  }
  return true;
}

std::string HolderPid(int fd) {
  char buffer[32] = {};
  const ssize_t n = pread(fd, buffer, sizeof(buffer) - 1, 0);
  if (n <= 0) return "";
  std::string text(buffer, static_cast<size_t>(n));
  int64_t pid = 0;
  return absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &pid) ? absl::StrCat(pid) : "";
}

}  // namespace

absl::StatusOr<std::unique_ptr<GpuLock>> GpuLock::Acquire(const std::string& dir,
                                                          const std::string& gpu_key) {
  if (!PlainKey(gpu_key)) {
    return absl::InvalidArgumentError(
        absl::StrCat("GPU lock: '", gpu_key, "' is not a GPU key (letters, digits, '-', '_')"));
  }
  const std::string path = absl::StrCat(dir, "/ptxbench-gpu-", gpu_key, ".lock");
  // 0666 and no O_EXCL: daemons of different users on one host share the GPU's lock file.
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "GPU lock: cannot open ", path, ": ", std::strerror(errno),
        " (set --gpu-lock-dir to a directory every ptxbench-worker of this host can write)"));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    const std::string holder = HolderPid(fd);
    close(fd);
    if (error == EWOULDBLOCK) {
      return absl::FailedPreconditionError(absl::StrCat(
          "GPU ", gpu_key, " is already evaluated by another ptxbench-worker",
          holder.empty() ? "" : absl::StrCat(" (pid ", holder, ")"), "; its lock is ", path,
          ". One GPU worker per GPU: two would measure inside each other's timed regions"));
    }
    return absl::FailedPreconditionError(
        absl::StrCat("GPU lock: flock ", path, ": ", std::strerror(error)));
  }
  const std::string pid = absl::StrCat(getpid(), "\n");
  const bool pid_written = ftruncate(fd, 0) == 0 && pwrite(fd, pid.data(), pid.size(), 0) ==
                                                        static_cast<ssize_t>(pid.size());
  (void)pid_written;  // Without the pid the lock still holds; only a refusal's message is poorer.
  return std::unique_ptr<GpuLock>(new GpuLock(fd, path));
}

GpuLock::~GpuLock() {
  // The lock file stays (another daemon may already have it open); the lock goes with the fd.
  close(fd_);
}

}  // namespace ptxbench::worker
