// Caps on the concurrent long-lived streams (Lease, WatchSubmission) of one tenant: each
// holds a server thread while open (server/server.cc says why), so without a cap one tenant
// could take every thread the process may start (issue 12, "Medium").
#ifndef PTXBENCH_SERVER_API_STREAM_SLOTS_H_
#define PTXBENCH_SERVER_API_STREAM_SLOTS_H_

#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "absl/status/statusor.h"

namespace ptxbench::api {

// Caps the concurrent long-lived streams of one kind per tenant: each holds a server thread
// (server/server.cc) and, for Lease, a place in the dispatcher.
class StreamSlots {
 public:
  StreamSlots(std::string what, int max_per_tenant)
      : what_(std::move(what)), max_per_tenant_(max_per_tenant) {}

  class Slot {
   public:
    Slot(Slot&& other) noexcept
        : owner_(std::exchange(other.owner_, nullptr)), tenant_(std::move(other.tenant_)) {}
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    Slot& operator=(Slot&&) = delete;
    ~Slot();

   private:
    friend class StreamSlots;
    Slot(StreamSlots* owner, std::string tenant) : owner_(owner), tenant_(std::move(tenant)) {}
    StreamSlots* owner_;
    std::string tenant_;
  };

  // A slot, or RESOURCE_EXHAUSTED naming the cap when the tenant holds max_per_tenant.
  absl::StatusOr<Slot> Acquire(const std::string& tenant);
  int held(const std::string& tenant) const;

 private:
  void Release(const std::string& tenant);

  const std::string what_;
  const int max_per_tenant_;
  mutable std::mutex mu_;
  std::map<std::string, int> held_;
};

}  // namespace ptxbench::api

#endif  // PTXBENCH_SERVER_API_STREAM_SLOTS_H_
