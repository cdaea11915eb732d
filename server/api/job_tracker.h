// Which leased jobs each worker holds, as seen by this server process: the slot accounting of
// Lease streams. A job counts against its worker's slots from the moment it is leased until
// Complete, Fail, or the store reports its lease lost (a Heartbeat's `lost` list, or a
// Heartbeat that no longer lists it). The store stays authoritative for who holds a lease;
// this only decides when a Lease stream may ask the store for another job.
#ifndef PTXBENCH_SERVER_API_JOB_TRACKER_H_
#define PTXBENCH_SERVER_API_JOB_TRACKER_H_

#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "server/store/store.h"

namespace ptxbench::api {

class JobTracker {
 public:
  // What a Complete or Fail needs to know about the job for metrics and logs.
  struct HeldJob {
    store::LeaseRef lease;
    std::string submission_id;
    std::string task_id;
    v1::Arch arch = v1::ARCH_UNSPECIFIED;
    v1::JobKind kind = v1::JOB_KIND_UNSPECIFIED;
    absl::Time leased_at;
  };

  void Leased(const HeldJob& job);
  // Returns the job if this process tracked it.
  std::optional<HeldJob> Released(const std::string& job_id);
  int Held(const std::string& worker_id) const;
  std::optional<HeldJob> Find(const std::string& job_id) const;

  // A heartbeat lists every lease the worker still holds; jobs missing from it are released,
  // except those leased within `grace`: a job may be on the wire while the heartbeat that does
  // not know it yet is sent. Returns the number released.
  int Reconcile(const std::string& worker_id, const std::vector<store::LeaseRef>& held,
                absl::Duration grace);

  // Counts a lease this process did not hand out (a heartbeat after a server restart lists it)
  // against its worker's slots.
  void Adopt(const store::LeaseRef& lease);
  // Makes the worker's tracked count at least `held` (the store's count of its leased jobs,
  // read when a Lease stream opens) with placeholders, so that after a server restart a
  // worker still running jobs leased from the previous process gets no more than its slots.
  // Its next heartbeats replace the placeholders by the leases it lists (Adopt, Reconcile).
  void HoldAtLeast(const std::string& worker_id, int held);

  // Forgets every job of the worker: it registered again, so it is a new process that holds
  // none of its predecessor's jobs (the reaper requeues those when their leases expire).
  // Returns the number forgotten.
  int ReleaseWorker(const std::string& worker_id);

  void SetDraining(const std::string& worker_id, bool draining);
  bool Draining(const std::string& worker_id) const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, HeldJob> jobs_;  // By job id.
  std::set<std::string> draining_;
};

}  // namespace ptxbench::api

#endif  // PTXBENCH_SERVER_API_JOB_TRACKER_H_
