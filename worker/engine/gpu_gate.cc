#include "worker/engine/gpu_gate.h"

#include <chrono>
#include <utility>

namespace ptxbench::engine {

GpuGate::Hold::Hold(Hold&& other) noexcept
    : gate_(std::exchange(other.gate_, nullptr)), wait_seconds_(other.wait_seconds_) {}

GpuGate::Hold& GpuGate::Hold::operator=(Hold&& other) noexcept {
  if (this != &other) {
    Release();
    gate_ = std::exchange(other.gate_, nullptr);
    wait_seconds_ = other.wait_seconds_;
  }
  return *this;
}

void GpuGate::Hold::Release() {
  if (gate_ != nullptr) std::exchange(gate_, nullptr)->ReleaseTurn();
}

absl::StatusOr<GpuGate::Hold> GpuGate::Acquire(const std::atomic<bool>* cancel) {
  const auto asked = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t ticket = next_ticket_++;
  ++waiting_;
  while (held_ || serving_ != ticket) {
    if (cancel != nullptr && cancel->load()) {
      --waiting_;
      abandoned_.insert(ticket);
      SkipAbandoned();
      turn_.notify_all();
      return absl::CancelledError("cancelled while waiting for the GPU gate");
    }
    turn_.wait_for(lock, std::chrono::milliseconds(kCancelPollMs));
  }
  --waiting_;
  held_ = true;
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - asked).count();
  return Hold(this, waited);
}

int GpuGate::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiting_;
}

void GpuGate::ReleaseTurn() {
  std::lock_guard<std::mutex> lock(mu_);
  held_ = false;
  ++serving_;
  SkipAbandoned();
  turn_.notify_all();
}

void GpuGate::SkipAbandoned() {
  // Only while nobody holds the turn: a cancelled ticket behind the holder waits in the set
  // until the holder's release reaches it.
  while (!held_ && abandoned_.erase(serving_) > 0) ++serving_;
}

}  // namespace ptxbench::engine
