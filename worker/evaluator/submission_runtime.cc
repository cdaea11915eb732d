#include "worker/evaluator/submission_runtime.h"

#include <algorithm>
#include <utility>

#include "common/status.h"

namespace ptxbench::evaluator {

absl::Status SubmissionRuntime::OpenDevice(const gpu::Submission& s, int gpu_ordinal,
                                           uint64_t key) {
  submission = s;
  hash_key = key;
  ASSIGN_OR_RETURN(task, LoadCheckedTask(s.task));
  ASSIGN_OR_RETURN(gpu, OpenGpu(gpu_ordinal));
  return absl::OkStatus();
}

absl::Status SubmissionRuntime::OpenModule(const gpu::ModulePaths& paths) {
  ASSIGN_OR_RETURN(cubin, gpu::ReadFileBytes(paths.cubin_path));
  ASSIGN_OR_RETURN(std::string ptx, gpu::ReadFileBytes(paths.ptx_path));
  ASSIGN_OR_RETURN(plans, ResolvePlans(task, submission, KernelsOf(ptx)));
  return absl::OkStatus();
}

void PreparedSets::Schedule(std::vector<std::string> workloads) {
  std::lock_guard<std::mutex> lock(mu_);
  scheduled_ = std::move(workloads);
}

void PreparedSets::Make(const Task& task) {
  while (true) {
    std::string name;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (scheduled_.empty()) return;
      name = scheduled_.front();
      scheduled_.erase(scheduled_.begin());
      making_ = name;
    }
    absl::StatusOr<gpu::TensorSet> made = [&]() -> absl::StatusOr<gpu::TensorSet> {
      ASSIGN_OR_RETURN(const Workload* w, FindWorkload(task, name));
      ASSIGN_OR_RETURN(auto tensors, gpu::ResolveTensors(task, *w));
      return gpu::TensorSet::Allocate(std::move(tensors));
    }();
    std::lock_guard<std::mutex> lock(mu_);
    made_.insert_or_assign(name, std::move(made));
    making_.clear();
    made_cv_.notify_all();
  }
}

std::optional<absl::StatusOr<gpu::TensorSet>> PreparedSets::Take(const std::string& name) {
  std::unique_lock<std::mutex> lock(mu_);
  // Not begun yet: the taker makes it now (Make then never sees it).
  auto scheduled = std::find(scheduled_.begin(), scheduled_.end(), name);
  if (scheduled != scheduled_.end()) {
    scheduled_.erase(scheduled);
    return std::nullopt;
  }
  made_cv_.wait(lock, [&] { return making_ != name; });
  auto made = made_.find(name);
  if (made == made_.end()) return std::nullopt;
  absl::StatusOr<gpu::TensorSet> set = std::move(made->second);
  made_.erase(made);
  return set;
}

absl::Status SubmissionRuntime::UseWorkload(const std::string& name) {
  if (workload == name) return absl::OkStatus();
  launcher = gpu::PlanLauncher();
  set = gpu::TensorSet();
  if (std::optional<absl::StatusOr<gpu::TensorSet>> made = prepared_sets.Take(name)) {
    ASSIGN_OR_RETURN(set, std::move(*made));
  } else {
    ASSIGN_OR_RETURN(const Workload* w, FindWorkload(task, name));
    ASSIGN_OR_RETURN(auto tensors, gpu::ResolveTensors(task, *w));
    ASSIGN_OR_RETURN(set, gpu::TensorSet::Allocate(std::move(tensors)));
  }
  auto plan = plans.find(name);
  if (plan == plans.end()) return absl::InternalError("no resolved plan for " + name);
  ASSIGN_OR_RETURN(launcher, gpu::PlanLauncher::Create(plan->second, set));
  workload = name;
  return absl::OkStatus();
}

absl::Status SubmissionRuntime::ReloadModule() {
  RETURN_IF_ERROR(module.Unload());
  ASSIGN_OR_RETURN(module, gpu::Module::Load(cubin.data()));
  return launcher.Bind(module);
}

absl::StatusOr<gpu::TrialEvent> RunTrial(SubmissionRuntime& s, const std::string& workload,
                                         uint64_t seed, const std::string& prefix,
                                         gpu::OutputTransfer transfer) {
  double t0 = Now();
  RETURN_IF_ERROR(s.UseWorkload(workload));
  RETURN_IF_ERROR(s.ReloadModule());
  cudaStream_t stream = s.gpu.stream.get();
  gpu::Builtins& builtins = *s.gpu.builtins;
  RETURN_IF_ERROR(s.set.GenerateInputs(builtins, seed, stream));
  ASSIGN_OR_RETURN(uint64_t before, s.set.HashInputs(builtins, s.hash_key, stream));
  RETURN_IF_ERROR(s.set.PoisonOutputs(builtins, stream));
  RETURN_IF_ERROR(s.launcher.ZeroScratch(stream));
  RETURN_IF_ERROR(builtins.FlushL2(stream));
  ASSIGN_OR_RETURN(gpu::Event start, gpu::Event::Create());
  ASSIGN_OR_RETURN(gpu::Event end, gpu::Event::Create());
  if (cudaEventRecord(start.get(), stream) != cudaSuccess) {
    return absl::InternalError("event record");
  }
  RETURN_IF_ERROR(s.launcher.LaunchAll(stream));
  if (cudaEventRecord(end.get(), stream) != cudaSuccess) return absl::InternalError("event record");
  RETURN_IF_ERROR(gpu::SynchronizeDevice());
  ASSIGN_OR_RETURN(double kernel_ms, gpu::ElapsedMs(start, end));
  ASSIGN_OR_RETURN(uint64_t after, s.set.HashInputs(builtins, s.hash_key, stream));
  gpu::TrialEvent event;
  ASSIGN_OR_RETURN(event.outputs, HandOverOutputs(s.set, transfer, prefix, stream));
  event.workload = workload;
  event.seed = seed;
  event.input_hash_before = before;
  event.input_hash_after = after;
  event.kernel_ms = kernel_ms;
  event.seconds = Now() - t0;
  return event;
}

}  // namespace ptxbench::evaluator
