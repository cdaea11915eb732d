// reference: trusted code only (ours and the library's). Regenerates inputs from seeds, runs the
// library baseline, keeps each reference on its device, and compares the candidate's outputs
// with it there (mapping the candidate's buffers by CUDA IPC, or reading its files). Kept warm
// between evaluations of the same task on the same GPU (evaluate.cc, ReferencePool).
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/expr.h"
#include "common/status.h"
#include "worker/engine/gpu/baseline.h"
#include "worker/engine/gpu/cuda_check.h"
#include "worker/engine/gpu/nvml_monitor.h"
#include "worker/engine/gpu/poison.h"
#include "worker/engine/gpu/sketch.h"
#include "worker/evaluator/evaluator.h"
#include "worker/evaluator/modes.h"
#include "worker/evaluator/support.h"

namespace ptxbench::evaluator {
namespace {

// The fp64 reference of one output (Tolerance::fp64_outputs): its values on the device and the
// library reference's own relative norm against them.
struct Fp64Output {
  gpu::DeviceBuffer values;  // `elements` doubles.
  double library_relative_norm = -1;
};

// Reference outputs of one (workload, seed), kept on the device until compared.
struct StoredReference {
  std::vector<gpu::WorkloadTensor> outputs;
  std::vector<gpu::DeviceBuffer> buffers;
  std::map<std::string, Fp64Output> fp64;  // By output name; empty without the fp64 rule.
};

// The fp64 SDPA backward's tensors, by the backward tasks' names (the names cuDNN's backward
// baseline reads: cudnn_sdpa_baseline.cc).
constexpr const char* kFp64Inputs[] = {"Q", "K", "V", "O", "dO", "LSE"};
constexpr const char* kFp64Outputs[] = {"dQ", "dK", "dV"};

// The fp64 SDPA backward of the drawn (and derived) inputs now in `set`, and the library's
// outputs, also in `set`, measured against it. Only on correctness workloads: the rule is not
// applied to the timed workload (a timed trial's outputs are compared with the library alone).
absl::StatusOr<std::map<std::string, Fp64Output>> ComputeFp64Reference(const Task& task,
                                                                       const Workload& workload,
                                                                       const gpu::TensorSet& set,
                                                                       gpu::Builtins& builtins,
                                                                       cudaStream_t stream) {
  std::map<std::string, Fp64Output> out;
  if (task.tolerance.fp64_outputs.empty() || workload.timed) return out;
  std::map<std::string, int> index;
  for (size_t i = 0; i < set.tensors().size(); ++i) index[set.tensors()[i].name] = i;
  for (const char* name : kFp64Inputs) {
    if (!index.count(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("fp64 reference: the task has no tensor '", name, "'"));
    }
  }
  const gpu::WorkloadTensor& q = set.tensors()[index["Q"]];
  if (q.shape.size() != 4) {
    return absl::InvalidArgumentError("fp64 reference: Q is not [B, H, S, D]");
  }
  gpu::SdpaFp64Shape shape;
  shape.heads = q.shape[0] * q.shape[1];
  shape.s = q.shape[2];
  shape.d = q.shape[3];
  shape.causal = task.baseline_operation == "sdpa_bwd_bf16_causal";
  // The scale as the candidate and the library receive it: the task's scalar in fp32
  // (plan_arguments.cc passes real scalars as 4 bytes).
  double scale = 1.0 / std::sqrt(static_cast<double>(shape.d));
  if (auto it = task.scalars.find("scale"); it != task.scalars.end()) {
    ASSIGN_OR_RETURN(scale, EvalRealExpr(it->second, workload.axes));
  }
  shape.scale = static_cast<double>(static_cast<float>(scale));
  for (const char* name : kFp64Outputs) {
    auto it = index.find(name);
    if (it == index.end()) continue;
    Fp64Output o;
    ASSIGN_OR_RETURN(
        o.values, gpu::DeviceBuffer::Allocate(set.tensors()[it->second].elements * sizeof(double)));
    out[name] = std::move(o);
  }
  auto values = [&](const char* name) -> double* {
    auto it = out.find(name);
    return it == out.end() ? nullptr : static_cast<double*>(it->second.values.get());
  };
  if (values("dQ") == nullptr) {
    return absl::InvalidArgumentError("fp64 reference: the task has no output 'dQ'");
  }
  RETURN_IF_ERROR(builtins.SdpaBackwardFp64(shape, set.pointer(index["Q"]), set.pointer(index["K"]),
                                            set.pointer(index["V"]), set.pointer(index["O"]),
                                            set.pointer(index["dO"]), set.pointer(index["LSE"]),
                                            values("dQ"), values("dK"), values("dV"), stream));
  for (auto& [name, o] : out) {
    const gpu::WorkloadTensor& t = set.tensors()[index[name]];
    ASSIGN_OR_RETURN(
        gpu::Fp64Sums sums,
        builtins.Fp64ErrorSums(set.pointer(index[name]), gpu::ElementTypeOf(t.dtype),
                               static_cast<const double*>(o.values.get()), t.elements, stream));
    o.library_relative_norm = gpu::Fp64RelativeNorm(sums);
  }
  return out;
}

using ReferenceKey = std::pair<std::string, uint64_t>;

class ReferenceProcess {
 public:
  ReferenceProcess(Task task, Gpu gpu, uint64_t hash_key)
      : task_(std::move(task)), gpu_(std::move(gpu)), hash_key_(hash_key) {}

  gpu::DeviceDescription Device() const {
    gpu::DeviceDescription device = gpu::Describe(gpu_.device);
    device.library_versions = gpu::BaselineLibraryVersions();
    if (auto nvml = gpu::NvmlMonitor::Open(gpu_.device.uuid); nvml.ok()) {
      device.nvml_driver_version = (*nvml)->driver_version();
      device.nvml_max_sm_mhz = (*nvml)->max_sm_mhz();
    }
    return device;
  }

  // Between evaluations: no reference survives "reset"; "begin" takes the next evaluation's
  // hash key. The context, every workload's buffers and library handles stay; the event says
  // what they hold on the GPU.
  gpu::ResetEvent Reset() {
    references_.clear();
    gpu::ResetEvent event;
    event.device_buffer_bytes = gpu::DeviceBuffer::LiveBytes();
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
      event.device_total_bytes = total_bytes;
    }
    return event;
  }
  void Begin(uint64_t hash_key) {
    hash_key_ = hash_key;
    references_.clear();
  }

  absl::StatusOr<gpu::ReferenceEvent> Compute(const gpu::ComputeReferenceCommand& cmd);
  absl::StatusOr<gpu::CompareEvent> Compare(const gpu::CompareCommand& cmd);
  // The reference outputs of each requested seed, sketched (sketch.h) with the tolerance sums
  // of the task's rule; nothing is kept.
  absl::StatusOr<gpu::ReferenceSketchesEvent> Sketch(const gpu::SketchReferenceCommand& cmd);

 private:
  // Buffers and the library's handle for `workload`, kept while it stays the one in use.
  absl::Status UseWorkload(const Workload& workload);
  // One run of the library on the inputs now in `set_`, its scratch and outputs poisoned first.
  absl::Status RunLibrary(cudaStream_t stream);
  // Why the outputs now in `set_` and `previous` (an earlier run on the same inputs) do not
  // agree under the task's rule, or "" when they do; any non-finite value disagrees.
  absl::StatusOr<std::string> RunsDisagree(const StoredReference& previous, cudaStream_t stream);

  // Library runs per reference before it is declared not reproducible (two must agree).
  static constexpr int kMaxLibraryRuns = 4;

  Task task_;
  Gpu gpu_;
  uint64_t hash_key_;
  // Every workload used so far keeps its buffers and its library handle, across evaluations
  // too: building them again was the attention tasks' correctness stage, one cuDNN graph per
  // workload at every change (H100 2026-12-06, gpu-test 13-c: 1.1-1.7 s per workload, 6.3 s of
  // the backward's 8.3 s; the GEMM's cuBLASLt handle 0.1 s). They add up to little beyond the
  // timed workload's, which was kept before.
  struct WorkloadState {
    gpu::TensorSet set;
    std::unique_ptr<gpu::Baseline> baseline;
  };
  std::map<std::string, WorkloadState> workloads_;
  std::string current_;
  gpu::TensorSet* set_ = nullptr;      // workloads_[current_]'s.
  gpu::Baseline* baseline_ = nullptr;  // workloads_[current_]'s.
  std::map<ReferenceKey, StoredReference> references_;
  gpu::DeviceBuffer upload_;  // Candidate outputs read from files, for the compare kernel.
};

absl::Status ReferenceProcess::UseWorkload(const Workload& workload) {
  if (current_ == workload.name) return absl::OkStatus();
  auto kept = workloads_.find(workload.name);
  if (kept == workloads_.end()) {
    WorkloadState state;
    ASSIGN_OR_RETURN(auto tensors, gpu::ResolveTensors(task_, workload));
    ASSIGN_OR_RETURN(state.set, gpu::TensorSet::Allocate(std::move(tensors)));
    ASSIGN_OR_RETURN(state.baseline, gpu::CreateBaseline(task_.baseline_library,
                                                         task_.baseline_operation, workload.axes));
    kept = workloads_.emplace(workload.name, std::move(state)).first;
  }
  set_ = &kept->second.set;
  baseline_ = kept->second.baseline.get();
  current_ = workload.name;
  return absl::OkStatus();
}

absl::StatusOr<gpu::ReferenceEvent> ReferenceProcess::Compute(
    const gpu::ComputeReferenceCommand& cmd) {
  double t0 = Now();
  ASSIGN_OR_RETURN(const Workload* workload, FindWorkload(task_, cmd.workload));
  const bool new_workload = current_ != cmd.workload;
  RETURN_IF_ERROR(UseWorkload(*workload));
  const double setup_seconds = new_workload ? Now() - t0 : 0;
  cudaStream_t stream = gpu_.stream.get();
  RETURN_IF_ERROR(set_->GenerateInputs(*gpu_.builtins, cmd.seed, stream));
  ASSIGN_OR_RETURN(uint64_t input_hash, set_->HashInputs(*gpu_.builtins, hash_key_, stream));
  gpu::ReferenceEvent event;
  event.workload = cmd.workload;
  event.seed = cmd.seed;
  event.input_hash = input_hash;
  event.baseline = baseline_->Describe();
  event.setup_seconds = setup_seconds;
  // The reference stays on the device until the supervisor's "compare" (no copy to the host:
  // ~0.13 s per 117 MB output on the H200 before, 2026-11-30-h200-gpu-test-3.json).
  StoredReference stored;
  for (const gpu::WorkloadTensor& t : set_->tensors()) {
    if (!t.output) continue;
    ASSIGN_OR_RETURN(gpu::DeviceBuffer copy, gpu::DeviceBuffer::Allocate(t.bytes));
    stored.outputs.push_back(t);
    stored.buffers.push_back(std::move(copy));
  }
  // A reference is kept only when two runs of the library on the same inputs agree under the
  // task's rule, each run's outputs and scratch poisoned first: a library run that leaves part
  // of an output unwritten or writes it wrong is then an infrastructure failure, never a wrong
  // verdict against the candidate. On the H100 (2026-12-06) the fp8 attention's reference held
  // 128-row blocks of stale e4m3 data in 1-3 timed trials of each of 4 evaluations, and each
  // such trial failed an honest kernel (docs/task-authoring.md, the fp8 task's status).
  for (int run = 1;; ++run) {
    RETURN_IF_ERROR(RunLibrary(stream));
    if (run > 1) {
      ASSIGN_OR_RETURN(std::string disagreement, RunsDisagree(stored, stream));
      if (disagreement.empty()) {
        event.library_runs = run;
        break;
      }
      event.repeat_disagreements.push_back(
          absl::StrCat("runs ", run - 1, " and ", run, ": ", disagreement));
      if (run == kMaxLibraryRuns) {
        return absl::InternalError(absl::StrCat(
            "the library's reference for ", cmd.workload, "/", gpu::U64(cmd.seed),
            " is not reproducible: ", kMaxLibraryRuns, " runs on the same inputs, no two ",
            "consecutive ones agree under the task's rule (",
            absl::StrJoin(event.repeat_disagreements, "; "), ")"));
      }
    }
    // The latest run is what the next one is checked against.
    std::vector<void*> pointers = set_->OutputPointers();
    for (size_t k = 0; k < stored.buffers.size(); ++k) {
      PTXBENCH_CUDA_TRY(cudaMemcpyAsync(stored.buffers[k].get(), pointers.at(k),
                                        stored.outputs[k].bytes, cudaMemcpyDeviceToDevice, stream));
    }
  }
  ASSIGN_OR_RETURN(stored.fp64,
                   ComputeFp64Reference(task_, *workload, *set_, *gpu_.builtins, stream));
  RETURN_IF_ERROR(gpu::SynchronizeDevice());
  references_[{cmd.workload, cmd.seed}] = std::move(stored);
  event.seconds = Now() - t0;
  return event;
}

absl::Status ReferenceProcess::RunLibrary(cudaStream_t stream) {
  RETURN_IF_ERROR(baseline_->PoisonScratch(stream));
  RETURN_IF_ERROR(set_->PoisonOutputs(*gpu_.builtins, stream));
  return baseline_->Run(set_->InputPointers(), set_->OutputPointers(), stream);
}

absl::StatusOr<std::string> ReferenceProcess::RunsDisagree(const StoredReference& previous,
                                                           cudaStream_t stream) {
  const gpu::ToleranceRule rule = gpu::RuleOf(task_.tolerance);
  std::vector<void*> pointers = set_->OutputPointers();
  std::vector<std::string> why;
  for (size_t k = 0; k < previous.outputs.size(); ++k) {
    const gpu::WorkloadTensor& t = previous.outputs[k];
    ASSIGN_OR_RETURN(gpu::CompareReport report,
                     gpu_.builtins->Compare(pointers.at(k), previous.buffers[k].get(), t.elements,
                                            gpu::ElementTypeOf(t.dtype), t.shape, rule,
                                            gpu::PoisonPattern(t.dtype), stream));
    if (report.pass && report.nonfinite == 0 && report.reference_nonfinite == 0) continue;
    std::string first;
    if (!report.first_mismatches.empty()) {
      const gpu::Mismatch& m = report.first_mismatches[0];
      first = absl::StrFormat("; first at [%s]: %g, before %g", absl::StrJoin(m.coordinates, ","),
                              m.got, m.expected);
    }
    why.push_back(absl::StrFormat(
        "%s: %d non-finite now, %d before, %d unwritten; relative norm %.3g, worst block %d "
        "(%.3g)%s%s",
        t.name, report.nonfinite, report.reference_nonfinite, report.unwritten,
        report.relative_norm, report.worst_block, report.worst_block_relative_norm,
        report.reason.empty() ? "" : "; ", report.reason + first));
  }
  return absl::StrJoin(why, "; ");
}

// A candidate buffer that cannot be mapped is reported (ipc_failed), not an error: the
// supervisor then asks for files.
absl::StatusOr<gpu::CompareEvent> ReferenceProcess::Compare(const gpu::CompareCommand& cmd) {
  double t0 = Now();
  ASSIGN_OR_RETURN(const Workload* workload, FindWorkload(task_, cmd.workload));
  (void)workload;
  auto stored = references_.find({cmd.workload, cmd.seed});
  if (stored == references_.end()) {
    return absl::InternalError(absl::StrCat("no reference for ", cmd.workload, "/",
                                            gpu::U64(cmd.seed), " to compare with"));
  }
  gpu::CompareEvent event{cmd.workload, cmd.seed, {}, std::nullopt, 0};
  const gpu::ToleranceRule rule = gpu::RuleOf(task_.tolerance);
  cudaStream_t stream = gpu_.stream.get();
  const StoredReference& ref = stored->second;
  for (size_t k = 0; k < ref.outputs.size(); ++k) {
    const gpu::WorkloadTensor& t = ref.outputs[k];
    const gpu::OutputHandle* handle = nullptr;
    for (const gpu::OutputHandle& o : cmd.outputs) {
      if (o.tensor == t.name) handle = &o;
    }
    if (handle == nullptr) return absl::InternalError("the candidate handed over no " + t.name);
    gpu::ImportedBuffer imported;
    const void* got = nullptr;
    if (handle->transfer == gpu::OutputTransfer::kIpc) {
      auto opened = gpu::ImportedBuffer::Open(handle->handle);
      if (!opened.ok()) {
        event.tensors.clear();
        event.ipc_failed = std::string(opened.status().message());
        break;
      }
      imported = std::move(*opened);
      got = imported.get();
    } else {
      ASSIGN_OR_RETURN(std::string bytes, gpu::ReadFileBytes(handle->handle));
      if (bytes.size() != t.bytes) {
        return absl::InternalError(
            absl::StrCat("output ", t.name, ": ", bytes.size(), " bytes, expected ", t.bytes));
      }
      if (upload_.bytes() < t.bytes) {
        upload_.Reset();
        ASSIGN_OR_RETURN(upload_, gpu::DeviceBuffer::Allocate(t.bytes));
      }
      PTXBENCH_CUDA_TRY(
          cudaMemcpyAsync(upload_.get(), bytes.data(), t.bytes, cudaMemcpyHostToDevice, stream));
      got = upload_.get();
    }
    ASSIGN_OR_RETURN(
        gpu::CompareReport report,
        gpu_.builtins->Compare(got, ref.buffers[k].get(), t.elements, gpu::ElementTypeOf(t.dtype),
                               t.shape, rule, gpu::PoisonPattern(t.dtype), stream));
    if (auto f = ref.fp64.find(t.name); f != ref.fp64.end()) {
      ASSIGN_OR_RETURN(gpu::Fp64Sums sums,
                       gpu_.builtins->Fp64ErrorSums(
                           got, gpu::ElementTypeOf(t.dtype),
                           static_cast<const double*>(f->second.values.get()), t.elements, stream));
      const auto& listed = task_.tolerance.fp64_outputs;
      const bool judged = std::find(listed.begin(), listed.end(), t.name) != listed.end();
      gpu::ApplyFp64Reference(sums, judged ? task_.tolerance.fp64_max_relative_norm : 0,
                              f->second.library_relative_norm, &report);
    }
    event.tensors[t.name] = report;
  }
  event.seconds = Now() - t0;
  // Each (workload, seed) is compared once; a failed mapping is retried with files.
  if (!event.ipc_failed.has_value() && !cmd.keep) references_.erase(stored);
  return event;
}

absl::StatusOr<gpu::ReferenceSketchesEvent> ReferenceProcess::Sketch(
    const gpu::SketchReferenceCommand& cmd) {
  double t0 = Now();
  if (cmd.projections == 0 || cmd.projections > gpu::kSketchMaxProjections) {
    return absl::InvalidArgumentError(absl::StrCat("sketch_reference: ", cmd.projections,
                                                   " projections (1..", gpu::kSketchMaxProjections,
                                                   ")"));
  }
  ASSIGN_OR_RETURN(const Workload* workload, FindWorkload(task_, cmd.workload));
  RETURN_IF_ERROR(UseWorkload(*workload));
  // allclose: the tolerance sums of max(atol, rtol |ref|); a relative-norm rule needs only
  // sum ref^2 (sketch.h).
  const gpu::ToleranceRule rule = gpu::RuleOf(task_.tolerance);
  const bool allclose = rule.all_close;
  cudaStream_t stream = gpu_.stream.get();
  gpu::ReferenceSketchesEvent event;
  event.workload = cmd.workload;
  event.sketches.projections = cmd.projections;
  for (const gpu::WorkloadTensor& t : set_->tensors()) {
    if (t.output) event.sketches.tensors.push_back(t.name);
  }
  for (const gpu::CheckedSample& sample : cmd.samples) {
    RETURN_IF_ERROR(set_->GenerateInputs(*gpu_.builtins, sample.seed, stream));
    RETURN_IF_ERROR(RunLibrary(stream));
    const uint64_t key = gpu::SketchKey(cmd.sketch_seed, sample.seed);
    gpu::SampleSketch sketch{sample.sample, false, sample.seed, {}};
    std::vector<void*> pointers = set_->OutputPointers();
    uint32_t ordinal = 0;
    for (const gpu::WorkloadTensor& t : set_->tensors()) {
      if (!t.output) continue;
      ASSIGN_OR_RETURN(gpu::TensorSketch tensor,
                       gpu_.builtins->Sketch(pointers.at(ordinal), t.elements, t.dtype, key,
                                             ordinal, cmd.projections, allclose ? rule.atol : 0,
                                             allclose ? rule.rtol : 0, stream));
      ++ordinal;
      sketch.tensors.push_back(std::move(tensor));
    }
    event.sketches.samples.push_back(std::move(sketch));
  }
  RETURN_IF_ERROR(gpu::SynchronizeDevice());
  event.seconds = Now() - t0;
  return event;
}

}  // namespace

int ReferenceMode(const gpu::ReferenceRequest& request) {
  auto task = LoadCheckedTask(request.task);
  if (!task.ok()) return Fail(kExitInfrastructure, gpu::ErrorKind::kInfrastructure, task.status());
  auto g = OpenGpu(request.gpu);
  if (!g.ok()) return Fail(kExitInfrastructure, gpu::ErrorKind::kUnavailable, g.status());
  ReferenceProcess process(std::move(*task), std::move(*g), request.hash_key);
  const gpu::DeviceDescription device = process.Device();
  Emit(gpu::ReadyEvent{device, false});
  CommandReader commands;
  while (true) {
    auto next =
        commands
            .Next<gpu::QuitCommand, gpu::ResetCommand, gpu::BeginCommand,
                  gpu::ComputeReferenceCommand, gpu::CompareCommand, gpu::SketchReferenceCommand>();
    if (!next.ok())
      return Fail(kExitInfrastructure, gpu::ErrorKind::kInfrastructure, next.status());
    if (!next->has_value() || std::holds_alternative<gpu::QuitCommand>(**next)) return kExitOk;
    absl::Status status = std::visit(
        [&](const auto& cmd) -> absl::Status {
          using Command = std::decay_t<decltype(cmd)>;
          if constexpr (std::is_same_v<Command, gpu::ResetCommand>) {
            Emit(process.Reset());
          } else if constexpr (std::is_same_v<Command, gpu::BeginCommand>) {
            process.Begin(cmd.hash_key);
            Emit(gpu::ReadyEvent{device, true});
          } else if constexpr (std::is_same_v<Command, gpu::ComputeReferenceCommand>) {
            ASSIGN_OR_RETURN(gpu::ReferenceEvent event, process.Compute(cmd));
            Emit(event);
          } else if constexpr (std::is_same_v<Command, gpu::CompareCommand>) {
            ASSIGN_OR_RETURN(gpu::CompareEvent event, process.Compare(cmd));
            Emit(event);
          } else if constexpr (std::is_same_v<Command, gpu::SketchReferenceCommand>) {
            ASSIGN_OR_RETURN(gpu::ReferenceSketchesEvent event, process.Sketch(cmd));
            Emit(event);
          }
          return absl::OkStatus();
        },
        **next);
    if (!status.ok()) return Fail(kExitInfrastructure, gpu::ErrorKind::kInfrastructure, status);
  }
}

}  // namespace ptxbench::evaluator
