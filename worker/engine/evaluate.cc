// Evaluate(): the stages of one evaluation as short functions over its processes
// (evaluate_processes.h), in the order compile -> correctness -> target instructions -> timing.
// Each stage either lets the next one run (nullopt) or decides the verdict; an error Status is
// an infrastructure failure.
#include "worker/engine/evaluate.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/build_info.h"
#include "common/expr.h"
#include "common/status.h"
#include "worker/engine/compile_cache.h"
#include "worker/engine/evaluate_processes.h"
#include "worker/engine/gpu/baseline_choice.h"
#include "worker/engine/gpu/compare.h"
#include "worker/engine/gpu/philox.h"
#include "worker/engine/gpu/protocol.h"
#include "worker/engine/gpu/sketch.h"
#include "worker/engine/gpu/stats.h"
#include "worker/engine/gpu/target_analysis.h"
#include "worker/engine/gpu/work_share.h"
#include "worker/engine/sandbox.h"

namespace ptxbench::engine {
namespace {

using json = nlohmann::json;
using evaluation::CachedTimedBaseline;
using evaluation::CandidateProcess;
using evaluation::InstrumentProcess;
using evaluation::InstrumentSet;
using evaluation::Now;
using evaluation::Outcome;
using evaluation::ReferenceProcess;
using evaluation::SassMapProcess;
using evaluation::Step;
using evaluation::TimedBaselineKey;
using evaluation::Trim;
using evaluation::Workspace;
using gpu::U64;

std::string SelfDir() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string path(buf, static_cast<size_t>(n));
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

bool FileExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::optional<std::string> FindComputeSanitizer() {
  if (const char* env = std::getenv("PTXBENCH_COMPUTE_SANITIZER"); env && FileExists(env)) {
    return std::string(env);
  }
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    if (const char* root = std::getenv(var)) {
      std::string p = absl::StrCat(root, "/bin/compute-sanitizer");
      if (FileExists(p)) return p;
    }
  }
  if (FileExists("/usr/local/cuda/bin/compute-sanitizer")) {
    return std::string("/usr/local/cuda/bin/compute-sanitizer");
  }
  return std::nullopt;
}

struct OutputSpec {
  std::string name;
  uint64_t elements = 1;
};

absl::StatusOr<std::vector<OutputSpec>> OutputsOf(const Task& task, const Workload& w) {
  std::vector<OutputSpec> out;
  for (const TensorSpec& t : task.tensors) {
    if (t.role != TensorRole::kOutput) continue;
    OutputSpec o{t.name, 1};
    for (const std::string& d : t.shape) {
      ASSIGN_OR_RETURN(int64_t v, EvalIntExpr(d, w.axes));
      o.elements *= static_cast<uint64_t>(v);
    }
    out.push_back(std::move(o));
  }
  return out;
}

using StageResult = absl::StatusOr<std::optional<Verdict>>;

StageResult Decided(absl::StatusOr<Verdict> v) {
  if (!v.ok()) return v.status();
  return std::optional<Verdict>(std::move(*v));
}

// The verdict and audit report being built.
class Record {
 public:
  Record(const Workspace& workspace, const StageCallback& on_stage)
      : workspace_(workspace), on_stage_(on_stage), t_start_(Now()) {}

  Verdict& verdict() { return verdict_; }
  json& report() { return report_; }
  json& seeds() { return seeds_; }
  void AddProcess(json process) { processes_.push_back(std::move(process)); }
  void AddKernelSeconds(double seconds) { kernel_seconds_ += seconds; }
  void SetDevice(const gpu::DeviceDescription& device) { device_ = device; }

  void Report(Stage stage, bool ok, const std::string& summary, json detail, double seconds) {
    StageReport r;
    r.stage = stage;
    r.ok = ok;
    r.summary = summary;
    r.detail = std::move(detail);
    r.seconds = seconds;
    verdict_.stages.push_back(r);
    if (on_stage_) on_stage_(r);
  }

  Verdict Finish(VerdictClass c, const std::string& message) {
    verdict_.verdict_class = c;
    verdict_.message = message;
    // An impossible time means the measurement cannot be trusted (work outside the timed
    // region, results from elsewhere): the submission fails as a whole, TIC included.
    verdict_.tic_paper = verdict_.compiled && verdict_.correct && verdict_.target_executed &&
                         c != VerdictClass::kImpossibleTime;
    // The strong definition: the verdict class follows it, and a check that was not made
    // never counts as met.
    verdict_.tic = verdict_.tic_paper && c == VerdictClass::kPass &&
                   verdict_.target_work.strong_check == StrongCheck::kMade;
    const Task& task = workspace_.task();
    verdict_.harness = {kHarnessVersion, task.JudgingHash()};
    report_["seeds"] = seeds_;
    // Disclosed after the fact: the evaluation is reproducible.
    report_["secret"] = U64(workspace_.secret());
    report_["processes"] = processes_;
    report_["wall"] = {{"total_seconds", Now() - t_start_},
                       {"kernel_seconds", kernel_seconds_},
                       {"overhead_seconds", Now() - t_start_ - kernel_seconds_}};
    report_["task"] = {{"id", task.id}, {"version_hash", task.version_hash}};
    report_["arch"] = workspace_.request().arch;
    if (device_.has_value()) report_["device"] = gpu::ToJson(*device_);
    verdict_.report = report_;
    return verdict_;
  }

 private:
  const Workspace& workspace_;
  const StageCallback& on_stage_;
  double t_start_;
  Verdict verdict_;
  json report_ = json::object();
  json processes_ = json::array();
  json seeds_ = json::object();
  double kernel_seconds_ = 0;  // Inside the submission's and the baseline's launches.
  std::optional<gpu::DeviceDescription> device_;
};

// The strong check's evidence, gathered by two stages: the instrumented runs' target work
// (TargetStage) and the timed path's counters (TimingStage; nullopt until collected, the reason
// says why not). Judge() relates them (work_share.h).
struct StrongCheckEvidence {
  std::optional<gpu::ProfiledWork> profiled;
  std::optional<gpu::WorkShare> work_share;
  std::vector<std::map<std::string, double>> counted_metrics;
  double counted_median_ms = 0;  // The counted launches' median time (0: none).
  double timed_median_ms = 0;    // The timed samples' median.
  std::string counters_reason = "the timing stage did not run";

  // The work share against the arch's thresholds, and the profiled path against the timed one.
  gpu::TargetWorkJudgement Judge(const ArchSpec& arch, DType operands) const {
    gpu::PathAgreement path;
    path.reason = "the instrumented run's target work is not known (no SASS map)";
    if (work_share.has_value() && profiled.has_value()) {
      auto set = gpu::WorkCountersFor(arch.arch, operands);
      if (set.ok()) path = gpu::CompareProfiledWithTimed(*profiled, *set, counted_metrics);
      gpu::CheckCountedLaunchTimes(counted_median_ms, timed_median_ms, &path);
    } else if (!work_share.has_value()) {
      path.reason = "the timed path's counters were not collected";
    }
    std::optional<gpu::WorkShare> credited = work_share;
    if (work_share.has_value() && profiled.has_value()) {
      credited = gpu::CreditTaskPrecisionOnly(*work_share, *profiled);
    }
    return gpu::JudgeTargetWork(arch, credited, counters_reason, path);
  }
};

// One evaluation: its workspace, its processes and what the stages learned.
struct Evaluation {
  Evaluation(Workspace& w, const StageCallback& on_stage) : workspace(w), record(w, on_stage) {}
  ~Evaluation() {
    instruments.Clear();
    if (reference) reference->Release();
    reference.reset();
    candidate.reset();
    sassmap.reset();
    // gpu_hold, the first member, is destroyed last: the gate opens for the next job only once
    // every process above has been reaped (Sandbox's destructor kills and reaps) or handed to
    // the pool, so no CUDA context teardown of this job runs inside the next job's stages.
  }

  const Task& task() const { return workspace.task(); }
  const EngineOptions& options() const { return workspace.options(); }

  // Held from the correctness stage on when EngineOptions::gpu_gate is set (RunStages). Declared
  // first: see the destructor.
  GpuGate::Hold gpu_hold;
  bool gpu_gate_asked = false;
  Workspace& workspace;
  Record record;
  std::unique_ptr<ReferenceProcess> reference;
  std::unique_ptr<CandidateProcess> candidate;
  std::unique_ptr<SassMapProcess> sassmap;
  InstrumentSet instruments;
  std::string unavailable_reason;  // Why the runtime stages cannot run here.
  gpu::CompileEvent compile;
  gpu::CompiledModule module;  // When it compiled.
  gpu::DeviceDescription device;
  // How outputs reach the reference process: CUDA IPC until it reports it cannot map them.
  gpu::OutputTransfer transfer = gpu::OutputTransfer::kIpc;
  uint64_t instrument_seed = 0;
  // What the trials showed, for the derived watchdogs (DeriveWatchdogs).
  evaluation::WatchdogInputs watchdog_inputs;
  evaluation::Watchdogs watchdogs;
  StrongCheckEvidence evidence;
};

// ------------------------------------------------------------------ comparisons

// Has the reference process compare `outputs` (handed over by `owner`) with its reference of
// (workload, seed), on the GPU. When it cannot map the owner's buffers (CUDA IPC refused), the
// owner writes them to files under `prefix` and the evaluation goes on with files.
absl::StatusOr<gpu::CompareReport> CompareWithReference(
    Evaluation& e, const std::string& workload, uint64_t seed,
    std::vector<gpu::OutputHandle> outputs, json* detail, evaluation::EvaluatorProcess* owner,
    const std::string& prefix, bool keep_reference = false) {
  RETURN_IF_ERROR(e.reference->Reference(workload, seed).status());
  gpu::CompareEvent event;
  for (int attempt = 0;; ++attempt) {
    ASSIGN_OR_RETURN(event, e.reference->Compare(workload, seed, outputs, keep_reference));
    if (!event.ipc_failed.has_value()) break;
    // CUDA IPC refused between the two processes: files from now on.
    const std::string why = *event.ipc_failed;
    e.record.report()["output_transfer"] = {{"mode", "file"}, {"ipc_refused", why}};
    e.transfer = gpu::OutputTransfer::kFile;
    if (owner == nullptr || attempt > 0) {
      return absl::InternalError(absl::StrCat("the reference process cannot map outputs: ", why));
    }
    ASSIGN_OR_RETURN(outputs, owner->SaveOutputs(prefix, e.options().trial_timeout_seconds));
  }
  for (const gpu::OutputHandle& o : outputs) {
    // Outputs are large; the report keeps what matters.
    if (o.transfer == gpu::OutputTransfer::kFile) unlink(o.handle.c_str());
  }
  const Workload* w = nullptr;
  for (const Workload& x : e.task().workloads) {
    if (x.name == workload) w = &x;
  }
  if (w == nullptr) return absl::InternalError("unknown workload " + workload);
  ASSIGN_OR_RETURN(auto specs, OutputsOf(e.task(), *w));
  gpu::CompareReport worst;
  worst.pass = true;
  json per_tensor = json::object();
  for (const OutputSpec& o : specs) {
    auto it = event.tensors.find(o.name);
    if (it == event.tensors.end()) {
      return absl::InternalError("the reference process did not compare " + o.name);
    }
    const gpu::CompareReport& r = it->second;
    if (r.elements != o.elements) {
      return absl::InternalError(absl::StrFormat("output %s: %d elements compared, expected %d",
                                                 o.name, r.elements, o.elements));
    }
    if (r.reference_nonfinite > 0 || r.reference_norm == 0) {
      return absl::InternalError(absl::StrCat("reference for ", workload, "/", U64(seed), "/",
                                              o.name, " is degenerate: ", r.reason));
    }
    per_tensor[o.name] = gpu::ToJson(r);
    if (worst.pass && !r.pass) {
      worst = r;
      worst.reason = absl::StrCat(o.name, ": ", r.reason);
    } else if (worst.pass) {
      worst = r;
    }
  }
  (*detail)["tensors"] = per_tensor;
  (*detail)["reference_process_seconds"] = event.seconds;
  return worst;
}

// ------------------------------------------------------------------ runtime failures

// compute-sanitizer memcheck replays the failing trial in a fresh sandbox, for the feedback.
void SanitizerReplay(Evaluation& e, const std::string& workload, uint64_t seed, json* detail,
                     std::string* message) {
  std::optional<std::string> sanitizer = FindComputeSanitizer();
  if (!sanitizer) {
    (*detail)["compute_sanitizer"] = "not available on this worker";
    return;
  }
  double s0 = Now();
  auto dir_and_module = e.workspace.ModuleDir("sanitizer-", e.module.module);
  if (!dir_and_module.ok()) return;
  const auto& [dir, module] = *dir_and_module;
  gpu::ReplayRequest request{
      e.workspace.submission(), e.options().gpu, e.workspace.hash_key(), module, workload, seed,
      dir + "/replay"};
  auto path = e.workspace.WriteRequest(dir, gpu::ToJson(request));
  if (!path.ok()) return;
  SandboxOptions o;
  o.argv = {*sanitizer,
            "--tool",
            "memcheck",
            "--print-limit",
            "10",
            "--show-backtrace",
            "device",
            "--error-exitcode",
            "99",
            e.workspace.evaluator(),
            std::string(gpu::NameOf(gpu::EvaluatorMode::kReplay)),
            "--request",
            *path};
  o.private_dir = dir;
  o.env = MinimalEnv(dir);
  o.limits.wall_seconds = 60;
  o.isolate_network = e.options().isolate_network;
  o.drop_privileges = e.options().drop_privileges;
  o.cancel = e.workspace.cancel();
  auto sandbox = Sandbox::Start(o);
  if (!sandbox.ok()) return;
  SandboxExit exit = (*sandbox)->Wait();
  std::string lines;
  for (absl::string_view line : absl::StrSplit(exit.output_tail, '\n')) {
    if (absl::StartsWith(line, "=========") && lines.size() < 4000) {
      lines += std::string(line) + "\n";
    }
  }
  (*detail)["compute_sanitizer"] = {
      {"exit", ToJson(exit)}, {"report", lines}, {"seconds", Now() - s0}};
  if (!lines.empty()) *message += absl::StrCat("\ncompute-sanitizer memcheck:\n", lines);
}

// A step of a runtime stage that did not give its event: the kernel's verdict (plan invalid at
// run time, timeout, runtime error) or an infrastructure error.
template <typename Event>
absl::StatusOr<Verdict> RuntimeFailure(Evaluation& e, Stage stage, const Step<Event>& step,
                                       json detail, const std::string& workload, uint64_t seed,
                                       double seconds) {
  detail["workload"] = workload;
  detail["seed"] = U64(seed);
  detail["event"] = step.failure;
  if (step.outcome == Outcome::kCancelled) return absl::CancelledError("cancelled");
  if (step.outcome == Outcome::kInfrastructure) return absl::InternalError(step.message);
  if (step.outcome == Outcome::kPlanInvalid) {
    e.record.Report(stage, false, "launch plan invalid at run time", detail, seconds);
    return e.record.Finish(VerdictClass::kPlanInvalid,
                           absl::StrCat("launch plan invalid: ", step.message));
  }
  e.candidate.reset();
  if (step.outcome == Outcome::kTimeout) {
    // A hung kernel was killed: nothing of this GPU's state is kept.
    if (e.reference) e.reference->MarkFailed();
    // The GPU must still work for the next evaluation: probe it in a fresh process.
    // This evaluation holds the GPU gate (if any) already: the probe runs inside its turn, and
    // asking the non-reentrant gate again would wait for ever.
    EngineOptions probe_options = e.options();
    probe_options.gpu_gate = nullptr;
    auto health = HealthProbe(probe_options);
    detail["health_after_kill"] =
        health.ok() ? json("ok") : json(std::string(health.status().message()));
    e.record.Report(stage, false, "timeout", detail, seconds);
    if (!health.ok()) {
      return absl::UnavailableError(
          absl::StrCat("GPU unusable after killing a hung kernel: ", health.status().message()));
    }
    return e.record.Finish(VerdictClass::kTimeout,
                           absl::StrCat("timeout on workload '", workload, "': ", step.message));
  }
  // A kernel fault: optional compute-sanitizer replay of the same trial, for the feedback.
  std::string message = absl::StrCat("runtime error on workload '", workload, "': ", step.message);
  if (e.options().sanitizer_on_runtime_error) SanitizerReplay(e, workload, seed, &detail, &message);
  e.record.Report(stage, false, "runtime error", detail, seconds);
  return e.record.Finish(VerdictClass::kRuntimeError, message);
}

// ------------------------------------------------------------------ compile

// The compile cache's key for this submission, with the given toolchain versions.
std::string CompileKey(const Workspace& ws, const std::string& nvrtc, const std::string& ptxas) {
  const gpu::Submission& submission = ws.submission();
  CompileInputs inputs;
  inputs.task_id = ws.task().id;
  inputs.task_version_hash = ws.task().version_hash;
  inputs.arch = submission.arch;
  inputs.language = absl::StrCat(static_cast<int>(submission.language));
  inputs.source = submission.source;
  inputs.launch_plan_json = submission.launch_plan_json;
  inputs.nvrtc_version = nvrtc;
  inputs.ptxas_version = ptxas;
  inputs.harness_version = kHarnessVersion;
  return CompileCacheKey(inputs);
}

// A compile this stage did not run: its event, with the module written into the compile
// directory as the compiler would have written it, and the module's bytes.
struct ReadyCompile {
  gpu::CompileEvent event;
  engine::CachedCompile module;
};

// `module` (verified by its caller) written into `dir`; nullopt when it cannot be.
std::optional<ReadyCompile> WriteModule(engine::CachedCompile module, const std::string& dir) {
  auto event = gpu::FromJson<gpu::CompileEvent>(json::parse(module.event_json, nullptr, false));
  if (!event.ok() || !event->compiled.has_value()) return std::nullopt;
  gpu::ModulePaths paths{dir + "/module.cubin", dir + "/module.ptx"};
  if (!gpu::WriteFileBytes(paths.cubin_path, module.cubin).ok() ||
      !gpu::WriteFileBytes(paths.ptx_path, module.ptx).ok()) {
    return std::nullopt;
  }
  event->compiled->module = paths;
  return ReadyCompile{*std::move(event), std::move(module)};
}

// A compile of the same inputs with this worker's toolchain, from the compile cache
// (compile_cache.h), written into `dir`.
std::optional<ReadyCompile> CachedCompile(const Workspace& ws, const std::string& dir,
                                          std::string* key) {
  CompileCache* cache = ws.options().compile_cache.get();
  if (cache == nullptr) return std::nullopt;
  const auto [nvrtc, ptxas] = cache->Toolchain();
  if (ptxas.empty()) return std::nullopt;  // Nothing compiled on this worker yet.
  *key = CompileKey(ws, nvrtc, ptxas);
  std::optional<engine::CachedCompile> entry = cache->Get(*key);
  if (!entry.has_value()) return std::nullopt;
  return WriteModule(*std::move(entry), dir);
}

// A successful compile's module as the compile cache and a compile artifact keep it: the event
// with its module paths cleared, and the bytes read back from the compile directory.
std::optional<engine::CachedCompile> ReadCompiledModule(const gpu::CompileEvent& event) {
  if (event.outcome != gpu::CompileOutcome::kCompiled || !event.compiled.has_value()) {
    return std::nullopt;
  }
  auto cubin = gpu::ReadFileBytes(event.compiled->module.cubin_path);
  auto ptx = gpu::ReadFileBytes(event.compiled->module.ptx_path);
  if (!cubin.ok() || !ptx.ok()) return std::nullopt;
  gpu::CompileEvent stored = event;
  stored.compiled->module = {};
  const gpu::ModuleIdentity& identity = event.compiled->identity;
  return engine::CachedCompile{gpu::ToJson(stored).dump(), *std::move(cubin), *std::move(ptx),
                               identity.cubin_sha256, identity.ptx_sha256};
}

// Keeps a successful compile for the next evaluation of the same inputs on this worker, keyed
// by the toolchain versions the compile itself reported.
void StoreCompile(const Workspace& ws, const gpu::CompileEvent& event,
                  const std::optional<engine::CachedCompile>& module) {
  CompileCache* cache = ws.options().compile_cache.get();
  if (cache == nullptr || event.outcome != gpu::CompileOutcome::kCompiled ||
      !event.compiled.has_value()) {
    return;
  }
  const gpu::ModuleIdentity& identity = event.compiled->identity;
  const std::string& nvrtc = identity.nvrtc_version;
  const std::string& ptxas = identity.ptxas_version;
  if (ptxas.empty()) return;
  cache->SetToolchain(nvrtc, ptxas);
  if (!module.has_value()) return;
  // A refusal (bytes that do not hash to the report's SHA-256) is logged by the cache; the
  // evaluation goes on with the module it has.
  cache->Put(CompileKey(ws, nvrtc, ptxas), *module).IgnoreError();
}

// What a compile artifact is checked against: the toolchain of this worker's latest real
// compile (empty before the first) and its harness.
Toolchain OwnToolchain(const Workspace& ws) {
  Toolchain own;
  own.harness_version = kHarnessVersion;
  if (const CompileCache* cache = ws.options().compile_cache.get(); cache != nullptr) {
    std::tie(own.nvrtc_version, own.ptxas_version) = cache->Toolchain();
  }
  return own;
}

// This worker's own compile as an artifact for another worker.
CompileArtifact ArtifactOf(const engine::CachedCompile& module,
                           const gpu::ModuleIdentity& identity) {
  CompileArtifact artifact;
  artifact.cubin = module.cubin;
  artifact.ptx = module.ptx;
  artifact.cubin_sha256 = module.cubin_sha256;
  artifact.ptx_sha256 = module.ptx_sha256;
  artifact.compile_event_json = module.event_json;
  artifact.nvrtc_version = identity.nvrtc_version;
  artifact.ptxas_version = identity.ptxas_version;
  artifact.harness_version = kHarnessVersion;
  return artifact;
}

// The audit record of what the compile stage did with an offered artifact.
json ArtifactRecord(const CompileArtifact& offered, const ArtifactUse& use) {
  return {{"outcome", ArtifactOutcomeName(use.outcome)},
          {"detail", use.detail},
          {"producer_job_id", offered.producer_job_id},
          {"producer_worker_id", offered.producer_worker_id},
          {"cubin_sha256", offered.cubin_sha256},
          {"ptx_sha256", offered.ptx_sha256}};
}

// What this job did with another worker's compile artifact (compile_artifact.h), in the job's
// exchange and the audit record, and this worker's own compile offered for export.
void AccountForArtifacts(Evaluation& e, ArtifactExchange* exchange, const absl::Status& acceptable,
                         bool from_artifact, bool cache_hit,
                         const std::optional<engine::CachedCompile>& own_module, json* detail) {
  if (exchange == nullptr) return;
  const CompileArtifact* offered = exchange->offered.has_value() ? &*exchange->offered : nullptr;
  if (offered != nullptr) {
    if (!acceptable.ok()) {
      exchange->use = {ArtifactOutcome::kRefused, std::string(acceptable.message())};
    } else if (from_artifact) {
      exchange->use = {ArtifactOutcome::kUsed,
                       absl::StrCat("the compile stage used the module of compile job ",
                                    offered->producer_job_id, " (worker ",
                                    offered->producer_worker_id, ") instead of compiling")};
    } else {
      exchange->use = CompareWithOwnCompile(*offered, e.compile);
      if (cache_hit) absl::StrAppend(&exchange->use.detail, " (this worker's compile was cached)");
    }
    (*detail)["compile_artifact"] = ArtifactRecord(*offered, exchange->use);
    e.record.report()["compile_artifact"] = (*detail)["compile_artifact"];
  }
  if (!from_artifact && own_module.has_value() && e.compile.compiled.has_value()) {
    exchange->produced = ArtifactOf(*own_module, e.compile.compiled->identity);
  }
}

// The compile stage's verdict from the compile event in `e.compile`: a compile error, an invalid
// plan, or compiled (the SASS map then starts off the critical path; a compile-only job ends).
StageResult JudgeCompileOutcome(Evaluation& e, json detail, double t0) {
  Workspace& ws = e.workspace;
  Verdict& verdict = e.record.verdict();
  if (e.compile.outcome == gpu::CompileOutcome::kCompileError) {
    const std::string failure = e.compile.failure;
    e.record.Report(Stage::kCompile, false, absl::StrCat("compile error (", failure, ")"), detail,
                    Now() - t0);
    return std::optional<Verdict>(e.record.Finish(
        VerdictClass::kCompileError,
        absl::StrCat("compile error (", failure, "): ", Trim(e.compile.log, 2000))));
  }
  verdict.compiled = true;
  if (e.compile.outcome == gpu::CompileOutcome::kPlanInvalid || !e.compile.compiled.has_value()) {
    const std::string error = e.compile.plan_error.value_or("");
    detail["plan_error"] = error;
    e.record.Report(Stage::kCompile, false, "launch plan invalid", detail, Now() - t0);
    return std::optional<Verdict>(
        e.record.Finish(VerdictClass::kPlanInvalid, absl::StrCat("launch plan invalid: ", error)));
  }
  e.module = *e.compile.compiled;
  detail["launch_kernels"] = e.module.launch_kernels;
  // The timed workload's launches as the plan resolved them, so feedback can report the shared
  // memory each launch really uses (ptxas reports static shared memory only; a TMA pipeline's
  // ring is dynamic: 197,696 B for the reference GEMM).
  {
    json launches = json::array();
    for (const gpu::LaunchGeometry& l : e.module.timed_launches) launches.push_back(gpu::ToJson(l));
    detail["launches"] = std::move(launches);
  }
  if (!ws.request().compile_only) {
    // Off the critical path: TargetStage collects the map.
    ASSIGN_OR_RETURN(e.sassmap, SassMapProcess::Start(ws, e.module.module));
    e.record.AddProcess(
        {{"mode", "sassmap"}, {"event", "spawned"}, {"isolation", e.sassmap->isolation()}});
  }
  e.record.Report(Stage::kCompile, true,
                  absl::StrFormat("compiled (%d-byte cubin) in %.2f s", e.module.cubin_bytes,
                                  e.compile.seconds),
                  detail, Now() - t0);
  if (ws.request().compile_only) {
    return std::optional<Verdict>(
        e.record.Finish(VerdictClass::kCompiled, "compiled (compile-only scope)"));
  }
  return std::optional<Verdict>();
}

StageResult CompileStage(Evaluation& e) {
  double t0 = Now();
  Workspace& ws = e.workspace;
  ASSIGN_OR_RETURN(std::string dir, ws.NewSandboxDir("compile-"));
  std::string cache_key;
  std::optional<ReadyCompile> ready = CachedCompile(ws, dir, &cache_key);
  const bool cache_hit = ready.has_value();
  // Another worker's compile of this submission (compile_artifact.h): used for this job only,
  // never put into the compile cache, where any later job of the same inputs would find it (a
  // re-judge round opened because its producer was distrusted included). This worker's own
  // compile, cached or run now (verify), is compared with it instead.
  ArtifactExchange* exchange = ws.request().artifacts;
  const CompileArtifact* offered =
      exchange != nullptr && exchange->offered.has_value() ? &*exchange->offered : nullptr;
  const absl::Status acceptable =
      offered != nullptr ? CheckArtifact(*offered, OwnToolchain(ws)) : absl::OkStatus();
  bool from_artifact = false;
  if (offered != nullptr && acceptable.ok() && !ready.has_value() && !exchange->verify) {
    ready = WriteModule({offered->compile_event_json, offered->cubin, offered->ptx,
                         offered->cubin_sha256, offered->ptx_sha256},
                        dir);
    from_artifact = ready.has_value();
  }
  std::optional<engine::CachedCompile> own_module;  // This worker's own compile's bytes.
  if (cache_hit) own_module = ready->module;
  std::optional<evaluation::EvaluatorProcess> compiler;
  json isolation = {{"compile_cache", from_artifact ? "artifact" : "hit"}};
  if (!ready.has_value()) {
    ASSIGN_OR_RETURN(std::string path,
                     ws.WriteRequest(dir, gpu::ToJson(gpu::CompileRequest{ws.submission(), dir})));
    ASSIGN_OR_RETURN(auto sandbox, ws.Spawn(gpu::EvaluatorMode::kCompile, path, dir,
                                            e.options().compile_timeout_seconds, true));
    compiler.emplace(std::move(sandbox), dir, t0);
    isolation = compiler->isolation();
  }
  // The reference and candidate processes start now, beside the compiler: their CUDA and
  // library start-up overlaps compile.
  if (!ws.request().compile_only) {
    e.reference = ReferenceProcess::Start(ws, /*allow_warm=*/true, &e.unavailable_reason);
    e.candidate = CandidateProcess::StartEarly(ws);
  }
  Verdict& verdict = e.record.verdict();
  if (from_artifact) {
    e.record.AddProcess({{"mode", "compile"},
                         {"compile_cache", "artifact"},
                         {"producer_job_id", offered->producer_job_id},
                         {"producer_worker_id", offered->producer_worker_id}});
    e.compile = std::move(ready->event);
  } else if (cache_hit) {
    e.record.AddProcess({{"mode", "compile"}, {"compile_cache", "hit"}, {"key", cache_key}});
    e.compile = std::move(ready->event);
  } else {
    Step<gpu::CompileEvent> step = compiler->Await<gpu::CompileEvent>(-1, "compile");
    SandboxExit exit = compiler->sandbox().Wait();
    e.record.AddProcess(
        {{"mode", "compile"}, {"seconds", exit.wall_seconds}, {"isolation", isolation}});
    if (step.outcome == Outcome::kTimeout) {
      if (offered != nullptr) {
        exchange->use = acceptable.ok() ? ArtifactUse{ArtifactOutcome::kNone,
                                                      "not compared: this worker's own compile "
                                                      "timed out"}
                                        : ArtifactUse{ArtifactOutcome::kRefused,
                                                      std::string(acceptable.message())};
        e.record.report()["compile_artifact"] = ArtifactRecord(*offered, exchange->use);
      }
      verdict.compiled = false;
      e.record.Report(Stage::kCompile, false, "compile timed out", {{"message", step.message}},
                      Now() - t0);
      return std::optional<Verdict>(e.record.Finish(
          VerdictClass::kCompileError, "the compiler did not finish within the time limit"));
    }
    if (step.outcome == Outcome::kCancelled) return absl::CancelledError("cancelled");
    if (!step.ok()) {
      return absl::InternalError(absl::StrCat("compile stage failed: ", step.message));
    }
    e.compile = std::move(step.event);
    // The bytes, read back only for whoever keeps them: the cache or another worker.
    if (ws.options().compile_cache != nullptr || exchange != nullptr) {
      own_module = ReadCompiledModule(e.compile);
    }
    StoreCompile(ws, e.compile, own_module);
  }
  json detail = e.compile.report;
  detail["isolation"] = isolation;
  detail["compile_cache"] = {{"hit", cache_hit}, {"key", cache_key}};
  AccountForArtifacts(e, exchange, acceptable, from_artifact, cache_hit, own_module, &detail);
  return JudgeCompileOutcome(e, std::move(detail), t0);
}

// ------------------------------------------------------------------ correctness

// The reference process says whether a GPU is usable here (and which): "" when it is, else why
// not. A warm process that does not answer is ended and a fresh one decides.
std::string AwaitDevice(Evaluation& e) {
  if (e.reference == nullptr) {
    return e.unavailable_reason.empty() ? "the reference process did not start"
                                        : e.unavailable_reason;
  }
  Step<gpu::ReadyEvent> ready = e.reference->Await<gpu::ReadyEvent>(120, "GPU start-up");
  if (!ready.ok() && e.reference->reused()) {
    e.reference.reset();
    e.reference = ReferenceProcess::Start(e.workspace, /*allow_warm=*/false, &e.unavailable_reason);
    if (e.reference != nullptr) ready = e.reference->Await<gpu::ReadyEvent>(120, "GPU start-up");
  }
  if (e.reference == nullptr || !ready.ok()) {
    std::string why = ready.event_message.empty() ? ready.message : ready.event_message;
    e.reference.reset();
    return why;
  }
  e.device = ready.event.device;
  e.record.SetDevice(e.device);
  gpu::BaselineChoiceCache::Process().NoteGpu(e.workspace.options().gpu, e.device.name);
  e.record.AddProcess({{"mode", "reference"},
                       {"reused", e.reference->reused()},
                       {"ready_seconds", Now() - e.reference->spawned_at()}});
  if (e.device.arch != e.workspace.request().arch) {
    return absl::StrCat("this GPU is ", e.device.name, " (", e.device.arch,
                        "), the submission targets ", e.workspace.request().arch);
  }
  return "";
}

struct Trial {
  std::string workload;
  uint64_t seed = 0;
  bool is_public = false;
};

// Seeds: public (fixed per task and workload) then secret (fresh per evaluation), small
// workloads first: most failures show there, cheaply.
std::vector<Trial> PlanTrials(Evaluation& e) {
  const Task& task = e.task();
  std::vector<Trial> trials;
  for (const Workload* w : task.WorkloadsInTrialOrder()) {
    json seeds = json::array();
    for (int i = 0; i < e.options().public_seeds; ++i) {
      uint64_t s =
          gpu::Mix64(evaluation::HashText(task.id + "/" + w->name) + static_cast<uint64_t>(i));
      trials.push_back({w->name, s, true});
      seeds.push_back({{"seed", U64(s)}, {"kind", "public"}});
    }
    for (int i = 0; i < std::max(1, w->trials); ++i) {
      uint64_t s = e.workspace.SecretSeed("trial/" + w->name, static_cast<uint64_t>(i));
      trials.push_back({w->name, s, false});
      seeds.push_back({{"seed", U64(s)}, {"kind", "secret"}});
    }
    e.record.seeds()[w->name] = seeds;
  }
  return trials;
}

// The distinct kernels of the timed plan with the index of their first launch. One process per
// distinct kernel: CUPTI instruments only the first kernel function that runs under patching in
// a process (docs/results/2026-11-30-h200-device-probe-1.log).
std::vector<std::pair<std::string, size_t>> DistinctKernels(const Evaluation& e) {
  std::vector<std::pair<std::string, size_t>> kernels;
  size_t i = 0;
  for (const std::string& name : e.module.launch_kernels) {
    if (std::none_of(kernels.begin(), kernels.end(), [&](auto& p) { return p.first == name; })) {
      kernels.push_back({name, i});
    }
    ++i;
  }
  return kernels;
}

// The instrumented processes (one per distinct kernel of the plan), started before the GPU gate
// once the module is known: their CUDA, CUPTI and module start-up (~0.35 s of every GEMM job's
// target-instruction stage when it ran inside the gate, H100 service bench run 13) then runs
// while the job ahead measures, as the candidate's and the reference's does. They launch nothing
// until "go" from TargetStage (evaluator/instrument_mode.cc Instrument: the workload's buffers
// and the module reload come before AwaitGo, input generation and every launch after it).
void StartInstrumentedProcesses(Evaluation& e) {
  e.instrument_seed = e.workspace.SecretSeed("instrument", 0);
  e.record.seeds()["instrument"] = U64(e.instrument_seed);
  e.instruments.StartEarly(e.workspace, e.module.module, DistinctKernels(e), e.instrument_seed,
                           e.transfer);
}

// The candidate process, started beside the compiler and now given the module, or started now
// with it; its "ready".
absl::StatusOr<Step<gpu::ReadyEvent>> StartCandidate(Evaluation& e) {
  if (e.candidate) {
    RETURN_IF_ERROR(e.candidate->GiveModule(e.workspace, e.module.module));
  } else {
    ASSIGN_OR_RETURN(e.candidate, CandidateProcess::StartWithModule(e.workspace, e.module.module));
  }
  return e.candidate->Await<gpu::ReadyEvent>(120, "candidate start-up");
}

// How one correctness trial ended when it did not pass: its verdict.
struct TrialFailure {
  VerdictClass verdict;
  std::string summary;
  std::string message;
};

// Judges one trial's event against its reference; nullopt: it passed. `trial` gets the record,
// `reference_seconds` the reference process's time for this trial (the watchdogs' basis).
absl::StatusOr<std::optional<TrialFailure>> JudgeTrial(Evaluation& e, const Trial& t, size_t k,
                                                       const gpu::TrialEvent& event,
                                                       double candidate_wait, double w0,
                                                       json* trial, double* reference_seconds) {
  ASSIGN_OR_RETURN(gpu::ReferenceEvent ref, e.reference->Reference(t.workload, t.seed));
  *reference_seconds = ref.seconds;
  const double reference_wait = Now() - w0 - candidate_wait;
  *trial = {{"workload", t.workload},
            {"seed", U64(t.seed)},
            {"seed_kind", t.is_public ? "public" : "secret"},
            {"kernel_ms", event.kernel_ms},
            {"reference_library_runs", ref.library_runs}};
  if (!ref.repeat_disagreements.empty()) {
    (*trial)["reference_repeat_disagreements"] = ref.repeat_disagreements;
  }
  if (event.input_hash_before != ref.input_hash) {
    return absl::InternalError(absl::StrCat(
        "candidate and reference processes generated different inputs for ", t.workload, " seed ",
        U64(t.seed), " (\"", U64(event.input_hash_before), "\" vs \"", U64(ref.input_hash), "\")"));
  }
  if (event.input_hash_after != event.input_hash_before) {
    (*trial)["input_mutated"] = true;
    return std::optional<TrialFailure>(
        TrialFailure{VerdictClass::kInputMutated, "inputs mutated",
                     absl::StrCat("the kernel changed its inputs (workload '", t.workload,
                                  "'): the inputs' hash differs before and after the launches")});
  }
  json compare_detail;
  double c0 = Now();
  const bool by_ipc = e.transfer == gpu::OutputTransfer::kIpc;
  ASSIGN_OR_RETURN(gpu::CompareReport cmp,
                   CompareWithReference(e, t.workload, t.seed, event.outputs, &compare_detail,
                                        e.candidate.get(), e.candidate->TrialPrefix(k)));
  (*trial)["compare"] = compare_detail;
  (*trial)["transfer"] = by_ipc && e.transfer == gpu::OutputTransfer::kIpc ? "ipc" : "file";
  (*trial)["pass"] = cmp.pass;
  (*trial)["seconds"] = {
      {"candidate_process", event.seconds},      {"waiting_for_candidate", candidate_wait},
      {"waiting_for_reference", reference_wait}, {"reference_process", ref.seconds},
      {"reference_setup", ref.setup_seconds},    {"compare", Now() - c0}};
  if (cmp.pass) return std::optional<TrialFailure>();
  std::string first;
  if (!cmp.first_mismatches.empty()) {
    const gpu::Mismatch& m = cmp.first_mismatches[0];
    first = absl::StrFormat("; first at [%s]: got %g, expected %g (%s)",
                            absl::StrJoin(m.coordinates, ","), m.got, m.expected, m.kind);
  }
  return std::optional<TrialFailure>(TrialFailure{
      VerdictClass::kWrongResult, absl::StrCat("wrong result on ", t.workload),
      absl::StrFormat("wrong result on workload '%s' (%s seed): %s; max abs error %.4g, max rel "
                      "error %.4g, matched ratio %.6f%s",
                      t.workload, t.is_public ? "public" : "secret", cmp.reason, cmp.max_abs_error,
                      cmp.max_rel_error, cmp.matched_ratio, first)});
}

// The timing and instrumentation watchdogs, from what the correctness trials showed on the
// timed workload (evaluation::DeriveWatchdogs); recorded in the audit report.
void DeriveLaterWatchdogs(Evaluation& e) {
  e.watchdog_inputs.loop = e.options().timing;
  // The loop's counted launches: counted_per_config for each single-pass configuration (at
  // most 8 for the work-share metrics on GH100, cuptiProfilerHostGetNumOfPasses), one more for
  // the target's, and never fewer than counted_min_total; under a plan of passes (stats.h
  // PlanCountedPasses) whole rounds of up to 8, and one more round in the warm-up. The bound
  // covers both plans.
  const gpu::TimingLoopOptions& loop_options = e.options().timing;
  constexpr size_t kMaxPasses = 8;
  const size_t rounds = std::max(loop_options.counted_per_config + 1,
                                 (loop_options.counted_min_total + kMaxPasses - 1) / kMaxPasses);
  e.watchdog_inputs.counted_samples =
      loop_options.counted_per_config == 0 && loop_options.counted_min_total == 0
          ? 0
          : (rounds + 1) * kMaxPasses;
  e.watchdogs = evaluation::DeriveWatchdogs(e.watchdog_inputs, e.options());
  e.record.report()["watchdogs"] = {
      {"timing_seconds", e.watchdogs.timing_seconds},
      {"instrument_seconds", e.watchdogs.instrument_seconds},
      {"instrument_fresh_seconds", e.watchdogs.instrument_fresh_seconds},
      {"basis", e.watchdogs.basis}};
}

// The verdict when no usable GPU of the task's arch is here: compiled, runtime unverified.
Verdict SkipRuntimeStages(Evaluation& e) {
  e.reference.reset();
  e.record.verdict().runtime_unverified = true;
  e.record.report()["runtime_skipped"] = e.unavailable_reason;
  return e.record.Finish(
      VerdictClass::kCompiled,
      absl::StrCat("compiled; correctness, target-instruction and timing stages were SKIPPED: ",
                   e.unavailable_reason));
}

StageResult CorrectnessStage(Evaluation& e) {
  double t0 = Now();
  const std::vector<Trial> trials = PlanTrials(e);
  for (const Trial& t : trials) RETURN_IF_ERROR(e.reference->Request(t.workload, t.seed));
  // The instrumented run's reference, queued now so it is ready when needed (its seed was
  // drawn when the instrumented processes started, StartInstrumentedProcesses).
  const std::string timed = e.task().TimedWorkload().name;
  RETURN_IF_ERROR(e.reference->Request(timed, e.instrument_seed));

  const bool candidate_early = e.candidate != nullptr;
  const double c0 = e.candidate ? e.candidate->spawned_at() : Now();
  ASSIGN_OR_RETURN(Step<gpu::ReadyEvent> ready, StartCandidate(e));
  json isolation = e.candidate->isolation();
  if (!ready.ok()) {
    return Decided(RuntimeFailure(e, Stage::kCorrectness, ready, {{"isolation", isolation}}, "", 0,
                                  Now() - t0));
  }
  e.record.AddProcess({{"mode", "candidate"},
                       {"started_early", candidate_early},
                       {"ready_seconds", Now() - c0},
                       {"isolation", isolation}});
  if (e.options().run_timing) {
    // Baseline handle, its buffers, NVML and the hardware counters' configuration: the candidate
    // process sets them up on threads of their own while the trials run. The counters only
    // now, with the gate held (RunStages says why).
    RETURN_IF_ERROR(e.candidate->Send(gpu::PrepareTimingCommand{
        timed, gpu::PreparedBaselineCandidates(e.options().timing),
        gpu::PreparedCounterSession(e.options().timing),
        CachedTimedBaseline(e.task(), e.device.name, e.options().timing)}));
  }
  // With files, every trial is queued at once: the candidate runs trial i+1 while its output of
  // trial i is compared (a failed evaluation just kills the process with the rest of its queue).
  // With CUDA IPC the reference process reads the candidate's own output buffers, so trial i+1
  // is sent once trial i is compared (a round trip of a few milliseconds).
  size_t sent = 0;
  auto send_trials = [&](size_t done) -> absl::Status {
    const size_t want =
        e.transfer == gpu::OutputTransfer::kIpc ? std::min(done + 1, trials.size()) : trials.size();
    for (; sent < want; ++sent) {
      const Trial& t = trials[sent];
      RETURN_IF_ERROR(e.candidate->Send(
          gpu::TrialCommand{t.workload, t.seed, e.candidate->TrialPrefix(sent), e.transfer}));
    }
    return absl::OkStatus();
  };
  json results = json::array();
  for (size_t k = 0; k < trials.size(); ++k) {
    const Trial& t = trials[k];
    RETURN_IF_ERROR(send_trials(k));
    double w0 = Now();
    Step<gpu::TrialEvent> step = e.candidate->Await<gpu::TrialEvent>(
        e.options().trial_timeout_seconds,
        absl::StrCat("correctness trial (workload ", t.workload, ")"));
    if (!step.ok()) {
      json detail = {{"trials", results}, {"isolation", isolation}};
      return Decided(
          RuntimeFailure(e, Stage::kCorrectness, step, detail, t.workload, t.seed, Now() - t0));
    }
    e.record.AddKernelSeconds(step.event.kernel_ms / 1000);
    json trial;
    double reference_s = 0;
    ASSIGN_OR_RETURN(std::optional<TrialFailure> failure,
                     JudgeTrial(e, t, k, step.event, Now() - w0, w0, &trial, &reference_s));
    if (t.workload == timed) {
      evaluation::WatchdogInputs& in = e.watchdog_inputs;
      in.trial_kernel_ms = std::max(in.trial_kernel_ms, step.event.kernel_ms);
      in.reference_ms = std::max(in.reference_ms, reference_s * 1000);
    }
    results.push_back(trial);
    if (failure.has_value()) {
      e.record.Report(Stage::kCorrectness, false, failure->summary,
                      {{"trials", results}, {"isolation", isolation}}, Now() - t0);
      return std::optional<Verdict>(e.record.Finish(failure->verdict, failure->message));
    }
  }
  e.record.verdict().correct = true;
  DeriveLaterWatchdogs(e);
  e.record.Report(Stage::kCorrectness, true,
                  absl::StrFormat("%d trials on %d workloads within tolerance", results.size(),
                                  e.task().workloads.size()),
                  {{"trials", results}, {"isolation", isolation}}, Now() - t0);
  return std::optional<Verdict>();
}

// ------------------------------------------------------------------ target instructions

// One instrumented run of `kernel`: the process started beside the correctness stage (told to
// go), or a fresh one (`host_inputs`: the fallback with the kernel first in its process).
absl::StatusOr<std::unique_ptr<InstrumentProcess>> InstrumentRun(Evaluation& e,
                                                                 const std::string& kernel,
                                                                 size_t launch_index,
                                                                 bool host_inputs) {
  if (!host_inputs) {
    if (auto ready = e.instruments.Go(kernel, e.transfer)) return ready;
  }
  return InstrumentProcess::Start(
      e.workspace, e.module.module,
      {kernel, launch_index, host_inputs, false, e.instrument_seed, e.transfer});
}

// The instrumented run computed on secret inputs: its outputs must be right as well, so a
// kernel cannot behave differently while it is watched. nullopt: they are.
StageResult JudgeInstrumentedOutputs(Evaluation& e, InstrumentProcess& p,
                                     const gpu::InstrumentEvent& event, json* summary,
                                     json* run_details, double t0) {
  const std::string timed = e.task().TimedWorkload().name;
  json compare_detail;
  ASSIGN_OR_RETURN(gpu::ReferenceEvent ref, e.reference->Reference(timed, e.instrument_seed));
  if (event.input_hash_before != ref.input_hash) {
    return absl::InternalError("instrumented run generated different inputs than the reference");
  }
  // The reference is kept: every kernel of the plan gets an instrumented run on this seed.
  ASSIGN_OR_RETURN(gpu::CompareReport cmp,
                   CompareWithReference(e, timed, e.instrument_seed,
                                        event.outputs.value_or(std::vector<gpu::OutputHandle>()),
                                        &compare_detail, &p, p.OutputPrefix(), true));
  p.Quit();  // Its exported outputs are no longer needed.
  (*summary)["compare"] = compare_detail;
  run_details->push_back(*summary);
  if (event.input_hash_after != event.input_hash_before) {
    e.record.Report(Stage::kTargetInstructions, false, "inputs mutated", {{"runs", *run_details}},
                    Now() - t0);
    return std::optional<Verdict>(e.record.Finish(
        VerdictClass::kInputMutated, "the kernel changed its inputs in the instrumented run"));
  }
  if (!cmp.pass) {
    e.record.Report(Stage::kTargetInstructions, false, "wrong result in the instrumented run",
                    {{"runs", *run_details}}, Now() - t0);
    e.record.verdict().correct = false;
    return std::optional<Verdict>(e.record.Finish(
        VerdictClass::kWrongResult,
        absl::StrCat("wrong result in the instrumented run (timed workload, secret seed): ",
                     cmp.reason)));
  }
  return std::optional<Verdict>();
}

// Every distinct kernel of the plan under CUPTI: first the faithful run (earlier launches
// executed, then the kernel instrumented); if CUPTI returned no records for the kernel, once
// more with the kernel as the first kernel of its process (inputs generated on the host), which
// the H200 probe showed CUPTI covers. The runs that count go to `runs`.
StageResult InstrumentKernels(Evaluation& e, std::vector<gpu::InstrumentEvent>* runs,
                              json* run_details, double t0) {
  const std::string timed = e.task().TimedWorkload().name;
  for (const auto& [kernel, launch_index] : DistinctKernels(e)) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      const bool host_inputs = attempt == 1;
      ASSIGN_OR_RETURN(std::unique_ptr<InstrumentProcess> p,
                       InstrumentRun(e, kernel, launch_index, host_inputs));
      const double k0 = p->spawned_at();
      const bool waited_for_go = p->run().wait_for_go;
      json isolation = p->isolation();
      // Derived from the trials: a kernel that hangs only under the profiler ends here in
      // seconds, not at the 300 s cap.
      const double deadline =
          waited_for_go ? e.watchdogs.instrument_seconds : e.watchdogs.instrument_fresh_seconds;
      Step<gpu::InstrumentEvent> step =
          p->Await<gpu::InstrumentEvent>(deadline, absl::StrCat("instrumented run of ", kernel));
      e.record.AddProcess({{"mode", "instrument"},
                           {"kernel", kernel},
                           {"host_inputs", host_inputs},
                           {"started_early", waited_for_go},
                           {"seconds_since_spawn", Now() - k0},
                           {"seconds", Now() - (waited_for_go ? t0 : k0)},
                           {"deadline_seconds", deadline},
                           {"isolation", isolation}});
      if (!step.ok()) {
        if (step.outcome == Outcome::kInfrastructure) {
          // Never a pass without the profiler's evidence: the job is an infrastructure failure.
          return absl::UnavailableError(absl::StrCat(
              "target instructions cannot be verified here (refused, not passed): ", step.message));
        }
        return Decided(RuntimeFailure(e, Stage::kTargetInstructions, step, {{"runs", *run_details}},
                                      timed, e.instrument_seed, Now() - t0));
      }
      const gpu::InstrumentEvent& event = step.event;
      e.record.AddKernelSeconds(event.instrumented_seconds);
      json summary = gpu::ToJson(event);
      summary.erase("records");
      summary["record_count"] = event.records.size();
      summary["isolation"] = isolation;
      const bool covered =
          std::any_of(event.records.begin(), event.records.end(),
                      [&kernel = kernel](const gpu::PcRecord& r) { return r.function == kernel; });
      summary["covered"] = covered;
      if (!host_inputs) {
        ASSIGN_OR_RETURN(std::optional<Verdict> done,
                         JudgeInstrumentedOutputs(e, *p, event, &summary, run_details, t0));
        if (done) return done;
      } else {
        summary["compare"] = "not compared: host-generated inputs (fallback run)";
        run_details->push_back(summary);
      }
      if (covered || host_inputs) {
        runs->push_back(std::move(step.event));
        break;
      }
    }
  }
  return std::optional<Verdict>();
}

StageResult TargetStage(Evaluation& e) {
  double t0 = Now();
  const ArchSpec* arch = e.task().FindArch(e.workspace.request().arch);
  std::vector<std::string> required = arch ? arch->target_families : std::vector<std::string>();
  std::vector<gpu::InstrumentEvent> runs;
  json run_details = json::array();
  ASSIGN_OR_RETURN(std::optional<Verdict> done, InstrumentKernels(e, &runs, &run_details, t0));
  if (done) return done;
  // The static SASS map, computed beside correctness.
  gpu::SassFamilyMap sass_map = gpu::UnavailableSassMap("the SASS map process did not run");
  if (e.sassmap) {
    sass_map = e.sassmap->Collect();
    e.record.AddProcess(
        {{"mode", "sassmap"}, {"seconds_since_spawn", Now() - e.sassmap->spawned_at()}});
    e.sassmap.reset();
  }
  gpu::TargetReport target = gpu::AnalyzeTargets(sass_map, runs, e.compile.ptx_families, required);
  json detail = gpu::ToJson(target);
  // The profiled side of the path cross-check (the timed side comes from the timing stage).
  const std::string matrix_family = gpu::MatrixFamilyOf(e.workspace.request().arch);
  if (sass_map.available && !matrix_family.empty()) {
    e.evidence.profiled =
        gpu::ProfiledWorkFromRuns(sass_map, runs, matrix_family, e.task().OperandType());
    detail["profiled_work"] = {
        {"target_flops", e.evidence.profiled->target_flops},
        {"target_warp_insts", e.evidence.profiled->target_warp_insts},
        {"bulk_copy_warp_insts", e.evidence.profiled->bulk_copy_warp_insts},
        {"tma_pipe_other_warp_insts", e.evidence.profiled->tma_pipe_other_warp_insts},
        {"flops_known", e.evidence.profiled->flops_known}};
  }
  detail["runs"] = run_details;
  json sass_summary = gpu::ToJson(sass_map);
  sass_summary.erase("functions");
  detail["sass"] = sass_summary;
  if (target.refused) {
    e.record.Report(Stage::kTargetInstructions, false, "not verified", detail, Now() - t0);
    return absl::UnavailableError(absl::StrCat("refused, not passed: ", target.message));
  }
  e.record.verdict().target_executed = target.ok;
  e.record.Report(Stage::kTargetInstructions, target.ok, target.message, detail, Now() - t0);
  return std::optional<Verdict>();
}

// ------------------------------------------------------------------ timing

}  // namespace

Sampling JudgeSampling(const gpu::TimingMeasurement& result) {
  Sampling s;
  s.stop_reason = result.stop_reason;
  s.converged = result.stop_reason == "converged";
  // The scatter of one side: the larger of its median's relative standard error and its
  // MAD / median (a loop that scatters on purpose keeps both high). rse -1: fewer than 3
  // samples, no estimate: counted as unbounded.
  auto scatter = [](const gpu::SampleStats& x) {
    const double rse = x.rse_median < 0 ? INFINITY : x.rse_median;
    const double mad = x.median_ms > 0 ? x.mad_ms / x.median_ms : INFINITY;
    return std::max(rse, mad);
  };
  s.candidate_scatter = scatter(result.candidate);
  s.baseline_scatter = scatter(result.baseline);
  // The library's scatter, but never below the loop's target RSE: a library that measured
  // unusually tight must not make an honest 0.6 % candidate "unstable".
  const double allowed = kUnstableScatterRatio * std::max(s.baseline_scatter, kMinScatterBasis);
  s.speedup_stable = s.candidate_scatter <= allowed;
  std::vector<std::string> notes;
  if (!s.converged) {
    notes.push_back(absl::StrFormat(
        "the timing loop ended at its %s without converging (median RSE %.3g %% candidate, "
        "%.3g %% library)",
        result.stop_reason == "sample_cap" ? "sample cap" : "time cap",
        result.candidate.rse_median * 100, result.baseline.rse_median * 100));
  }
  if (!s.speedup_stable) {
    notes.push_back(absl::StrFormat(
        "the candidate's samples scatter %.3g %% (RSE or MAD/median), more than %.0fx the "
        "library's %.3g %%: the speedup is not a stable figure",
        s.candidate_scatter * 100, kUnstableScatterRatio, s.baseline_scatter * 100));
  }
  s.note = absl::StrJoin(notes, "; ");
  return s;
}

namespace {

// The timed path's side of the strong check: the counted samples' metrics and the work share
// against the task's formulas for the timed workload; or why there is none.
void TimedWorkShare(Evaluation& e, const gpu::TimingMeasurement& result) {
  const gpu::CountedSamples& counters = result.counters;
  if (!counters.collected) {
    e.evidence.counters_reason = counters.not_collected_reason.empty()
                                     ? "the timing process collected no counted samples"
                                     : counters.not_collected_reason;
    return;
  }
  e.evidence.counted_metrics.clear();
  for (const gpu::CountedSample& sample : counters.samples) {
    e.evidence.counted_metrics.push_back(sample.metrics);
  }
  e.evidence.timed_median_ms = result.candidate.median_ms;
  e.evidence.counted_median_ms =
      result.counted_ms.empty() ? 0 : gpu::Quantile(result.counted_ms, 0.5);
  const Task& task = e.task();
  const Workload& timed = task.TimedWorkload();
  auto set = gpu::WorkCountersFor(e.workspace.request().arch, task.OperandType());
  auto flops = EvalRealExpr(task.flops_expr, timed.axes);
  auto bytes = EvalRealExpr(task.min_bytes_expr, timed.axes);
  if (!set.ok() || !flops.ok() || !bytes.ok()) {
    e.evidence.counters_reason = absl::StrCat(
        "no work-share formula: ",
        !set.ok() ? set.status().message()
                  : (!flops.ok() ? flops.status().message() : bytes.status().message()));
    return;
  }
  auto share = gpu::ComputeWorkShare(*set, e.evidence.counted_metrics, *flops, *bytes);
  if (!share.ok()) {
    e.evidence.counters_reason = std::string(share.status().message());
    return;
  }
  e.evidence.work_share = *std::move(share);
}

// The outputs of the timed launches, checked against fresh references of their secret seeds;
// "" when all pass, else the first failure.
absl::StatusOr<std::string> JudgeTimedChecks(Evaluation& e, const gpu::TimingEvent& event,
                                             json* checks) {
  const std::string timed = e.task().TimedWorkload().name;
  for (const gpu::TimedCheck& c : event.checks) {
    RETURN_IF_ERROR(e.reference->Request(timed, c.seed));
  }
  std::string wrong;
  for (const gpu::TimedCheck& c : event.checks) {
    json compare_detail;
    ASSIGN_OR_RETURN(gpu::CompareReport cmp, CompareWithReference(e, timed, c.seed, c.outputs,
                                                                  &compare_detail, nullptr, ""));
    checks->push_back({{"sample", c.sample},
                       {"seed", U64(c.seed)},
                       {"pass", cmp.pass},
                       {"compare", compare_detail}});
    if (!cmp.pass && wrong.empty())
      wrong = absl::StrCat("timed sample ", c.sample, ": ", cmp.reason);
  }
  return wrong;
}

// Every timed sample is checkable (docs/measurement.md, "Sketches"): the candidate process
// sketched the outputs of every launch of the loop, timed or counted; the reference sketches
// the launches chosen here, after the loop, from a secret the candidate process never held
// (all of them when the reference's cost fits the budget, else a subset that catches a kernel
// wrong on 5 % of its samples with probability 1 - 1e-6). "" when every compared sketch agrees,
// else the first mismatch; `detail` gets the figures.
absl::StatusOr<std::string> JudgeSketches(Evaluation& e, const gpu::TimeCommand& cmd,
                                          const gpu::TimingMeasurement& result, json* detail) {
  const gpu::SampleSketches& candidate = result.sketches;
  if (candidate.samples.empty()) {
    return absl::InternalError("the timing process returned no sketches although asked for");
  }
  // The reference recomputes each seed: input generation, the library call and the sketch,
  // about 3x the library's timed median (GEMM: ~2 ms per seed on the H200).
  const double seconds_per_seed = std::max(1e-3, 3e-3 * result.baseline.median_ms);
  constexpr double kBudgetSeconds = 1.5;
  const std::vector<size_t> chosen =
      gpu::SketchSamplesToVerify(candidate.samples.size(), seconds_per_seed, kBudgetSeconds,
                                 e.workspace.SecretSeed("timing/sketch-subset", 0));
  std::vector<gpu::CheckedSample> samples;
  samples.reserve(chosen.size());
  for (size_t i : chosen)
    samples.push_back({candidate.samples[i].sample, candidate.samples[i].seed});
  const double timeout = 30 + 10 * seconds_per_seed * static_cast<double>(samples.size());
  ASSIGN_OR_RETURN(
      gpu::SampleSketches reference,
      e.reference->Sketch(cmd.workload, samples, cmd.sketch_seed, candidate.projections, timeout));
  auto compared = gpu::CompareSketches(candidate, reference, gpu::RuleOf(e.task().tolerance));
  if (!compared.ok()) {
    if (!absl::IsInvalidArgument(compared.status())) return compared.status();
    // The task's rule bounds no error norm (all-close with matched_ratio < 1): the element-wise
    // checks stand alone, and the report says so.
    (*detail)["sketches"] = {{"verified", false},
                             {"reason", std::string(compared.status().message())}};
    return std::string();
  }
  json figures = gpu::ToJson(*compared);
  figures["verified"] = true;
  figures["launches_sketched"] = candidate.samples.size();
  figures["launches_verified"] = samples.size();
  (*detail)["sketches"] = figures;
  return compared->pass ? std::string() : absl::StrCat("the sketch of ", compared->reason);
}

// The timing loop's command, its secret seeds and the worker's cached baseline choice; the
// references of the checked samples are queued with the reference process meanwhile.
absl::StatusOr<gpu::TimeCommand> TimingCommand(Evaluation& e, const std::string& baseline_key) {
  const Workload& timed = e.task().TimedWorkload();
  const gpu::TimingLoopOptions& loop = e.options().timing;
  gpu::TimeCommand cmd{timed.name,
                       e.workspace.SecretSeed("timing/candidate", 0),
                       e.workspace.SecretSeed("timing/baseline", 0),
                       e.workspace.SecretSeed("timing/check", 0),
                       loop,
                       e.candidate->dir() + "/timed-check",
                       e.transfer,
                       e.workspace.SecretSeed("timing/counters", 0),
                       e.workspace.SecretSeed("timing/sketch", 0),
                       std::nullopt};
  // The fair baseline: the worker's earlier choice for the same key goes along, so that only
  // the first evaluation of a (task, workload, GPU model, operation) measures the candidates.
  if (loop.baseline_selection == gpu::BaselineSelection::kFastest) {
    cmd.cached_baseline = gpu::BaselineChoiceCache::Process().Find(baseline_key);
  }
  // The checked samples sit at secret positions the supervisor knows too: their references are
  // queued now and computed while the timing loop runs.
  for (size_t block = 0; block < loop.max_checks && loop.check_every > 0; ++block) {
    uint64_t index = gpu::CheckedSampleOfBlock(cmd.check_position_seed, block, loop.check_every);
    if (index >= loop.min_samples) break;  // Reached in every run; later ones may not be.
    RETURN_IF_ERROR(
        e.reference->Request(timed.name, gpu::SampleSeed(cmd.candidate_seed_base, index)));
  }
  return cmd;
}

// The timing stage's one-line summary: both medians, the speedup and how the baseline was chosen.
std::string TimingSummary(const Task& task, const gpu::TimingMeasurement& result,
                          const gpu::BaselineChoice& choice, double speedup) {
  std::string summary = absl::StrFormat(
      "candidate %.4f ms, %s %.4f ms (median of %d interleaved samples each): speedup %.3f",
      result.candidate.median_ms, task.baseline_library, result.baseline.median_ms,
      result.candidate.n, speedup);
  if (choice.selection == gpu::BaselineSelection::kFastest) {
    absl::StrAppend(
        &summary, "; baseline: the library's candidate #", choice.chosen,
        choice.measured
            ? absl::StrFormat(", fastest of %d (%.4f ms against the first choice's "
                              "%.4f ms)",
                              choice.candidates.size(), choice.chosen_ms, choice.first_ms)
            : std::string(", this worker's earlier choice"));
  }
  return summary;
}

StageResult TimingStage(Evaluation& e) {
  double t0 = Now();
  const Task& task = e.task();
  const Workload& timed = task.TimedWorkload();
  const std::string baseline_key = TimedBaselineKey(task, e.device.name);
  ASSIGN_OR_RETURN(const gpu::TimeCommand cmd, TimingCommand(e, baseline_key));
  RETURN_IF_ERROR(e.candidate->Send(cmd));
  // Derived from the trials: a kernel that hangs only in the timing loop ends here in seconds.
  Step<gpu::TimingEvent> step =
      e.candidate->Await<gpu::TimingEvent>(e.watchdogs.timing_seconds, "timing");
  if (!step.ok()) {
    return Decided(RuntimeFailure(e, Stage::kTiming, step,
                                  {{"deadline_seconds", e.watchdogs.timing_seconds}}, timed.name, 0,
                                  Now() - t0));
  }
  const gpu::TimingMeasurement& result = step.event.result;
  const gpu::BaselineChoice& choice = step.event.baseline_choice;
  if (choice.measured) {
    gpu::BaselineChoiceCache::Process().Store(baseline_key, {choice.chosen, step.event.baseline});
  }
  e.record.AddKernelSeconds(result.kernel_ms_total / 1000);
  TimedWorkShare(e, result);
  json checks = json::array();
  ASSIGN_OR_RETURN(std::string wrong, JudgeTimedChecks(e, step.event, &checks));
  json raw = gpu::ToJson(step.event);
  raw.erase("checks");
  json detail = {{"timing", raw}, {"checks", checks}};
  if (cmd.loop.sketch_projections > 0) {
    ASSIGN_OR_RETURN(std::string sketch_wrong, JudgeSketches(e, cmd, result, &detail));
    if (wrong.empty()) wrong = sketch_wrong;
  }
  const double candidate_ms = result.candidate.median_ms;
  const double baseline_ms = result.baseline.median_ms;
  Verdict& verdict = e.record.verdict();
  verdict.speedup = result.speedup;
  verdict.sampling = JudgeSampling(result);
  detail["sampling"] = ToJson(*verdict.sampling);
  // Roofline floor of the timed workload.
  auto flops = EvalRealExpr(task.flops_expr, timed.axes);
  auto bytes = EvalRealExpr(task.min_bytes_expr, timed.axes);
  double floor_ms = (flops.ok() && bytes.ok())
                        ? RooflineFloorMs(e.device, *flops, *bytes, task.OperandType())
                        : 0;
  detail["roofline_floor_ms"] = floor_ms;
  if (flops.ok()) detail["candidate_tflops"] = *flops / (candidate_ms * 1e-3) / 1e12;
  if (flops.ok()) detail["baseline_tflops"] = *flops / (baseline_ms * 1e-3) / 1e12;
  const std::string summary = TimingSummary(task, result, choice, verdict.speedup);
  if (!wrong.empty()) {
    verdict.correct = false;
    e.record.Report(Stage::kTiming, false, summary, detail, Now() - t0);
    return std::optional<Verdict>(
        e.record.Finish(VerdictClass::kWrongResult,
                        absl::StrCat("the outputs of the timed launches are wrong (", wrong,
                                     "): results must not depend on earlier launches")));
  }
  if (floor_ms > 0 && candidate_ms < floor_ms) {
    e.record.Report(Stage::kTiming, false, summary, detail, Now() - t0);
    return std::optional<Verdict>(e.record.Finish(
        VerdictClass::kImpossibleTime,
        absl::StrFormat("measured %.4g ms is below the roofline floor %.4g ms of this GPU: "
                        "impossible, rejected",
                        candidate_ms, floor_ms)));
  }
  e.record.Report(Stage::kTiming, true, summary, detail, Now() - t0);
  return std::optional<Verdict>();
}

// ------------------------------------------------------------------ the whole

Verdict Conclude(Evaluation& e) {
  if (e.candidate) e.candidate->Quit();
  Verdict& verdict = e.record.verdict();
  const std::string& library = e.task().baseline_library;
  if (!verdict.target_executed) {
    verdict.target_work.strong_check = StrongCheck::kNotReached;
    verdict.target_work.reason = "the target families did not execute";
    std::string message;
    for (const StageReport& s : verdict.stages) {
      if (s.stage == Stage::kTargetInstructions) message = s.summary;
    }
    return e.record.Finish(
        VerdictClass::kTargetNotExecuted,
        absl::StrCat("correct, but ", message,
                     verdict.speedup > 0
                         ? absl::StrFormat(" (speedup %.3f over %s)", verdict.speedup, library)
                         : ""));
  }
  // The strong check: work share on the timed path and the profiled path = the timed path.
  const gpu::TargetWorkJudgement judged =
      e.evidence.Judge(*e.task().FindArch(e.workspace.request().arch), e.task().OperandType());
  verdict.target_work = judged.work;
  std::string sampling_note;
  if (verdict.sampling.has_value() && !verdict.sampling->note.empty()) {
    sampling_note = absl::StrCat("; ", verdict.sampling->note);
  }
  const std::string speed =
      verdict.speedup > 0 ? absl::StrFormat(" (speedup %.3f over %s)", verdict.speedup, library)
                          : "";
  if (judged.verdict_class != VerdictClass::kPass) {
    return e.record.Finish(judged.verdict_class,
                           absl::StrCat("correct, target families executed, but ", judged.feedback,
                                        speed, sampling_note));
  }
  std::string message =
      e.options().run_timing
          ? absl::StrFormat("correct, target instructions executed; speedup %.3f over %s",
                            verdict.speedup, library)
          : "correct, target instructions executed (timing not run)";
  if (!judged.feedback.empty()) absl::StrAppend(&message, "; ", judged.feedback);
  if (!judged.summary.empty()) absl::StrAppend(&message, "; ", judged.summary);
  return e.record.Finish(VerdictClass::kPass, absl::StrCat(message, sampling_note));
}

absl::StatusOr<Verdict> RunStages(Evaluation& e) {
  e.record.verdict().runtime_unverified = false;
  if (e.task().FindArch(e.workspace.request().arch) == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("task ", e.task().id, " has no arch ", e.workspace.request().arch));
  }
  {
    ASSIGN_OR_RETURN(std::optional<Verdict> done, CompileStage(e));
    if (done) return *done;  // Compile-only, compile errors, invalid plans: never gated.
  }
  // Everything up to here runs without the gate: the compiler (CPU only) and, beside it, the
  // reference and candidate processes' start-up; then the wait for the reference's "ready" and,
  // once the GPU is known to be usable, the instrumented processes' start-up. Before their
  // first command those processes make only these CUDA calls (evaluator/reference_mode.cc
  // ReferenceMode, candidate_mode.cc CandidateMode; support.cc OpenGpu; runtime.cc InitDevice,
  // Builtins::Load):
  //   both: cudaSetDevice (context creation), cudaDeviceSetLimit (printf FIFO, malloc heap,
  //     persisting L2 = 0), cudaGetDeviceProperties, cudaDeviceGetAttribute, cudaDriverGetVersion,
  //     cudaRuntimeGetVersion, cuModuleLoadData of the built-in kernels + cuModuleGetFunction +
  //     cuFuncSetAttribute, cudaMalloc (hash word, the 2x-L2 flush buffer),
  //     cudaStreamCreateWithFlags; the reference also NVML (driver version, max SM clock);
  //   candidate, on its preparing thread (StartPreparing): cudaSetDevice, cudaMalloc of every
  //     workload's tensors for the trials, in their order, and of the timed workload's for the
  //     baseline (TensorSet::Allocate: no fill), the plans of the derived inputs' library runs
  //     (the backward tasks' cuDNN forward: graph finalisation, nothing run), the handle and plan
  //     of each library candidate the baseline choice may time (gpu::PreparedBaselineCandidates:
  //     cublasLtCreate + heuristic query; cudnnCreate + graph finalisation), NVML open; for the
  //     paged-decode cuDNN plans only, one synchronous cudaMemcpy each of the batch's query
  //     lengths (b int32 ones, a constant, not an input: cudnn_sdpa_baseline.cc BuildPagedPlan).
  //     Not the hardware counters' configuration: CUPTI's counter-availability query fails with
  //     CUPTI_ERROR_HARDWARE_BUSY while another process profiles, and made another process's
  //     range-profiler start fail (H100 run 17); it comes with "prepare_timing", in the
  //     correctness stage, under the gate;
  //   instrumented processes, started just below (instrument_mode.cc InstrumentMode, then
  //     Instrument up to AwaitGo): the same device start-up, cuModuleLoadData of the submission's
  //     cubin (opened, then reloaded), cudaMalloc of the timed workload's tensors and scratch,
  //     host-side tensor-map encoding, and CUPTI's profiler initialization and device queries
  //     (cupti_sass.cc SassMetricsSession::Create); the SASS metrics are set and enabled, and
  //     the module patched, only after "go".
  // No kernel is launched and no input is generated, copied or set before the first command
  // (inputs are generated by "compute_reference" and "trial", kernels run on "trial",
  // "compare", "time", "sketch", "go"), so the gate is taken here, before the first of them.
  // The one copy above is a few bytes on a copy engine, no SM work; a GPU lent to a pipelined
  // worker is still measured for drift by the service bench (docs/operations.md).
  // The reference process's "ready" says whether this GPU can run the task's arch at all; a job
  // that cannot is decided here (compiled, runtime unverified) without the gate or the
  // instrumented processes.
  e.unavailable_reason = AwaitDevice(e);
  if (!e.unavailable_reason.empty()) return SkipRuntimeStages(e);
  StartInstrumentedProcesses(e);
  if (const std::shared_ptr<GpuGate>& gate = e.options().gpu_gate; gate != nullptr) {
    e.gpu_gate_asked = true;
    ASSIGN_OR_RETURN(e.gpu_hold, gate->Acquire(e.workspace.cancel()));
  }
  for (StageResult (*stage)(Evaluation&) : {CorrectnessStage, TargetStage}) {
    ASSIGN_OR_RETURN(std::optional<Verdict> done, stage(e));
    if (done) return *done;
  }
  if (e.options().run_timing) {
    ASSIGN_OR_RETURN(std::optional<Verdict> done, TimingStage(e));
    if (done) return *done;
  }
  return Conclude(e);
}

}  // namespace

std::string DefaultEvaluatorPath() {
  if (const char* env = std::getenv("PTXBENCH_EVALUATOR"); env && *env) return env;
  return SelfDir() + "/ptxbench-evaluator";
}

double RooflineFloorMs(const gpu::DeviceDescription& device, double flops, double bytes,
                       DType operands) {
  // Dense bf16 tensor-core FLOP per SM per clock: 4096 on sm_90 (H100 SXM: 989.4 TFLOP/s =
  // 132 SMs x 4096 x 1.83 GHz), 8192 on sm_100 (B200). With the device's maximum SM clock
  // (1980 MHz on the H200: 1070 TFLOP/s), an upper bound no kernel exceeds.
  const std::string& cc = device.compute_capability;
  double per_sm_clock = cc == "9.0" ? 4096 : (cc == "10.0" ? 8192 : 0);
  double sms = device.sm_count;
  double clock_hz = device.sm_clock_max_khz * 1e3;
  if (device.nvml_max_sm_mhz.has_value() && *device.nvml_max_sm_mhz > 0) {
    clock_hz = std::max(clock_hz, *device.nvml_max_sm_mhz * 1e6);
  }
  // fp8 runs at twice the rate (TensorRateOverBf16).
  double peak_flops = per_sm_clock * sms * clock_hz * TensorRateOverBf16(operands);
  // HBM: two transfers per memory clock over the bus (H200: 2 x 3.2 GHz x 768 B = 4.9 TB/s).
  double bandwidth = 2.0 * device.memory_clock_max_khz * 1e3 * device.memory_bus_bits / 8.0;
  if (peak_flops <= 0 || bandwidth <= 0) return 0;
  return std::max(flops / peak_flops, bytes / bandwidth) * 1e3;
}

absl::StatusOr<Verdict> Evaluate(const EvaluationRequest& request, const EngineOptions& options,
                                 const StageCallback& on_stage, const std::atomic<bool>* cancel) {
  if (request.task == nullptr) return absl::InvalidArgumentError("EvaluationRequest.task is null");
  ASSIGN_OR_RETURN(std::unique_ptr<Workspace> workspace,
                   Workspace::Create(request, options, cancel));
  Evaluation evaluation(*workspace, on_stage);
  absl::StatusOr<Verdict> verdict = RunStages(evaluation);
  // An infrastructure error or a cancellation may leave the reference process mid-command.
  if (!verdict.ok() && evaluation.reference) evaluation.reference->MarkFailed();
  if (verdict.ok() && evaluation.gpu_gate_asked) {
    // Audit: this job's GPU stages ran with the GPU to themselves. Still held here; released
    // when `evaluation` is destroyed, after its processes.
    verdict->report["gpu_gate"] = {{"held", evaluation.gpu_hold.held()},
                                   {"wait_seconds", evaluation.gpu_hold.wait_seconds()},
                                   {"released", "after the evaluation's processes ended"}};
  }
  return verdict;
}

absl::StatusOr<json> HealthProbe(const EngineOptions& options) {
  std::string evaluator =
      options.evaluator_path.empty() ? DefaultEvaluatorPath() : options.evaluator_path;
  std::string root = options.work_root;
  if (root.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    root = tmp && *tmp ? tmp : "/tmp";
  }
  // The probe launches a kernel: never inside another job's GPU stages.
  GpuGate::Hold hold;
  if (options.gpu_gate != nullptr) {
    ASSIGN_OR_RETURN(hold, options.gpu_gate->Acquire());
  }
  bool drop = options.drop_privileges && geteuid() == 0;
  ASSIGN_OR_RETURN(std::string dir, CreatePrivateDir(root, "ptxbench-health-", drop ? 65534 : -1,
                                                     drop ? 65534 : -1));
  // A minimal request so the evaluator can read its GPU ordinal.
  std::string path = dir + "/request.json";
  RETURN_IF_ERROR(gpu::WriteFileBytes(path, gpu::ToJson(gpu::HealthRequest{options.gpu}).dump()));
  if (drop) chown(path.c_str(), 65534, 65534);
  SandboxOptions o;
  o.argv = {evaluator, std::string(gpu::NameOf(gpu::EvaluatorMode::kHealth)), "--request", path};
  o.private_dir = dir;
  o.env = MinimalEnv(dir);
  o.limits.wall_seconds = 60;
  o.isolate_network = options.isolate_network;
  o.drop_privileges = options.drop_privileges;
  auto sandbox = Sandbox::Start(o);
  if (!sandbox.ok()) {
    RemoveTree(dir);
    return sandbox.status();
  }
  evaluation::EvaluatorProcess probe(std::move(*sandbox), dir, Now());
  Step<gpu::HealthEvent> step = probe.Await<gpu::HealthEvent>(60, "health probe");
  probe.sandbox().Wait();
  RemoveTree(dir);
  if (!step.ok()) {
    if (step.outcome == Outcome::kTimeout) return absl::DeadlineExceededError(step.message);
    if (step.outcome == Outcome::kCancelled) return absl::CancelledError(step.message);
    return absl::UnavailableError(absl::StrCat("GPU not usable: ", step.message));
  }
  return gpu::ToJson(step.event.device);
}

}  // namespace ptxbench::engine
