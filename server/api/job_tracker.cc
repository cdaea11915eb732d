#include "server/api/job_tracker.h"

#include "absl/strings/str_cat.h"

namespace ptxbench::api {
namespace {

// Job ids of placeholders (HoldAtLeast); real job ids are UUIDs.
constexpr char kPlaceholderPrefix[] = "held-before-restart:";

}  // namespace

void JobTracker::Leased(const HeldJob& job) {
  std::lock_guard<std::mutex> lock(mu_);
  jobs_[job.lease.job_id] = job;
}

std::optional<JobTracker::HeldJob> JobTracker::Released(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return std::nullopt;
  HeldJob job = std::move(it->second);
  jobs_.erase(it);
  return job;
}

int JobTracker::Held(const std::string& worker_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  int held = 0;
  for (const auto& [id, job] : jobs_) held += job.lease.worker_id == worker_id ? 1 : 0;
  return held;
}

std::optional<JobTracker::HeldJob> JobTracker::Find(const std::string& job_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return std::nullopt;
  return it->second;
}

int JobTracker::Reconcile(const std::string& worker_id, const std::vector<store::LeaseRef>& held,
                          absl::Duration grace) {
  std::set<std::string> listed;
  for (const auto& lease : held) listed.insert(lease.job_id);
  const absl::Time cutoff = absl::Now() - grace;
  std::lock_guard<std::mutex> lock(mu_);
  int released = 0;
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    const HeldJob& job = it->second;
    if (job.lease.worker_id == worker_id && !listed.count(job.lease.job_id) &&
        job.leased_at < cutoff) {
      it = jobs_.erase(it);
      ++released;
    } else {
      ++it;
    }
  }
  return released;
}

void JobTracker::Adopt(const store::LeaseRef& lease) {
  std::lock_guard<std::mutex> lock(mu_);
  if (jobs_.count(lease.job_id) > 0) return;
  HeldJob job;
  job.lease = lease;
  job.leased_at = absl::Now();
  jobs_[lease.job_id] = job;
  // One placeholder of this worker stands for this lease from now on.
  for (auto it = jobs_.begin(); it != jobs_.end(); ++it) {
    if (it->second.lease.worker_id == lease.worker_id &&
        it->first.rfind(kPlaceholderPrefix, 0) == 0) {
      jobs_.erase(it);
      break;
    }
  }
}

void JobTracker::HoldAtLeast(const std::string& worker_id, int held) {
  std::lock_guard<std::mutex> lock(mu_);
  int tracked = 0;
  for (const auto& [id, job] : jobs_) tracked += job.lease.worker_id == worker_id ? 1 : 0;
  for (int i = tracked; i < held; ++i) {
    HeldJob job;
    job.lease.job_id = absl::StrCat(kPlaceholderPrefix, worker_id, ":", i);
    job.lease.worker_id = worker_id;
    job.leased_at = absl::Now();
    jobs_[job.lease.job_id] = job;
  }
}

int JobTracker::ReleaseWorker(const std::string& worker_id) {
  std::lock_guard<std::mutex> lock(mu_);
  int released = 0;
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    if (it->second.lease.worker_id == worker_id) {
      it = jobs_.erase(it);
      ++released;
    } else {
      ++it;
    }
  }
  return released;
}

void JobTracker::SetDraining(const std::string& worker_id, bool draining) {
  std::lock_guard<std::mutex> lock(mu_);
  if (draining) {
    draining_.insert(worker_id);
  } else {
    draining_.erase(worker_id);
  }
}

bool JobTracker::Draining(const std::string& worker_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return draining_.count(worker_id) > 0;
}

}  // namespace ptxbench::api
