// A broadcast "something changed" signal with a generation counter, so that waiters never miss
// a change that happened between their last look and their wait: read generation(), look at
// the store, then WaitForChange(seen, ...) returns at once if anything happened meanwhile.
//
// The server keeps one for stage events (it wakes WatchSubmission streams; Lease streams have
// lease_dispatcher.h). It is bumped in-process by the RPC that made the change and by a
// listener thread that turns the store's PostgreSQL NOTIFYs (changes made by another server
// replica) into Notify() calls. Waiters still poll the store on a timeout: the signal only
// shortens waits, the store stays the source of truth.
//
// Cost: a NOTIFY names no submission, so every event wakes every watcher for one indexed
// ListStageEvents query; at hundreds of watchers and a few events per second per running job
// that is a few thousand small queries a second at most.
#ifndef PTXBENCH_SERVER_API_NOTIFIER_H_
#define PTXBENCH_SERVER_API_NOTIFIER_H_

#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "absl/time/time.h"

namespace ptxbench::api {

class Notifier {
 public:
  uint64_t generation() const {
    std::lock_guard<std::mutex> lock(mu_);
    return generation_;
  }

  void Notify() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++generation_;
    }
    changed_.notify_all();
  }

  // Returns true when the generation moved past `seen` (or shutdown began) within `timeout`.
  bool WaitForChange(uint64_t seen, absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                             [&] { return generation_ != seen || shutdown_; });
  }

  // Wakes every waiter for good; shutting_down() then stays true.
  void Shutdown() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      shutdown_ = true;
      ++generation_;
    }
    changed_.notify_all();
  }

  bool shutting_down() const {
    std::lock_guard<std::mutex> lock(mu_);
    return shutdown_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable changed_;
  uint64_t generation_ = 0;
  bool shutdown_ = false;
};

}  // namespace ptxbench::api

#endif  // PTXBENCH_SERVER_API_NOTIFIER_H_
