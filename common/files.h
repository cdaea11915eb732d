// Reading a whole file: the one helper every component uses (issue 15, item 3).
//
// Why not std::ifstream + istreambuf_iterator: libstdc++'s filebuf throws
// "basic_filebuf::underflow error reading the file" when read(2) fails, whatever the stream's
// exception mask, and reading /proc/<pid>/... of a process that exits meanwhile fails with
// ESRCH. A test died of exactly that in CI (compile_jail_test, 2026-12-02). This helper uses
// read(2), never throws, bounds what it reads, and names the file and the reason in its error.
//
// Non-regular files: the path is opened with O_NONBLOCK and refused unless it is a regular
// file (/proc and /sys entries are regular files of size 0 and read fine). A FIFO would
// otherwise block the reader until some writer appears (forever, for a FIFO planted where a
// task or CA file is expected), and a device such as /dev/zero would be read up to the limit.
// The one caller that means to read a pipe (the CLI, for `--source <(generate)`) says so with
// `allow_pipes`.
#ifndef PTXBENCH_COMMON_FILES_H_
#define PTXBENCH_COMMON_FILES_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace ptxbench {

struct ReadLimits {
  // A file larger than this is an error (kFailedPrecondition naming the size), not a silent
  // prefix: a caller that wants a prefix reads /proc-style files with `truncate_at_limit`.
  size_t max_bytes = size_t{64} << 20;
  // Return the first max_bytes instead of failing (for /proc files and logs, whose size is
  // not known in advance).
  bool truncate_at_limit = false;
  // Read a FIFO or pipe (blocking until its writer closes it) instead of refusing it. For a
  // user's own command line only: never for a path a submission or task could choose.
  bool allow_pipes = false;
};

// The bytes of `path`. `what` names the file for the error ("--tls-ca", "task.json"):
// "--tls-ca: cannot read /etc/x.pem: No such file or directory". Codes: a missing file (or a
// /proc entry of a process that is gone) kNotFound, no permission kPermissionDenied, a folder,
// FIFO, socket or device kInvalidArgument, a file over the limit kFailedPrecondition, any
// other I/O failure kUnavailable.
absl::StatusOr<std::string> ReadFileToString(const std::string& path, std::string_view what,
                                             const ReadLimits& limits = {});

// The bytes readable from an open descriptor, up to its end, under the same limits and error
// texts (`path` only names it in errors). For callers that opened the file themselves under
// their own checks (TrustedDir's openat with O_NOFOLLOW, fstat and owner checks) or read
// standard input. Does not close `fd` and does not check its type.
absl::StatusOr<std::string> ReadFdToString(int fd, const std::string& path, std::string_view what,
                                           const ReadLimits& limits = {});

// For callers that only care whether there was something to read: the bytes, or "" when the
// file cannot be read for any reason (a /proc entry of a process that is gone).
std::string ReadFileOrEmpty(const std::string& path, size_t max_bytes = size_t{1} << 20);

}  // namespace ptxbench

#endif  // PTXBENCH_COMMON_FILES_H_
