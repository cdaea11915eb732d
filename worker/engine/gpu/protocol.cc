#include "worker/engine/gpu/protocol.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/files.h"

namespace ptxbench::gpu {

absl::Status WriteJsonLine(int fd, const nlohmann::json& message) {
  std::string line = message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  line.push_back('\n');
  size_t done = 0;
  while (done < line.size()) {
    ssize_t n = write(fd, line.data() + done, line.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::UnavailableError(absl::StrCat("write to fd ", fd, ": ", std::strerror(errno)));
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> LineReader::ReadLine(int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    size_t newline = buffer_.find('\n');
    if (newline != std::string::npos) {
      std::string line = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      return std::optional<std::string>(std::move(line));
    }
    if (eof_) {
      if (buffer_.empty()) return std::optional<std::string>();
      std::string rest = std::move(buffer_);
      buffer_.clear();
      return std::optional<std::string>(std::move(rest));
    }
    if (buffer_.size() > (64u << 20)) return absl::ResourceExhaustedError("protocol line too long");
    int wait = -1;
    if (timeout_ms >= 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - std::chrono::steady_clock::now())
                      .count();
      if (left <= 0) return absl::DeadlineExceededError("no protocol line before the deadline");
      wait = static_cast<int>(left);
    }
    pollfd p{fd_, POLLIN, 0};
    int ready = poll(&p, 1, wait);
    if (ready < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("poll: ", std::strerror(errno)));
    }
    if (ready == 0) continue;
    char chunk[1 << 16];
    ssize_t n = read(fd_, chunk, sizeof chunk);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return absl::InternalError(absl::StrCat("read: ", std::strerror(errno)));
    }
    if (n == 0) {
      eof_ = true;
      continue;
    }
    buffer_.append(chunk, static_cast<size_t>(n));
  }
}

std::string U64(uint64_t value) { return std::to_string(value); }

absl::StatusOr<uint64_t> ParseU64(const nlohmann::json& value) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer() && value.get<int64_t>() >= 0) {
    return static_cast<uint64_t>(value.get<int64_t>());
  }
  if (value.is_string()) {
    const std::string& s = value.get_ref<const std::string&>();
    if (s.empty() || s.size() > 20 || s.find_first_not_of("0123456789") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("not a u64: '", s, "'"));
    }
    errno = 0;
    unsigned long long v = std::strtoull(s.c_str(), nullptr, 10);
    if (errno == ERANGE) return absl::InvalidArgumentError(absl::StrCat("u64 overflow: ", s));
    return static_cast<uint64_t>(v);
  }
  return absl::InvalidArgumentError("expected a u64 (decimal string or number)");
}

absl::StatusOr<std::string> ReadFileBytes(const std::string& path) {
  absl::StatusOr<std::string> bytes =
      ReadFileToString(path, "exchanged file", {.max_bytes = kMaxExchangedFileBytes});
  if (bytes.ok() || absl::IsNotFound(bytes.status())) return bytes;
  // The evaluator reads a kFailedPrecondition as a kernel fault and a kInvalidArgument as an
  // invalid plan (FailFromStatus, worker/evaluator/support.cc). These files are written by
  // the supervisor or by our own processes, so failing to read one (too large, not a regular
  // file, unreadable) is infrastructure, whatever code the reader chose: kInternal, as before
  // the shared reader.
  return absl::InternalError(bytes.status().message());
}

absl::Status WriteFileBytes(const std::string& path, const std::string& bytes) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("create ", path, ": ", std::strerror(errno)));
  }
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      close(fd);
      return absl::InternalError(absl::StrCat("write ", path, ": ", std::strerror(errno)));
    }
    done += static_cast<size_t>(n);
  }
  if (close(fd) != 0) return absl::InternalError(absl::StrCat("close ", path));
  return absl::OkStatus();
}

}  // namespace ptxbench::gpu
