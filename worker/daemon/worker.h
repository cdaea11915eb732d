// ptxbench-worker's daemon: registers with the server, holds a Lease stream open, runs each
// leased job through a JobExecutor, streams stage results, heartbeats inside the lease, and
// drains on request. Lifecycle follows Triton's shape: Create, Start, GracefulStop, Wait.
#ifndef PTXBENCH_WORKER_DAEMON_WORKER_H_
#define PTXBENCH_WORKER_DAEMON_WORKER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/daemon/gpu_lock.h"
#include "worker/daemon/job_executor.h"

namespace ptxbench::worker {

struct WorkerOptions {
  std::string server = "127.0.0.1:50051";
  std::string token;  // Worker-role bearer token; empty on a tokenless server.
  bool tls = false;
  std::string tls_ca_file;
  std::string hostname;  // Default: gethostname().
  int gpu = 0;           // CUDA device ordinal this daemon is pinned to.
  bool compile_only = false;
  // Jobs run at once on a compile-only worker. A GPU worker refuses any value but 1: its jobs'
  // GPU stages must have the GPU to themselves, and gpu_pipeline is the only way to overlap them.
  int slots = 1;
  // Jobs a GPU worker holds at once: 1 (one job at a time) or 2 (the next job compiles and
  // starts its processes while the current one runs its GPU stages; the executor's GPU gate,
  // worker/engine/gpu_gate.h, keeps the GPU stages one job at a time). GPU workers only.
  int gpu_pipeline = 1;
  // Where the per-GPU lock lives (gpu_lock.h); empty: /run/lock when it is a writable
  // directory (shared by systemd units with PrivateTmp), else /tmp.
  std::string gpu_lock_dir;
  std::string metrics_listen;  // Empty: no metrics endpoint.
  // Longest wait between two attempts to reach the server (Register, the Lease stream, a
  // failed heartbeat), before a jitter of 50-100 %. 1 s: a restarted server is leased from
  // again within about 2 s (gRPC's own reconnection is capped to the same), short enough
  // that no lease of a live worker runs out over a restart, and at most one attempt a
  // second per worker against a server that stays down.
  absl::Duration reconnect_backoff_max = absl::Seconds(1);
};

class Worker {
 public:
  static absl::StatusOr<std::unique_ptr<Worker>> Create(const WorkerOptions& options,
                                                        std::unique_ptr<JobExecutor> executor);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Registers and starts the lease loop on background threads.
  absl::Status Start();
  // Takes no new job; the jobs in hand finish and are reported. Returns at once.
  void GracefulStop();
  // Stops now: running sandboxes are killed and their leases left to expire.
  void Abort();
  // Blocks until the lease loop has ended (after GracefulStop or Abort, or unhealthy).
  void Wait();

  const std::string& worker_id() const;
  int metrics_port() const;  // 0 when no metrics endpoint.
  int64_t jobs_finished() const;
  bool healthy() const;

 private:
  class Impl;
  explicit Worker(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ptxbench::worker

#endif  // PTXBENCH_WORKER_DAEMON_WORKER_H_
