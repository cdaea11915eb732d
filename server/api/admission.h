// Admission of the API's unary calls: one pool of threads for every blocking handler, shared
// fairly between callers, with bounded queues.
//
// Why: before, each Submit waited in one FIFO queue in front of 8 threads, with no bound, so
// unauthenticated 8 MiB bodies piled up in memory (server RSS 28 -> 474 MB) and another
// tenant's Submit waited behind them (3 ms -> 330-810 ms; issue 12, "Medium"). Now every
// unary call is classified on its headers before any work (auth.h:
// Authenticator::Lane): a call without a well-formed token is refused at once; one whose
// token this server has verified before runs in its tenant's lane; any other (a token never
// seen: possibly a guess) in the one "unverified" lane, which may use only a few threads and
// queue only a few calls. Threads take the lanes' calls round-robin, and a lane may use at
// most half the threads, so no tenant and no stranger can keep the others waiting; a full
// lane answers RESOURCE_EXHAUSTED at once instead of growing.
#ifndef PTXBENCH_SERVER_API_ADMISSION_H_
#define PTXBENCH_SERVER_API_ADMISSION_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ptxbench::api {

class Admission {
 public:
  struct Options {
    // Every unary call holds a store connection for a query or a transaction; more threads
    // than the store pool (16 by default) would only wait for connections.
    int threads = 16;
    int max_running_per_lane = 8;
    // A repair loop has one call in flight per trajectory; `ptxbench run --concurrency 64`
    // stays well inside this.
    int max_queued_per_lane = 256;
    // Calls whose token this server has not verified yet: each costs a store lookup.
    int max_running_unverified = 2;
    int max_queued_unverified = 32;
  };

  explicit Admission(const Options& options);
  // Runs what is queued, then joins.
  ~Admission();
  Admission(const Admission&) = delete;
  Admission& operator=(const Admission&) = delete;

  // Queues `work` in `lane` ("" = the unverified lane). False, and `work` dropped unrun, when
  // the lane's queue is full or the pool is stopping.
  bool Run(const std::string& lane, std::function<void()> work);

  // Runs `work` on the calling thread once `lane` admits it: a pool thread is held for it
  // meanwhile, so the lane's and the pool's limits count it like any queued work. False, and
  // `work` not run, when refused as Run would.
  bool RunOnCaller(const std::string& lane, const std::function<void()>& work);

  struct Stats {
    int64_t run = 0;
    int64_t refused = 0;
  };
  Stats stats() const;

 private:
  struct Lane {
    std::deque<std::function<void()>> queue;
    int running = 0;
  };

  void Loop();
  // The next lane after `cursor_` with work and a free running slot; lanes_.end() if none.
  std::map<std::string, Lane>::iterator NextReady();
  int RunningLimit(const std::string& lane) const;
  int QueueLimit(const std::string& lane) const;

  const Options options_;
  mutable std::mutex mu_;
  std::condition_variable ready_;
  std::map<std::string, Lane> lanes_;
  std::string cursor_;  // The lane served last; the next search starts after it.
  bool stopping_ = false;
  Stats stats_;
  std::vector<std::thread> threads_;
};

}  // namespace ptxbench::api

#endif  // PTXBENCH_SERVER_API_ADMISSION_H_
