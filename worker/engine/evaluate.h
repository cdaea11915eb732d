// The evaluation engine's top-level API, used by the worker daemon and `ptxbench eval`.
//
// Evaluate() runs every stage of one submission: compile -> correctness -> target instructions
// -> timing, each step in a fresh sandboxed ptxbench-evaluator process (sandbox.h), and returns
// the Verdict. evaluate.cc holds the stages, evaluate_processes.h one class per process kind,
// gpu/protocol_messages.h every message they exchange. A Verdict is data about the kernel (also
// RUNTIME_ERROR, TIMEOUT...); an error Status means the infrastructure failed (GPU lost, profiler
// unavailable, evaluator crashed) and nothing is known about the kernel: never charge it to a
// model.
//
// Processes of one evaluation (docs/measurement.md explains why):
//   compile     sandbox, no GPU: NVRTC + ptxas, plan validation, static SASS family map.
//   reference   trusted, started alongside compile (or kept warm from the last evaluation of
//               the task on this GPU): regenerates inputs from seeds, computes the library's
//               outputs, keeps them on its device, and compares the candidate's outputs with
//               them on the GPU; it maps the candidate's output buffers (CUDA IPC), never the
//               other way round.
//   candidate   sandbox: correctness trials (module reloaded each trial), then the interleaved
//               timing loop; exports its outputs to the reference process (files in its
//               private directory where CUDA IPC is refused).
//   instrument  sandbox, one per distinct kernel of the plan: CUPTI SASS metrics; started
//               beside the correctness stage, runs when told to.
// Without a usable GPU (or with a GPU of another arch) only the compile stage runs and the
// verdict says plainly that the runtime stages were skipped and why.
#ifndef PTXBENCH_WORKER_ENGINE_EVALUATE_H_
#define PTXBENCH_WORKER_ENGINE_EVALUATE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/task.h"
#include "common/verdict.h"
#include "nlohmann/json.hpp"
#include "worker/engine/compile_artifact.h"
#include "worker/engine/compile_cache.h"
#include "worker/engine/gpu/protocol_messages.h"
#include "worker/engine/gpu_gate.h"

namespace ptxbench::engine {

// The compile artifacts (compile_artifact.h) one evaluation exchanges with other workers.
struct ArtifactExchange {
  // In: another worker's compile of this submission (its evaluate job's lease carried it), and
  // whether to compile anyway and compare instead of using it (ShouldVerify, drawn by the
  // caller from its own secret randomness).
  std::optional<CompileArtifact> offered;
  bool verify = false;
  // Out: what the compile stage did with `offered` (kNone when nothing was offered).
  ArtifactUse use;
  // Out: this worker's own successful compile of the submission (run now or kept in its
  // compile cache), never another worker's: what a compile job hands to the server.
  std::optional<CompileArtifact> produced;
};

struct EvaluationRequest {
  const Task* task = nullptr;     // Loaded by the caller (LoadTask); must outlive the call.
  std::string arch;               // "sm_90a" or "sm_100a".
  std::string language = "cuda";  // "cuda" or "ptx".
  std::string source;
  std::string launch_plan_json;  // Empty: the PTXBENCH_PLAN block of the source.
  bool compile_only = false;
  // Null: no artifact is offered or wanted. Must outlive the call.
  ArtifactExchange* artifacts = nullptr;
};

// The timing loop's rule and checks; sent to the candidate process as they are.
using TimingOptions = gpu::TimingLoopOptions;

struct EngineOptions {
  std::string evaluator_path;  // Empty: ptxbench-evaluator beside the running binary.
  int gpu = 0;
  std::string work_root;  // Empty: $TMPDIR or /tmp.
  // Keep the reference process warm for the next evaluation of the same task on this GPU
  // (evaluate_processes.cc, ReferencePool): saves its CUDA and library set-up, ~1.4 s on the
  // H200, and every workload's library graph (attention: 1.1-1.7 s each).
  bool reuse_reference_process = true;
  // The warm processes kept at most, the least recently used ended first: one per task of the
  // suite (12), so that a mix of tasks keeps them all (H100 service bench run 15: with 4 kept,
  // a mix of 5 tasks ended every backward job's process before its task came round again).
  int warm_reference_capacity = 16;
  // And the GPU memory they may hold together, as a fraction of the device's: their buffers
  // (ResetEvent) plus kWarmReferenceContextBytes each. The rest stays for the candidate and
  // instrumented processes, whose needs the scratch caps bound.
  double warm_reference_memory_fraction = 0.25;
  bool keep_work_dir = false;  // Keep the private directories (debugging).
  bool isolate_network = true;
  bool drop_privileges = true;             // When root: sandboxes run as nobody.
  bool sanitizer_on_runtime_error = true;  // compute-sanitizer memcheck replay for feedback.
  bool run_timing = true;
  int public_seeds = 1;  // Per workload, before the task's `trials` secret seeds.
  uint64_t secret = 0;   // 0: drawn from /dev/urandom (tests pin it).
  double compile_timeout_seconds = 180;
  double trial_timeout_seconds = 60;  // One correctness trial (a hang -> TIMEOUT).
  // Upper bounds of the instrument and timing watchdogs. The deadlines themselves derive from
  // what the submission showed in its correctness trials (evaluate_processes.h,
  // DeriveWatchdogs), so that a kernel that hangs only when timed or only when profiled costs
  // seconds of GPU, not these caps.
  double instrument_timeout_seconds = 300;  // Patched code runs up to ~70x slower.
  double timing_timeout_seconds = 300;
  // The set-up part of the derived deadlines (what a stage needs besides the submission's
  // kernels): 3x the largest measured on the H200 (docs/measurement.md, "Watchdogs"). Tests
  // lower them to keep the fake hangs short.
  double timing_setup_floor_seconds = 10;
  double instrument_setup_floor_seconds = 12;        // A process that set up beside the trials.
  double instrument_fresh_setup_floor_seconds = 25;  // A fresh process (CUDA + CUPTI start-up).
  // CUPTI's host work for one counted sample at worst: a session switch (a new configuration's
  // session primed: 147 ms median, 193 ms max on the H200) plus Begin and End (0.3 + 1.8 ms);
  // gpu_counters_test "the cost and values of a collection, per session policy", 2026-12-02 run
  // 6 (docs/results/2026-12-02-h200-gpu-test-6-c.json). Tests with the fake GPU lower it.
  double counted_sample_host_ms = 200;
  double evaluation_timeout_seconds = 1200;
  TimingOptions timing;
  // Compiles of this worker kept for the next evaluation of the same inputs (compile_cache.h);
  // null: every evaluation compiles.
  std::shared_ptr<CompileCache> compile_cache;
  // The GPU's gate when evaluations overlap on one GPU (gpu_gate.h; ptxbench-worker
  // --gpu-pipeline 2): the compile stage runs without it, and the gate is held from the first
  // correctness command until the evaluation's processes have ended or gone back to the
  // reference pool; HealthProbe holds it too. Null: no gate, one evaluation at a time is the
  // caller's promise (today's worker).
  std::shared_ptr<GpuGate> gpu_gate;
};

using StageCallback = std::function<void(const StageReport&)>;

absl::StatusOr<Verdict> Evaluate(const EvaluationRequest& request, const EngineOptions& options,
                                 const StageCallback& on_stage,
                                 const std::atomic<bool>* cancel = nullptr);

// Runs the tiny known kernel in a fresh evaluator process; the device description on success.
absl::StatusOr<nlohmann::json> HealthProbe(const EngineOptions& options);

// Sampling honesty (docs/measurement.md, "Sampling"): whether the loop converged, and whether
// the candidate's samples scatter more than kUnstableScatterRatio x the library's (never less
// than kMinScatterBasis, the loop's default target RSE): then the speedup is not stable.
inline constexpr double kUnstableScatterRatio = 4;
inline constexpr double kMinScatterBasis = 0.005;
Sampling JudgeSampling(const gpu::TimingMeasurement& result);

// ptxbench-evaluator beside /proc/self/exe (or $PTXBENCH_EVALUATOR when set).
std::string DefaultEvaluatorPath();

// Roofline floor in milliseconds: the larger of flops / peak rate and bytes / peak bandwidth,
// from the device's SM count, maximum SM clock and memory interface (docs/measurement.md).
// 0 when the device is unknown to the table (no impossible-time check then).
double RooflineFloorMs(const gpu::DeviceDescription& device, double flops, double bytes,
                       DType operands = DType::kBF16);

}  // namespace ptxbench::engine

#endif  // PTXBENCH_WORKER_ENGINE_EVALUATE_H_
