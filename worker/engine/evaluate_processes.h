// The processes of one evaluation, as the supervisor (evaluate.cc) sees them: one class per kind,
// each owning its sandbox, its private directory and its timings, and speaking the typed
// protocol (gpu/protocol_messages.h). Internal to the engine; docs/measurement.md gives the
// processes' roles and isolation.
//
//   Workspace           the evaluation's directories, secret, request files and Spawn()
//   EvaluatorProcess    one sandboxed evaluator: Send(command), Await<Event>(timeout)
//   ReferenceProcess    trusted; references and comparisons; kept warm in a pool between
//                       evaluations of the same task on the same GPU
//   CandidateProcess    the submission's trials and timing loop; started beside the compiler
//   SassMapProcess      nvdisasm's static SASS map, beside the correctness stage
//   InstrumentSet       one CUPTI process per distinct kernel, started early, waiting for "go"
#ifndef PTXBENCH_WORKER_ENGINE_EVALUATE_PROCESSES_H_
#define PTXBENCH_WORKER_ENGINE_EVALUATE_PROCESSES_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/task.h"
#include "nlohmann/json.hpp"
#include "worker/engine/evaluate.h"
#include "worker/engine/gpu/protocol_messages.h"
#include "worker/engine/sandbox.h"

namespace ptxbench::engine::evaluation {

double Now();
// FNV-1a of `text`, mixed: seeds derived from names (public seeds, secret seeds' tags).
uint64_t HashText(const std::string& text);
// s cut to `max` characters ("..." appended).
std::string Trim(const std::string& s, size_t max);

// The key of the fair-baseline choice for the task's timed workload on the GPU model `gpu_name`
// (gpu::BaselineChoiceKey).
std::string TimedBaselineKey(const Task& task, const std::string& gpu_name);
// This worker's earlier choice for that key when the loop chooses the fastest library candidate
// (gpu::BaselineChoiceCache); none otherwise.
std::optional<gpu::CachedBaselineChoice> CachedTimedBaseline(const Task& task,
                                                             const std::string& gpu_name,
                                                             const gpu::TimingLoopOptions& loop);

// How a step run in a sandbox ended, beyond its events.
enum class Outcome { kOk, kFault, kPlanInvalid, kTimeout, kInfrastructure, kCancelled };

// The awaited event, or how the step ended without it.
template <typename Event>
struct Step {
  Outcome outcome = Outcome::kOk;
  Event event{};           // When kOk.
  nlohmann::json failure;  // Otherwise, for the report: the fault, plan_invalid or error
                           // event (with the output tail), or the process's exit.
  std::string message;     // Otherwise.
  // The fault, plan_invalid or error event's own message, without the supervisor's context
  // ("" for other failures): what a caller quotes when the event itself says why.
  std::string event_message;
  bool ok() const { return outcome == Outcome::kOk; }
};

// Everything the processes of one evaluation share. Its directory is removed with it (unless
// EngineOptions::keep_work_dir).
class Workspace {
 public:
  static absl::StatusOr<std::unique_ptr<Workspace>> Create(const EvaluationRequest& request,
                                                           const EngineOptions& options,
                                                           const std::atomic<bool>* cancel);
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  const Task& task() const { return *request_.task; }
  const EvaluationRequest& request() const { return request_; }
  const EngineOptions& options() const { return options_; }
  const std::atomic<bool>* cancel() const { return cancel_; }
  const std::string& evaluator() const { return evaluator_; }
  const std::string& work_root() const { return work_root_; }
  const std::string& reference_dir() const { return reference_dir_; }
  bool root() const { return root_; }
  uint64_t secret() const { return secret_; }
  // The key of every input hash of this evaluation (secret).
  uint64_t hash_key() const { return hash_key_; }
  // A seed no submission can predict: from the secret, a tag and an index.
  uint64_t SecretSeed(const std::string& tag, uint64_t index) const;
  const gpu::Submission& submission() const { return submission_; }

  // A fresh directory for a sandbox (given to nobody when the sandbox drops privileges).
  absl::StatusOr<std::string> NewSandboxDir(const std::string& prefix) const;
  // Copies the compiled module into `dir`; the copies' paths.
  absl::StatusOr<gpu::ModulePaths> CopyModule(const std::string& dir,
                                              const gpu::ModulePaths& compiled) const;
  // A fresh sandbox directory holding a copy of the compiled module.
  absl::StatusOr<std::pair<std::string, gpu::ModulePaths>> ModuleDir(
      const std::string& prefix, const gpu::ModulePaths& compiled) const;
  // Writes `request` to <dir>/request.json, owned like `dir`; its path.
  absl::StatusOr<std::string> WriteRequest(const std::string& dir,
                                           const nlohmann::json& request) const;
  absl::StatusOr<std::unique_ptr<Sandbox>> Spawn(gpu::EvaluatorMode mode,
                                                 const std::string& request_path,
                                                 const std::string& dir, double wall_seconds,
                                                 bool drop_privileges,
                                                 bool cancellable = true) const;

 private:
  Workspace(const EvaluationRequest& request, const EngineOptions& options,
            const std::atomic<bool>* cancel)
      : request_(request), options_(options), cancel_(cancel) {}

  const EvaluationRequest& request_;
  const EngineOptions& options_;
  const std::atomic<bool>* cancel_;
  gpu::Submission submission_;
  std::string evaluator_;
  std::string work_root_;
  std::string work_;
  std::string reference_dir_;
  bool root_ = false;
  uint64_t secret_ = 0;
  uint64_t hash_key_ = 0;
};

// One sandboxed evaluator process.
class EvaluatorProcess {
 public:
  EvaluatorProcess(std::unique_ptr<Sandbox> sandbox, std::string dir, double spawned_at)
      : sandbox_(std::move(sandbox)), dir_(std::move(dir)), spawned_at_(spawned_at) {}
  virtual ~EvaluatorProcess() = default;
  EvaluatorProcess(const EvaluatorProcess&) = delete;
  EvaluatorProcess& operator=(const EvaluatorProcess&) = delete;

  template <typename Command>
  absl::Status Send(const Command& command) {
    return sandbox_->Send(gpu::ToJson(command));
  }
  // Asks the process to end (it may be gone already).
  void Quit() { (void)Send(gpu::QuitCommand{}); }

  // The next `Event`, or the fault, invalid plan, error, timeout, exit or cancellation that came
  // instead. `timeout_seconds` < 0: up to the sandbox's watchdog. `drain`: other events are
  // dropped (else an event nobody asked for is an infrastructure failure).
  template <typename Event>
  Step<Event> Await(double timeout_seconds, const std::string& what, bool drain = false) {
    Step<nlohmann::json> raw = AwaitJson(Event::kKind, timeout_seconds, what, drain);
    Step<Event> step;
    step.outcome = raw.outcome;
    step.failure = std::move(raw.failure);
    step.message = std::move(raw.message);
    if (raw.ok()) {
      absl::StatusOr<Event> event = gpu::FromJson<Event>(raw.event);
      if (event.ok()) {
        step.event = std::move(*event);
      } else {
        step.outcome = Outcome::kInfrastructure;
        step.message = what + ": " + std::string(event.status().message());
        step.failure = std::move(raw.event);
      }
    }
    return step;
  }

  // The last outputs again, as files under `prefix` (the reference process could not map them).
  absl::StatusOr<std::vector<gpu::OutputHandle>> SaveOutputs(const std::string& prefix,
                                                             double timeout_seconds);

  nlohmann::json isolation() const { return ToJson(sandbox_->isolation()); }
  const std::string& dir() const { return dir_; }
  double spawned_at() const { return spawned_at_; }
  Sandbox& sandbox() { return *sandbox_; }
  // Hands the sandbox over (the reference pool keeps it).
  std::unique_ptr<Sandbox> ReleaseSandbox() { return std::move(sandbox_); }

 protected:
  // An event that arrived while another was awaited; true when the process kept it.
  virtual bool KeepUnrequested(gpu::EventKind /*kind*/, const nlohmann::json& /*event*/) {
    return false;
  }

 private:
  Step<nlohmann::json> AwaitJson(gpu::EventKind expected, double timeout_seconds,
                                 const std::string& what, bool drain);

  std::unique_ptr<Sandbox> sandbox_;
  std::string dir_;
  double spawned_at_ = 0;
};

// The trusted reference process (evaluator/reference_mode.cc). Kept warm between evaluations
// of the same task on the same GPU: its CUDA context and baseline library handles cost ~1.4 s to
// set up (H200, docs/results/2026-11-30-h200-evaluation-overhead.json: the first reference of an
// evaluation came 1.23-2.08 s after the candidate's first trial), which only the first
// evaluation pays. Between evaluations it holds no reference ("reset") and takes the next
// evaluation's hash key ("begin").
class ReferenceProcess : public EvaluatorProcess {
 public:
  // A warm process from the pool (told to "begin"), else a fresh one; nullptr and `why_not`
  // when none could be started.
  static std::unique_ptr<ReferenceProcess> Start(const Workspace& workspace, bool allow_warm,
                                                 std::string* why_not);
  // Ends the process unless Release() handed it to the pool.
  ~ReferenceProcess() override;

  bool reused() const { return reused_; }
  // Any failure of or around the process: it is never pooled.
  void MarkFailed() { failed_ = true; }
  // Hands the process back to the pool when it is healthy and drained, else ends it.
  void Release();

  // Queues the reference of (workload, seed) once; computed on the device and kept there until
  // compared: recomputing (0.8 ms for the timed GEMM) costs less than reading a cached 117 MB
  // file back, so nothing is cached across evaluations.
  absl::Status Request(const std::string& workload, uint64_t seed);
  // The reference's event, waiting for it (the reference process fails the evaluation's
  // infrastructure, never the kernel).
  absl::StatusOr<gpu::ReferenceEvent> Reference(const std::string& workload, uint64_t seed);
  // One comparison round trip (ipc_failed set when the outputs could not be mapped).
  absl::StatusOr<gpu::CompareEvent> Compare(const std::string& workload, uint64_t seed,
                                            const std::vector<gpu::OutputHandle>& outputs,
                                            bool keep);
  // The reference's sketches (sketch.h) of `samples` (index, seed) under the candidate's sketch
  // key and projection count: one round trip, waiting up to `timeout_seconds` (the reference
  // recomputes every seed: ~1 ms per GEMM seed on the H200).
  absl::StatusOr<gpu::SampleSketches> Sketch(const std::string& workload,
                                             const std::vector<gpu::CheckedSample>& samples,
                                             uint64_t sketch_seed, size_t projections,
                                             double timeout_seconds);

 protected:
  bool KeepUnrequested(gpu::EventKind kind, const nlohmann::json& event) override;

 private:
  ReferenceProcess(std::unique_ptr<Sandbox> sandbox, std::string dir, double spawned_at)
      : EvaluatorProcess(std::move(sandbox), std::move(dir), spawned_at) {}

  std::string pool_key_;     // Evaluator, GPU, task version, isolation.
  bool pooled_dir_ = false;  // dir() outlives the evaluation (it may be pooled).
  double wall_seconds_ = 0;  // The watchdog.
  bool reused_ = false;
  bool failed_ = false;
  bool released_ = false;
  bool reuse_ = false;
  // The pool's limits when Release() hands it back (EngineOptions).
  void SetPoolLimits(const EngineOptions& options) {
    pool_capacity_ = static_cast<size_t>(std::max(0, options.warm_reference_capacity));
    pool_memory_fraction_ = options.warm_reference_memory_fraction;
  }
  size_t pool_capacity_ = 0;
  double pool_memory_fraction_ = 0;
  std::map<std::pair<std::string, uint64_t>, gpu::ReferenceEvent> references_;
  std::set<std::pair<std::string, uint64_t>> requested_;
};

// The candidate process (evaluator/candidate_mode.cc).
class CandidateProcess : public EvaluatorProcess {
 public:
  // Beside the compiler: CUDA and the timing baseline are set up while the source compiles; it
  // waits for GiveModule. nullptr when it could not start (StartWithModule then).
  static std::unique_ptr<CandidateProcess> StartEarly(const Workspace& workspace);
  static absl::StatusOr<std::unique_ptr<CandidateProcess>> StartWithModule(
      const Workspace& workspace, const gpu::ModulePaths& compiled);
  // Copies the module into its directory and sends "module" (a process that died while waiting
  // says why in the next Await).
  absl::Status GiveModule(const Workspace& workspace, const gpu::ModulePaths& compiled);
  bool started_early() const { return started_early_; }
  // Output files of the k-th trial, when they travel as files.
  std::string TrialPrefix(size_t k) const;

 private:
  CandidateProcess(std::unique_ptr<Sandbox> sandbox, std::string dir, double spawned_at, bool early)
      : EvaluatorProcess(std::move(sandbox), std::move(dir), spawned_at), started_early_(early) {}
  bool started_early_ = false;
};

// The static SASS map (evaluator/sassmap_mode.cc): nvdisasm takes ~1 s on a GEMM cubin (H200
// host, 2026-11-30), so it runs in its own sandbox beside the correctness stage.
class SassMapProcess : public EvaluatorProcess {
 public:
  static absl::StatusOr<std::unique_ptr<SassMapProcess>> Start(const Workspace& workspace,
                                                               const gpu::ModulePaths& compiled);
  // Its map, or one that says why there is none.
  gpu::SassFamilyMap Collect();

 private:
  using EvaluatorProcess::EvaluatorProcess;
};

// One instrumented process (evaluator/instrument_mode.cc).
class InstrumentProcess : public EvaluatorProcess {
 public:
  struct Run {
    std::string kernel;
    size_t launch_index = 0;
    bool host_inputs = false;  // The fallback: the kernel first in a fresh process.
    bool wait_for_go = false;  // Started early: waits for "go".
    uint64_t seed = 0;
    gpu::OutputTransfer transfer = gpu::OutputTransfer::kIpc;
  };
  static absl::StatusOr<std::unique_ptr<InstrumentProcess>> Start(const Workspace& workspace,
                                                                  const gpu::ModulePaths& compiled,
                                                                  const Run& run);
  const Run& run() const { return run_; }
  std::string OutputPrefix() const { return dir() + "/instrumented"; }

 private:
  InstrumentProcess(std::unique_ptr<Sandbox> sandbox, std::string dir, double spawned_at, Run run)
      : EvaluatorProcess(std::move(sandbox), std::move(dir), spawned_at), run_(std::move(run)) {}
  Run run_;
};

// The instrumented processes started beside the correctness stage, one per distinct kernel,
// set up (CUDA, CUPTI, module, buffers: ~0.5 s on the H200) and waiting for "go".
class InstrumentSet {
 public:
  // Starts one per kernel; one that cannot be started here is started when needed.
  void StartEarly(const Workspace& workspace, const gpu::ModulePaths& compiled,
                  const std::vector<std::pair<std::string, size_t>>& kernels, uint64_t seed,
                  gpu::OutputTransfer transfer);
  // The waiting process of `kernel`, told to go with `transfer`; nullptr when there is none.
  std::unique_ptr<InstrumentProcess> Go(const std::string& kernel, gpu::OutputTransfer transfer);
  void Clear() { ready_.clear(); }

 private:
  std::map<std::string, std::unique_ptr<InstrumentProcess>> ready_;
};

// ------------------------------------------------------------------ watchdogs

// What the submission showed before the stages whose deadlines derive from it.
struct WatchdogInputs {
  // The slowest correctness trial of the timed workload: every launch of the plan, on a fresh
  // module (a cold first launch, so no faster than the timing loop's warm ones).
  double trial_kernel_ms = 0;
  // The library's slowest reference computation of the timed workload (the reference process's
  // command time, input generation included): an upper bound of the baseline's timed launch.
  double reference_ms = 0;
  gpu::TimingLoopOptions loop;
  size_t counted_samples = 0;  // Extra launches with hardware counters in the timing loop.
};

struct Watchdogs {
  double timing_seconds = 0;
  double instrument_seconds = 0;        // An instrumented process that set up beside the trials.
  double instrument_fresh_seconds = 0;  // One started fresh (the host-inputs fallback).
  nlohmann::json basis;                 // Every term, for the report.
};

// The loop's own bound on its duration (ShouldStop: converged, the sample cap, or the time cap
// once 5 pairs ran; warm-up of at least 3 pairs and warmup_seconds), at the per-pair time the
// trials showed, doubled for clocks and jitter, plus the counted samples (kernel + ~17 ms of
// CUPTI host work each, H200 probe 2026-12-01) and the stage's set-up floor. Instrumentation:
// the profiler's slowdown (68x measured on the H200 for SASS patching) on the plan's time,
// doubled, plus the floor. Each is capped by the EngineOptions maximum.
Watchdogs DeriveWatchdogs(const WatchdogInputs& inputs, const EngineOptions& options);

}  // namespace ptxbench::engine::evaluation

#endif  // PTXBENCH_WORKER_ENGINE_EVALUATE_PROCESSES_H_
