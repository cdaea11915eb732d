// The submission loaded on the device: what the candidate, instrument and replay modes share
// (the task, the device, the module and its resolved plans, the buffers of one workload and
// the launcher of its plan), and one correctness trial.
#ifndef PTXBENCH_WORKER_EVALUATOR_SUBMISSION_RUNTIME_H_
#define PTXBENCH_WORKER_EVALUATOR_SUBMISSION_RUNTIME_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "common/task.h"
#include "worker/engine/gpu/plan_runner.h"
#include "worker/engine/gpu/protocol_messages.h"
#include "worker/engine/gpu/runtime.h"
#include "worker/engine/plan.h"
#include "worker/evaluator/support.h"

namespace ptxbench::evaluator {

struct SubmissionRuntime {
  Task task;
  Gpu gpu;
  gpu::Submission submission;
  uint64_t hash_key = 0;
  std::string cubin;
  std::map<std::string, ResolvedPlan> plans;
  gpu::Module module;
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
