#include "worker/engine/evaluate.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/expr.h"
#include "common/status.h"
#include "worker/engine/gpu/compare.h"
#include "worker/engine/gpu/philox.h"
#include "worker/engine/gpu/protocol.h"
#include "worker/engine/gpu/target_analysis.h"
#include "worker/engine/sandbox.h"

namespace ptxbench::engine {
namespace {

using json = nlohmann::json;
using gpu::Mix64;
using gpu::ParseU64;
using gpu::U64;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

uint64_t HashText(const std::string& text) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return Mix64(h);
}

absl::StatusOr<uint64_t> RandomU64() {
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::InternalError("cannot open /dev/urandom");
  uint64_t v = 0;
  ssize_t n = read(fd, &v, sizeof v);
  close(fd);
  if (n != sizeof v) return absl::InternalError("short read from /dev/urandom");
  return v;
}

struct OutputSpec {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t elements = 1;
};

absl::StatusOr<std::vector<OutputSpec>> OutputsOf(const Task& task, const Workload& w) {
  std::vector<OutputSpec> out;
  for (const TensorSpec& t : task.tensors) {
    if (t.role != TensorRole::kOutput) continue;
    OutputSpec o{t.name, t.dtype, {}, 1};
    for (const std::string& d : t.shape) {
      ASSIGN_OR_RETURN(int64_t v, EvalIntExpr(d, w.axes));
      o.shape.push_back(v);
      o.elements *= static_cast<uint64_t>(v);
    }
    out.push_back(std::move(o));
  }
  return out;
}

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

// Whether the NVIDIA driver restricts GPU performance counters to administrators
// (NVreg_RestrictProfilingToAdminUsers): then the instrumented process keeps root.
bool ProfilingNeedsAdmin() {
  auto text = gpu::ReadFileBytes("/proc/driver/nvidia/params");
  if (!text.ok()) return true;  // Unknown: assume the restrictive default.
  size_t at = text->find("RmProfilingAdminOnly:");
  if (at == std::string::npos) return true;
  return text->compare(at + 21, 2, " 0") != 0;
}

std::string Trim(const std::string& s, size_t max) {
  return s.size() <= max ? s : s.substr(0, max) + "...";
}

absl::StatusOr<std::optional<Verdict>> Done(absl::StatusOr<Verdict> v) {
  if (!v.ok()) return v.status();
  return std::optional<Verdict>(std::move(*v));
}

// What happened to a step run in a sandbox, beyond its events.
enum class Outcome { kOk, kFault, kPlanInvalid, kTimeout, kInfrastructure, kCancelled };

struct StepResult {
  Outcome outcome = Outcome::kOk;
  json event;           // The expected event when kOk; the fault/error event otherwise.
  std::string message;  // For non-ok outcomes.
};

// Reference processes kept warm between evaluations of the same task on the same GPU. Their
// CUDA context and baseline library handles cost ~1.4 s to set up (H200,
// docs/results/2026-11-30-h200-evaluation-overhead.json: the first reference of an evaluation
// came 1.23-2.08 s after the candidate's first trial), which only the first evaluation pays.
// Trusted code only: it never runs submitted code; between evaluations it holds no reference
// ("reset") and takes the next evaluation's hash key ("begin").
struct WarmReference {
  std::string key;
  std::unique_ptr<Sandbox> process;
  std::string dir;          // Its private directory, outside any evaluation's work directory.
  double wall_seconds = 0;  // Its watchdog.
};

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
  void Put(WarmReference w) {
    std::lock_guard<std::mutex> lock(mu_);
    idle_.push_back(std::move(w));
    while (idle_.size() > kCapacity) {  // One per GPU and task in steady state.
      Discard(idle_.front());
      idle_.erase(idle_.begin());
    }
  }
  ~ReferencePool() {
    for (WarmReference& w : idle_) Discard(w);
  }

 private:
  static constexpr size_t kCapacity = 4;
  static void Discard(WarmReference& w) {
    if (w.process) (void)w.process->Send({{"cmd", "quit"}});
    w.process.reset();  // Kills and reaps what did not quit.
    if (!w.dir.empty()) RemoveTree(w.dir);
  }
  std::mutex mu_;
  std::vector<WarmReference> idle_;
};

class Evaluation {
 public:
  Evaluation(const EvaluationRequest& request, const EngineOptions& options,
             const StageCallback& on_stage, const std::atomic<bool>* cancel)
      : req_(request), opt_(options), on_stage_(on_stage), cancel_(cancel), task_(*request.task) {}

  ~Evaluation() {
    instrument_ready_.clear();
    ReleaseReference();
    candidate_.reset();
    sassmap_.reset();
    if (!opt_.keep_work_dir && !work_.empty()) RemoveTree(work_);
  }

  absl::StatusOr<Verdict> Run();

 private:
  absl::StatusOr<Verdict> RunStages();
  // Starts the reference process (or takes a warm one) beside the compiler.
  void StartReference(bool allow_warm = true);
  // Hands the reference process back to the pool when it is healthy and drained, else ends it.
  void ReleaseReference();
  // ---- plumbing
  absl::Status Setup();
  absl::StatusOr<std::string> WriteRequest(const std::string& dir, const std::string& name,
                                           const json& request);
  absl::StatusOr<std::string> NewSandboxDir(const std::string& prefix);
  // A fresh private directory holding copies of the compiled module (module.cubin, module.ptx).
  absl::StatusOr<std::string> ModuleDir(const std::string& prefix);
  // Copies the compiled module into an existing sandbox directory.
  absl::Status CopyModule(const std::string& dir);
  // Starts the candidate process beside the compiler: CUDA and the timing baseline are set up
  // while the source compiles; CorrectnessStage hands it the module.
  void StartCandidateEarly();
  absl::StatusOr<std::unique_ptr<Sandbox>> Spawn(const std::string& mode,
                                                 const std::string& request_path,
                                                 const std::string& dir, double wall_seconds,
                                                 bool drop_privileges, bool cancellable = true);
  StepResult Await(Sandbox& s, const std::string& expected, double timeout_seconds,
                   const std::string& what);
  void Report(Stage stage, bool ok, const std::string& summary, json detail, double seconds);
  Verdict Finish(VerdictClass c, const std::string& message);
  json BaseRequest(const std::string& dir) const;
  uint64_t SecretSeed(const std::string& tag, uint64_t i) const {
    return Mix64(secret_ ^ HashText(tag) ^ Mix64(i + 0x51));
  }

  // ---- references
  absl::Status RequestReference(const std::string& workload, uint64_t seed);
  absl::StatusOr<json> AwaitReference(const std::string& workload, uint64_t seed);
  // Has the reference process compare `outputs` (as handed over by the process `owner`) with
  // its reference, on the GPU. When it cannot map the owner's buffers (CUDA IPC refused), the
  // owner writes them to files under `prefix` and the evaluation goes on with files.
  absl::StatusOr<gpu::CompareReport> CompareWithReference(const std::string& workload,
                                                          uint64_t seed, const json& outputs,
                                                          json* detail, Sandbox* owner,
                                                          const std::string& prefix,
                                                          bool keep_reference = false);

  // ---- instrumented processes (one per distinct kernel of the plan)
  struct InstrumentProcess {
    std::unique_ptr<Sandbox> sandbox;
    std::string dir;
    json request;
    double spawned_at = 0;
    bool waited_for_go = false;
  };
  absl::StatusOr<InstrumentProcess> SpawnInstrument(const std::string& kernel, size_t launch_index,
                                                    bool host_inputs, bool wait_for_go);
  // The distinct kernels of the timed plan with the index of their first launch.
  std::vector<std::pair<std::string, size_t>> DistinctKernels() const;

  // ---- stages
  absl::StatusOr<std::optional<Verdict>> CompileStage();
  absl::StatusOr<std::optional<Verdict>> CorrectnessStage();
  absl::StatusOr<std::optional<Verdict>> TargetStage();
  absl::StatusOr<std::optional<Verdict>> TimingStage();
  absl::StatusOr<Verdict> RuntimeFailure(Stage stage, const StepResult& step, const json& detail,
                                         const std::string& workload, uint64_t seed,
                                         double seconds);

  const EvaluationRequest& req_;
  const EngineOptions& opt_;
  const StageCallback& on_stage_;
  const std::atomic<bool>* cancel_;
  const Task& task_;
  Verdict verdict_;
  json report_ = json::object();
  json processes_ = json::array();
  double t_start_ = 0;
  uint64_t secret_ = 0;
  uint64_t hash_key_ = 0;
  std::string evaluator_;
  std::string work_;
  std::string reference_dir_;
  std::string compile_dir_;
  std::string candidate_dir_;
  bool root_ = false;
  json compile_event_;
  json device_;
  std::string unavailable_reason_;
  std::unique_ptr<Sandbox> reference_;
  double reference_spawned_at_ = 0;
  std::string reference_key_;       // Pool key: evaluator, GPU, task version, isolation.
  std::string reference_pool_dir_;  // Its directory when it may be pooled.
  double reference_wall_seconds_ = 0;
  bool reference_reused_ = false;
  bool reference_failed_ = false;  // Any failure of or around it: never pooled.
  std::string work_root_;
  std::unique_ptr<Sandbox> candidate_;
  double candidate_spawned_at_ = 0;
  std::unique_ptr<Sandbox> sassmap_;  // Static SASS family map, computed beside correctness.
  // Instrumented processes started beside the correctness stage, set up and waiting for "go".
  std::map<std::string, InstrumentProcess> instrument_ready_;
  double sassmap_spawned_at_ = 0;
  std::map<std::pair<std::string, uint64_t>, json> references_;
  std::set<std::pair<std::string, uint64_t>> reference_requested_;
  // How candidate outputs reach the reference process: "ipc" (mapped on the device) until the
  // reference process reports it cannot map them, then "file".
  std::string transfer_ = "ipc";
  double kernel_seconds_ = 0;  // Time spent inside the submission's and baseline's launches.
  json seeds_ = json::object();
};

// ------------------------------------------------------------------ plumbing

json Evaluation::BaseRequest(const std::string& dir) const {
  return json{{"task_dir", task_.dir},     {"task_version_hash", task_.version_hash},
              {"arch", req_.arch},         {"language", req_.language},
              {"source", req_.source},     {"launch_plan_json", req_.launch_plan_json},
              {"work_dir", dir},           {"gpu", opt_.gpu},
              {"hash_key", U64(hash_key_)}};
}

absl::Status Evaluation::Setup() {
  root_ = geteuid() == 0;
  evaluator_ = opt_.evaluator_path.empty() ? DefaultEvaluatorPath() : opt_.evaluator_path;
  if (!FileExists(evaluator_)) {
    return absl::FailedPreconditionError(absl::StrCat("evaluator not found at ", evaluator_));
  }
  if (opt_.secret != 0) {
    secret_ = opt_.secret;
  } else {
    ASSIGN_OR_RETURN(secret_, RandomU64());
  }
  hash_key_ = Mix64(secret_ ^ 0x6b657973ull);
  std::string root = opt_.work_root;
  if (root.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    root = tmp && *tmp ? tmp : "/tmp";
  }
  work_root_ = root;
  ASSIGN_OR_RETURN(work_, CreatePrivateDir(root, "ptxbench-eval-"));
  // The supervisor's own directories stay 0700 root-owned: sandboxes (nobody) cannot enter.
  ASSIGN_OR_RETURN(reference_dir_, CreatePrivateDir(work_, "reference-"));
  chmod(work_.c_str(), 0711);  // Sandboxes traverse to their own subdirectory only.
  return absl::OkStatus();
}

absl::StatusOr<std::string> Evaluation::NewSandboxDir(const std::string& prefix) {
  bool drop = opt_.drop_privileges && root_;
  return CreatePrivateDir(work_, prefix, drop ? 65534 : -1, drop ? 65534 : -1);
}

absl::StatusOr<std::string> Evaluation::ModuleDir(const std::string& prefix) {
  ASSIGN_OR_RETURN(std::string dir, NewSandboxDir(prefix));
  RETURN_IF_ERROR(CopyModule(dir));
  return dir;
}

absl::Status Evaluation::CopyModule(const std::string& dir) {
  ASSIGN_OR_RETURN(std::string cubin,
                   gpu::ReadFileBytes(compile_event_.value("cubin_path", std::string())));
  ASSIGN_OR_RETURN(std::string ptx,
                   gpu::ReadFileBytes(compile_event_.value("ptx_path", std::string())));
  RETURN_IF_ERROR(gpu::WriteFileBytes(dir + "/module.cubin", cubin));
  RETURN_IF_ERROR(gpu::WriteFileBytes(dir + "/module.ptx", ptx));
  if (root_ && opt_.drop_privileges) {
    chown((dir + "/module.cubin").c_str(), 65534, 65534);
    chown((dir + "/module.ptx").c_str(), 65534, 65534);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Evaluation::WriteRequest(const std::string& dir,
                                                     const std::string& name, const json& request) {
  std::string path = absl::StrCat(dir, "/", name);
  RETURN_IF_ERROR(gpu::WriteFileBytes(path, request.dump()));
  struct stat st;
  if (root_ && stat(dir.c_str(), &st) == 0) chown(path.c_str(), st.st_uid, st.st_gid);
  return path;
}

absl::StatusOr<std::unique_ptr<Sandbox>> Evaluation::Spawn(const std::string& mode,
                                                           const std::string& request_path,
                                                           const std::string& dir,
                                                           double wall_seconds,
                                                           bool drop_privileges, bool cancellable) {
  SandboxOptions o;
  o.argv = {evaluator_, mode, "--request", request_path};
  o.private_dir = dir;
  if (mode == "compile" || mode == "sassmap") {
    // No CUDA context in these processes, so the address space itself can be capped: the
    // compilers and nvdisasm get 16 GiB (the reference GEMM compiles in well under 1 GiB).
    o.limits.address_space_bytes = 16ull << 30;
    o.limits.data_bytes = 16ull << 30;
  }
  o.env = MinimalEnv(dir);
  o.limits.wall_seconds = wall_seconds;
  o.isolate_network = opt_.isolate_network;
  o.drop_privileges = drop_privileges && opt_.drop_privileges;
  o.cancel = cancellable ? cancel_ : nullptr;
  return Sandbox::Start(o);
}

StepResult Evaluation::Await(Sandbox& s, const std::string& expected, double timeout_seconds,
                             const std::string& what) {
  StepResult r;
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
        r.event = {{"exit", ToJson(e)}, {"output_tail", Trim(e.output_tail, 4000)}};
        return r;
      }
      r.outcome = Outcome::kInfrastructure;
      r.message = absl::StrCat(what, ": ", next.status().message());
      return r;
    }
    if (!next->has_value()) {
      SandboxExit e = s.Wait();
      r.event = {{"exit", ToJson(e)}, {"output_tail", Trim(e.output_tail, 4000)}};
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
    const std::string name = event.value("event", std::string());
    if (name == expected) {
      r.event = std::move(event);
      return r;
    }
    if (name == "fault") {
      r.outcome = Outcome::kFault;
      r.message = event.value("message", std::string("kernel fault"));
      r.event = std::move(event);
      SandboxExit e = s.Wait();
      r.event["output_tail"] = Trim(e.output_tail, 4000);
      return r;
    }
    if (name == "plan_invalid") {
      r.outcome = Outcome::kPlanInvalid;
      r.message = event.value("message", std::string("plan invalid"));
      r.event = std::move(event);
      return r;
    }
    if (name == "reference" && &s == reference_.get()) {
      // A queued reference finished while a comparison was awaited: keep it.
      auto seed = ParseU64(event["seed"]);
      if (seed.ok()) references_[{event.value("workload", std::string()), *seed}] = event;
      continue;
    }
    if (name == "error") {
      r.outcome = Outcome::kInfrastructure;
      r.message = absl::StrCat(what, ": ", event.value("kind", std::string()), ": ",
                               event.value("message", std::string()));
      r.event = std::move(event);
      return r;
    }
    // Unknown events are ignored (forward compatibility).
  }
}

void Evaluation::Report(Stage stage, bool ok, const std::string& summary, json detail,
                        double seconds) {
  StageReport r;
  r.stage = stage;
  r.ok = ok;
  r.summary = summary;
  r.detail = std::move(detail);
  r.seconds = seconds;
  verdict_.stages.push_back(r);
  if (on_stage_) on_stage_(r);
}

Verdict Evaluation::Finish(VerdictClass c, const std::string& message) {
  verdict_.verdict_class = c;
  verdict_.message = message;
  // An impossible time means the measurement cannot be trusted (work outside the timed region,
  // results from elsewhere): the submission fails as a whole, TIC included.
  verdict_.tic = verdict_.compiled && verdict_.correct && verdict_.target_executed &&
                 c != VerdictClass::kImpossibleTime;
  report_["seeds"] = seeds_;
  report_["secret"] = U64(secret_);  // Disclosed after the fact: the evaluation is reproducible.
  report_["processes"] = processes_;
  report_["wall"] = {{"total_seconds", Now() - t_start_},
                     {"kernel_seconds", kernel_seconds_},
                     {"overhead_seconds", Now() - t_start_ - kernel_seconds_}};
  report_["task"] = {{"id", task_.id}, {"version_hash", task_.version_hash}};
  report_["arch"] = req_.arch;
  if (!device_.is_null()) report_["device"] = device_;
  verdict_.report = report_;
  return verdict_;
}

// ------------------------------------------------------------------ references

absl::Status Evaluation::RequestReference(const std::string& workload, uint64_t seed) {
  auto key = std::make_pair(workload, seed);
  if (reference_requested_.count(key)) return absl::OkStatus();
  reference_requested_.insert(key);
  // Computed on the device and kept there until compared: recomputing (0.8 ms for the timed
  // GEMM) costs less than reading a cached 117 MB file back, so nothing is cached across
  // evaluations any more.
  return reference_->Send({{"cmd", "reference"}, {"workload", workload}, {"seed", U64(seed)}});
}

absl::StatusOr<json> Evaluation::AwaitReference(const std::string& workload, uint64_t seed) {
  auto key = std::make_pair(workload, seed);
  while (!references_.count(key)) {
    StepResult r = Await(*reference_, "reference", 600, "reference computation");
    if (r.outcome != Outcome::kOk) {
      reference_failed_ = true;
      return absl::InternalError(absl::StrCat("reference process failed: ", r.message));
    }
    ASSIGN_OR_RETURN(uint64_t s, ParseU64(r.event["seed"]));
    std::string w = r.event.value("workload", std::string());
    references_[{w, s}] = r.event;
  }
  return references_[key];
}

absl::StatusOr<gpu::CompareReport> Evaluation::CompareWithReference(
    const std::string& workload, uint64_t seed, const json& outputs_in, json* detail,
    Sandbox* owner, const std::string& prefix, bool keep_reference) {
  ASSIGN_OR_RETURN(json ref, AwaitReference(workload, seed));
  (void)ref;
  json outputs = outputs_in;
  json event;
  for (int attempt = 0;; ++attempt) {
    RETURN_IF_ERROR(reference_->Send({{"cmd", "compare"},
                                      {"workload", workload},
                                      {"seed", U64(seed)},
                                      {"outputs", outputs},
                                      {"keep", keep_reference}}));
    StepResult r = Await(*reference_, "compare", 600, "comparison");
    if (r.outcome != Outcome::kOk) {
      reference_failed_ = true;
      return absl::InternalError(absl::StrCat("reference process failed: ", r.message));
    }
    event = std::move(r.event);
    if (!event.contains("ipc_failed")) break;
    // CUDA IPC refused between the two processes: files from now on.
    std::string why = event.value("ipc_failed", std::string());
    report_["output_transfer"] = {{"mode", "file"}, {"ipc_refused", why}};
    transfer_ = "file";
    if (owner == nullptr || attempt > 0) {
      return absl::InternalError(absl::StrCat("the reference process cannot map outputs: ", why));
    }
    RETURN_IF_ERROR(owner->Send({{"cmd", "save_outputs"}, {"prefix", prefix}}));
    StepResult saved = Await(*owner, "outputs", opt_.trial_timeout_seconds, "saving outputs");
    if (saved.outcome != Outcome::kOk) {
      return absl::InternalError(
          absl::StrCat("saving outputs after a refused mapping: ", saved.message));
    }
    outputs = saved.event["outputs"];
  }
  for (const json& f : outputs) {
    // Outputs are large; the report keeps what matters.
    if (f.contains("path")) unlink(f.value("path", std::string()).c_str());
  }
  const Workload* w = nullptr;
  for (const Workload& x : task_.workloads) {
    if (x.name == workload) w = &x;
  }
  if (w == nullptr) return absl::InternalError("unknown workload " + workload);
  ASSIGN_OR_RETURN(auto specs, OutputsOf(task_, *w));
  gpu::CompareReport worst;
  worst.pass = true;
  json per_tensor = json::object();
  const json tensors = event.value("tensors", json::object());
  for (const OutputSpec& o : specs) {
    if (!tensors.contains(o.name)) {
      return absl::InternalError("the reference process did not compare " + o.name);
    }
    ASSIGN_OR_RETURN(gpu::CompareReport r, gpu::CompareReportFromJson(tensors[o.name]));
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
  (*detail)["reference_process_seconds"] = event.value("seconds", 0.0);
  return worst;
}

// ------------------------------------------------------------------ stages

absl::StatusOr<std::optional<Verdict>> Evaluation::CompileStage() {
  double t0 = Now();
  ASSIGN_OR_RETURN(compile_dir_, NewSandboxDir("compile-"));
  ASSIGN_OR_RETURN(std::string path,
                   WriteRequest(compile_dir_, "request.json", BaseRequest(compile_dir_)));
  ASSIGN_OR_RETURN(auto sandbox,
                   Spawn("compile", path, compile_dir_, opt_.compile_timeout_seconds, true));
  json isolation = ToJson(sandbox->isolation());
  // The reference and candidate processes start now, beside the compiler: their CUDA and
  // library start-up overlaps compile.
  if (!req_.compile_only) {
    StartReference();
    StartCandidateEarly();
  }
  StepResult step = Await(*sandbox, "compile", -1, "compile");
  SandboxExit exit = sandbox->Wait();
  processes_.push_back(
      {{"mode", "compile"}, {"seconds", exit.wall_seconds}, {"isolation", isolation}});
  if (step.outcome == Outcome::kTimeout) {
    verdict_.compiled = false;
    Report(Stage::kCompile, false, "compile timed out", {{"message", step.message}}, Now() - t0);
    return std::optional<Verdict>(
        Finish(VerdictClass::kCompileError, "the compiler did not finish within the time limit"));
  }
  if (step.outcome == Outcome::kCancelled) return absl::CancelledError("cancelled");
  if (step.outcome != Outcome::kOk) {
    return absl::InternalError(absl::StrCat("compile stage failed: ", step.message));
  }
  compile_event_ = step.event;
  json detail = compile_event_.value("report", json::object());
  detail["isolation"] = isolation;
  if (!compile_event_.value("ok", false)) {
    std::string failure = detail.value("failure", std::string("compile error"));
    Report(Stage::kCompile, false, absl::StrCat("compile error (", failure, ")"), detail,
           Now() - t0);
    std::string log = detail.value("log", std::string());
    return std::optional<Verdict>(
        Finish(VerdictClass::kCompileError,
               absl::StrCat("compile error (", failure, "): ", Trim(log, 2000))));
  }
  verdict_.compiled = true;
  if (!compile_event_.value("plan_ok", false)) {
    std::string error = compile_event_.value("plan_error", std::string());
    detail["plan_error"] = error;
    Report(Stage::kCompile, false, "launch plan invalid", detail, Now() - t0);
    return std::optional<Verdict>(
        Finish(VerdictClass::kPlanInvalid, absl::StrCat("launch plan invalid: ", error)));
  }
  detail["launch_kernels"] = compile_event_["launch_kernels"];
  {
    // The timed workload's launches as the plan resolved them, so feedback can report the
    // shared memory each launch really uses (ptxas reports static shared memory only; a TMA
    // pipeline's ring is dynamic: 197,696 B for the reference GEMM).
    json launches = json::array();
    const json plans = compile_event_.value("resolved_plans", json::object());
    const auto timed = plans.find(task_.TimedWorkload().name);
    if (timed != plans.end() && timed->is_object()) {
      for (const json& l : timed->value("launches", json::array())) {
        launches.push_back({{"kernel", l.value("kernel", std::string())},
                            {"grid", l.value("grid", json::array())},
                            {"block", l.value("block", json::array())},
                            {"dynamic_shared_bytes", l.value("dynamic_shared_bytes", int64_t{0})}});
      }
    }
    detail["launches"] = std::move(launches);
  }
  if (!req_.compile_only) {
    // nvdisasm takes ~1 s on a GEMM cubin (H200 host, 2026-11-30): off the critical path, in
    // its own sandbox beside the correctness stage; TargetStage() collects its event.
    ASSIGN_OR_RETURN(std::string dir, ModuleDir("sassmap-"));
    json r = BaseRequest(dir);
    r.erase("source");
    r["cubin_path"] = dir + "/module.cubin";
    r["ptx_path"] = dir + "/module.ptx";
    ASSIGN_OR_RETURN(std::string path, WriteRequest(dir, "request.json", r));
    ASSIGN_OR_RETURN(sassmap_, Spawn("sassmap", path, dir, 120, true));
    sassmap_spawned_at_ = Now();
    processes_.push_back(
        {{"mode", "sassmap"}, {"event", "spawned"}, {"isolation", ToJson(sassmap_->isolation())}});
  }
  Report(
      Stage::kCompile, true,
      absl::StrFormat("compiled (%d-byte cubin) in %.2f s", compile_event_.value("cubin_bytes", 0),
                      compile_event_.value("seconds", 0.0)),
      detail, Now() - t0);
  if (req_.compile_only) {
    return std::optional<Verdict>(Finish(VerdictClass::kCompiled, "compiled (compile-only scope)"));
  }
  return std::optional<Verdict>();
}

absl::StatusOr<Verdict> Evaluation::RuntimeFailure(Stage stage, const StepResult& step,
                                                   const json& detail_in,
                                                   const std::string& workload, uint64_t seed,
                                                   double seconds) {
  json detail = detail_in;
  detail["workload"] = workload;
  detail["seed"] = U64(seed);
  detail["event"] = step.event;
  if (step.outcome == Outcome::kCancelled) return absl::CancelledError("cancelled");
  if (step.outcome == Outcome::kInfrastructure) {
    return absl::InternalError(step.message);
  }
  if (step.outcome == Outcome::kPlanInvalid) {
    Report(stage, false, "launch plan invalid at run time", detail, seconds);
    return Finish(VerdictClass::kPlanInvalid, absl::StrCat("launch plan invalid: ", step.message));
  }
  candidate_.reset();
  if (step.outcome == Outcome::kTimeout) {
    reference_failed_ = true;  // A hung kernel was killed: nothing of this GPU's state is kept.
    // The GPU must still work for the next evaluation: probe it in a fresh process.
    auto health = HealthProbe(opt_);
    detail["health_after_kill"] =
        health.ok() ? json("ok") : json(std::string(health.status().message()));
    Report(stage, false, "timeout", detail, seconds);
    if (!health.ok()) {
      return absl::UnavailableError(
          absl::StrCat("GPU unusable after killing a hung kernel: ", health.status().message()));
    }
    return Finish(VerdictClass::kTimeout,
                  absl::StrCat("timeout on workload '", workload, "': ", step.message));
  }
  // A kernel fault: optional compute-sanitizer replay of the same trial, for the feedback.
  std::string message = absl::StrCat("runtime error on workload '", workload, "': ", step.message);
  if (opt_.sanitizer_on_runtime_error) {
    if (auto sanitizer = FindComputeSanitizer()) {
      double s0 = Now();
      auto dir = ModuleDir("sanitizer-");
      if (dir.ok()) {
        json r = BaseRequest(*dir);
        r["cubin_path"] = *dir + "/module.cubin";
        r["ptx_path"] = *dir + "/module.ptx";
        r["workload"] = workload;
        r["seed"] = U64(seed);
        r["output_prefix"] = *dir + "/replay";
        auto path = WriteRequest(*dir, "request.json", r);
        if (path.ok()) {
          SandboxOptions o;
          o.argv = {*sanitizer, "--tool",           "memcheck", "--print-limit",
                    "10",       "--show-backtrace", "device",   "--error-exitcode",
                    "99",       evaluator_,         "replay",   "--request",
                    *path};
          o.private_dir = *dir;
          o.env = MinimalEnv(*dir);
          o.limits.wall_seconds = 60;
          o.isolate_network = opt_.isolate_network;
          o.drop_privileges = opt_.drop_privileges;
          o.cancel = cancel_;
          if (auto sb = Sandbox::Start(o); sb.ok()) {
            SandboxExit e = (*sb)->Wait();
            std::string lines;
            for (absl::string_view line : absl::StrSplit(e.output_tail, '\n')) {
              if (absl::StartsWith(line, "=========") && lines.size() < 4000) {
                lines += std::string(line) + "\n";
              }
            }
            detail["compute_sanitizer"] = {
                {"exit", ToJson(e)}, {"report", lines}, {"seconds", Now() - s0}};
            if (!lines.empty()) message += absl::StrCat("\ncompute-sanitizer memcheck:\n", lines);
          }
        }
      }
    } else {
      detail["compute_sanitizer"] = "not available on this worker";
    }
  }
  Report(stage, false, "runtime error", detail, seconds);
  return Finish(VerdictClass::kRuntimeError, message);
}

absl::StatusOr<std::optional<Verdict>> Evaluation::CorrectnessStage() {
  double t0 = Now();
  // The reference process says whether a GPU is usable here (and which).
  if (reference_ == nullptr) {
    if (unavailable_reason_.empty()) unavailable_reason_ = "the reference process did not start";
  } else {
    StepResult ready = Await(*reference_, "ready", 120, "GPU start-up");
    if (ready.outcome != Outcome::kOk && reference_reused_) {
      // A warm process that does not answer is ended; a fresh one decides.
      reference_.reset();
      if (!reference_pool_dir_.empty()) RemoveTree(reference_pool_dir_);
      reference_pool_dir_.clear();
      reference_reused_ = false;
      StartReference(/*allow_warm=*/false);
      if (reference_ != nullptr) ready = Await(*reference_, "ready", 120, "GPU start-up");
    }
    if (reference_ == nullptr || ready.outcome != Outcome::kOk) {
      unavailable_reason_ = ready.event.value("message", ready.message);
      reference_.reset();
    } else {
      device_ = ready.event["device"];
      processes_.push_back({{"mode", "reference"},
                            {"reused", reference_reused_},
                            {"ready_seconds", Now() - reference_spawned_at_}});
    }
  }
  if (unavailable_reason_.empty() && device_.value("arch", std::string()) != req_.arch) {
    unavailable_reason_ =
        absl::StrCat("this GPU is ", device_.value("name", std::string()), " (",
                     device_.value("arch", std::string()), "), the submission targets ", req_.arch);
  }
  if (!unavailable_reason_.empty()) {
    reference_.reset();
    verdict_.runtime_unverified = true;
    report_["runtime_skipped"] = unavailable_reason_;
    return std::optional<Verdict>(Finish(
        VerdictClass::kCompiled,
        absl::StrCat("compiled; correctness, target-instruction and timing stages were SKIPPED: ",
                     unavailable_reason_)));
  }
  // Seeds: public (fixed per task and workload) then secret (fresh per evaluation).
  std::vector<const Workload*> order;
  for (const Workload& w : task_.workloads) order.push_back(&w);
  std::map<std::string, uint64_t> size_of;
  for (const Workload* w : order) {
    auto outs = OutputsOf(task_, *w);
    uint64_t e = 0;
    if (outs.ok()) {
      for (const OutputSpec& o : *outs) e += o.elements;
    }
    size_of[w->name] = e;
  }
  // Small workloads first: most failures show there, cheaply.
  std::stable_sort(order.begin(), order.end(), [&](const Workload* a, const Workload* b) {
    return size_of[a->name] < size_of[b->name];
  });
  struct Trial {
    std::string workload;
    uint64_t seed;
    bool is_public;
  };
  std::vector<Trial> trials;
  for (const Workload* w : order) {
    json ws = json::array();
    for (int i = 0; i < opt_.public_seeds; ++i) {
      uint64_t s = Mix64(HashText(task_.id + "/" + w->name) + static_cast<uint64_t>(i));
      trials.push_back({w->name, s, true});
      ws.push_back({{"seed", U64(s)}, {"kind", "public"}});
    }
    for (int i = 0; i < std::max(1, w->trials); ++i) {
      uint64_t s = SecretSeed("trial/" + w->name, static_cast<uint64_t>(i));
      trials.push_back({w->name, s, false});
      ws.push_back({{"seed", U64(s)}, {"kind", "secret"}});
    }
    seeds_[w->name] = ws;
  }
  for (const Trial& t : trials) RETURN_IF_ERROR(RequestReference(t.workload, t.seed));
  // The instrumented run's reference, queued now so it is ready when needed.
  const std::string timed = task_.TimedWorkload().name;
  const uint64_t instrument_seed = SecretSeed("instrument", 0);
  seeds_["instrument"] = U64(instrument_seed);
  RETURN_IF_ERROR(RequestReference(timed, instrument_seed));

  // The candidate process: started beside the compiler and now given the module, or started
  // now with it.
  const bool candidate_early = candidate_ != nullptr;
  double c0 = candidate_ ? candidate_spawned_at_ : Now();
  if (candidate_) {
    RETURN_IF_ERROR(CopyModule(candidate_dir_));
    // A process that died while waiting says why in the Await below.
    (void)candidate_->Send({{"cmd", "module"},
                            {"cubin_path", candidate_dir_ + "/module.cubin"},
                            {"ptx_path", candidate_dir_ + "/module.ptx"}});
  } else {
    ASSIGN_OR_RETURN(candidate_dir_, ModuleDir("candidate-"));
    json creq = BaseRequest(candidate_dir_);
    creq["cubin_path"] = candidate_dir_ + "/module.cubin";
    creq["ptx_path"] = candidate_dir_ + "/module.ptx";
    ASSIGN_OR_RETURN(std::string cpath, WriteRequest(candidate_dir_, "request.json", creq));
    ASSIGN_OR_RETURN(candidate_, Spawn("candidate", cpath, candidate_dir_,
                                       opt_.evaluation_timeout_seconds, true));
  }
  json isolation = ToJson(candidate_->isolation());
  // The instrumented processes start now as well and set up (CUDA, CUPTI, module, buffers:
  // ~0.5 s on the H200) while the trials run; they wait for "go" from TargetStage. One that
  // cannot be started here is started there.
  for (const auto& [kernel, launch_index] : DistinctKernels()) {
    auto p = SpawnInstrument(kernel, launch_index, false, true);
    if (p.ok()) instrument_ready_[kernel] = std::move(*p);
  }
  StepResult ready = Await(*candidate_, "ready", 120, "candidate start-up");
  if (ready.outcome != Outcome::kOk) {
    return Done(
        RuntimeFailure(Stage::kCorrectness, ready, {{"isolation", isolation}}, "", 0, Now() - t0));
  }
  processes_.push_back({{"mode", "candidate"},
                        {"started_early", candidate_early},
                        {"ready_seconds", Now() - c0},
                        {"isolation", isolation}});

  json results = json::array();
  // With files, every trial is queued at once: the candidate runs trial i+1 while its output of
  // trial i is compared (a failed evaluation just kills the process with the rest of its queue).
  // With CUDA IPC the reference process reads the candidate's own output buffers, so trial i+1
  // is sent once trial i is compared (a round trip of a few milliseconds).
  size_t sent = 0;
  if (opt_.run_timing) {
    // Baseline handle, its buffers and NVML: the candidate process sets them up on a thread of
    // their own while the trials run.
    RETURN_IF_ERROR(candidate_->Send({{"cmd", "prepare_timing"}, {"workload", timed}}));
  }
  auto trial_prefix = [&](size_t k) { return absl::StrCat(candidate_dir_, "/trial", k); };
  auto send_trials = [&](size_t done) -> absl::Status {
    const size_t want = transfer_ == "ipc" ? std::min(done + 1, trials.size()) : trials.size();
    for (; sent < want; ++sent) {
      const Trial& t = trials[sent];
      RETURN_IF_ERROR(candidate_->Send({{"cmd", "trial"},
                                        {"workload", t.workload},
                                        {"seed", U64(t.seed)},
                                        {"prefix", trial_prefix(sent)},
                                        {"transfer", transfer_}}));
    }
    return absl::OkStatus();
  };
  for (size_t k = 0; k < trials.size(); ++k) {
    const Trial& t = trials[k];
    RETURN_IF_ERROR(send_trials(k));
    double w0 = Now();
    StepResult step = Await(*candidate_, "trial", opt_.trial_timeout_seconds,
                            absl::StrCat("correctness trial (workload ", t.workload, ")"));
    if (step.outcome != Outcome::kOk) {
      json detail = {{"trials", results}, {"isolation", isolation}};
      return Done(
          RuntimeFailure(Stage::kCorrectness, step, detail, t.workload, t.seed, Now() - t0));
    }
    kernel_seconds_ += step.event.value("kernel_ms", 0.0) / 1000;
    const double candidate_wait = Now() - w0;
    ASSIGN_OR_RETURN(json ref, AwaitReference(t.workload, t.seed));
    const double reference_wait = Now() - w0 - candidate_wait;
    json trial = {{"workload", t.workload},
                  {"seed", U64(t.seed)},
                  {"seed_kind", t.is_public ? "public" : "secret"},
                  {"kernel_ms", step.event.value("kernel_ms", 0.0)}};
    if (step.event["input_hash_before"] != ref["input_hash"]) {
      return absl::InternalError(absl::StrCat(
          "candidate and reference processes generated different inputs for ", t.workload, " seed ",
          U64(t.seed), " (", step.event["input_hash_before"].dump(), " vs ",
          ref["input_hash"].dump(), ")"));
    }
    if (step.event["input_hash_after"] != step.event["input_hash_before"]) {
      trial["input_mutated"] = true;
      results.push_back(trial);
      Report(Stage::kCorrectness, false, "inputs mutated",
             {{"trials", results}, {"isolation", isolation}}, Now() - t0);
      return std::optional<Verdict>(
          Finish(VerdictClass::kInputMutated,
                 absl::StrCat("the kernel changed its inputs (workload '", t.workload,
                              "'): the inputs' hash differs before and after the launches")));
    }
    json cmp_detail;
    double c0 = Now();
    const bool by_ipc = transfer_ == "ipc";
    ASSIGN_OR_RETURN(gpu::CompareReport cmp,
                     CompareWithReference(t.workload, t.seed, step.event["outputs"], &cmp_detail,
                                          candidate_.get(), trial_prefix(k)));
    trial["compare"] = cmp_detail;
    trial["transfer"] = by_ipc && transfer_ == "ipc" ? "ipc" : "file";
    trial["pass"] = cmp.pass;
    trial["seconds"] = {{"candidate_process", step.event.value("seconds", 0.0)},
                        {"waiting_for_candidate", candidate_wait},
                        {"waiting_for_reference", reference_wait},
                        {"reference_process", ref.value("seconds", 0.0)},
                        {"reference_setup", ref.value("setup_seconds", 0.0)},
                        {"compare", Now() - c0}};
    results.push_back(trial);
    if (!cmp.pass) {
      std::string first;
      if (!cmp.first_mismatches.empty()) {
        const gpu::Mismatch& m = cmp.first_mismatches[0];
        first = absl::StrFormat("; first at [%s]: got %g, expected %g (%s)",
                                absl::StrJoin(m.coordinates, ","), m.got, m.expected, m.kind);
      }
      Report(Stage::kCorrectness, false, absl::StrCat("wrong result on ", t.workload),
             {{"trials", results}, {"isolation", isolation}}, Now() - t0);
      return std::optional<Verdict>(Finish(
          VerdictClass::kWrongResult,
          absl::StrFormat("wrong result on workload '%s' (%s seed): %s; max abs error %.4g, max "
                          "rel error %.4g, matched ratio %.6f%s",
                          t.workload, t.is_public ? "public" : "secret", cmp.reason,
                          cmp.max_abs_error, cmp.max_rel_error, cmp.matched_ratio, first)));
    }
  }
  verdict_.correct = true;
  Report(Stage::kCorrectness, true,
         absl::StrFormat("%d trials on %d workloads within tolerance", results.size(),
                         task_.workloads.size()),
         {{"trials", results}, {"isolation", isolation}}, Now() - t0);
  return std::optional<Verdict>();
}

std::vector<std::pair<std::string, size_t>> Evaluation::DistinctKernels() const {
  // One process per distinct kernel: CUPTI instruments only the first kernel function that runs
  // under patching in a process (docs/results/2026-11-30-h200-device-probe-1.log).
  std::vector<std::pair<std::string, size_t>> kernels;
  size_t i = 0;
  for (const json& k : compile_event_.value("launch_kernels", json::array())) {
    std::string name = k.get<std::string>();
    if (std::none_of(kernels.begin(), kernels.end(), [&](auto& p) { return p.first == name; })) {
      kernels.push_back({name, i});
    }
    ++i;
  }
  return kernels;
}

absl::StatusOr<Evaluation::InstrumentProcess> Evaluation::SpawnInstrument(const std::string& kernel,
                                                                          size_t launch_index,
                                                                          bool host_inputs,
                                                                          bool wait_for_go) {
  InstrumentProcess p;
  p.spawned_at = Now();
  p.waited_for_go = wait_for_go;
  ASSIGN_OR_RETURN(p.dir, ModuleDir("instrument-"));
  ASSIGN_OR_RETURN(uint64_t seed, ParseU64(seeds_["instrument"]));
  json r = BaseRequest(p.dir);
  r["cubin_path"] = p.dir + "/module.cubin";
  r["ptx_path"] = p.dir + "/module.ptx";
  r["workload"] = task_.TimedWorkload().name;
  r["seed"] = U64(seed);
  r["kernel"] = kernel;
  r["launch_index"] = launch_index;
  r["host_inputs"] = host_inputs;
  r["output_prefix"] = p.dir + "/instrumented";
  r["transfer"] = transfer_;
  r["wait_for_go"] = wait_for_go;
  p.request = r;
  ASSIGN_OR_RETURN(std::string path, WriteRequest(p.dir, "request.json", r));
  const bool keep_root = root_ && ProfilingNeedsAdmin();
  // A process waiting for "go" may wait through the whole correctness stage.
  const double wall =
      opt_.instrument_timeout_seconds + 30 + (wait_for_go ? opt_.evaluation_timeout_seconds : 0);
  ASSIGN_OR_RETURN(p.sandbox, Spawn("instrument", path, p.dir, wall, !keep_root));
  return p;
}

absl::StatusOr<std::optional<Verdict>> Evaluation::TargetStage() {
  double t0 = Now();
  const ArchSpec* arch = task_.FindArch(req_.arch);
  std::vector<std::string> required = arch ? arch->target_families : std::vector<std::string>();
  const std::string timed = task_.TimedWorkload().name;
  ASSIGN_OR_RETURN(uint64_t seed, ParseU64(seeds_["instrument"]));
  const std::vector<std::pair<std::string, size_t>> kernels = DistinctKernels();
  std::vector<json> runs;
  json run_details = json::array();
  for (const auto& [kernel, launch_index] : kernels) {
    // First the faithful run (earlier launches executed, then the kernel instrumented); if
    // CUPTI returned no records for the kernel, once more with the kernel as the first kernel of
    // its process (inputs generated on the host), which the H200 probe showed CUPTI covers.
    for (int attempt = 0; attempt < 2; ++attempt) {
      const bool host_inputs = attempt == 1;
      InstrumentProcess p;
      auto ready = instrument_ready_.find(kernel);
      if (!host_inputs && ready != instrument_ready_.end()) {
        // Started beside the correctness stage and waiting: its start-up is already paid.
        p = std::move(ready->second);
        instrument_ready_.erase(ready);
        p.request["transfer"] = transfer_;
        // A process that died while waiting says why in the Await below.
        (void)p.sandbox->Send({{"cmd", "go"}, {"transfer", transfer_}});
      } else {
        ASSIGN_OR_RETURN(p, SpawnInstrument(kernel, launch_index, host_inputs, false));
      }
      const double k0 = p.spawned_at;
      const std::string& dir = p.dir;
      std::unique_ptr<Sandbox>& sandbox = p.sandbox;
      json isolation = ToJson(sandbox->isolation());
      StepResult step = Await(*sandbox, "instrument", opt_.instrument_timeout_seconds,
                              absl::StrCat("instrumented run of ", kernel));
      processes_.push_back({{"mode", "instrument"},
                            {"kernel", kernel},
                            {"host_inputs", host_inputs},
                            {"started_early", p.waited_for_go},
                            {"seconds_since_spawn", Now() - k0},
                            {"seconds", Now() - (p.waited_for_go ? t0 : k0)},
                            {"isolation", isolation}});
      if (step.outcome != Outcome::kOk) {
        if (step.outcome == Outcome::kInfrastructure) {
          // Never a pass without the profiler's evidence: the job is an infrastructure failure.
          return absl::UnavailableError(absl::StrCat(
              "target instructions cannot be verified here (refused, not passed): ", step.message));
        }
        return Done(RuntimeFailure(Stage::kTargetInstructions, step, {{"runs", run_details}}, timed,
                                   seed, Now() - t0));
      }
      kernel_seconds_ += step.event.value("instrumented_seconds", 0.0);
      json summary = step.event;
      summary.erase("records");
      summary["record_count"] = step.event["records"].size();
      summary["isolation"] = isolation;
      bool covered = false;
      for (const json& rec : step.event["records"]) {
        if (rec.is_array() && !rec.empty() && rec[0] == kernel) covered = true;
      }
      summary["covered"] = covered;
      if (!host_inputs) {
        // The instrumented run computed on secret inputs: its outputs must be right as well, so
        // a kernel cannot behave differently while it is watched.
        json cmp_detail;
        ASSIGN_OR_RETURN(json ref, AwaitReference(timed, seed));
        if (step.event["input_hash_before"] != ref["input_hash"]) {
          return absl::InternalError(
              "instrumented run generated different inputs than the reference");
        }
        // The reference is kept: every kernel of the plan gets an instrumented run on this seed.
        ASSIGN_OR_RETURN(gpu::CompareReport cmp,
                         CompareWithReference(timed, seed, step.event["outputs"], &cmp_detail,
                                              sandbox.get(), dir + "/instrumented", true));
        (void)sandbox->Send({{"cmd", "quit"}});  // Its exported outputs are no longer needed.
        summary["compare"] = cmp_detail;
        run_details.push_back(summary);
        if (step.event["input_hash_after"] != step.event["input_hash_before"]) {
          Report(Stage::kTargetInstructions, false, "inputs mutated", {{"runs", run_details}},
                 Now() - t0);
          return std::optional<Verdict>(
              Finish(VerdictClass::kInputMutated,
                     "the kernel changed its inputs in the instrumented run"));
        }
        if (!cmp.pass) {
          Report(Stage::kTargetInstructions, false, "wrong result in the instrumented run",
                 {{"runs", run_details}}, Now() - t0);
          verdict_.correct = false;
          return std::optional<Verdict>(Finish(
              VerdictClass::kWrongResult,
              absl::StrCat("wrong result in the instrumented run (timed workload, secret seed): ",
                           cmp.reason)));
        }
      } else {
        summary["compare"] = "not compared: host-generated inputs (fallback run)";
        run_details.push_back(summary);
      }
      if (covered || host_inputs) {
        runs.push_back(std::move(step.event));
        break;
      }
    }
  }
  // The static SASS map, computed beside correctness.
  json sass_map = {{"available", false}, {"reason", "the SASS map process did not run"}};
  if (sassmap_) {
    StepResult sm = Await(*sassmap_, "sassmap", 120, "SASS map");
    processes_.push_back(
        {{"mode", "sassmap"}, {"seconds_since_spawn", Now() - sassmap_spawned_at_}});
    if (sm.outcome == Outcome::kOk) {
      sass_map = sm.event.value("sass", sass_map);
    } else {
      sass_map["reason"] = sm.message;
    }
    sassmap_.reset();
  }
  std::map<std::string, int> ptx_families;
  json pf = compile_event_.value("report", json::object()).value("ptx_families", json::object());
  for (auto it = pf.begin(); it != pf.end(); ++it) {
    if (it.value().is_number_integer()) ptx_families[it.key()] = it.value().get<int>();
  }
  gpu::TargetReport target = gpu::AnalyzeTargets(sass_map, runs, ptx_families, required);
  json detail = gpu::ToJson(target);
  detail["runs"] = run_details;
  json sass_summary = sass_map;
  sass_summary.erase("functions");
  detail["sass"] = sass_summary;
  if (target.refused) {
    Report(Stage::kTargetInstructions, false, "not verified", detail, Now() - t0);
    return absl::UnavailableError(absl::StrCat("refused, not passed: ", target.message));
  }
  verdict_.target_executed = target.ok;
  Report(Stage::kTargetInstructions, target.ok, target.message, detail, Now() - t0);
  return std::optional<Verdict>();
}

absl::StatusOr<std::optional<Verdict>> Evaluation::TimingStage() {
  double t0 = Now();
  const Workload& timed = task_.TimedWorkload();
  json cmd = {{"cmd", "time"},
              {"workload", timed.name},
              {"candidate_seed_base", U64(SecretSeed("timing/candidate", 0))},
              {"baseline_seed_base", U64(SecretSeed("timing/baseline", 0))},
              {"check_position_seed", U64(SecretSeed("timing/check", 0))},
              {"min_samples", opt_.timing.min_samples},
              {"max_samples", opt_.timing.max_samples},
              {"max_seconds", opt_.timing.max_seconds},
              {"target_rse", opt_.timing.target_rse},
              {"warmup_seconds", opt_.timing.warmup_seconds},
              {"check_every", opt_.timing.check_every},
              {"max_checks", opt_.timing.max_checks},
              {"check_prefix", candidate_dir_ + "/timed-check"},
              {"transfer", transfer_}};
  // The checked samples sit at secret positions the supervisor knows too: their references are
  // queued now and computed while the timing loop runs.
  const uint64_t check_seed = SecretSeed("timing/check", 0);
  const uint64_t candidate_base = SecretSeed("timing/candidate", 0);
  for (size_t block = 0; block < opt_.timing.max_checks && opt_.timing.check_every > 0; ++block) {
    uint64_t index = gpu::CheckedSampleOfBlock(check_seed, block, opt_.timing.check_every);
    if (index >= opt_.timing.min_samples) break;  // Reached in every run; later ones may not be.
    RETURN_IF_ERROR(RequestReference(timed.name, gpu::SampleSeed(candidate_base, index)));
  }
  RETURN_IF_ERROR(candidate_->Send(cmd));
  StepResult step = Await(*candidate_, "timing", opt_.timing_timeout_seconds, "timing");
  if (step.outcome != Outcome::kOk) {
    return Done(RuntimeFailure(Stage::kTiming, step, json::object(), timed.name, 0, Now() - t0));
  }
  json result = step.event["result"];
  kernel_seconds_ += result.value("kernel_ms_total", 0.0) / 1000;
  // The outputs of timed launches, checked against fresh references of their secret seeds.
  json checks = json::array();
  for (const json& c : step.event.value("checks", json::array())) {
    ASSIGN_OR_RETURN(uint64_t seed, ParseU64(c["seed"]));
    RETURN_IF_ERROR(RequestReference(timed.name, seed));
  }
  std::string wrong;
  for (const json& c : step.event.value("checks", json::array())) {
    ASSIGN_OR_RETURN(uint64_t seed, ParseU64(c["seed"]));
    json cmp_detail;
    ASSIGN_OR_RETURN(gpu::CompareReport cmp, CompareWithReference(timed.name, seed, c["outputs"],
                                                                  &cmp_detail, nullptr, ""));
    checks.push_back({{"sample", c["sample"]},
                      {"seed", c["seed"]},
                      {"pass", cmp.pass},
                      {"compare", cmp_detail}});
    if (!cmp.pass && wrong.empty()) {
      wrong = absl::StrCat("timed sample ", c["sample"].dump(), ": ", cmp.reason);
    }
  }
  json raw = step.event;
  raw.erase("checks");
  json detail = {{"timing", raw}, {"checks", checks}};
  double candidate_ms = result["candidate"].value("median_ms", 0.0);
  double baseline_ms = result["baseline"].value("median_ms", 0.0);
  verdict_.speedup = result.value("speedup", 0.0);
  // Roofline floor of the timed workload.
  std::map<std::string, int64_t> axes = timed.axes;
  auto flops = EvalRealExpr(task_.flops_expr, axes);
  auto bytes = EvalRealExpr(task_.min_bytes_expr, axes);
  double floor_ms = (flops.ok() && bytes.ok()) ? RooflineFloorMs(device_, *flops, *bytes) : 0;
  detail["roofline_floor_ms"] = floor_ms;
  if (flops.ok()) detail["candidate_tflops"] = *flops / (candidate_ms * 1e-3) / 1e12;
  if (flops.ok()) detail["baseline_tflops"] = *flops / (baseline_ms * 1e-3) / 1e12;
  std::string summary = absl::StrFormat(
      "candidate %.4f ms, %s %.4f ms (median of %d interleaved samples each): speedup %.3f",
      candidate_ms, task_.baseline_library, baseline_ms, result["candidate"].value("n", 0),
      verdict_.speedup);
  if (!wrong.empty()) {
    verdict_.correct = false;
    Report(Stage::kTiming, false, summary, detail, Now() - t0);
    return std::optional<Verdict>(
        Finish(VerdictClass::kWrongResult,
               absl::StrCat("the outputs of the timed launches are wrong (", wrong,
                            "): results must not depend on earlier launches")));
  }
  if (floor_ms > 0 && candidate_ms < floor_ms) {
    Report(Stage::kTiming, false, summary, detail, Now() - t0);
    return std::optional<Verdict>(
        Finish(VerdictClass::kImpossibleTime,
               absl::StrFormat("measured %.4g ms is below the roofline floor %.4g ms of this GPU: "
                               "impossible, rejected",
                               candidate_ms, floor_ms)));
  }
  Report(Stage::kTiming, true, summary, detail, Now() - t0);
  return std::optional<Verdict>();
}

absl::StatusOr<Verdict> Evaluation::Run() {
  absl::StatusOr<Verdict> v = RunStages();
  // An infrastructure error or a cancellation may leave the reference process mid-command.
  if (!v.ok()) reference_failed_ = true;
  return v;
}

void Evaluation::StartReference(bool allow_warm) {
  reference_key_ = absl::StrCat(evaluator_, "|", opt_.gpu, "|", task_.dir, "|", task_.version_hash,
                                "|", opt_.isolate_network);
  if (opt_.reuse_reference_process && allow_warm) {
    std::optional<WarmReference> warm =
        ReferencePool::Get().Take(reference_key_, opt_.evaluation_timeout_seconds + 60);
    if (warm && warm->process->Send({{"cmd", "begin"}, {"hash_key", U64(hash_key_)}}).ok()) {
      // It answers "begin" with the "ready" event a fresh one sends.
      reference_ = std::move(warm->process);
      reference_pool_dir_ = warm->dir;
      reference_wall_seconds_ = warm->wall_seconds;
      reference_spawned_at_ = Now();
      reference_reused_ = true;
      return;
    }
    if (warm) RemoveTree(warm->dir);  // Its process ended with `warm`.
  }
  std::string dir = reference_dir_;
  double wall = opt_.evaluation_timeout_seconds;
  if (opt_.reuse_reference_process) {
    // Outlives this evaluation's work directory; an hour's watchdog, renewed by a fresh process.
    auto pooled = CreatePrivateDir(work_root_, "ptxbench-reference-");
    if (pooled.ok()) {
      dir = reference_pool_dir_ = *pooled;
      wall = std::max(wall, 3600.0);
    }
  }
  json ref_request = BaseRequest(dir);
  ref_request.erase("source");
  auto ref_path = WriteRequest(dir, "request.json", ref_request);
  if (!ref_path.ok()) {
    unavailable_reason_ = std::string(ref_path.status().message());
    return;
  }
  // Trusted code only (ours and the library's): keeps the supervisor's uid; still its own
  // process group, no network, and a watchdog. Not tied to this evaluation's cancel flag: it may
  // serve the next evaluation (a cancelled evaluation ends it in ReleaseReference).
  auto ref = Spawn("reference", *ref_path, dir, wall, false, /*cancellable=*/false);
  if (ref.ok()) {
    reference_ = std::move(*ref);
    reference_spawned_at_ = Now();
    reference_wall_seconds_ = wall;
  } else {
    unavailable_reason_ = std::string(ref.status().message());
  }
}

void Evaluation::StartCandidateEarly() {
  auto dir = NewSandboxDir("candidate-");
  if (!dir.ok()) return;  // CorrectnessStage starts it then.
  json creq = BaseRequest(*dir);
  creq["wait_for_module"] = true;
  if (opt_.run_timing) creq["timing_workload"] = task_.TimedWorkload().name;
  auto path = WriteRequest(*dir, "request.json", creq);
  if (!path.ok()) return;
  auto sandbox = Spawn("candidate", *path, *dir, opt_.evaluation_timeout_seconds, true);
  if (!sandbox.ok()) return;
  candidate_dir_ = *dir;
  candidate_ = std::move(*sandbox);
  candidate_spawned_at_ = Now();
}

void Evaluation::ReleaseReference() {
  if (reference_ != nullptr && opt_.reuse_reference_process && !reference_failed_ &&
      !reference_pool_dir_.empty() && reference_->Send({{"cmd", "reset"}}).ok()) {
    // Drains what is still queued (references of trials never run, a "ready" never read).
    StepResult r = Await(*reference_, "reset", 30, "reference reset");
    if (r.outcome == Outcome::kOk) {
      ReferencePool::Get().Put(
          {reference_key_, std::move(reference_), reference_pool_dir_, reference_wall_seconds_});
      return;
    }
  }
  if (reference_ != nullptr) (void)reference_->Send({{"cmd", "quit"}});
  reference_.reset();
  if (!reference_pool_dir_.empty()) RemoveTree(reference_pool_dir_);
}

absl::StatusOr<Verdict> Evaluation::RunStages() {
  t_start_ = Now();
  verdict_.runtime_unverified = false;
  RETURN_IF_ERROR(Setup());
  const ArchSpec* arch = task_.FindArch(req_.arch);
  if (arch == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("task ", task_.id, " has no arch ", req_.arch));
  }
  ASSIGN_OR_RETURN(std::optional<Verdict> done, CompileStage());
  if (done) return *done;
  ASSIGN_OR_RETURN(done, CorrectnessStage());
  if (done) return *done;
  ASSIGN_OR_RETURN(done, TargetStage());
  if (done) return *done;
  if (opt_.run_timing) {
    ASSIGN_OR_RETURN(done, TimingStage());
    if (done) return *done;
  }
  if (candidate_) (void)candidate_->Send({{"cmd", "quit"}});
  if (!verdict_.target_executed) {
    std::string message;
    for (const StageReport& s : verdict_.stages) {
      if (s.stage == Stage::kTargetInstructions) message = s.summary;
    }
    return Finish(VerdictClass::kTargetNotExecuted,
                  absl::StrCat("correct, but ", message,
                               verdict_.speedup > 0
                                   ? absl::StrFormat(" (speedup %.3f over %s)", verdict_.speedup,
                                                     task_.baseline_library)
                                   : ""));
  }
  return Finish(VerdictClass::kPass,
                opt_.run_timing
                    ? absl::StrFormat("correct, target instructions executed; speedup %.3f over %s",
                                      verdict_.speedup, task_.baseline_library)
                    : "correct, target instructions executed (timing not run)");
}

}  // namespace

std::string DefaultEvaluatorPath() {
  if (const char* env = std::getenv("PTXBENCH_EVALUATOR"); env && *env) return env;
  return SelfDir() + "/ptxbench-evaluator";
}

double RooflineFloorMs(const json& device, double flops, double bytes) {
  // Dense bf16 tensor-core FLOP per SM per clock: 4096 on sm_90 (H100 SXM: 989.4 TFLOP/s =
  // 132 SMs x 4096 x 1.83 GHz), 8192 on sm_100 (B200). With the device's maximum SM clock
  // (1980 MHz on the H200: 1070 TFLOP/s), an upper bound no kernel exceeds.
  std::string cc = device.value("compute_capability", std::string());
  double per_sm_clock = cc == "9.0" ? 4096 : (cc == "10.0" ? 8192 : 0);
  double sms = device.value("sm_count", 0);
  double clock_hz = device.value("sm_clock_max_khz", 0) * 1e3;
  if (device.contains("nvml_max_sm_mhz") && device["nvml_max_sm_mhz"].get<double>() > 0) {
    clock_hz = std::max(clock_hz, device["nvml_max_sm_mhz"].get<double>() * 1e6);
  }
  double peak_flops = per_sm_clock * sms * clock_hz;
  // HBM: two transfers per memory clock over the bus (H200: 2 x 3.2 GHz x 768 B = 4.9 TB/s).
  double bandwidth = 2.0 * device.value("memory_clock_max_khz", 0) * 1e3 *
                     device.value("memory_bus_bits", 0) / 8.0;
  if (peak_flops <= 0 || bandwidth <= 0) return 0;
  return std::max(flops / peak_flops, bytes / bandwidth) * 1e3;
}

absl::StatusOr<Verdict> Evaluate(const EvaluationRequest& request, const EngineOptions& options,
                                 const StageCallback& on_stage, const std::atomic<bool>* cancel) {
  if (request.task == nullptr) return absl::InvalidArgumentError("EvaluationRequest.task is null");
  Evaluation evaluation(request, options, on_stage, cancel);
  return evaluation.Run();
}

absl::StatusOr<json> HealthProbe(const EngineOptions& options) {
  std::string evaluator =
      options.evaluator_path.empty() ? DefaultEvaluatorPath() : options.evaluator_path;
  SandboxOptions o;
  o.argv = {evaluator, "health"};
  std::string root = options.work_root;
  if (root.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    root = tmp && *tmp ? tmp : "/tmp";
  }
  bool drop = options.drop_privileges && geteuid() == 0;
  ASSIGN_OR_RETURN(std::string dir, CreatePrivateDir(root, "ptxbench-health-", drop ? 65534 : -1,
                                                     drop ? 65534 : -1));
  o.private_dir = dir;
  o.env = MinimalEnv(dir);
  o.limits.wall_seconds = 60;
  o.isolate_network = options.isolate_network;
  o.drop_privileges = options.drop_privileges;
  // Write a minimal request so the evaluator can read its GPU ordinal.
  std::string path = dir + "/request.json";
  RETURN_IF_ERROR(gpu::WriteFileBytes(path, json{{"gpu", options.gpu}}.dump()));
  if (drop) chown(path.c_str(), 65534, 65534);
  o.argv = {evaluator, "health", "--request", path};
  auto sandbox = Sandbox::Start(o);
  if (!sandbox.ok()) {
    RemoveTree(dir);
    return sandbox.status();
  }
  auto event = (*sandbox)->Next(60);
  SandboxExit e = (*sandbox)->Wait();
  RemoveTree(dir);
  if (!event.ok()) return event.status();
  if (!event->has_value()) {
    return absl::UnavailableError(
        absl::StrCat("health probe exited without a result: ", Trim(e.output_tail, 500)));
  }
  const json& ev = **event;
  if (ev.value("event", std::string()) != "health") {
    return absl::UnavailableError(absl::StrCat("GPU not usable: ", ev.value("message", ev.dump())));
  }
  return ev["device"];
}

}  // namespace ptxbench::engine
