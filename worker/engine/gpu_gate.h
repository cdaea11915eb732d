// The exclusive, first-come-first-served gate of one GPU, shared by the evaluations a GPU worker
// pipelines (ptxbench-worker --gpu-pipeline 2; docs/measurement.md, "Exclusivity of the
// measuring phases"). An evaluation runs its CPU-side work (compile; its processes' CUDA and
// library start-up) without the gate and holds it from its first correctness command until its
// processes have ended or gone back to the reference pool, so no kernel, comparison, profiled
// run or timing loop of one job runs inside another job's.
//
// FIFO ("ticket" order), not a plain mutex: std::mutex promises no order, so a job that asked
// first could be passed over again and again by later ones (each re-leased job would then wait
// for an unbounded number of others, and its processes' watchdogs run meanwhile). With tickets a
// job waits at most for the jobs that asked before it.
#ifndef PTXBENCH_WORKER_ENGINE_GPU_GATE_H_
#define PTXBENCH_WORKER_ENGINE_GPU_GATE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <set>

#include "absl/status/statusor.h"

namespace ptxbench::engine {

class GpuGate {
 public:
  // The GPU held; released when destroyed (movable, so it can live in an optional).
  class Hold {
   public:
    Hold() = default;
    Hold(Hold&& other) noexcept;
    Hold& operator=(Hold&& other) noexcept;
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    ~Hold() { Release(); }

    bool held() const { return gate_ != nullptr; }
    double wait_seconds() const { return wait_seconds_; }  // Asked -> held.
    void Release();

   private:
    friend class GpuGate;
    Hold(GpuGate* gate, double wait_seconds) : gate_(gate), wait_seconds_(wait_seconds) {}
    GpuGate* gate_ = nullptr;
    double wait_seconds_ = 0;
  };

  GpuGate() = default;
  GpuGate(const GpuGate&) = delete;
  GpuGate& operator=(const GpuGate&) = delete;

  // Waits for this caller's turn. CANCELLED when `cancel` (may be null) becomes true while
  // waiting: the turn is given up and the jobs behind it move up. The flag is polled every
  // kCancelPollMs (its owners set it without notifying anyone).
  absl::StatusOr<Hold> Acquire(const std::atomic<bool>* cancel = nullptr);

  // Callers waiting now (for tests and metrics).
  int waiting() const;

  static constexpr int kCancelPollMs = 10;

 private:
  void ReleaseTurn();
  // Skips the tickets given up by cancelled callers. mu_ held.
  void SkipAbandoned();

  mutable std::mutex mu_;
  std::condition_variable turn_;
  uint64_t next_ticket_ = 0;  // The next caller's ticket.
  uint64_t serving_ = 0;      // The ticket that may hold the GPU.
  bool held_ = false;         // The serving ticket's caller holds it.
  std::set<uint64_t> abandoned_;
  int waiting_ = 0;
};

}  // namespace ptxbench::engine

#endif  // PTXBENCH_WORKER_ENGINE_GPU_GATE_H_
