#include "worker/engine/evaluate_processes.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
#include "worker/engine/gpu/baseline_choice.h"
#include "worker/engine/gpu/philox.h"
#include "worker/engine/gpu/protocol.h"

namespace ptxbench::engine::evaluation {
namespace {

using json = nlohmann::json;

constexpr int kNobody = 65534;

absl::StatusOr<uint64_t> RandomU64() {
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::InternalError("cannot open /dev/urandom");
  uint64_t v = 0;
  ssize_t n = read(fd, &v, sizeof v);
  close(fd);
  if (n != sizeof v) return absl::InternalError("short read from /dev/urandom");
  return v;
}

bool FileExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Whether the NVIDIA driver restricts GPU performance counters to administrators
// (NVreg_RestrictProfilingToAdminUsers): then the instrumented process keeps root.
bool ProfilingNeedsAdmin() {
  auto text = gpu::ReadFileBytes("/proc/driver/nvidia/params");
  if (!text.ok()) return true;  // Unknown: assume the restrictive default.
  size_t at = text->find("RmProfilingAdminOnly:");
  if (at == std::string::npos) return true;
  return text->compare(at + 21, 2, " 0") != 0;
}

absl::StatusOr<gpu::SubmissionLanguage> LanguageOf(const std::string& language) {
  if (language.empty() || language == "cuda") return gpu::SubmissionLanguage::kCuda;
  if (language == "ptx") return gpu::SubmissionLanguage::kPtx;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown submission language '", language, "' (cuda or ptx)"));
}

// A warm reference process between evaluations.
struct WarmReference {
  std::string key;
  std::unique_ptr<Sandbox> process;
  std::string dir;          // Its private directory, outside any evaluation's work directory.
  double wall_seconds = 0;  // Its watchdog.
  // What it holds on the GPU (its ResetEvent): its buffers plus the context allowance, and the
  // device's memory (0: unknown, no memory bound).
  uint64_t device_bytes = 0;
  uint64_t device_total_bytes = 0;
};

// What a process's CUDA context, modules and library handles hold beyond its buffers, charged
// to every warm process. Measured (H100, service bench run 16, nvidia-smi per process): 622 MiB
// right after start-up, before any buffer; idle warm reference processes of the mix held
// 1,418 MiB (attention forward), 1,478 MiB (GEMM) and ~2,650 MiB (backward) in all. 768 MiB
// leaves room for the library handles the buffers do not count.
constexpr uint64_t kWarmReferenceContextBytes = uint64_t{768} << 20;

void Discard(WarmReference& w) {
  if (w.process) (void)w.process->Send(gpu::ToJson(gpu::QuitCommand{}));
  w.process.reset();  // Kills and reaps what did not quit.
  if (!w.dir.empty()) RemoveTree(w.dir);
}

// Trusted code only: a pooled process never runs submitted code. Least recently used first:
// `idle_` is in the order the processes were handed back, and Take removes the one it returns.
class ReferencePool {
 public:
  static ReferencePool& Get() {
    static ReferencePool pool;
    return pool;
  }
  // A warm process for `key` that has `needed_seconds` left before its watchdog, if any.
  std::optional<WarmReference> Take(const std::string& key, double needed_seconds) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = idle_.begin(); it != idle_.end(); ++it) {
      if (it->key != key) continue;
      WarmReference w = std::move(*it);
      idle_.erase(it);
      if (w.process->elapsed_seconds() + needed_seconds < w.wall_seconds) return w;
      Discard(w);
      return std::nullopt;
    }
    return std::nullopt;
  }
  // Keeps `w`, then ends the least recently used processes until at most `capacity` are kept
  // and, where the device's memory is known, they hold at most `memory_fraction` of it (`w`
  // itself goes when it alone holds more).
  void Put(WarmReference w, size_t capacity, double memory_fraction) {
    std::lock_guard<std::mutex> lock(mu_);
    idle_.push_back(std::move(w));
    while (!idle_.empty() && (idle_.size() > capacity || OverMemory(memory_fraction))) {
      Discard(idle_.front());
      idle_.erase(idle_.begin());
    }
  }
  ~ReferencePool() {
    for (WarmReference& w : idle_) Discard(w);
  }

 private:
  // The processes of one device (the same total) hold more than the fraction of it.
  bool OverMemory(double memory_fraction) const {
    std::map<uint64_t, uint64_t> held_per_device;
    for (const WarmReference& w : idle_) {
      if (w.device_total_bytes > 0) held_per_device[w.device_total_bytes] += w.device_bytes;
    }
    for (const auto& [total, held] : held_per_device) {
      if (static_cast<double>(held) > memory_fraction * static_cast<double>(total)) return true;
    }
    return false;
  }

  std::mutex mu_;
  std::vector<WarmReference> idle_;
};

}  // namespace

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

uint64_t HashText(const std::string& text) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return gpu::Mix64(h);
}

std::string TimedBaselineKey(const Task& task, const std::string& gpu_name) {
  const Workload& timed = task.TimedWorkload();
  return gpu::BaselineChoiceKey(task.JudgingHash(), timed.name, timed.axes, gpu_name,
                                task.baseline_library, task.baseline_operation);
}

std::optional<gpu::CachedBaselineChoice> CachedTimedBaseline(const Task& task,
                                                             const std::string& gpu_name,
                                                             const gpu::TimingLoopOptions& loop) {
  if (loop.baseline_selection != gpu::BaselineSelection::kFastest) return std::nullopt;
  return gpu::BaselineChoiceCache::Process().Find(TimedBaselineKey(task, gpu_name));
}

std::string Trim(const std::string& s, size_t max) {
  return s.size() <= max ? s : s.substr(0, max) + "...";
}

// ------------------------------------------------------------------ Workspace

absl::StatusOr<std::unique_ptr<Workspace>> Workspace::Create(const EvaluationRequest& request,
                                                             const EngineOptions& options,
                                                             const std::atomic<bool>* cancel) {
  std::unique_ptr<Workspace> w(new Workspace(request, options, cancel));
  const Task& task = *request.task;
  w->root_ = geteuid() == 0;
  w->evaluator_ = options.evaluator_path.empty() ? DefaultEvaluatorPath() : options.evaluator_path;
  if (!FileExists(w->evaluator_)) {
    return absl::FailedPreconditionError(absl::StrCat("evaluator not found at ", w->evaluator_));
  }
  ASSIGN_OR_RETURN(gpu::SubmissionLanguage language, LanguageOf(request.language));
  w->submission_ = {{task.dir, task.version_hash},
                    request.arch,
                    language,
                    request.source,
                    request.launch_plan_json};
  if (options.secret != 0) {
    w->secret_ = options.secret;
  } else {
    ASSIGN_OR_RETURN(w->secret_, RandomU64());
  }
  w->hash_key_ = gpu::Mix64(w->secret_ ^ 0x6b657973ull);
  std::string root = options.work_root;
  if (root.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    root = tmp && *tmp ? tmp : "/tmp";
  }
  w->work_root_ = root;
  ASSIGN_OR_RETURN(w->work_, CreatePrivateDir(root, "ptxbench-eval-"));
  // The supervisor's own directories stay 0700 root-owned: sandboxes (nobody) cannot enter.
  ASSIGN_OR_RETURN(w->reference_dir_, CreatePrivateDir(w->work_, "reference-"));
  chmod(w->work_.c_str(), 0711);  // Sandboxes traverse to their own subdirectory only.
  return w;
}

Workspace::~Workspace() {
  if (!options_.keep_work_dir && !work_.empty()) RemoveTree(work_);
}

uint64_t Workspace::SecretSeed(const std::string& tag, uint64_t index) const {
  return gpu::Mix64(secret_ ^ HashText(tag) ^ gpu::Mix64(index + 0x51));
}

absl::StatusOr<std::string> Workspace::NewSandboxDir(const std::string& prefix) const {
  const bool drop = options_.drop_privileges && root_;
  return CreatePrivateDir(work_, prefix, drop ? kNobody : -1, drop ? kNobody : -1);
}

absl::StatusOr<gpu::ModulePaths> Workspace::CopyModule(const std::string& dir,
                                                       const gpu::ModulePaths& compiled) const {
  ASSIGN_OR_RETURN(std::string cubin, gpu::ReadFileBytes(compiled.cubin_path));
  ASSIGN_OR_RETURN(std::string ptx, gpu::ReadFileBytes(compiled.ptx_path));
  gpu::ModulePaths copy{dir + "/module.cubin", dir + "/module.ptx"};
  RETURN_IF_ERROR(gpu::WriteFileBytes(copy.cubin_path, cubin));
  RETURN_IF_ERROR(gpu::WriteFileBytes(copy.ptx_path, ptx));
  if (root_ && options_.drop_privileges) {
    chown(copy.cubin_path.c_str(), kNobody, kNobody);
    chown(copy.ptx_path.c_str(), kNobody, kNobody);
  }
  return copy;
}

absl::StatusOr<std::pair<std::string, gpu::ModulePaths>> Workspace::ModuleDir(
    const std::string& prefix, const gpu::ModulePaths& compiled) const {
  ASSIGN_OR_RETURN(std::string dir, NewSandboxDir(prefix));
  ASSIGN_OR_RETURN(gpu::ModulePaths module, CopyModule(dir, compiled));
  return std::make_pair(dir, module);
}

absl::StatusOr<std::string> Workspace::WriteRequest(const std::string& dir,
                                                    const json& request) const {
  std::string path = dir + "/request.json";
  RETURN_IF_ERROR(gpu::WriteFileBytes(path, request.dump()));
  struct stat st;
  if (root_ && stat(dir.c_str(), &st) == 0) chown(path.c_str(), st.st_uid, st.st_gid);
  return path;
}

absl::StatusOr<std::unique_ptr<Sandbox>> Workspace::Spawn(gpu::EvaluatorMode mode,
                                                          const std::string& request_path,
                                                          const std::string& dir,
                                                          double wall_seconds, bool drop_privileges,
                                                          bool cancellable) const {
  SandboxOptions o;
  o.argv = {evaluator_, std::string(gpu::NameOf(mode)), "--request", request_path};
  o.private_dir = dir;
  if (mode == gpu::EvaluatorMode::kCompile || mode == gpu::EvaluatorMode::kSassMap) {
    // No CUDA context in these processes, so the address space itself can be capped: the
    // compilers and nvdisasm get 16 GiB (the reference GEMM compiles in well under 1 GiB).
    o.limits.address_space_bytes = 16ull << 30;
    o.limits.data_bytes = 16ull << 30;
  }
  o.env = MinimalEnv(dir);
  o.limits.wall_seconds = wall_seconds;
  o.isolate_network = options_.isolate_network;
  o.drop_privileges = drop_privileges && options_.drop_privileges;
  o.cancel = cancellable ? cancel_ : nullptr;
  return Sandbox::Start(o);
}

// ------------------------------------------------------------------ EvaluatorProcess

Step<json> EvaluatorProcess::AwaitJson(gpu::EventKind expected, double timeout_seconds,
                                       const std::string& what, bool drain) {
  Step<json> r;
  Sandbox& s = *sandbox_;
  while (true) {
    auto next = s.Next(timeout_seconds);
    if (!next.ok()) {
      if (next.status().code() == absl::StatusCode::kCancelled) {
        r.outcome = Outcome::kCancelled;
        r.message = "cancelled";
        return r;
      }
      if (next.status().code() == absl::StatusCode::kDeadlineExceeded) {
        s.Kill();
        SandboxExit e = s.Wait();
        r.outcome = Outcome::kTimeout;
        r.message = absl::StrFormat("%s did not finish within %.0f s; the process group was killed",
                                    what, timeout_seconds < 0 ? e.wall_seconds : timeout_seconds);
        r.failure = {{"exit", ToJson(e)}, {"output_tail", Trim(e.output_tail, 4000)}};
        return r;
      }
      r.outcome = Outcome::kInfrastructure;
      r.message = absl::StrCat(what, ": ", next.status().message());
      return r;
    }
    if (!next->has_value()) {
      SandboxExit e = s.Wait();
      r.failure = {{"exit", ToJson(e)}, {"output_tail", Trim(e.output_tail, 4000)}};
      if (e.timed_out) {
        r.outcome = Outcome::kTimeout;
        r.message = absl::StrCat(what, " hit the sandbox's wall-clock limit");
      } else if (e.cancelled) {
        r.outcome = Outcome::kCancelled;
        r.message = "cancelled";
      } else {
        // The evaluator died without saying why (a crash of ours, or the OOM killer).
        r.outcome = Outcome::kInfrastructure;
        r.message =
            absl::StrFormat("%s: evaluator exited (code %d, signal %d) without a result: %s", what,
                            e.exit_code, e.signal, Trim(e.output_tail, 1000));
      }
      return r;
    }
    json event = std::move(**next);
    absl::StatusOr<gpu::EventKind> kind = gpu::EventKindOf(event);
    if (!kind.ok()) {
      r.outcome = Outcome::kInfrastructure;
      r.message = absl::StrCat(what, ": ", kind.status().message());
      r.failure = std::move(event);
      return r;
    }
    if (*kind == expected) {
      r.event = std::move(event);
      return r;
    }
    switch (*kind) {
      case gpu::EventKind::kFault: {
        auto fault = gpu::FromJson<gpu::FaultEvent>(event);
        r.outcome = fault.ok() ? Outcome::kFault : Outcome::kInfrastructure;
        r.message =
            fault.ok() ? fault->message : absl::StrCat(what, ": ", fault.status().message());
        if (fault.ok()) r.event_message = fault->message;
        r.failure = std::move(event);
        SandboxExit e = s.Wait();
        r.failure["output_tail"] = Trim(e.output_tail, 4000);
        return r;
      }
      case gpu::EventKind::kPlanInvalid: {
        auto invalid = gpu::FromJson<gpu::PlanInvalidEvent>(event);
        r.outcome = invalid.ok() ? Outcome::kPlanInvalid : Outcome::kInfrastructure;
        r.message =
            invalid.ok() ? invalid->message : absl::StrCat(what, ": ", invalid.status().message());
        if (invalid.ok()) r.event_message = invalid->message;
        r.failure = std::move(event);
        return r;
      }
      case gpu::EventKind::kError: {
        auto error = gpu::FromJson<gpu::ErrorEvent>(event);
        r.outcome = Outcome::kInfrastructure;
        r.message = error.ok() ? absl::StrCat(what, ": ", std::string(gpu::NameOf(error->kind)),
                                              ": ", error->message)
                               : absl::StrCat(what, ": ", error.status().message());
        if (error.ok()) r.event_message = error->message;
        r.failure = std::move(event);
        return r;
      }
      default:
        break;
    }
    if (KeepUnrequested(*kind, event) || drain) continue;
    r.outcome = Outcome::kInfrastructure;
    r.message = absl::StrCat(what, ": an unexpected '", std::string(gpu::NameOf(*kind)),
                             "' event (waiting for '", std::string(gpu::NameOf(expected)), "')");
    r.failure = std::move(event);
    return r;
  }
}

absl::StatusOr<std::vector<gpu::OutputHandle>> EvaluatorProcess::SaveOutputs(
    const std::string& prefix, double timeout_seconds) {
  RETURN_IF_ERROR(Send(gpu::SaveOutputsCommand{prefix}));
  Step<gpu::OutputsEvent> saved = Await<gpu::OutputsEvent>(timeout_seconds, "saving outputs");
  if (!saved.ok()) {
    return absl::InternalError(
        absl::StrCat("saving outputs after a refused mapping: ", saved.message));
  }
  return std::move(saved.event.outputs);
}

// ------------------------------------------------------------------ ReferenceProcess

std::unique_ptr<ReferenceProcess> ReferenceProcess::Start(const Workspace& workspace,
                                                          bool allow_warm, std::string* why_not) {
  const EngineOptions& options = workspace.options();
  const Task& task = workspace.task();
  const std::string key = absl::StrCat(workspace.evaluator(), "|", options.gpu, "|", task.dir, "|",
                                       task.version_hash, "|", options.isolate_network);
  if (options.reuse_reference_process && allow_warm) {
    std::optional<WarmReference> warm =
        ReferencePool::Get().Take(key, options.evaluation_timeout_seconds + 60);
    if (warm && warm->process->Send(gpu::ToJson(gpu::BeginCommand{workspace.hash_key()})).ok()) {
      // It answers "begin" with the "ready" event a fresh one sends.
      std::unique_ptr<ReferenceProcess> p(
          new ReferenceProcess(std::move(warm->process), warm->dir, Now()));
      p->pool_key_ = key;
      p->pooled_dir_ = true;
      p->wall_seconds_ = warm->wall_seconds;
      p->reused_ = true;
      p->reuse_ = true;
      p->SetPoolLimits(options);
      return p;
    }
    if (warm) RemoveTree(warm->dir);  // Its process ended with `warm`.
  }
  std::string dir = workspace.reference_dir();
  double wall = options.evaluation_timeout_seconds;
  bool pooled_dir = false;
  if (options.reuse_reference_process) {
    // Outlives this evaluation's work directory; an hour's watchdog, renewed by a fresh process.
    auto pooled = CreatePrivateDir(workspace.work_root(), "ptxbench-reference-");
    if (pooled.ok()) {
      dir = *pooled;
      pooled_dir = true;
      wall = std::max(wall, 3600.0);
    }
  }
  gpu::ReferenceRequest request{workspace.submission().task, options.gpu, workspace.hash_key()};
  auto path = workspace.WriteRequest(dir, gpu::ToJson(request));
  if (!path.ok()) {
    *why_not = std::string(path.status().message());
    if (pooled_dir) RemoveTree(dir);
    return nullptr;
  }
  // Trusted code only (ours and the library's): keeps the supervisor's uid; still its own
  // process group, no network, and a watchdog. Not tied to this evaluation's cancel flag: it may
  // serve the next evaluation (a cancelled evaluation ends it in Release).
  auto sandbox = workspace.Spawn(gpu::EvaluatorMode::kReference, *path, dir, wall,
                                 /*drop_privileges=*/false, /*cancellable=*/false);
  if (!sandbox.ok()) {
    *why_not = std::string(sandbox.status().message());
    if (pooled_dir) RemoveTree(dir);
    return nullptr;
  }
  std::unique_ptr<ReferenceProcess> p(new ReferenceProcess(std::move(*sandbox), dir, Now()));
  p->pool_key_ = key;
  p->pooled_dir_ = pooled_dir;
  p->wall_seconds_ = wall;
  p->reuse_ = options.reuse_reference_process;
  p->SetPoolLimits(options);
  return p;
}

ReferenceProcess::~ReferenceProcess() {
  if (released_) return;
  Quit();
  (void)ReleaseSandbox();  // Kills and reaps what did not quit.
  if (pooled_dir_) RemoveTree(dir());
}

void ReferenceProcess::Release() {
  if (reuse_ && !failed_ && pooled_dir_ && Send(gpu::ResetCommand{}).ok()) {
    // Drains what is still queued (references of trials never run, a "ready" never read).
    Step<gpu::ResetEvent> reset = Await<gpu::ResetEvent>(30, "reference reset", /*drain=*/true);
    if (reset.ok()) {
      WarmReference warm{pool_key_, ReleaseSandbox(), dir(), wall_seconds_};
      warm.device_bytes = reset.event.device_buffer_bytes + kWarmReferenceContextBytes;
      warm.device_total_bytes = reset.event.device_total_bytes;
      ReferencePool::Get().Put(std::move(warm), pool_capacity_, pool_memory_fraction_);
      released_ = true;
    }
  }
}

bool ReferenceProcess::KeepUnrequested(gpu::EventKind kind, const json& event) {
  if (kind != gpu::EventKind::kReference) return false;
  // A queued reference finished while something else was awaited: keep it.
  auto reference = gpu::FromJson<gpu::ReferenceEvent>(event);
  if (!reference.ok()) return false;
  references_[{reference->workload, reference->seed}] = std::move(*reference);
  return true;
}

absl::Status ReferenceProcess::Request(const std::string& workload, uint64_t seed) {
  if (!requested_.insert({workload, seed}).second) return absl::OkStatus();
  return Send(gpu::ComputeReferenceCommand{workload, seed});
}

absl::StatusOr<gpu::ReferenceEvent> ReferenceProcess::Reference(const std::string& workload,
                                                                uint64_t seed) {
  const auto key = std::make_pair(workload, seed);
  while (!references_.count(key)) {
    Step<gpu::ReferenceEvent> r = Await<gpu::ReferenceEvent>(600, "reference computation");
    if (!r.ok()) {
      failed_ = true;
      return absl::InternalError(absl::StrCat("reference process failed: ", r.message));
    }
    references_[{r.event.workload, r.event.seed}] = std::move(r.event);
  }
  return references_[key];
}

absl::StatusOr<gpu::CompareEvent> ReferenceProcess::Compare(
    const std::string& workload, uint64_t seed, const std::vector<gpu::OutputHandle>& outputs,
    bool keep) {
  RETURN_IF_ERROR(Send(gpu::CompareCommand{workload, seed, outputs, keep}));
  Step<gpu::CompareEvent> r = Await<gpu::CompareEvent>(600, "comparison");
  if (!r.ok()) {
    failed_ = true;
    return absl::InternalError(absl::StrCat("reference process failed: ", r.message));
  }
  return std::move(r.event);
}

absl::StatusOr<gpu::SampleSketches> ReferenceProcess::Sketch(
    const std::string& workload, const std::vector<gpu::CheckedSample>& samples,
    uint64_t sketch_seed, size_t projections, double timeout_seconds) {
  RETURN_IF_ERROR(Send(gpu::SketchReferenceCommand{workload, samples, sketch_seed, projections}));
  Step<gpu::ReferenceSketchesEvent> r =
      Await<gpu::ReferenceSketchesEvent>(timeout_seconds, "reference sketches");
  if (!r.ok()) {
    failed_ = true;
    return absl::InternalError(absl::StrCat("reference process failed: ", r.message));
  }
  return std::move(r.event.sketches);
}

// ------------------------------------------------------------------ CandidateProcess

std::unique_ptr<CandidateProcess> CandidateProcess::StartEarly(const Workspace& workspace) {
  auto dir = workspace.NewSandboxDir("candidate-");
  if (!dir.ok()) return nullptr;
  gpu::CandidateRequest request;
  request.submission = workspace.submission();
  request.gpu = workspace.options().gpu;
  request.hash_key = workspace.hash_key();
  if (workspace.options().run_timing) {
    request.timing_workload = workspace.task().TimedWorkload().name;
    request.timing_baseline_candidates =
        gpu::PreparedBaselineCandidates(workspace.options().timing);
    // The GPU has not answered this process yet: the model an earlier start-up on the same
    // ordinal reported stands in (no choice is cached before one has, so none is lost), and
    // the timing stage still compares the choice it sends, keyed by this process's own answer.
    if (auto gpu_name = gpu::BaselineChoiceCache::Process().GpuName(workspace.options().gpu)) {
      request.timing_cached_baseline =
          CachedTimedBaseline(workspace.task(), *gpu_name, workspace.options().timing);
    }
  }
  auto path = workspace.WriteRequest(*dir, gpu::ToJson(request));
  if (!path.ok()) return nullptr;
  auto sandbox = workspace.Spawn(gpu::EvaluatorMode::kCandidate, *path, *dir,
                                 workspace.options().evaluation_timeout_seconds, true);
  if (!sandbox.ok()) return nullptr;
  return std::unique_ptr<CandidateProcess>(
      new CandidateProcess(std::move(*sandbox), *dir, Now(), /*early=*/true));
}

absl::StatusOr<std::unique_ptr<CandidateProcess>> CandidateProcess::StartWithModule(
    const Workspace& workspace, const gpu::ModulePaths& compiled) {
  double spawned_at = Now();
  ASSIGN_OR_RETURN(auto dir_and_module, workspace.ModuleDir("candidate-", compiled));
  const auto& [dir, module] = dir_and_module;
  gpu::CandidateRequest request;
  request.submission = workspace.submission();
  request.gpu = workspace.options().gpu;
  request.hash_key = workspace.hash_key();
  request.module = module;
  ASSIGN_OR_RETURN(std::string path, workspace.WriteRequest(dir, gpu::ToJson(request)));
  ASSIGN_OR_RETURN(auto sandbox,
                   workspace.Spawn(gpu::EvaluatorMode::kCandidate, path, dir,
                                   workspace.options().evaluation_timeout_seconds, true));
  return std::unique_ptr<CandidateProcess>(
      new CandidateProcess(std::move(sandbox), dir, spawned_at, /*early=*/false));
}

absl::Status CandidateProcess::GiveModule(const Workspace& workspace,
                                          const gpu::ModulePaths& compiled) {
  ASSIGN_OR_RETURN(gpu::ModulePaths module, workspace.CopyModule(dir(), compiled));
  (void)Send(gpu::ModuleCommand{module});
  return absl::OkStatus();
}

std::string CandidateProcess::TrialPrefix(size_t k) const {
  return absl::StrCat(dir(), "/trial", k);
}

// ------------------------------------------------------------------ SassMapProcess

absl::StatusOr<std::unique_ptr<SassMapProcess>> SassMapProcess::Start(
    const Workspace& workspace, const gpu::ModulePaths& compiled) {
  ASSIGN_OR_RETURN(auto dir_and_module, workspace.ModuleDir("sassmap-", compiled));
  const auto& [dir, module] = dir_and_module;
  gpu::SassMapRequest request{workspace.request().arch, module};
  ASSIGN_OR_RETURN(std::string path, workspace.WriteRequest(dir, gpu::ToJson(request)));
  ASSIGN_OR_RETURN(auto sandbox,
                   workspace.Spawn(gpu::EvaluatorMode::kSassMap, path, dir, 120, true));
  return std::unique_ptr<SassMapProcess>(new SassMapProcess(std::move(sandbox), dir, Now()));
}

gpu::SassFamilyMap SassMapProcess::Collect() {
  Step<gpu::SassMapEvent> step = Await<gpu::SassMapEvent>(120, "SASS map");
  if (step.ok()) return std::move(step.event.sass);
  return gpu::UnavailableSassMap(step.message);
}

// ------------------------------------------------------------------ instrumented processes

absl::StatusOr<std::unique_ptr<InstrumentProcess>> InstrumentProcess::Start(
    const Workspace& workspace, const gpu::ModulePaths& compiled, const Run& run) {
  double spawned_at = Now();
  ASSIGN_OR_RETURN(auto dir_and_module, workspace.ModuleDir("instrument-", compiled));
  const auto& [dir, module] = dir_and_module;
  gpu::InstrumentRequest request;
  request.submission = workspace.submission();
  request.gpu = workspace.options().gpu;
  request.hash_key = workspace.hash_key();
  request.module = module;
  request.workload = workspace.task().TimedWorkload().name;
  request.seed = run.seed;
  request.kernel = run.kernel;
  request.launch_index = run.launch_index;
  request.host_inputs = run.host_inputs;
  request.output_prefix = dir + "/instrumented";
  request.transfer = run.transfer;
  request.wait_for_go = run.wait_for_go;
  ASSIGN_OR_RETURN(std::string path, workspace.WriteRequest(dir, gpu::ToJson(request)));
  const EngineOptions& options = workspace.options();
  const bool keep_root = workspace.root() && ProfilingNeedsAdmin();
  // A process waiting for "go" may wait through the whole correctness stage.
  const double wall = options.instrument_timeout_seconds + 30 +
                      (run.wait_for_go ? options.evaluation_timeout_seconds : 0);
  ASSIGN_OR_RETURN(auto sandbox,
                   workspace.Spawn(gpu::EvaluatorMode::kInstrument, path, dir, wall, !keep_root));
  return std::unique_ptr<InstrumentProcess>(
      new InstrumentProcess(std::move(sandbox), dir, spawned_at, run));
}

void InstrumentSet::StartEarly(const Workspace& workspace, const gpu::ModulePaths& compiled,
                               const std::vector<std::pair<std::string, size_t>>& kernels,
                               uint64_t seed, gpu::OutputTransfer transfer) {
  for (const auto& [kernel, launch_index] : kernels) {
    auto p = InstrumentProcess::Start(workspace, compiled,
                                      {kernel, launch_index, false, true, seed, transfer});
    if (p.ok()) ready_[kernel] = std::move(*p);
  }
}

std::unique_ptr<InstrumentProcess> InstrumentSet::Go(const std::string& kernel,
                                                     gpu::OutputTransfer transfer) {
  auto it = ready_.find(kernel);
  if (it == ready_.end()) return nullptr;
  std::unique_ptr<InstrumentProcess> p = std::move(it->second);
  ready_.erase(it);
  // A process that died while waiting says why in the next Await.
  (void)p->Send(gpu::GoCommand{transfer});
  return p;
}

// ------------------------------------------------------------------ watchdogs

namespace {

// Per timed pair besides the two kernels: fresh inputs for the sample, the L2 flush and the
// host round trip. ~1-3 ms on the H200 for the GEMM (20 pairs + warm-up in 0.37-1.44 s of
// stage, docs/results/2026-11-30-h200-gpu-test-5.json); 10 ms leaves room.
constexpr double kPairOverheadMs = 10;
// SASS patching slows a kernel ~68x (clock64-timed FFMA loop, H200, 2026-12-01).
constexpr double kProfilerSlowdown = 68;
// Clocks, jitter, and the warm loop being slower than a trial in a bad moment.
constexpr double kSlack = 2;
constexpr size_t kWarmupMinPairs = 3;   // gpu/timing.h TimingConfig::warmup_min_pairs.
constexpr size_t kTimeCapMinPairs = 5;  // gpu/stats.cc ShouldStop.

}  // namespace

Watchdogs DeriveWatchdogs(const WatchdogInputs& in, const EngineOptions& options) {
  Watchdogs w;
  const gpu::TimingLoopOptions& loop = in.loop;
  // While counting, both launches of a pair also wait the gap equalizer's pad (timing.h).
  const double pad_ms = in.counted_samples > 0 ? std::max(0.0, loop.gap_pad_max_us) / 1000 : 0;
  const double pair_s = (std::max(0.0, in.trial_kernel_ms) + std::max(0.0, in.reference_ms) +
                         kPairOverheadMs + 2 * pad_ms) /
                        1000;
  const double warmup_s =
      std::max(loop.warmup_seconds, static_cast<double>(kWarmupMinPairs) * pair_s) + pair_s;
  const double time_capped_s =
      std::max(loop.max_seconds,
               static_cast<double>(std::min(loop.min_samples, kTimeCapMinPairs)) * pair_s) +
      pair_s;
  const double sampling_s = std::min(static_cast<double>(loop.max_samples) * pair_s, time_capped_s);
  const double counted_s =
      static_cast<double>(in.counted_samples) *
      (std::max(0.0, in.trial_kernel_ms) + options.counted_sample_host_ms + 2 * pad_ms) / 1000;
  const double timing =
      options.timing_setup_floor_seconds + kSlack * (warmup_s + sampling_s + counted_s);
  w.timing_seconds = std::min(options.timing_timeout_seconds, timing);
  const double profiled_s = kSlack * kProfilerSlowdown * std::max(0.0, in.trial_kernel_ms) / 1000;
  w.instrument_seconds = std::min(options.instrument_timeout_seconds,
                                  options.instrument_setup_floor_seconds + profiled_s);
  w.instrument_fresh_seconds = std::min(options.instrument_timeout_seconds,
                                        options.instrument_fresh_setup_floor_seconds + profiled_s);
  w.basis = {{"trial_kernel_ms", in.trial_kernel_ms},
             {"reference_ms", in.reference_ms},
             {"pair_seconds", pair_s},
             {"warmup_seconds", warmup_s},
             {"sampling_seconds", sampling_s},
             {"counted_samples", in.counted_samples},
             {"counted_seconds", counted_s},
             {"slack", kSlack},
             {"profiler_slowdown", kProfilerSlowdown},
             {"timing_setup_floor_seconds", options.timing_setup_floor_seconds},
             {"instrument_setup_floor_seconds", options.instrument_setup_floor_seconds},
             {"instrument_fresh_setup_floor_seconds", options.instrument_fresh_setup_floor_seconds},
             {"timing_cap_seconds", options.timing_timeout_seconds},
             {"instrument_cap_seconds", options.instrument_timeout_seconds}};
  return w;
}

}  // namespace ptxbench::engine::evaluation
