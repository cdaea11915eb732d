#include "worker/daemon/engine_executor.h"

#include <spdlog/spdlog.h>
#include <sys/random.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/build_info.h"
#include "common/task.h"
#include "worker/engine/evaluate.h"

namespace ptxbench::worker {
namespace {

// 64 bits from the kernel's random source, which no other worker and no submission can
// predict: a producer that knew which artifacts are verified would forge only the others. When
// it fails (it does not on Linux >= 3.17 once the pool is initialised), 0, which ShouldVerify
// turns into "verify" for any fraction above 0.
uint64_t SecretDraw() {
  uint64_t draw = 0;
  if (getrandom(&draw, sizeof draw, 0) != static_cast<ssize_t>(sizeof draw)) return 0;
  return draw;
}

class EngineExecutor : public JobExecutor {
 public:
  EngineExecutor(TaskCatalog catalog, engine::EngineOptions engine_options,
                 ExecutorIdentity identity, double verify_fraction)
      : catalog_(std::move(catalog)),
        engine_options_(std::move(engine_options)),
        identity_(std::move(identity)),
        verify_fraction_(verify_fraction) {}

  ExecutorIdentity Identity() const override { return identity_; }

  absl::StatusOr<Verdict> Run(const JobSpec& job, const StageCallback& on_stage,
                              const std::atomic<bool>& cancel) override {
    ASSIGN_OR_RETURN(JobResult result, RunWithArtifacts(job, on_stage, cancel));
    return std::move(result.verdict);
  }

  absl::StatusOr<JobResult> RunWithArtifacts(const JobSpec& job, const StageCallback& on_stage,
                                             const std::atomic<bool>& cancel) override {
    const Task* task = catalog_.Find(job.task_id);
    // A worker whose copy of the task differs from the server's would grade against another
    // definition; that is the deployment's fault, never the kernel's.
    if (task == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("task ", job.task_id, " is not in this worker's tasks folder"));
    }
    if (!job.task_version_hash.empty() && task->version_hash != job.task_version_hash) {
      return absl::FailedPreconditionError(absl::StrCat(
          "task ", job.task_id, " version mismatch: worker has ", task->version_hash.substr(0, 12),
          ", the job was accepted for ", job.task_version_hash.substr(0, 12)));
    }
    engine::EvaluationRequest request;
    request.task = task;
    request.arch = job.arch;
    request.language = job.language;
    request.source = job.source;
    request.launch_plan_json = job.launch_plan_json;
    request.compile_only = job.compile_only;
    // The compile job's module, when the lease carried one (compile_artifact.h): used, or on a
    // sample drawn from this worker's own randomness compiled again and compared.
    engine::ArtifactExchange artifacts;
    artifacts.offered = job.artifact;
    if (job.artifact.has_value()) {
      artifacts.verify = engine::ShouldVerify(verify_fraction_, SecretDraw());
    }
    request.artifacts = &artifacts;
    absl::StatusOr<Verdict> verdict = engine::Evaluate(request, engine_options_, on_stage, &cancel);
    if (!verdict.ok()) return verdict.status();
    verdict->report["harness_version"] = kHarnessVersion;
    verdict->report["task_version_hash"] = task->version_hash;
    verdict->report["worker_identity"] = {
        {"arch", identity_.arch},
        {"gpu_name", identity_.gpu_name},
        {"gpu_uuid", identity_.gpu_uuid},
        {"driver_version", identity_.driver_version},
        {"cuda_version", identity_.cuda_version},
    };
    JobResult result{*std::move(verdict), std::nullopt, std::nullopt};
    if (job.artifact.has_value()) result.artifact_use = artifacts.use;
    // Only a compile job's module serves another job: the evaluate job of its round.
    if (job.compile_only && result.verdict.verdict_class == VerdictClass::kCompiled) {
      result.artifact = std::move(artifacts.produced);
    }
    return result;
  }

  CompileCacheCounts CompileCache() const override {
    if (engine_options_.compile_cache == nullptr) return {};
    const engine::CompileCacheStats stats = engine_options_.compile_cache->stats();
    return {stats.hits, stats.misses, stats.tampered};
  }

  absl::Status HealthProbe() override {
    if (engine_options_.gpu < 0) return absl::OkStatus();
    absl::StatusOr<nlohmann::json> device = engine::HealthProbe(engine_options_);
    return device.ok() ? absl::OkStatus() : device.status();
  }

 private:
  TaskCatalog catalog_;
  engine::EngineOptions engine_options_;
  ExecutorIdentity identity_;
  const double verify_fraction_;
};

std::string JsonText(const nlohmann::json& json, const char* key) {
  if (!json.contains(key)) return "";
  const nlohmann::json& value = json[key];
  return value.is_string() ? value.get<std::string>() : value.dump();
}

}  // namespace

absl::StatusOr<std::unique_ptr<JobExecutor>> CreateEngineExecutor(
    const EngineExecutorOptions& options) {
  absl::StatusOr<TaskCatalog> catalog = TaskCatalog::Load(options.tasks_dir);
  if (!catalog.ok()) {
    return absl::Status(
        catalog.status().code(),
        absl::StrCat("loading tasks from ", options.tasks_dir, ": ", catalog.status().message()));
  }
  engine::EngineOptions engine_options;
  engine_options.evaluator_path = options.evaluator_path;
  engine_options.gpu = options.gpu;
  engine_options.timing.baseline_selection = options.baseline_selection;
  // One cache for every job of this daemon: a compile job and the evaluate job after it, or a
  // source submitted again, compile once on this worker (issue 16).
  engine_options.compile_cache = std::make_shared<engine::CompileCache>();
  if (engine_options.evaluator_path.empty()) {
    engine_options.evaluator_path = engine::DefaultEvaluatorPath();
  }
  if (!std::filesystem::exists(engine_options.evaluator_path)) {
    return absl::NotFoundError(absl::StrCat("the sandboxed evaluator ",
                                            engine_options.evaluator_path,
                                            " does not exist; pass --evaluator PATH"));
  }
  ExecutorIdentity identity;
  identity.harness_version = kHarnessVersion;
  if (!options.compile_only) {
    // A GPU worker must prove its GPU works before it registers: a daemon on a broken node
    // would otherwise take jobs and fail every one as infrastructure.
    absl::StatusOr<nlohmann::json> device = engine::HealthProbe(engine_options);
    if (!device.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("GPU ", options.gpu, " is not usable (", device.status().message(),
                       "); run with --compile-only on machines without a GPU"));
    }
    identity.arch = JsonText(*device, "arch");
    identity.gpu_name = JsonText(*device, "name");
    identity.gpu_uuid = JsonText(*device, "uuid");
    identity.driver_version = JsonText(*device, "driver_version");
    identity.cuda_version = JsonText(*device, "runtime_version");
    spdlog::info("GPU {}: {} ({}, {})", options.gpu, identity.gpu_name, identity.arch,
                 identity.gpu_uuid);
    // Jobs that overlap on this GPU take turns for their GPU stages; with one job at a time
    // there is nothing to take turns with, and no gate keeps the engine exactly as before.
    if (options.gpu_pipeline > 1) engine_options.gpu_gate = std::make_shared<engine::GpuGate>();
  } else {
    engine_options.gpu = -1;
  }
  return std::unique_ptr<JobExecutor>(new EngineExecutor(
      *std::move(catalog), engine_options, identity, options.artifact_verify_fraction));
}

}  // namespace ptxbench::worker
