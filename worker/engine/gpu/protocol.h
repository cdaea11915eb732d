// The line protocol between the supervisor (worker/engine/evaluate.cc) and the evaluator
// process (worker/evaluator): one JSON object per line. Commands go to the evaluator's stdin;
// events come back on file descriptor 3, never on stdout or stderr, where device printf and
// library logs land: a kernel cannot forge an event by printing one.
#ifndef PTXBENCH_WORKER_ENGINE_GPU_PROTOCOL_H_
#define PTXBENCH_WORKER_ENGINE_GPU_PROTOCOL_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace ptxbench::gpu {

inline constexpr int kEventFd = 3;

// Writes `message` and a newline to `fd` (all of it, retrying on EINTR/short writes).
absl::Status WriteJsonLine(int fd, const nlohmann::json& message);

// Buffered line reader over a file descriptor.
class LineReader {
 public:
  explicit LineReader(int fd) : fd_(fd) {}
  // The next line without its newline; nullopt at end of file; DeadlineExceeded after
  // `timeout_ms` (< 0: wait forever) without a full line. Lines over 64 MiB are an error.
  absl::StatusOr<std::optional<std::string>> ReadLine(int timeout_ms);
  int fd() const { return fd_; }

 private:
  int fd_;
  std::string buffer_;
  bool eof_ = false;
};

// 64-bit values travel as decimal strings: JSON numbers lose precision past 2^53.
std::string U64(uint64_t value);
absl::StatusOr<uint64_t> ParseU64(const nlohmann::json& value);

// Whole files the supervisor and evaluator exchange (outputs, references, cubins, PTX,
// requests), through common/files' reader. A bound against a runaway file, not a policy:
// each caller checks the size it expects (a tensor's bytes against the task). 64 GiB is
// above any tensor one H200 (141 GiB) holds with its reference and candidate copies.
inline constexpr size_t kMaxExchangedFileBytes = size_t{64} << 30;
// A file that is missing is kNotFound; every other failure is kInternal (infrastructure,
// never a kernel fault or an invalid plan; see protocol.cc).
absl::StatusOr<std::string> ReadFileBytes(const std::string& path);
absl::Status WriteFileBytes(const std::string& path, const std::string& bytes);

}  // namespace ptxbench::gpu

#endif  // PTXBENCH_WORKER_ENGINE_GPU_PROTOCOL_H_
