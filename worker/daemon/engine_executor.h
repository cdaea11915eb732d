// The JobExecutor that runs jobs through the evaluation engine (worker/engine): the compile
// stage for compile-only workers, every stage on a GPU worker, each in a fresh sandbox.
#ifndef PTXBENCH_WORKER_DAEMON_ENGINE_EXECUTOR_H_
#define PTXBENCH_WORKER_DAEMON_ENGINE_EXECUTOR_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "worker/daemon/job_executor.h"
#include "worker/engine/gpu/protocol_messages.h"

namespace ptxbench::worker {

struct EngineExecutorOptions {
  std::string tasks_dir = "tasks";
  std::string evaluator_path;  // Empty: ptxbench-evaluator beside the running binary.
  int gpu = 0;
  bool compile_only = false;
  // The timing's library baseline (protocol_messages.h BaselineSelection).
  gpu::BaselineSelection baseline_selection = gpu::BaselineSelection::kFastest;
  // WorkerOptions::gpu_pipeline: above 1, one GPU gate (worker/engine/gpu_gate.h) shared by
  // every job and the health probe of this executor.
  int gpu_pipeline = 1;
  // The share of compile artifacts (worker/engine/compile_artifact.h) this GPU worker compiles
  // again and compares instead of using, drawn from its own randomness: 1 always (a lab that
  // does not trust its compile-only hosts), 0 never. A producer that forges t artifacts
  // escapes with probability (1 - fraction)^t; 1/8 costs an eighth of the compile time that
  // artifacts save and catches a producer forging 20 with probability 0.93.
  double artifact_verify_fraction = 0.125;
};

absl::StatusOr<std::unique_ptr<JobExecutor>> CreateEngineExecutor(
    const EngineExecutorOptions& options);

}  // namespace ptxbench::worker

#endif  // PTXBENCH_WORKER_DAEMON_ENGINE_EXECUTOR_H_
