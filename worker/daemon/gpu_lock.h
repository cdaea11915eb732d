// One GPU, one evaluating daemon: an exclusive advisory lock per GPU, held for the life of a
// GPU worker. Two ptxbench-worker daemons pinned to the same GPU would time, profile and check
// kernels inside each other's regions (docs/measurement.md, "Exclusivity of the measuring
// phases"); a worker runs one job at a time, and this makes "one worker per GPU" a rule the
// second daemon cannot break by mistake, instead of an operational convention.
//
// The lock is flock(2) on <dir>/ptxbench-gpu-<key>.lock, where the key is the GPU's UUID (the
// same GPU under another CUDA_VISIBLE_DEVICES ordering is the same key); the holder's pid is
// written into the file for the refusal message. The kernel drops a flock with its process, so
// a crashed or killed worker never leaves a stale lock. Advisory: it binds only PTXBench's own
// daemons (anything else on the GPU is the operator's to keep off, docs/operations.md).
#ifndef PTXBENCH_WORKER_DAEMON_GPU_LOCK_H_
#define PTXBENCH_WORKER_DAEMON_GPU_LOCK_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace ptxbench::worker {

class GpuLock {
 public:
  // Takes the lock of `gpu_key` in `dir` without waiting. FAILED_PRECONDITION naming the GPU,
  // the lock file and the holder's pid when another process holds it; INVALID_ARGUMENT for an
  // empty key or one that is not a plain file-name word; the errno's meaning when the
  // directory cannot hold the file.
  static absl::StatusOr<std::unique_ptr<GpuLock>> Acquire(const std::string& dir,
                                                          const std::string& gpu_key);
  ~GpuLock();  // Releases the lock.
  GpuLock(const GpuLock&) = delete;
  GpuLock& operator=(const GpuLock&) = delete;

  const std::string& path() const { return path_; }

 private:
  GpuLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_;
  std::string path_;
};

}  // namespace ptxbench::worker

#endif  // PTXBENCH_WORKER_DAEMON_GPU_LOCK_H_
