#include "worker/evaluator/support.h"

#include <fcntl.h>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "worker/engine/ptx_scan.h"
#include "worker/evaluator/evaluator.h"

namespace ptxbench::evaluator {
namespace {

int EventFd() {
  static const int fd = fcntl(gpu::kEventFd, F_GETFD) != -1 ? gpu::kEventFd : STDOUT_FILENO;
  return fd;
}

// What a model should read of a fault: the CUDA error without our call site
// ("cudaErrorIllegalAddress (an illegal memory access was encountered)"); the call site stays in
// the event's "detail" for the audit record.
std::string CleanFault(const std::string& message) {
  size_t at = message.find(" at ");
  if (at == std::string::npos) return message;
  size_t colon = message.find(": ", at);
  return colon == std::string::npos ? message : message.substr(colon + 2);
}

}  // namespace

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void EmitJson(const nlohmann::json& event) { (void)gpu::WriteJsonLine(EventFd(), event); }

int Fail(int exit_code, gpu::ErrorKind kind, const absl::Status& status) {
  Emit(gpu::ErrorEvent{kind, std::string(status.message()),
                       absl::StatusCodeToString(status.code())});
  return exit_code;
}

int FailFromStatus(const absl::Status& status, gpu::FaultPhase during) {
  if (status.code() == absl::StatusCode::kAborted ||
      status.code() == absl::StatusCode::kFailedPrecondition) {
    std::string message(status.message());
    Emit(gpu::FaultEvent{during, CleanFault(message), message});
    return kExitKernelFault;
  }
  if (status.code() == absl::StatusCode::kInvalidArgument) {
    Emit(gpu::PlanInvalidEvent{std::string(status.message())});
    return kExitPlanInvalid;
  }
  return Fail(kExitInfrastructure, gpu::ErrorKind::kInfrastructure, status);
}

absl::StatusOr<std::optional<nlohmann::json>> CommandReader::NextLine() {
  ASSIGN_OR_RETURN(std::optional<std::string> line, reader_.ReadLine(-1));
  if (!line.has_value()) return std::optional<nlohmann::json>();
  nlohmann::json command = nlohmann::json::parse(*line, nullptr, false);
  if (command.is_discarded()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a command line that is not JSON: ", line->substr(0, 200)));
  }
  return std::optional<nlohmann::json>(std::move(command));
}

absl::StatusOr<nlohmann::json> ReadRequestFile(int argc, char** argv) {
  std::string path;
  for (int i = 2; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--request") path = argv[i + 1];
  }
  if (path.empty()) {
    return absl::InvalidArgumentError("usage: ptxbench-evaluator MODE --request FILE");
  }
  ASSIGN_OR_RETURN(std::string text, gpu::ReadFileBytes(path));
  nlohmann::json request = nlohmann::json::parse(text, nullptr, false);
  if (request.is_discarded() || !request.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat("request ", path, " is not a JSON object"));
  }
  return request;
}

absl::StatusOr<Task> LoadCheckedTask(const gpu::TaskRef& ref) {
  ASSIGN_OR_RETURN(Task task, LoadTask(ref.dir));
  if (task.version_hash != ref.version_hash) {
    return absl::FailedPreconditionError(
        absl::StrCat("task version changed under the evaluation: supervisor has ", ref.version_hash,
                     ", evaluator read ", task.version_hash));
  }
  return task;
}

absl::StatusOr<const Workload*> FindWorkload(const Task& task, const std::string& name) {
  for (const Workload& w : task.workloads) {
    if (w.name == name) return &w;
  }
  return absl::InvalidArgumentError(absl::StrCat("no workload '", name, "'"));
}

absl::StatusOr<std::map<std::string, ResolvedPlan>> ResolvePlans(
    const Task& task, const gpu::Submission& submission,
    const std::vector<KernelSignature>& kernels) {
  std::optional<LaunchPlan> from_request;
  if (!submission.launch_plan_json.empty()) {
    PlanOr<LaunchPlan> parsed = ParseLaunchPlanJson(submission.launch_plan_json);
    if (!parsed.ok()) return absl::InvalidArgumentError(parsed.error().ToString());
    from_request = parsed.value();
  }
  PlanOr<LaunchPlan> plan = SelectLaunchPlan(from_request, submission.source);
  if (!plan.ok()) return absl::InvalidArgumentError(plan.error().ToString());
  ASSIGN_OR_RETURN(DeviceLimits limits, DeviceLimitsForArch(submission.arch));
  std::map<std::string, ResolvedPlan> out;
  for (const Workload& w : task.workloads) {
    PlanOr<ResolvedPlan> resolved = ValidatePlan(plan.value(), task, w, limits, kernels);
    if (!resolved.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(resolved.error().ToString(), " (workload '", w.name, "')"));
    }
    out[w.name] = resolved.value();
  }
  return out;
}

std::vector<KernelSignature> KernelsOf(const std::string& ptx) { return ScanPtx(ptx).kernels; }

absl::StatusOr<Gpu> OpenGpu(int ordinal) {
  Gpu g;
  ASSIGN_OR_RETURN(g.device, gpu::InitDevice(ordinal));
  ASSIGN_OR_RETURN(g.builtins, gpu::Builtins::Load(g.device));
  ASSIGN_OR_RETURN(g.stream, gpu::Stream::Create());
  return g;
}

absl::StatusOr<std::vector<gpu::OutputHandle>> SaveOutputs(const gpu::TensorSet& set,
                                                           const std::string& prefix,
                                                           cudaStream_t stream) {
  std::vector<gpu::OutputHandle> files;
  size_t ordinal = 0;
  for (const gpu::WorkloadTensor& t : set.tensors()) {
    if (!t.output) continue;
    ASSIGN_OR_RETURN(std::string bytes, set.DownloadOutput(ordinal++, stream));
    std::string path = absl::StrCat(prefix, ".", t.name, ".bin");
    RETURN_IF_ERROR(gpu::WriteFileBytes(path, bytes));
    files.push_back({t.name, bytes.size(), gpu::OutputTransfer::kFile, path});
  }
  return files;
}

absl::StatusOr<std::vector<gpu::OutputHandle>> HandOverOutputs(const gpu::TensorSet& set,
                                                               gpu::OutputTransfer transfer,
                                                               const std::string& prefix,
                                                               cudaStream_t stream) {
  if (transfer == gpu::OutputTransfer::kFile) return SaveOutputs(set, prefix, stream);
  std::vector<gpu::OutputHandle> outputs;
  std::vector<void*> pointers = set.OutputPointers();
  size_t ordinal = 0;
  for (const gpu::WorkloadTensor& t : set.tensors()) {
    if (!t.output) continue;
    ASSIGN_OR_RETURN(std::string handle, gpu::ExportIpcHandle(pointers.at(ordinal++)));
    outputs.push_back({t.name, t.bytes, gpu::OutputTransfer::kIpc, handle});
  }
  return outputs;
}

}  // namespace ptxbench::evaluator
