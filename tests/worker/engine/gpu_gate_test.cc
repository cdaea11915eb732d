// The GPU gate alone (worker/engine/gpu_gate.h): one holder at a time, turns in the order they
// were asked for, a cancelled waiter gives up its turn promptly without blocking those behind.
#include "worker/engine/gpu_gate.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace ptxbench::engine {
namespace {

// Waits until `n` callers are queued on `gate` (bounded).
bool AwaitWaiting(const GpuGate& gate, int n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (gate.waiting() != n && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return gate.waiting() == n;
}

TEST_CASE("the GPU gate hands turns out in the order they were asked for, one at a time",
          "[gpu_gate]") {
  GpuGate gate;
  absl::StatusOr<GpuGate::Hold> first = gate.Acquire();
  REQUIRE(first.ok());
  CHECK(first->held());
  std::mutex mu;
  std::vector<int> order;
  std::atomic<int> inside{0};
  std::atomic<int> most_inside{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 5; ++i) {
    // Each waiter is queued before the next one starts: the ticket order is 0..4.
    threads.emplace_back([&, i] {
      absl::StatusOr<GpuGate::Hold> hold = gate.Acquire();
      REQUIRE(hold.ok());
      const int now = ++inside;
      int seen = most_inside;
      while (now > seen && !most_inside.compare_exchange_weak(seen, now)) {
      }
      {
        std::lock_guard<std::mutex> lock(mu);
        order.push_back(i);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      --inside;
    });
    REQUIRE(AwaitWaiting(gate, i + 1));
  }
  first->Release();
  CHECK_FALSE(first->held());
  for (std::thread& t : threads) t.join();
  CHECK(order == std::vector<int>{0, 1, 2, 3, 4});
  CHECK(most_inside == 1);
  CHECK(gate.waiting() == 0);
}

TEST_CASE(
    "a caller cancelled while waiting for the GPU gate returns promptly and gives up its "
    "turn",
    "[gpu_gate]") {
  GpuGate gate;
  absl::StatusOr<GpuGate::Hold> holder = gate.Acquire();
  REQUIRE(holder.ok());
  std::atomic<bool> cancel{false};
  absl::StatusOr<GpuGate::Hold> cancelled = absl::UnknownError("not run");
  std::chrono::steady_clock::time_point returned;
  std::thread waiter([&] {
    cancelled = gate.Acquire(&cancel);
    returned = std::chrono::steady_clock::now();
  });
  REQUIRE(AwaitWaiting(gate, 1));
  // A second waiter queued behind the one to be cancelled.
  std::atomic<bool> second_held{false};
  std::thread behind([&] {
    absl::StatusOr<GpuGate::Hold> hold = gate.Acquire();
    second_held = hold.ok() && hold->held();
  });
  REQUIRE(AwaitWaiting(gate, 2));
  const auto cancelled_at = std::chrono::steady_clock::now();
  cancel = true;
  waiter.join();
  REQUIRE_FALSE(cancelled.ok());
  CHECK(cancelled.status().code() == absl::StatusCode::kCancelled);
  // Polled every kCancelPollMs: well under a second even on a loaded machine.
  CHECK(std::chrono::duration<double>(returned - cancelled_at).count() < 0.5);
  CHECK(AwaitWaiting(gate, 1));  // The one behind still waits for the holder...
  CHECK_FALSE(second_held.load());
  holder->Release();  // ...and gets the turn the cancelled caller gave up.
  behind.join();
  CHECK(second_held.load());
  // Free again afterwards.
  absl::StatusOr<GpuGate::Hold> again = gate.Acquire();
  REQUIRE(again.ok());
  CHECK(again->wait_seconds() < 0.5);
}

TEST_CASE("a GPU gate hold moved keeps one turn and releases it once", "[gpu_gate]") {
  GpuGate gate;
  GpuGate::Hold outer;
  CHECK_FALSE(outer.held());
  {
    absl::StatusOr<GpuGate::Hold> hold = gate.Acquire();
    REQUIRE(hold.ok());
    outer = std::move(*hold);
  }  // The moved-from hold's destruction releases nothing.
  CHECK(outer.held());
  std::atomic<bool> got{false};
  std::thread next([&] { got = gate.Acquire().ok(); });
  REQUIRE(AwaitWaiting(gate, 1));
  CHECK_FALSE(got.load());
  outer.Release();
  next.join();
  CHECK(got.load());
}

}  // namespace
}  // namespace ptxbench::engine
