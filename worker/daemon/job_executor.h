// The seam between the worker daemon (gRPC, leases, heartbeats) and the evaluation engine
// (CUDA, sandbox). The daemon knows only this interface; engine_executor.cc adapts the engine.
#ifndef PTXBENCH_WORKER_DAEMON_JOB_EXECUTOR_H_
#define PTXBENCH_WORKER_DAEMON_JOB_EXECUTOR_H_

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "common/status.h"
#include "common/verdict.h"
#include "worker/engine/compile_artifact.h"

namespace ptxbench::worker {

struct JobSpec {
  std::string job_id;
  int attempt = 0;
  bool compile_only = false;  // A compile job: the compile stage only, no GPU.
  std::string submission_id;
  std::string task_id;
  std::string task_version_hash;  // Must equal the worker's own copy of the task.
  std::string arch;               // "sm_90a" or "sm_100a".
  std::string language;           // "cuda" or "ptx".
  std::string source;
  std::string launch_plan_json;  // Empty when the plan is in the source.
  // An evaluate job's lease may carry the compile job's module (worker.proto CompileArtifact).
  std::optional<engine::CompileArtifact> artifact;
};

// A job's result beside its verdict.
struct JobResult {
  Verdict verdict;
  // A compile job that compiled: its module, for the evaluate job's worker.
  std::optional<engine::CompileArtifact> artifact;
  // A job that was offered an artifact: what became of it.
  std::optional<engine::ArtifactUse> artifact_use;
};

// What the worker is and runs on, recorded in every verdict for audit.
struct ExecutorIdentity {
  std::string arch;  // Empty for compile-only workers.
  std::string gpu_name;
  std::string gpu_uuid;
  std::string driver_version;
  std::string cuda_version;
  std::string cublas_version;
  std::string cudnn_version;
  std::string harness_version;
};

using StageCallback = std::function<void(const StageReport&)>;

class JobExecutor {
 public:
  virtual ~JobExecutor() = default;
  virtual ExecutorIdentity Identity() const = 0;
  // Runs one job. `on_stage` is called as each stage completes. When `cancel` becomes true
  // (lease lost, owner cancelled) the executor stops the sandbox promptly and returns
  // CANCELLED. A returned Verdict is a statement about the kernel; an error status is an
  // infrastructure failure and says nothing about it.
  virtual absl::StatusOr<Verdict> Run(const JobSpec& job, const StageCallback& on_stage,
                                      const std::atomic<bool>& cancel) = 0;
  // Run, with the compile artifacts a job exchanges: the daemon calls this one. An executor
  // without artifacts (the tests' fakes) keeps this default, which ignores `job.artifact`.
  virtual absl::StatusOr<JobResult> RunWithArtifacts(const JobSpec& job,
                                                     const StageCallback& on_stage,
                                                     const std::atomic<bool>& cancel) {
    ASSIGN_OR_RETURN(Verdict verdict, Run(job, on_stage, cancel));
    return JobResult{std::move(verdict), std::nullopt, std::nullopt};
  }
  // Checks the GPU is usable after a sandbox crash or timeout (a tiny known kernel).
  virtual absl::Status HealthProbe() = 0;
  // Lookups of the worker-local compile cache so far (worker/engine/compile_cache.h), for the
  // metrics; zeros for an executor without one.
  struct CompileCacheCounts {
    int64_t hits = 0;
    int64_t misses = 0;
    int64_t tampered = 0;
  };
  virtual CompileCacheCounts CompileCache() const { return {}; }
};

}  // namespace ptxbench::worker

#endif  // PTXBENCH_WORKER_DAEMON_JOB_EXECUTOR_H_
