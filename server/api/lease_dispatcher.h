// Wakes Lease streams one at a time instead of all at once.
//
// Measured without it (bench/scheduler_bench, steady state, 16 idle workers): every Submit
// woke all 16 Lease streams, each ran the store's lease query, one got the job and 15 found
// nothing: 16 lease queries per job, 8.8 ms of PostgreSQL CPU per job, 137 jobs/s on the
// 2-core machine. With it a new job wakes one idle stream of a pool that can run it; a stream
// that got a job passes the wake on to the next idle stream of its pool (more jobs may be
// queued), and a stream that found nothing ends the chain. A stream whose worker completes or
// fails a job is woken directly (its slot is free).
//
// Pools: GPU workers lease jobs of their own arch ("sm_90a"), compile-only workers compile
// jobs of any arch ("compile_only"); store.h's LeaseJob routing. Within a pool the stream idle
// the longest is woken first, so work spreads over the workers.
//
// Lost wake-ups: each pool has a generation counter that every wake moves. A stream reads it
// before asking the store for a job and, finding none, waits only if it has not moved since;
// streams still poll the store every poll_interval as the last line of defence.
#ifndef PTXBENCH_SERVER_API_LEASE_DISPATCHER_H_
#define PTXBENCH_SERVER_API_LEASE_DISPATCHER_H_

#include <condition_variable>
#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <string>

#include "absl/time/time.h"

namespace ptxbench::api {

class LeaseDispatcher {
 public:
  // One Lease stream. Created by the stream's handler, registered for its lifetime.
  struct Waiter {
    std::string worker_id;
    std::string pool;
    std::condition_variable cv;
    bool woken = false;
    bool idle = false;  // Waiting for a job (it has a free slot).
  };

  // The pool of a worker: its arch, or "compile_only".
  static std::string PoolOf(const std::string& arch, bool compile_only);

  void Add(Waiter* waiter);
  void Remove(Waiter* waiter);

  uint64_t Generation(const std::string& pool) const;

  // Blocks until woken, `timeout` passes or shutdown. An `idle` waiter (free slot) can be
  // picked by JobsAvailable/PassOn and returns at once when its pool's generation is no longer
  // `seen`. Returns true when woken (or the generation moved), false on timeout or shutdown.
  bool Wait(Waiter* waiter, bool idle, uint64_t seen, absl::Duration timeout);

  // New jobs for `arch` may be queued ("" = of any arch, e.g. after a reap or a NOTIFY from
  // another replica): wakes one idle waiter of each pool that could run one.
  void JobsAvailable(const std::string& arch);
  // A waiter of `pool` got a job; more may be queued: wake the next idle one.
  void PassOn(const std::string& pool);
  // A worker's slot was freed or its drain state changed: wake its streams.
  void WakeWorker(const std::string& worker_id);

  void Shutdown();
  bool shutting_down() const;

 private:
  void WakeOneIdleLocked(const std::string& pool);

  mutable std::mutex mu_;
  std::list<Waiter*> waiters_;  // Idle order: the longest idle first (moved to back on wake).
  std::map<std::string, uint64_t> generations_;
  bool shutdown_ = false;
};

}  // namespace ptxbench::api

#endif  // PTXBENCH_SERVER_API_LEASE_DISPATCHER_H_
