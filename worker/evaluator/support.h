// What every mode of ptxbench-evaluator shares: events out (fd 3), commands in (stdin), the
// request file, failures by kind, the task and its launch plans, the device, and handing
// outputs to the reference process. The protocol's messages are gpu/protocol_messages.h.
#ifndef PTXBENCH_WORKER_EVALUATOR_SUPPORT_H_
#define PTXBENCH_WORKER_EVALUATOR_SUPPORT_H_

#include <unistd.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "common/task.h"
#include "nlohmann/json.hpp"
#include "worker/engine/gpu/plan_runner.h"
#include "worker/engine/gpu/protocol.h"
#include "worker/engine/gpu/protocol_messages.h"
#include "worker/engine/gpu/runtime.h"
#include "worker/engine/kernel_info.h"
#include "worker/engine/plan.h"

namespace ptxbench::evaluator {

double Now();

// Events go to fd 3 when the supervisor opened it, else to stdout (manual runs).
void EmitJson(const nlohmann::json& event);
template <typename Event>
void Emit(const Event& event) {
  EmitJson(gpu::ToJson(event));
}

// An error event of `kind`; returns `exit_code`.
int Fail(int exit_code, gpu::ErrorKind kind, const absl::Status& status);
// A kernel fault (kAborted from cuda_check.h) or a refused launch (kFailedPrecondition) is the
// kernel's: a fault event. InvalidArgument is the plan's: plan_invalid. Anything else is ours.
int FailFromStatus(const absl::Status& status, gpu::FaultPhase during);

// Commands on stdin, one JSON object per line.
class CommandReader {
 public:
  // The next command if it is one of `Commands`; nullopt at the end of input; InvalidArgument
  // naming the problem for a line that is not one of them.
  template <typename... Commands>
  absl::StatusOr<std::optional<std::variant<Commands...>>> Next() {
    absl::StatusOr<std::optional<nlohmann::json>> line = NextLine();
    if (!line.ok()) return line.status();
    if (!line->has_value()) return std::optional<std::variant<Commands...>>();
    absl::StatusOr<std::variant<Commands...>> command = gpu::FromJsonOneOf<Commands...>(**line);
    if (!command.ok()) return command.status();
    return std::optional<std::variant<Commands...>>(std::move(*command));
  }

 private:
  absl::StatusOr<std::optional<nlohmann::json>> NextLine();
  gpu::LineReader reader_{STDIN_FILENO};
};

// `ptxbench-evaluator MODE --request FILE`: FILE's request.
absl::StatusOr<nlohmann::json> ReadRequestFile(int argc, char** argv);
template <typename Request>
absl::StatusOr<Request> ReadRequest(int argc, char** argv) {
  absl::StatusOr<nlohmann::json> json = ReadRequestFile(argc, argv);
  if (!json.ok()) return json.status();
  return gpu::FromJson<Request>(*json);
}

// The task of `ref`, refused when it changed under the evaluation.
absl::StatusOr<Task> LoadCheckedTask(const gpu::TaskRef& ref);
absl::StatusOr<const Workload*> FindWorkload(const Task& task, const std::string& name);

// The launch plan for every workload, resolved against the module's kernel signatures (the
// engine's one entry into plan.h). The compile mode validated it with ptxas resources too; the
// GPU modes repeat the checks that do not need them, so they never trust a file written by
// another process blindly. InvalidArgument: the plan is invalid.
absl::StatusOr<std::map<std::string, ResolvedPlan>> ResolvePlans(
    const Task& task, const gpu::Submission& submission,
    const std::vector<KernelSignature>& kernels);
// The kernels of a module, from its PTX.
std::vector<KernelSignature> KernelsOf(const std::string& ptx);

// The device, the harness's own kernels and a stream.
struct Gpu {
  gpu::DeviceInfo device;
  std::unique_ptr<gpu::Builtins> builtins;
  gpu::Stream stream;
};
absl::StatusOr<Gpu> OpenGpu(int ordinal);

// Every output tensor of `set` as files "<prefix>.<tensor>.bin".
absl::StatusOr<std::vector<gpu::OutputHandle>> SaveOutputs(const gpu::TensorSet& set,
                                                           const std::string& prefix,
                                                           cudaStream_t stream);
// Every output tensor of `set` as the supervisor asked: exported by CUDA IPC (the buffers must
// stay untouched until its next command) or as files under `prefix`.
absl::StatusOr<std::vector<gpu::OutputHandle>> HandOverOutputs(const gpu::TensorSet& set,
                                                               gpu::OutputTransfer transfer,
                                                               const std::string& prefix,
                                                               cudaStream_t stream);

}  // namespace ptxbench::evaluator

#endif  // PTXBENCH_WORKER_EVALUATOR_SUPPORT_H_
