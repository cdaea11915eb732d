// A fixed pool of threads for handlers of gRPC callback-API methods that block (every store
// call does): gRPC's callback threads must not be held by a blocking call, so the handler
// queues its work here and finishes the reactor from the pool.
#ifndef PTXBENCH_SERVER_API_EXECUTOR_H_
#define PTXBENCH_SERVER_API_EXECUTOR_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace ptxbench::api {

class Executor {
 public:
  explicit Executor(int threads) {
    for (int i = 0; i < threads; ++i) {
      threads_.emplace_back([this] { Loop(); });
    }
  }
  // Runs what is queued, then joins.
  ~Executor() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    ready_.notify_all();
    for (auto& thread : threads_) thread.join();
  }
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  void Run(std::function<void()> work) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(work));
    }
    ready_.notify_one();
  }

 private:
  void Loop() {
    while (true) {
      std::function<void()> work;
      {
        std::unique_lock<std::mutex> lock(mu_);
        ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        work = std::move(queue_.front());
        queue_.pop_front();
      }
      work();
    }
  }

  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace ptxbench::api

#endif  // PTXBENCH_SERVER_API_EXECUTOR_H_
