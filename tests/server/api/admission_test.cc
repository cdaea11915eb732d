// Admission: lanes run round-robin within their limits, full lanes refuse at once, and
// RunOnCaller counts like queued work. Real threads, no sleeps as assertions: each step waits
// for the state it needs.
#include "server/api/admission.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ptxbench::api {
namespace {

// A gate that work waits on until the test opens it.
class Gate {
 public:
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    ++waiting_;
    cv_.notify_all();
    cv_.wait(lock, [this] { return open_; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  bool WaitForWaiting(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return waiting_ >= n; });
  }
  int waiting() {
    std::lock_guard<std::mutex> lock(mu_);
    return waiting_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  int waiting_ = 0;
};

TEST_CASE("a lane runs at most its limit, queues a bounded number, refuses the rest",
          "[admission]") {
  Admission::Options options;
  options.threads = 4;
  options.max_running_per_lane = 2;
  options.max_queued_per_lane = 3;
  Gate gate;
  Admission admission(options);
  for (int i = 0; i < 2; ++i) REQUIRE(admission.Run("tenant:a", [&] { gate.Wait(); }));
  REQUIRE(gate.WaitForWaiting(2));
  for (int i = 0; i < 3; ++i) REQUIRE(admission.Run("tenant:a", [&] { gate.Wait(); }));
  CHECK_FALSE(admission.Run("tenant:a", [] {}));  // Queue full: refused, not run.
  CHECK(admission.stats().refused == 1);
  // Another lane still gets the free threads while a's are busy and its queue is full.
  Gate other;
  REQUIRE(admission.Run("tenant:b", [&] { other.Wait(); }));
  REQUIRE(other.WaitForWaiting(1));
  CHECK(gate.waiting() == 2);  // a never ran more than 2 at once.
  other.Open();
  gate.Open();
}

TEST_CASE("the unverified lane has its own small limits", "[admission]") {
  Admission::Options options;
  options.threads = 4;
  options.max_running_unverified = 1;
  options.max_queued_unverified = 1;
  Gate gate;
  Admission admission(options);
  REQUIRE(admission.Run("", [&] { gate.Wait(); }));
  REQUIRE(gate.WaitForWaiting(1));
  REQUIRE(admission.Run("", [&] { gate.Wait(); }));
  CHECK_FALSE(admission.Run("", [] {}));
  CHECK(gate.waiting() == 1);
  gate.Open();
}

TEST_CASE("lanes are served round-robin", "[admission]") {
  Admission::Options options;
  options.threads = 1;
  options.max_queued_per_lane = 100;
  std::mutex mu;
  std::vector<std::string> order;
  Gate start;
  {
    Admission admission(options);
    REQUIRE(admission.Run("tenant:hold", [&] { start.Wait(); }));
    REQUIRE(start.WaitForWaiting(1));
    // A noisy tenant queues many, a quiet one a few: the quiet one is not served last.
    for (int i = 0; i < 10; ++i) {
      REQUIRE(admission.Run("tenant:noisy", [&] {
        std::lock_guard<std::mutex> lock(mu);
        order.push_back("noisy");
      }));
    }
    for (int i = 0; i < 2; ++i) {
      REQUIRE(admission.Run("tenant:quiet", [&] {
        std::lock_guard<std::mutex> lock(mu);
        order.push_back("quiet");
      }));
    }
    start.Open();
  }  // Runs what is queued, then joins.
  REQUIRE(order.size() == 12);
  int last_quiet = 0;
  for (int i = 0; i < 12; ++i) {
    if (order[i] == "quiet") last_quiet = i;
  }
  CHECK(last_quiet <= 4);  // Alternating: quiet's two calls are among the first five.
}

TEST_CASE("RunOnCaller runs on the caller once admitted and counts against the lane",
          "[admission]") {
  Admission::Options options;
  options.threads = 2;
  options.max_running_per_lane = 1;
  options.max_queued_per_lane = 1;
  Admission admission(options);
  Gate gate;
  std::thread holder([&] { CHECK(admission.RunOnCaller("tenant:a", [&] { gate.Wait(); })); });
  REQUIRE(gate.WaitForWaiting(1));
  REQUIRE(admission.Run("tenant:a", [] {}));              // Queued behind the caller's work.
  CHECK_FALSE(admission.RunOnCaller("tenant:a", [] {}));  // Queue full.
  bool ran = false;
  CHECK(admission.RunOnCaller("tenant:b", [&] { ran = true; }));
  CHECK(ran);
  gate.Open();
  holder.join();
}

}  // namespace
}  // namespace ptxbench::api
