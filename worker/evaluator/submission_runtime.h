// The submission loaded on the device: what the candidate, instrument and replay modes share
// (the task, the device, the module and its resolved plans, the buffers of one workload and
// the launcher of its plan), and one correctness trial.
#ifndef PTXBENCH_WORKER_EVALUATOR_SUBMISSION_RUNTIME_H_
#define PTXBENCH_WORKER_EVALUATOR_SUBMISSION_RUNTIME_H_

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/task.h"
#include "worker/engine/gpu/plan_runner.h"
#include "worker/engine/gpu/protocol_messages.h"
#include "worker/engine/gpu/runtime.h"
#include "worker/engine/plan.h"
#include "worker/evaluator/support.h"

namespace ptxbench::evaluator {

// Tensor sets made ahead of the correctness trials on another thread (the candidate process's
// preparing thread, candidate_mode.cc), which UseWorkload takes. Why: a set's derived inputs
// need the library's plan for that shape, and a fresh candidate process has none cached (the
// backward tasks' cuDNN forward: 0.46-1.4 s per workload, 3.1 s of a backward evaluation's
// correctness, H100 gpu-test 13-c `trials[].seconds.candidate_process`); made while the job
// ahead holds the GPU gate, they cost the trials nothing.
class PreparedSets {
 public:
  // Before the preparing thread starts, on the thread that takes: what Make will make, in order.
  void Schedule(std::vector<std::string> workloads);
  // On the preparing thread: each scheduled set in order; a set that fails keeps its error for
  // Take, where the trial reports it as if it had made the set itself.
  void Make(const Task& task);
  // The set of `name` when it is made or being made (waiting for it), else nullopt: never
  // scheduled, or not begun (then it is unscheduled, and the caller makes it).
  std::optional<absl::StatusOr<gpu::TensorSet>> Take(const std::string& name);

 private:
  std::mutex mu_;
  std::condition_variable made_cv_;
  std::vector<std::string> scheduled_;                          // Not begun, in order.
  std::string making_;                                          // Being made now ("" for none).
  std::map<std::string, absl::StatusOr<gpu::TensorSet>> made_;  // Made, not yet taken.
};

struct SubmissionRuntime {
  Task task;
  Gpu gpu;
  gpu::Submission submission;
  uint64_t hash_key = 0;
  std::string cubin;
  std::map<std::string, ResolvedPlan> plans;
  gpu::Module module;
  PreparedSets prepared_sets;
  // Buffers of the workload in use (freed when another workload starts).
  std::string workload;
  gpu::TensorSet set;
  gpu::PlanLauncher launcher;

  // The task, the device and the hash key: what needs no compiled module.
  absl::Status OpenDevice(const gpu::Submission& submission, int gpu_ordinal, uint64_t hash_key);
  // The compiled module and the resolved plans (InvalidArgument: PLAN_INVALID).
  absl::Status OpenModule(const gpu::ModulePaths& paths);
  // Buffers and launcher of `name` (kept while it stays the workload in use).
  absl::Status UseWorkload(const std::string& name);
  // (Re)loads the module and binds the plan to it: every run starts from fresh module globals.
  absl::Status ReloadModule();
};

// One correctness trial: fresh inputs of `seed`, hashed before and after, poisoned outputs,
// zeroed scratch, flushed L2, the plan's launches timed by events. Kernel faults come back as
// kAborted / kFailedPrecondition.
absl::StatusOr<gpu::TrialEvent> RunTrial(SubmissionRuntime& s, const std::string& workload,
                                         uint64_t seed, const std::string& prefix,
                                         gpu::OutputTransfer transfer);

}  // namespace ptxbench::evaluator

#endif  // PTXBENCH_WORKER_EVALUATOR_SUBMISSION_RUNTIME_H_
