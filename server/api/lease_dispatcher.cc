#include "server/api/lease_dispatcher.h"

#include <algorithm>

namespace ptxbench::api {

std::string LeaseDispatcher::PoolOf(const std::string& arch, bool compile_only) {
  return compile_only ? "compile_only" : arch;
}

void LeaseDispatcher::Add(Waiter* waiter) {
  std::lock_guard<std::mutex> lock(mu_);
  waiters_.push_back(waiter);
}

void LeaseDispatcher::Remove(Waiter* waiter) {
  std::lock_guard<std::mutex> lock(mu_);
  waiters_.remove(waiter);
}

uint64_t LeaseDispatcher::Generation(const std::string& pool) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = generations_.find(pool);
  return it == generations_.end() ? 0 : it->second;
}

bool LeaseDispatcher::Wait(Waiter* waiter, bool idle, uint64_t seen, absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (shutdown_) return false;
  if (waiter->woken) {
    waiter->woken = false;
    return true;
  }
  if (idle) {
    auto it = generations_.find(waiter->pool);
    if ((it == generations_.end() ? 0 : it->second) != seen) return true;
  }
  waiter->idle = idle;
  const bool woken = waiter->cv.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                                         [&] { return waiter->woken || shutdown_; });
  waiter->idle = false;
  waiter->woken = false;
  return woken && !shutdown_;
}

void LeaseDispatcher::WakeOneIdleLocked(const std::string& pool) {
  ++generations_[pool];
  for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
    Waiter* waiter = *it;
    if (waiter->pool != pool || !waiter->idle || waiter->woken) continue;
    waiter->woken = true;
    waiter->idle = false;
    // The woken one goes to the back: the next wake picks whoever has waited longest.
    waiters_.splice(waiters_.end(), waiters_, it);
    waiter->cv.notify_one();
    return;
  }
}

void LeaseDispatcher::JobsAvailable(const std::string& arch) {
  std::lock_guard<std::mutex> lock(mu_);
  if (arch.empty()) {
    std::map<std::string, bool> pools;
    for (Waiter* waiter : waiters_) pools[waiter->pool] = true;
    for (const auto& [pool, unused] : pools) WakeOneIdleLocked(pool);
    return;
  }
  WakeOneIdleLocked(arch);
  WakeOneIdleLocked(PoolOf(arch, /*compile_only=*/true));
}

void LeaseDispatcher::PassOn(const std::string& pool) {
  std::lock_guard<std::mutex> lock(mu_);
  WakeOneIdleLocked(pool);
}

void LeaseDispatcher::WakeWorker(const std::string& worker_id) {
  std::lock_guard<std::mutex> lock(mu_);
  for (Waiter* waiter : waiters_) {
    if (waiter->worker_id != worker_id) continue;
    waiter->woken = true;
    waiter->cv.notify_one();
  }
}

void LeaseDispatcher::Shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  shutdown_ = true;
  for (Waiter* waiter : waiters_) waiter->cv.notify_one();
}

bool LeaseDispatcher::shutting_down() const {
  std::lock_guard<std::mutex> lock(mu_);
  return shutdown_;
}

}  // namespace ptxbench::api
