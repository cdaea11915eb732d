#include "server/api/stream_slots.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ptxbench::api {

StreamSlots::Slot::~Slot() {
  if (owner_ != nullptr) owner_->Release(tenant_);
}

absl::StatusOr<StreamSlots::Slot> StreamSlots::Acquire(const std::string& tenant) {
  std::lock_guard<std::mutex> lock(mu_);
  int& held = held_[tenant];
  if (held >= max_per_tenant_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("tenant '", tenant, "' already has ", held, " open ", what_,
                     " streams, the most one tenant may hold; close one and retry"));
  }
  ++held;
  return Slot(this, tenant);
}

int StreamSlots::held(const std::string& tenant) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = held_.find(tenant);
  return it == held_.end() ? 0 : it->second;
}

void StreamSlots::Release(const std::string& tenant) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = held_.find(tenant);
  if (it != held_.end() && --it->second <= 0) held_.erase(it);
}

}  // namespace ptxbench::api
