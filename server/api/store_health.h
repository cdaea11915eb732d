// Whether the store answers, as the server's supervisor last saw it (server/server.cc probes
// it every second and restarts an embedded PostgreSQL that died). The API refuses calls with
// UNAVAILABLE while it is down, at once and with a plain message, instead of letting each
// call find out by itself (and tell the caller the database's address and user).
#ifndef PTXBENCH_SERVER_API_STORE_HEALTH_H_
#define PTXBENCH_SERVER_API_STORE_HEALTH_H_

#include <atomic>

#include "absl/status/status.h"

namespace ptxbench::api {

class StoreHealth {
 public:
  bool reachable() const { return reachable_.load(std::memory_order_relaxed); }
  void Set(bool reachable) { reachable_.store(reachable, std::memory_order_relaxed); }

 private:
  std::atomic<bool> reachable_{true};
};

// What a caller is told while the store is down: retryable, and nothing of its address.
absl::Status StoreUnavailable();

}  // namespace ptxbench::api

#endif  // PTXBENCH_SERVER_API_STORE_HEALTH_H_
