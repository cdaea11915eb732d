// instrument: untrusted code under CUPTI SASS metrics, for ONE kernel of the plan.
//
// Runs the plan once on the timed workload with the metrics enabled from the first launch of the
// kernel (request launch_index) to the end of the plan: the earlier launches run uninstrumented
// first, so the instrumented kernel sees the inputs the real plan gives it. The profiler is
// initialized before any kernel runs; the metrics are configured and enabled only after the
// harness's own kernels and the earlier launches ran.
// host_inputs: the fallback for a CUPTI that instruments only the first kernel a process
// executes: inputs generated on the CPU and copied, poison and scratch by copies, no earlier
// launches, so the submission's kernel is the first kernel of the process. Its outputs are then
// not compared (host and device generation differ in the last bits) and the report says so.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/engine/gpu/cupti_sass.h"
#include "worker/evaluator/evaluator.h"
#include "worker/evaluator/modes.h"
#include "worker/evaluator/submission_runtime.h"
#include "worker/evaluator/support.h"

namespace ptxbench::evaluator {
namespace {

// Started beside the correctness stage: CUDA, CUPTI, the module and the buffers are set up;
// nothing of the submission runs before the supervisor's "go" (~0.5 s of start-up off the
// critical path). nullopt: the evaluation ended before this stage (end of input or "quit").
absl::StatusOr<std::optional<gpu::GoCommand>> AwaitGo(CommandReader& commands) {
  ASSIGN_OR_RETURN(auto next, (commands.Next<gpu::GoCommand, gpu::QuitCommand>()));
  if (!next.has_value() || std::holds_alternative<gpu::QuitCommand>(*next)) {
    return std::optional<gpu::GoCommand>();
  }
  return std::optional<gpu::GoCommand>(std::get<gpu::GoCommand>(*next));
}

// The instrumented run itself, its seconds counted from `t0` (or from "go"); nullopt when never
// told to go.
absl::StatusOr<std::optional<gpu::InstrumentEvent>> Instrument(
    const gpu::InstrumentRequest& request, SubmissionRuntime& s, gpu::SassMetricsSession& session,
    uint64_t crc, CommandReader& commands, double t0, gpu::OutputTransfer* transfer) {
  RETURN_IF_ERROR(s.UseWorkload(request.workload));
  RETURN_IF_ERROR(s.ReloadModule());
  const size_t launch_index = request.launch_index;
  if (launch_index >= s.launcher.launch_count()) {
    return absl::InternalError("launch_index past the plan");
  }
  gpu::InstrumentEvent event;
  if (request.wait_for_go) {
    ASSIGN_OR_RETURN(std::optional<gpu::GoCommand> go, AwaitGo(commands));
    if (!go.has_value()) return std::optional<gpu::InstrumentEvent>();
    *transfer = go->transfer;
    event.waited_for_go = true;
    t0 = Now();
  }
  cudaStream_t stream = s.gpu.stream.get();
  gpu::Builtins& builtins = *s.gpu.builtins;
  uint64_t before = 0;
  if (request.host_inputs) {
    RETURN_IF_ERROR(s.set.UploadInputsFromHost(request.seed, stream));
    RETURN_IF_ERROR(s.set.PoisonOutputsByCopy(stream));
    RETURN_IF_ERROR(s.launcher.ZeroScratchByCopy(stream));
  } else {
    RETURN_IF_ERROR(s.set.GenerateInputs(builtins, request.seed, stream));
    ASSIGN_OR_RETURN(before, s.set.HashInputs(builtins, s.hash_key, stream));
    RETURN_IF_ERROR(s.set.PoisonOutputs(builtins, stream));
    RETURN_IF_ERROR(s.launcher.ZeroScratch(stream));
    RETURN_IF_ERROR(s.launcher.Launch(stream, 0, launch_index));
  }
  RETURN_IF_ERROR(gpu::SynchronizeDevice());
  RETURN_IF_ERROR(session.Enable());
  double k0 = Now();
  RETURN_IF_ERROR(s.launcher.Launch(stream, launch_index, s.launcher.launch_count()));
  RETURN_IF_ERROR(gpu::SynchronizeDevice());
  event.instrumented_seconds = Now() - k0;
  ASSIGN_OR_RETURN(std::vector<gpu::SassPcCounts> records, session.FlushAndDisable());
  event.workload = request.workload;
  event.seed = request.seed;
  event.kernel = s.launcher.kernel(launch_index);
  event.launch_index = launch_index;
  event.host_inputs = request.host_inputs;
  event.cubin_crc = crc;
  event.cupti_version = session.cupti_version();
  event.chip = session.chip();
  if (!request.host_inputs) {
    ASSIGN_OR_RETURN(uint64_t after, s.set.HashInputs(builtins, s.hash_key, stream));
    ASSIGN_OR_RETURN(event.outputs,
                     HandOverOutputs(s.set, *transfer, request.output_prefix, stream));
    event.input_hash_before = before;
    event.input_hash_after = after;
  }
  for (const gpu::SassPcCounts& r : records) {
    if (r.cubin_crc != crc) {
      ++event.other_module_records[r.function];
      continue;
    }
    event.records.push_back({r.function, r.pc_offset, r.warp_inst_executed, r.thread_inst_pred_on,
                             r.gmma_warp_inst_executed, r.tma_warp_inst_executed});
  }
  event.seconds = Now() - t0;
  return std::optional<gpu::InstrumentEvent>(std::move(event));
}

}  // namespace

int InstrumentMode(const gpu::InstrumentRequest& request) {
  const double t0 = Now();
  SubmissionRuntime s;
  absl::Status opened = s.OpenDevice(request.submission, request.gpu, request.hash_key);
  if (opened.ok()) opened = s.OpenModule(request.module);
  if (!opened.ok()) {
    if (opened.code() == absl::StatusCode::kInvalidArgument) {
      return FailFromStatus(opened, gpu::FaultPhase::kSetup);
    }
    return Fail(kExitInfrastructure, gpu::ErrorKind::kInfrastructure, opened);
  }
  auto session = gpu::SassMetricsSession::Create(s.gpu.device.ordinal);
  if (!session.ok()) {
    return Fail(kExitInfrastructure, gpu::ErrorKind::kProfilerUnavailable, session.status());
  }
  auto crc = gpu::SassMetricsSession::CubinCrc(s.cubin);
  if (!crc.ok()) {
    return Fail(kExitInfrastructure, gpu::ErrorKind::kProfilerUnavailable, crc.status());
  }
  CommandReader commands;
  gpu::OutputTransfer transfer = request.transfer;
  auto result = Instrument(request, s, **session, *crc, commands, t0, &transfer);
  if (!result.ok()) return FailFromStatus(result.status(), gpu::FaultPhase::kInstrumentedRun);
  if (!result->has_value()) return kExitOk;  // Never told to go.
  Emit(**result);
  if (transfer != gpu::OutputTransfer::kIpc || request.host_inputs) return kExitOk;
  // The exported outputs live as long as this process: wait until the supervisor has had them
  // compared ("quit" or end of input); "save_outputs" writes them as files instead.
  while (true) {
    auto next = commands.Next<gpu::SaveOutputsCommand, gpu::QuitCommand>();
    if (!next.ok())
      return Fail(kExitInfrastructure, gpu::ErrorKind::kInfrastructure, next.status());
    if (!next->has_value() || std::holds_alternative<gpu::QuitCommand>(**next)) return kExitOk;
    const std::string& prefix = std::get<gpu::SaveOutputsCommand>(**next).prefix;
    auto files = SaveOutputs(s.set, prefix, s.gpu.stream.get());
    if (!files.ok()) return FailFromStatus(files.status(), gpu::FaultPhase::kSavingOutputs);
    Emit(gpu::OutputsEvent{*files});
  }
}

}  // namespace ptxbench::evaluator
