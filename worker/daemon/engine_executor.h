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
};

absl::StatusOr<std::unique_ptr<JobExecutor>> CreateEngineExecutor(
    const EngineExecutorOptions& options);

}  // namespace ptxbench::worker

#endif  // PTXBENCH_WORKER_DAEMON_ENGINE_EXECUTOR_H_
