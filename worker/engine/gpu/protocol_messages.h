// Every message between the supervisor (worker/engine/evaluate*.cc) and the evaluator process
// (worker/evaluator/), and the request file each mode is started with: one struct each, with its
// fields listed once (protocol_codec.h gives the one ToJson and the one FromJson of each). The
// supervisor, the evaluator and the fake evaluator (tests/worker/engine/gpu/fake_evaluator.cc)
// all speak through these structs, so a renamed field fails to compile instead of failing at run
// time on a GPU. Transport: protocol.h (one JSON object per line; commands on the evaluator's
// stdin, events on its fd 3).
//
// What is typed: everything a receiver reads or decides on. What stays a JSON document:
// reports passed through unread into the verdict's audit record (the compiler's report, the
// resolved plans, the baseline's description, NVML clock samples).
//
// Adding a command or an event: a struct with kKind and Fields here, a name in CommandNames /
// EventNames, then the sender's ToJson(...) and the receiver's FromJson<...> (or its
// FromJsonOneOf list); tests/worker/engine/gpu/protocol_messages_test.cc round-trips each one.
#ifndef PTXBENCH_WORKER_ENGINE_GPU_PROTOCOL_MESSAGES_H_
#define PTXBENCH_WORKER_ENGINE_GPU_PROTOCOL_MESSAGES_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"
#include "worker/engine/gpu/compare.h"
#include "worker/engine/gpu/cupti_counters.h"
#include "worker/engine/gpu/protocol_codec.h"

namespace ptxbench::gpu {

// ------------------------------------------------------------------ names

// The evaluator's modes: `ptxbench-evaluator MODE --request FILE` (worker/evaluator/).
enum class EvaluatorMode {
  kCompile,
  kSassMap,
  kReference,
  kCandidate,
  kInstrument,
  kReplay,
  kHealth
};
inline constexpr std::array<std::pair<EvaluatorMode, std::string_view>, 7> kEvaluatorModeNames{{
    {EvaluatorMode::kCompile, "compile"},
    {EvaluatorMode::kSassMap, "sassmap"},
    {EvaluatorMode::kReference, "reference"},
    {EvaluatorMode::kCandidate, "candidate"},
    {EvaluatorMode::kInstrument, "instrument"},
    {EvaluatorMode::kReplay, "replay"},
    {EvaluatorMode::kHealth, "health"},
}};
constexpr const auto& EnumNames(EvaluatorMode) { return kEvaluatorModeNames; }

enum class CommandKind {
  kQuit,
  kReset,
  kBegin,
  kReference,
  kCompare,
  kModule,
  kTrial,
  kSaveOutputs,
  kPrepareTiming,
  kTime,
  kGo,
  kSketchReference,
};
inline constexpr std::array<std::pair<CommandKind, std::string_view>, 12> kCommandNames{{
    {CommandKind::kQuit, "quit"},
    {CommandKind::kReset, "reset"},
    {CommandKind::kBegin, "begin"},
    {CommandKind::kReference, "reference"},
    {CommandKind::kCompare, "compare"},
    {CommandKind::kModule, "module"},
    {CommandKind::kTrial, "trial"},
    {CommandKind::kSaveOutputs, "save_outputs"},
    {CommandKind::kPrepareTiming, "prepare_timing"},
    {CommandKind::kTime, "time"},
    {CommandKind::kGo, "go"},
    {CommandKind::kSketchReference, "sketch_reference"},
}};
constexpr const auto& EnumNames(CommandKind) { return kCommandNames; }
constexpr std::string_view EnvelopeKey(CommandKind) { return "cmd"; }
constexpr std::string_view EnvelopeKind(CommandKind) { return "command"; }

enum class EventKind {
  kReady,
  kReset,
  kReference,
  kCompare,
  kTrial,
  kOutputs,
  kTiming,
  kInstrument,
  kSassMap,
  kCompile,
  kHealth,
  kFault,
  kPlanInvalid,
  kError,
  kReferenceSketches,
};
inline constexpr std::array<std::pair<EventKind, std::string_view>, 15> kEventNames{{
    {EventKind::kReady, "ready"},
    {EventKind::kReset, "reset"},
    {EventKind::kReference, "reference"},
    {EventKind::kCompare, "compare"},
    {EventKind::kTrial, "trial"},
    {EventKind::kOutputs, "outputs"},
    {EventKind::kTiming, "timing"},
    {EventKind::kInstrument, "instrument"},
    {EventKind::kSassMap, "sassmap"},
    {EventKind::kCompile, "compile"},
    {EventKind::kHealth, "health"},
    {EventKind::kFault, "fault"},
    {EventKind::kPlanInvalid, "plan_invalid"},
    {EventKind::kError, "error"},
    {EventKind::kReferenceSketches, "reference_sketches"},
}};
constexpr const auto& EnumNames(EventKind) { return kEventNames; }
constexpr std::string_view EnvelopeKey(EventKind) { return "event"; }
constexpr std::string_view EnvelopeKind(EventKind) { return "event"; }

// The kind of a command or event line; InvalidArgument for anything else.
absl::StatusOr<CommandKind> CommandKindOf(const nlohmann::json& message);
absl::StatusOr<EventKind> EventKindOf(const nlohmann::json& message);

// How a process hands its outputs to the reference process: CUDA IPC (the reference process
// maps the device buffers) or files in the process's private directory (where IPC is refused).
enum class OutputTransfer { kIpc, kFile };
inline constexpr std::array<std::pair<OutputTransfer, std::string_view>, 2> kOutputTransferNames{{
    {OutputTransfer::kIpc, "ipc"},
    {OutputTransfer::kFile, "file"},
}};
constexpr const auto& EnumNames(OutputTransfer) { return kOutputTransferNames; }

enum class SubmissionLanguage { kCuda, kPtx };
inline constexpr std::array<std::pair<SubmissionLanguage, std::string_view>, 2> kLanguageNames{{
    {SubmissionLanguage::kCuda, "cuda"},
    {SubmissionLanguage::kPtx, "ptx"},
}};
constexpr const auto& EnumNames(SubmissionLanguage) { return kLanguageNames; }

// What an error event blames: "unavailable" (no usable GPU), "unhealthy" (the health kernel
// failed), "profiler_unavailable" (CUPTI refused), else "infrastructure".
enum class ErrorKind { kInfrastructure, kUnavailable, kUnhealthy, kProfilerUnavailable };
inline constexpr std::array<std::pair<ErrorKind, std::string_view>, 4> kErrorKindNames{{
    {ErrorKind::kInfrastructure, "infrastructure"},
    {ErrorKind::kUnavailable, "unavailable"},
    {ErrorKind::kUnhealthy, "unhealthy"},
    {ErrorKind::kProfilerUnavailable, "profiler_unavailable"},
}};
constexpr const auto& EnumNames(ErrorKind) { return kErrorKindNames; }

// Where a kernel fault happened.
enum class FaultPhase { kSetup, kTrial, kSavingOutputs, kTiming, kInstrumentedRun, kReplay };
inline constexpr std::array<std::pair<FaultPhase, std::string_view>, 6> kFaultPhaseNames{{
    {FaultPhase::kSetup, "setup"},
    {FaultPhase::kTrial, "trial"},
    {FaultPhase::kSavingOutputs, "saving outputs"},
    {FaultPhase::kTiming, "timing"},
    {FaultPhase::kInstrumentedRun, "instrumented run"},
    {FaultPhase::kReplay, "replay"},
}};
constexpr const auto& EnumNames(FaultPhase) { return kFaultPhaseNames; }

// How the compile step ended (a compile error and an invalid plan are verdicts, not errors).
enum class CompileOutcome { kCompileError, kPlanInvalid, kCompiled };
inline constexpr std::array<std::pair<CompileOutcome, std::string_view>, 3> kCompileOutcomeNames{{
    {CompileOutcome::kCompileError, "compile_error"},
    {CompileOutcome::kPlanInvalid, "plan_invalid"},
    {CompileOutcome::kCompiled, "compiled"},
}};
constexpr const auto& EnumNames(CompileOutcome) { return kCompileOutcomeNames; }

// How a SASS instruction was attributed to a target family (docs/measurement.md).
enum class SiteEvidence { kSassOpcode, kPtxLine, kSourceLine };
inline constexpr std::array<std::pair<SiteEvidence, std::string_view>, 3> kSiteEvidenceNames{{
    {SiteEvidence::kSassOpcode, "sass_opcode"},
    {SiteEvidence::kPtxLine, "ptx_line"},
    {SiteEvidence::kSourceLine, "source_line"},
}};
constexpr const auto& EnumNames(SiteEvidence) { return kSiteEvidenceNames; }

// CompareReport keeps its own codec (compare.h); these make it a protocol value.
nlohmann::json EncodeCustom(const CompareReport& report);
absl::Status DecodeCustom(const nlohmann::json& j, CompareReport* report);

// ------------------------------------------------------------------ parts of messages

struct TaskRef {
  std::string dir;           // The task's directory (every process loads it itself).
  std::string version_hash;  // Must match what the process loads: the task did not change.
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("dir", m.dir);
    v("version_hash", m.version_hash);
  }
};

// The submission as the supervisor received it.
struct Submission {
  TaskRef task;
  std::string arch;  // "sm_90a", "sm_100a".
  SubmissionLanguage language = SubmissionLanguage::kCuda;
  std::string source;
  std::string launch_plan_json;  // Empty: the PTXBENCH_PLAN block of the source.
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("task", m.task);
    v("arch", m.arch);
    v("language", m.language);
    v("source", m.source);
    v("launch_plan_json", m.launch_plan_json);
  }
};

// The compiled module, copied into the private directory of the process that loads it.
struct ModulePaths {
  std::string cubin_path;
  std::string ptx_path;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("cubin_path", m.cubin_path);
    v("ptx_path", m.ptx_path);
  }
};

// One output tensor handed to the reference process: a CUDA IPC handle (hex) or a file path.
struct OutputHandle {
  std::string tensor;
  uint64_t bytes = 0;
  OutputTransfer transfer = OutputTransfer::kIpc;
  std::string handle;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("tensor", m.tensor);
    v("bytes", m.bytes);
    v("transfer", m.transfer);
    v("handle", m.handle);
  }
};

// The device a process opened. library_versions and the NVML fields come only from the
// reference process; RooflineFloorMs (evaluate.h) reads the clocks, SM count and bus width.
struct DeviceDescription {
  int ordinal = 0;
  std::string name;
  std::string uuid;
  std::string pci_bus_id;
  std::string compute_capability;  // "9.0".
  std::string arch;                // "sm_90a".
  int sm_count = 0;
  int64_t l2_bytes = 0;
  int64_t persisting_l2_max_bytes = 0;
  int64_t shared_per_block_optin = 0;
  int64_t total_memory = 0;
  int sm_clock_max_khz = 0;
  int memory_clock_max_khz = 0;
  int memory_bus_bits = 0;
  int driver_version = 0;
  int runtime_version = 0;
  std::optional<nlohmann::json> library_versions;  // {"cublaslt": 130100, "cudnn": 91900}
  std::optional<std::string> nvml_driver_version;
  std::optional<unsigned> nvml_max_sm_mhz;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("ordinal", m.ordinal);
    v("name", m.name);
    v("uuid", m.uuid);
    v("pci_bus_id", m.pci_bus_id);
    v("compute_capability", m.compute_capability);
    v("arch", m.arch);
    v("sm_count", m.sm_count);
    v("l2_bytes", m.l2_bytes);
    v("persisting_l2_max_bytes", m.persisting_l2_max_bytes);
    v("shared_per_block_optin", m.shared_per_block_optin);
    v("total_memory", m.total_memory);
    v("sm_clock_max_khz", m.sm_clock_max_khz);
    v("memory_clock_max_khz", m.memory_clock_max_khz);
    v("memory_bus_bits", m.memory_bus_bits);
    v("driver_version", m.driver_version);
    v("runtime_version", m.runtime_version);
    v("library_versions", m.library_versions);
    v("nvml_driver_version", m.nvml_driver_version);
    v("nvml_max_sm_mhz", m.nvml_max_sm_mhz);
  }
};

// Which of the library's algorithms the candidate is timed against (issue 16, "a fair
// baseline"). kFirstHeuristic: the library heuristic's first choice, as its own callers get it.
// kFastest: the fastest of the heuristic's top candidates on this GPU whose outputs meet the
// task's rule against the first choice's (baseline_choice.h), measured once per key on a worker
// and cached. The references of the correctness trials always come from the first choice.
enum class BaselineSelection { kFirstHeuristic, kFastest };
inline constexpr std::array<std::pair<BaselineSelection, std::string_view>, 2>
    kBaselineSelectionNames{{
        {BaselineSelection::kFirstHeuristic, "first_heuristic"},
        {BaselineSelection::kFastest, "fastest"},
    }};
constexpr const auto& EnumNames(BaselineSelection) { return kBaselineSelectionNames; }

inline constexpr std::array<std::pair<CounterSession, std::string_view>, 4> kCounterSessionNames{{
    {CounterSession::kPerCollection, "per_collection"},
    {CounterSession::kPerConfiguration, "per_configuration"},
    {CounterSession::kPerConfigurationStartedEarly, "per_configuration_started_early"},
    {CounterSession::kOneSessionPassPerLaunch, "one_session_pass_per_launch"},
}};
constexpr const auto& EnumNames(CounterSession) { return kCounterSessionNames; }

// The timing loop's rule and checks (EngineOptions::timing; timing.h TimingConfig).
struct TimingLoopOptions {
  size_t min_samples = 20;
  size_t max_samples = 400;
  double max_seconds = 2.0;   // Cap of the recorded sampling loop.
  double target_rse = 0.005;  // Relative standard error of both medians.
  double warmup_seconds = 0.3;
  size_t check_every = 16;
  size_t max_checks = 4;
  // Counted samples (hardware counters on extra launches at secret positions, timing.h): at
  // least this many per single-pass counter configuration, one more for the configuration of
  // the target family's FLOPs. 0: no counted samples.
  size_t counted_per_config = 2;
  // ...and at least this many in all: a kernel that takes another path on a share x >= 1/2 of
  // its launches (what moving the median needs) escapes m counted launches with probability
  // <= 2^-m (docs/measurement.md, "Counted samples").
  size_t counted_min_total = 20;
  // Host-side random delay, uniform in [0, jitter_us_max] microseconds, before every launch of
  // both sides (timed or counted), so launch gaps do not tell a counted launch (measurement.md).
  double jitter_us_max = 200;
  // The gap equalizer's bound (timing.h): while counting, every launch of both sides also waits
  // a pad of twice the largest idle excess a counted launch showed (plus 0.1 ms), at most this
  // much. With the counters' sessions per configuration started early (below) the excess is
  // Begin's Push, 0.29 ms median and 0.54 ms max on the H200, and the pad came to 1.5 ms: no
  // counted gap above the timed gaps' 99th percentile (0 of 32) for 0.94 s of pad per loop
  // (2026-12-02 run 6, gpu_counters_test "sessions per configuration and the pad hide the
  // gap"). Under kPerCollection the excess is 140-175 ms, which no affordable pad hides.
  double gap_pad_max_us = 3000;
  // How the hardware counters of the counted launches use CUPTI sessions (cupti_counters.h):
  // one session for the loop, a pass of one configuration per counted launch. Its Begin is the
  // Push alone, as under kPerConfigurationStartedEarly (chosen in run 6 for that, every value
  // finite), and it drops that policy's session changes (docs/measurement.md, "One session,
  // a pass per counted launch").
  CounterSession counter_session = CounterSession::kOneSessionPassPerLaunch;
  // Projections of every timed and counted candidate sample's outputs (sketch.h). 0: none.
  size_t sketch_projections = 4;
  // The fastest of the library's candidates since it ran on the H200 (2026-12-03: every GEMM,
  // attention forward and backward verdict of the service bench and the engine bench passed
  // under it; docs/measurement.md, "A fair baseline").
  BaselineSelection baseline_selection = BaselineSelection::kFastest;
  // Library candidates timed for kFastest (cuBLASLt heuristic results; cuDNN finalizable
  // engine configurations of the heuristic's list), and timed runs of each.
  size_t baseline_candidates = 8;
  size_t baseline_runs = 15;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("min_samples", m.min_samples);
    v("max_samples", m.max_samples);
    v("max_seconds", m.max_seconds);
    v("target_rse", m.target_rse);
    v("warmup_seconds", m.warmup_seconds);
    v("check_every", m.check_every);
    v("max_checks", m.max_checks);
    v("counted_per_config", m.counted_per_config);
    v("counted_min_total", m.counted_min_total);
    v("jitter_us_max", m.jitter_us_max);
    v("gap_pad_max_us", m.gap_pad_max_us);
    v("counter_session", m.counter_session);
    v("sketch_projections", m.sketch_projections);
    v("baseline_selection", m.baseline_selection);
    v("baseline_candidates", m.baseline_candidates);
    v("baseline_runs", m.baseline_runs);
  }
};

// How many library candidates a candidate process prepares for the baseline (PrepareTiming-
// Command): every one the choice may time under kFastest, else only the first.
inline size_t PreparedBaselineCandidates(const TimingLoopOptions& loop) {
  return loop.baseline_selection == BaselineSelection::kFastest
             ? std::max<size_t>(loop.baseline_candidates, 1)
             : 0;
}

// The counter session a candidate process configures ahead (PrepareTimingCommand, sent only once
// the evaluation holds the GPU): the loop's, when it asks for counted samples; none otherwise.
inline std::optional<CounterSession> PreparedCounterSession(const TimingLoopOptions& loop) {
  if (loop.counted_per_config == 0 && loop.counted_min_total == 0) return std::nullopt;
  return loop.counter_session;
}

// stats.h SampleSummary as reported, in milliseconds; rse_median -1 stands for infinite (fewer
// than 3 samples).
struct SampleStats {
  size_t n = 0;
  double median_ms = 0;
  double mean_ms = 0;
  double min_ms = 0;
  double max_ms = 0;
  double p10_ms = 0;
  double p90_ms = 0;
  double mad_ms = 0;
  double rse_median = 0;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("n", m.n);
    v("median_ms", m.median_ms);
    v("mean_ms", m.mean_ms);
    v("min_ms", m.min_ms);
    v("max_ms", m.max_ms);
    v("p10_ms", m.p10_ms);
    v("p90_ms", m.p90_ms);
    v("mad_ms", m.mad_ms);
    v("rse_median", m.rse_median);
  }
};

struct CheckedSample {
  size_t sample = 0;
  uint64_t seed = 0;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("sample", m.sample);
    v("seed", AsDecimal(m.seed));
  }
};

// One counted candidate launch (timing.h): hardware counters of one single-pass configuration.
struct CountedSample {
  // Its place in the loop: the index among ALL candidate launches of the recorded loop (timed
  // samples and counted launches together, from 0), so the audit shows they were interleaved.
  // A counted launch takes the place of a timed one in a pair (the baseline still runs), so the
  // pattern of launches around it is that of a timed sample.
  size_t position = 0;
  size_t after_sample = 0;  // How many timed samples preceded it.
  uint64_t seed = 0;        // Its inputs' seed (of the timed samples' never-repeated sequence).
  size_t config = 0;        // cupti_counters.h configuration index.
  double begin_us = 0;      // Host time of the counters' Begin (hidden inside the jitter).
  // Idle GPU between the end of its wait and its launch (CUDA events): the counters' Begin and
  // an idle stream's launch latency, which the gap equalizer hides (timing.h).
  double idle_us = 0;
  std::map<std::string, double> metrics;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("position", m.position);
    v("after_sample", m.after_sample);
    v("seed", AsDecimal(m.seed));
    v("config", m.config);
    v("begin_us", m.begin_us);
    v("idle_us", m.idle_us);
    v("metrics", m.metrics);
  }
};

// The counted samples of one timing loop, or why none were collected (then the work share and
// the profiled-vs-timed cross-check were not made, and the verdict says so).
struct CountedSamples {
  bool collected = false;
  std::string not_collected_reason;
  std::string chip;                               // CUPTI's chip name ("GH100").
  std::vector<std::vector<std::string>> configs;  // Metrics of each configuration.
  // CounterSession::kOneSessionPassPerLaunch: the passes of its one configuration, a counted
  // launch each; a round's metrics come with its last pass's sample (the others have none).
  // 0 under the other policies.
  size_t passes = 0;
  size_t needed = 0;  // stats.h CountedPlan: launches asked for...
  double rate = 0;    // ...and the chance of each pair.
  std::vector<CountedSample> samples;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("collected", m.collected);
    v("not_collected_reason", m.not_collected_reason);
    v("chip", m.chip);
    v("configs", m.configs);
    v("passes", m.passes);
    v("needed", m.needed);
    v("rate", m.rate);
    v("samples", m.samples);
  }
};

// One output tensor's sketch (sketch.h): k projections sum_i w_j(i) x_i in fp64 with secret
// +-1 weights, and the sums the comparison bound is derived from, all in the same one pass.
struct TensorSketch {
  std::vector<double> projections;  // k values.
  double abs_sum = 0;               // sum |x_i| (bounds the fp64 rounding of the projections).
  double square_sum = 0;            // sum x_i^2.
  uint64_t nonfinite = 0;           // NaN or Inf elements (the poison of unwritten outputs).
  // Reference side only (0 from the candidate): sum tol_i and sum tol_i^2 with tol_i =
  // max(atol, rtol |ref_i|), the task's allclose rule (compare.h).
  double tolerance_sum = 0;
  double tolerance_square_sum = 0;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("projections", m.projections);
    v("abs_sum", m.abs_sum);
    v("square_sum", m.square_sum);
    v("nonfinite", m.nonfinite);
    v("tolerance_sum", m.tolerance_sum);
    v("tolerance_square_sum", m.tolerance_square_sum);
  }
};

// The sketch of one candidate launch's outputs (or of a reference), one entry per output
// tensor in the order of SampleSketches::tensors.
struct SampleSketch {
  size_t sample = 0;     // Timed sample index; for a counted launch, its CountedSample position.
  bool counted = false;  // A counted launch (not a timed sample).
  uint64_t seed = 0;     // The inputs' seed: the reference sketches the same seed.
  std::vector<TensorSketch> tensors;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("sample", m.sample);
    v("counted", m.counted);
    v("seed", AsDecimal(m.seed));
    v("tensors", m.tensors);
  }
};

struct SampleSketches {
  size_t projections = 0;            // k; 0: no sketches taken.
  std::vector<std::string> tensors;  // The output tensors, in order.
  std::vector<SampleSketch> samples;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("projections", m.projections);
    v("tensors", m.tensors);
    v("samples", m.samples);
  }
};

// timing.h TimingResult as reported.
struct TimingMeasurement {
  SampleStats candidate;
  SampleStats baseline;
  double speedup = 0;       // baseline median / candidate median.
  std::string stop_reason;  // stats.h ShouldStop: "converged", "sample_cap", "time_cap".
  size_t warmup_pairs = 0;
  double warmup_seconds = 0;
  double sampling_seconds = 0;
  double kernel_ms_total = 0;  // Every timed region, both sides, warm-up included.
  std::vector<double> candidate_ms;
  std::vector<double> baseline_ms;
  nlohmann::json clocks = nlohmann::json::array();  // NVML samples (nvml_monitor.h ToJson).
  std::vector<CheckedSample> checked_samples;
  CountedSamples counters;
  SampleSketches sketches;
  double jitter_us_max = 0;    // The delay bound that was applied.
  double jitter_us_mean = 0;   // The mean delay actually drawn (both sides).
  double counted_seconds = 0;  // Wall time of counted launches and their collection.
  // Inside counted_seconds: host time of the counters' End (the range closed, and on a round's
  // last pass decoded and evaluated) and of arming the next pass.
  double counted_end_seconds = 0;
  double counted_prepare_seconds = 0;
  double sketch_seconds = 0;       // Wall time of the sketches (GPU kernel + copy back).
  size_t pairs = 0;                // Recorded pairs, counted ones included.
  std::vector<double> counted_ms;  // Event time of each counted launch (not statistics).
  // The gap equalizer (timing.h; 0 without counted launches): the pad every launch waited at
  // the end, the GPU seconds it cost, the mean idle GPU before a timed and before a counted
  // launch, and the counted launches whose idle outgrew their wait and pad (visible ones).
  double gap_pad_us = 0;
  double gap_pad_seconds = 0;
  double timed_idle_us_mean = 0;
  double counted_idle_us_mean = 0;
  size_t gap_pad_exceeded = 0;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("candidate", m.candidate);
    v("baseline", m.baseline);
    v("speedup", m.speedup);
    v("stop_reason", m.stop_reason);
    v("warmup_pairs", m.warmup_pairs);
    v("warmup_seconds", m.warmup_seconds);
    v("sampling_seconds", m.sampling_seconds);
    v("kernel_ms_total", m.kernel_ms_total);
    v("candidate_ms", m.candidate_ms);
    v("baseline_ms", m.baseline_ms);
    v("clocks", m.clocks);
    v("checked_samples", m.checked_samples);
    v("counters", m.counters);
    v("sketches", m.sketches);
    v("jitter_us_max", m.jitter_us_max);
    v("jitter_us_mean", m.jitter_us_mean);
    v("counted_seconds", m.counted_seconds);
    v("counted_end_seconds", m.counted_end_seconds);
    v("counted_prepare_seconds", m.counted_prepare_seconds);
    v("sketch_seconds", m.sketch_seconds);
    v("counted_ms", m.counted_ms);
    v("pairs", m.pairs);
    v("gap_pad_us", m.gap_pad_us);
    v("gap_pad_seconds", m.gap_pad_seconds);
    v("timed_idle_us_mean", m.timed_idle_us_mean);
    v("counted_idle_us_mean", m.counted_idle_us_mean);
    v("gap_pad_exceeded", m.gap_pad_exceeded);
  }
};

// The outputs of one timed candidate sample, handed over for comparison after the loop.
struct TimedCheck {
  size_t sample = 0;
  uint64_t seed = 0;
  std::vector<OutputHandle> outputs;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("sample", m.sample);
    v("seed", AsDecimal(m.seed));
    v("outputs", m.outputs);
  }
};

// CUPTI's counts at one PC of the submission's own module (cupti_sass.h SassPcCounts).
struct PcRecord {
  std::string function;
  uint32_t pc = 0;
  uint64_t warp_inst_executed = 0;   // smsp__sass_inst_executed
  uint64_t thread_inst_pred_on = 0;  // smsp__sass_thread_inst_executed_pred_on
  uint64_t gmma_warp_inst = 0;
  uint64_t tma_warp_inst = 0;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("function", m.function);
    v("pc", m.pc);
    v("warp_inst_executed", m.warp_inst_executed);
    v("thread_inst_pred_on", m.thread_inst_pred_on);
    v("gmma_warp_inst", m.gmma_warp_inst);
    v("tma_warp_inst", m.tma_warp_inst);
  }
};

// ------------------------------------------------------------------ the static SASS map

// One SASS instruction attributed to a target family.
struct SassSite {
  uint32_t pc = 0;
  std::string sass;
  SiteEvidence by = SiteEvidence::kSassOpcode;
  std::optional<int> ptx_line;        // Its PTX line (nvdisasm -gp), when known.
  std::optional<std::string> source;  // "submission.cu:123" (nvdisasm -g), when known.
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("pc", m.pc);
    v("sass", m.sass);
    v("by", m.by);
    v("ptx_line", m.ptx_line);
    v("source", m.source);
  }
};

struct SassFunctionSites {
  size_t instructions = 0;
  std::map<std::string, std::vector<SassSite>> sites;  // Family name -> its instructions.
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("instructions", m.instructions);
    v("sites", m.sites);
  }
};

// How often a line view agreed with the opcode classification, over opcode-classified sites.
struct LineAgreement {
  int checked = 0;
  int consistent = 0;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("checked", m.checked);
    v("consistent", m.consistent);
  }
};

// A few opcode-classified instructions with the PTX line nvdisasm -gp gave them (diagnostics).
struct PtxLineSample {
  std::string function;
  uint32_t pc = 0;
  std::string sass;
  std::string gp_file;
  int gp_line = 0;
  std::string ptx_at_line;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("function", m.function);
    v("pc", m.pc);
    v("sass", m.sass);
    v("gp_file", m.gp_file);
    v("gp_line", m.gp_line);
    v("ptx_at_line", m.ptx_at_line);
  }
};

// Where each target family sits in the submission's SASS (worker/engine/sass_families.h).
struct SassFamilyMap {
  bool available = false;
  std::optional<std::string> reason;                     // Why not, when not available.
  std::string tool;                                      // The nvdisasm that read the cubin.
  SiteEvidence line_method = SiteEvidence::kSourceLine;  // The line view used.
  bool ptx_lines_available = false;
  std::string ptx_source;  // ".nv_debug_ptx_txt" or "compile stage PTX".
  LineAgreement ptx_line_consistency;
  LineAgreement source_line_consistency;
  std::vector<PtxLineSample> gp_sample;
  int no_op_matrix_instructions_ignored = 0;
  std::map<std::string, SassFunctionSites> functions;
  double seconds = 0;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("available", m.available);
    v("reason", m.reason);
    v("tool", m.tool);
    v("line_method", m.line_method);
    v("ptx_lines_available", m.ptx_lines_available);
    v("ptx_source", m.ptx_source);
    v("ptx_line_consistency", m.ptx_line_consistency);
    v("source_line_consistency", m.source_line_consistency);
    v("gp_sample", m.gp_sample);
    v("no_op_matrix_instructions_ignored", m.no_op_matrix_instructions_ignored);
    v("functions", m.functions);
    v("seconds", m.seconds);
  }
};
// A map that says why it is missing.
SassFamilyMap UnavailableSassMap(std::string reason);

// ------------------------------------------------------------------ request files

struct CompileRequest {
  static constexpr std::string_view kName = "compile request";
  Submission submission;
  std::string work_dir;  // Where module.cubin and module.ptx are written.
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("submission", m.submission);
    v("work_dir", m.work_dir);
  }
};

struct SassMapRequest {
  static constexpr std::string_view kName = "sassmap request";
  std::string arch;
  ModulePaths module;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("arch", m.arch);
    v("module", m.module);
  }
};

// The trusted reference process: never given the submission.
struct ReferenceRequest {
  static constexpr std::string_view kName = "reference request";
  TaskRef task;
  int gpu = 0;
  uint64_t hash_key = 0;  // Secret key of the input hashes (replaced by "begin" when reused).
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("task", m.task);
    v("gpu", m.gpu);
    v("hash_key", AsDecimal(m.hash_key));
  }
};

// A worker's earlier choice for the same key, handed to the next timing process.
struct CachedBaselineChoice {
  size_t index = 0;
  nlohmann::json algorithm;  // Must equal the candidate's Describe() now, or it is measured again.
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("index", m.index);
    v("algorithm", m.algorithm);
  }
};

struct CandidateRequest {
  static constexpr std::string_view kName = "candidate request";
  Submission submission;
  int gpu = 0;
  uint64_t hash_key = 0;
  // Absent: started beside the compiler, the module comes with the "module" command.
  std::optional<ModulePaths> module;
  // The timing loop's workload and its baseline's library candidates (PrepareTimingCommand),
  // prepared from the start. Not its hardware counters: this process starts before its
  // evaluation holds the GPU, and CUPTI's queries then collide with another evaluation's counted
  // launches (candidate_mode.cc StartConfiguringCounters); "prepare_timing" brings them.
  std::optional<std::string> timing_workload;
  size_t timing_baseline_candidates = 0;
  std::optional<CachedBaselineChoice> timing_cached_baseline;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("submission", m.submission);
    v("gpu", m.gpu);
    v("hash_key", AsDecimal(m.hash_key));
    v("module", m.module);
    v("timing_workload", m.timing_workload);
    v("timing_baseline_candidates", m.timing_baseline_candidates);
    v("timing_cached_baseline", m.timing_cached_baseline);
  }
};

// One kernel of the plan under CUPTI SASS metrics (evaluator/instrument_mode.cc).
struct InstrumentRequest {
  static constexpr std::string_view kName = "instrument request";
  Submission submission;
  int gpu = 0;
  uint64_t hash_key = 0;
  ModulePaths module;
  std::string workload;
  uint64_t seed = 0;
  std::string kernel;        // The kernel of launch_index (for the audit record).
  size_t launch_index = 0;   // Launches before it run uninstrumented.
  bool host_inputs = false;  // The fallback: inputs from the host, no earlier launches.
  std::string output_prefix;
  OutputTransfer transfer = OutputTransfer::kIpc;
  bool wait_for_go = false;  // Set up, then wait for "go".
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("submission", m.submission);
    v("gpu", m.gpu);
    v("hash_key", AsDecimal(m.hash_key));
    v("module", m.module);
    v("workload", m.workload);
    v("seed", AsDecimal(m.seed));
    v("kernel", m.kernel);
    v("launch_index", m.launch_index);
    v("host_inputs", m.host_inputs);
    v("output_prefix", m.output_prefix);
    v("transfer", m.transfer);
    v("wait_for_go", m.wait_for_go);
  }
};

// One trial without the protocol's commands, under compute-sanitizer (feedback only).
struct ReplayRequest {
  static constexpr std::string_view kName = "replay request";
  Submission submission;
  int gpu = 0;
  uint64_t hash_key = 0;
  ModulePaths module;
  std::string workload;
  uint64_t seed = 0;
  std::string output_prefix;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("submission", m.submission);
    v("gpu", m.gpu);
    v("hash_key", AsDecimal(m.hash_key));
    v("module", m.module);
    v("workload", m.workload);
    v("seed", AsDecimal(m.seed));
    v("output_prefix", m.output_prefix);
  }
};

struct HealthRequest {
  static constexpr std::string_view kName = "health request";
  int gpu = 0;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("gpu", m.gpu);
  }
};

// ------------------------------------------------------------------ commands (stdin)

struct QuitCommand {
  static constexpr CommandKind kKind = CommandKind::kQuit;
  template <typename Self, typename V>
  static void Fields(Self&, V&) {}
};

// Reference process, between evaluations: drop every stored reference, answer "reset".
struct ResetCommand {
  static constexpr CommandKind kKind = CommandKind::kReset;
  template <typename Self, typename V>
  static void Fields(Self&, V&) {}
};

// Reference process, kept warm: the next evaluation's hash key; answered with "ready".
struct BeginCommand {
  static constexpr CommandKind kKind = CommandKind::kBegin;
  uint64_t hash_key = 0;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("hash_key", AsDecimal(m.hash_key));
  }
};

// Reference process: compute and keep the reference of (workload, seed).
struct ComputeReferenceCommand {
  static constexpr CommandKind kKind = CommandKind::kReference;
  std::string workload;
  uint64_t seed = 0;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("workload", m.workload);
    v("seed", AsDecimal(m.seed));
  }
};

// Reference process: compare `outputs` with the stored reference of (workload, seed); `keep`
// keeps the reference for another comparison (else it is freed).
struct CompareCommand {
  static constexpr CommandKind kKind = CommandKind::kCompare;
  std::string workload;
  uint64_t seed = 0;
  std::vector<OutputHandle> outputs;
  bool keep = false;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("workload", m.workload);
    v("seed", AsDecimal(m.seed));
    v("outputs", m.outputs);
    v("keep", m.keep);
  }
};

// Candidate process started beside the compiler: the compiled module.
struct ModuleCommand {
  static constexpr CommandKind kKind = CommandKind::kModule;
  ModulePaths module;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("module", m.module);
  }
};

// Candidate process: one correctness trial.
struct TrialCommand {
  static constexpr CommandKind kKind = CommandKind::kTrial;
  std::string workload;
  uint64_t seed = 0;
  std::string prefix;  // Output files' prefix, when transfer is kFile.
  OutputTransfer transfer = OutputTransfer::kIpc;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("workload", m.workload);
    v("seed", AsDecimal(m.seed));
    v("prefix", m.prefix);
    v("transfer", m.transfer);
  }
};

// Candidate or instrument process: the last outputs again, as files under `prefix`.
struct SaveOutputsCommand {
  static constexpr CommandKind kKind = CommandKind::kSaveOutputs;
  std::string prefix;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("prefix", m.prefix);
  }
};

// Candidate process: set up the timing baseline on a thread of its own (no event).
struct PrepareTimingCommand {
  static constexpr CommandKind kKind = CommandKind::kPrepareTiming;
  std::string workload;
  // The library candidates to prepare for the baseline choice (TimingLoopOptions::
  // baseline_candidates under BaselineSelection::kFastest); 0: the first heuristic choice only.
  size_t baseline_candidates = 0;
  // The hardware counters to configure while the trials run (PreparedCounterSession); absent:
  // none. Sent only once the evaluation holds the GPU (evaluate.cc CorrectnessStage).
  std::optional<CounterSession> counter_session;
  // The worker's earlier choice among those candidates (BaselineChoiceCache), when it has one:
  // then only the candidates up to it are made, and the others only if it no longer stands.
  std::optional<CachedBaselineChoice> cached_baseline;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("workload", m.workload);
    v("baseline_candidates", m.baseline_candidates);
    v("counter_session", m.counter_session);
    v("cached_baseline", m.cached_baseline);
  }
};

// Candidate process: the interleaved timing loop (timing.h), seeds and check positions secret.
// One library candidate of the baseline selection: what it is, how fast, whether it may stand.
struct BaselineCandidateFigure {
  size_t index = 0;          // Position in the library heuristic's list (0 = its first choice).
  nlohmann::json algorithm;  // The library's description (Baseline::Describe).
  double median_ms = 0;      // Of `runs` timed runs, each after an L2 flush; 0 when not timed.
  size_t runs = 0;
  bool eligible = false;  // Its outputs met the task's rule against candidate 0's.
  std::string note;       // Why not eligible or not timed.
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("index", m.index);
    v("algorithm", m.algorithm);
    v("median_ms", m.median_ms);
    v("runs", m.runs);
    v("eligible", m.eligible);
    v("note", m.note);
  }
};

// What the timing process chose as its baseline, and on what evidence (the audit report's
// "baseline_choice").
struct BaselineChoice {
  BaselineSelection selection = BaselineSelection::kFirstHeuristic;
  size_t chosen = 0;
  bool measured = false;  // false: the worker's cached choice (or the first heuristic) was used.
  double first_ms = 0;    // Candidate 0's median, when measured.
  double chosen_ms = 0;   // The chosen one's median, when measured.
  std::vector<BaselineCandidateFigure> candidates;  // When measured.
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("selection", m.selection);
    v("chosen", m.chosen);
    v("measured", m.measured);
    v("first_ms", m.first_ms);
    v("chosen_ms", m.chosen_ms);
    v("candidates", m.candidates);
  }
};

struct TimeCommand {
  static constexpr CommandKind kKind = CommandKind::kTime;
  std::string workload;
  uint64_t candidate_seed_base = 0;
  uint64_t baseline_seed_base = 0;
  uint64_t check_position_seed = 0;
  TimingLoopOptions loop;
  std::string check_prefix;  // Checked samples' output files, when transfer is kFile.
  OutputTransfer transfer = OutputTransfer::kIpc;
  uint64_t counter_seed = 0;  // Secret: counted positions, their configurations, the jitter.
  uint64_t sketch_seed = 0;   // Secret: Philox key of the sketch weights (sketch.h).
  // With loop.baseline_selection kFastest: the candidate this worker already chose for the same
  // key (baseline_choice.h), whose description must still match; absent: measure the choice.
  std::optional<CachedBaselineChoice> cached_baseline;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("workload", m.workload);
    v("candidate_seed_base", AsDecimal(m.candidate_seed_base));
    v("baseline_seed_base", AsDecimal(m.baseline_seed_base));
    v("check_position_seed", AsDecimal(m.check_position_seed));
    v("loop", m.loop);
    v("check_prefix", m.check_prefix);
    v("transfer", m.transfer);
    v("counter_seed", AsDecimal(m.counter_seed));
    v("sketch_seed", AsDecimal(m.sketch_seed));
    v("cached_baseline", m.cached_baseline);
  }
};

// Reference process: the sketches (sketch.h) of the reference outputs of `seeds` on `workload`,
// under the candidate's sketch key and projection count (same weights, same tensor order).
// `samples` pairs each seed with the candidate's sample index, echoed in the answer.
struct SketchReferenceCommand {
  static constexpr CommandKind kKind = CommandKind::kSketchReference;
  std::string workload;
  std::vector<CheckedSample> samples;
  uint64_t sketch_seed = 0;
  size_t projections = 0;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("workload", m.workload);
    v("samples", m.samples);
    v("sketch_seed", AsDecimal(m.sketch_seed));
    v("projections", m.projections);
  }
};

// Instrument process started beside the correctness stage: run now, hand outputs over so.
struct GoCommand {
  static constexpr CommandKind kKind = CommandKind::kGo;
  OutputTransfer transfer = OutputTransfer::kIpc;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("transfer", m.transfer);
  }
};

// ------------------------------------------------------------------ events (fd 3)

// Reference and candidate processes: the device is open (and the module loaded).
struct ReadyEvent {
  static constexpr EventKind kKind = EventKind::kReady;
  DeviceDescription device;
  bool reused = false;  // A warm reference process, answering "begin".
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("device", m.device);
    v("reused", m.reused);
  }
};

struct ResetEvent {
  static constexpr EventKind kKind = EventKind::kReset;
  // What the warm process keeps on the GPU until its next evaluation: its own allocations
  // (DeviceBuffer::LiveBytes: every workload's buffers and library workspaces) and the device's
  // memory (cudaMemGetInfo; 0: unknown), for the pool's memory bound (evaluate_processes.cc).
  uint64_t device_buffer_bytes = 0;
  uint64_t device_total_bytes = 0;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("device_buffer_bytes", m.device_buffer_bytes);
    v("device_total_bytes", m.device_total_bytes);
  }
};

// A reference computed and kept on the reference process's device.
struct ReferenceEvent {
  static constexpr EventKind kKind = EventKind::kReference;
  std::string workload;
  uint64_t seed = 0;
  uint64_t input_hash = 0;   // Keyed hash of the inputs: must equal the candidate's.
  nlohmann::json baseline;   // The library's description (baseline.h Describe()).
  double setup_seconds = 0;  // Buffers and library handle of a new workload.
  double seconds = 0;
  // Runs of the library until two consecutive ones on the same inputs agreed under the task's
  // rule (2 when the first pair did), and why each earlier pair did not (reference_mode.cc).
  int library_runs = 0;
  std::vector<std::string> repeat_disagreements;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("workload", m.workload);
    v("seed", AsDecimal(m.seed));
    v("input_hash", AsDecimal(m.input_hash));
    v("baseline", m.baseline);
    v("setup_seconds", m.setup_seconds);
    v("seconds", m.seconds);
    v("library_runs", m.library_runs);
    v("repeat_disagreements", m.repeat_disagreements);
  }
};

// The answer to "sketch_reference": one sketch per requested sample, in the command's order
// (`sample` and `seed` echoed, `counted` false).
struct ReferenceSketchesEvent {
  static constexpr EventKind kKind = EventKind::kReferenceSketches;
  std::string workload;
  SampleSketches sketches;
  double seconds = 0;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("workload", m.workload);
    v("sketches", m.sketches);
    v("seconds", m.seconds);
  }
};

// A comparison: one report per output tensor, or why the outputs could not be mapped (the
// supervisor then has them saved as files and asks again).
struct CompareEvent {
  static constexpr EventKind kKind = EventKind::kCompare;
  std::string workload;
  uint64_t seed = 0;
  std::map<std::string, CompareReport> tensors;
  std::optional<std::string> ipc_failed;
  double seconds = 0;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("workload", m.workload);
    v("seed", AsDecimal(m.seed));
    v("tensors", m.tensors);
    v("ipc_failed", m.ipc_failed);
    v("seconds", m.seconds);
  }
};

struct TrialEvent {
  static constexpr EventKind kKind = EventKind::kTrial;
  std::string workload;
  uint64_t seed = 0;
  uint64_t input_hash_before = 0;
  uint64_t input_hash_after = 0;  // Differs from before: the kernel changed its inputs.
  std::vector<OutputHandle> outputs;
  double kernel_ms = 0;
  double seconds = 0;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("workload", m.workload);
    v("seed", AsDecimal(m.seed));
    v("input_hash_before", AsDecimal(m.input_hash_before));
    v("input_hash_after", AsDecimal(m.input_hash_after));
    v("outputs", m.outputs);
    v("kernel_ms", m.kernel_ms);
    v("seconds", m.seconds);
  }
};

// The answer to "save_outputs".
struct OutputsEvent {
  static constexpr EventKind kKind = EventKind::kOutputs;
  std::vector<OutputHandle> outputs;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("outputs", m.outputs);
  }
};

// Where the candidate process's seconds went between "time" and the loop's warm-up (the
// service bench's timing stage minus warm-up and sampling; docs/measurement.md).
struct TimingSetupSplit {
  double prepare_wait_seconds = 0;     // Waiting for the preparing thread (baseline handles).
  double module_seconds = 0;           // The timed workload's buffers and the module's reload.
  double baseline_choice_seconds = 0;  // Choosing the baseline (cached: taking the prepared one).
  double counters_seconds = 0;         // Opening the hardware counters (after setup_seconds).
  // What prepare_wait_seconds waited for, each measured on its own thread (issue 16: a warm
  // GEMM job's timing stage waited 1.2 s here, H100 run 19). The preparing thread, from the
  // process's start: the trials' sets, the baseline's buffers and library candidates
  // (PrepareTiming, in it the candidates), then CUPTI's start-up. The counters' thread, from
  // "prepare_timing": its wait for the preparing thread, then HardwareCounters::Configure,
  // split as HardwareCounters::ConfigureSeconds.
  double preparing_thread_seconds = 0;
  double baseline_prepare_seconds = 0;
  double baseline_candidates_seconds = 0;
  double profiler_initialize_seconds = 0;
  double trial_sets_seconds = 0;
  double counters_wait_for_preparing_seconds = 0;
  double counters_configure_initialize_seconds = 0;
  double counters_configure_availability_seconds = 0;
  double counters_configure_images_seconds = 0;
  // The library candidates this process made for the baseline, prepared ahead or at "time":
  // the timing stage's share of the library's set-up (cuDNN finalizes a plan for each).
  size_t baseline_candidates_made = 0;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("prepare_wait_seconds", m.prepare_wait_seconds);
    v("module_seconds", m.module_seconds);
    v("baseline_choice_seconds", m.baseline_choice_seconds);
    v("counters_seconds", m.counters_seconds);
    v("preparing_thread_seconds", m.preparing_thread_seconds);
    v("baseline_prepare_seconds", m.baseline_prepare_seconds);
    v("baseline_candidates_seconds", m.baseline_candidates_seconds);
    v("profiler_initialize_seconds", m.profiler_initialize_seconds);
    v("trial_sets_seconds", m.trial_sets_seconds);
    v("counters_wait_for_preparing_seconds", m.counters_wait_for_preparing_seconds);
    v("counters_configure_initialize_seconds", m.counters_configure_initialize_seconds);
    v("counters_configure_availability_seconds", m.counters_configure_availability_seconds);
    v("counters_configure_images_seconds", m.counters_configure_images_seconds);
    v("baseline_candidates_made", m.baseline_candidates_made);
  }
};

struct TimingEvent {
  static constexpr EventKind kKind = EventKind::kTiming;
  std::string workload;
  TimingMeasurement result;
  std::vector<TimedCheck> checks;
  nlohmann::json baseline;  // The library's description (of the chosen candidate).
  BaselineChoice baseline_choice;
  DeviceDescription device;
  uint64_t flush_bytes = 0;  // L2 flush buffer.
  double setup_seconds = 0;
  TimingSetupSplit setup_split;
  double prepare_seconds = 0;
  double check_seconds = 0;
  double seconds = 0;
  std::optional<std::string> nvml_unavailable;  // Why no clocks were sampled.
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("workload", m.workload);
    v("result", m.result);
    v("checks", m.checks);
    v("baseline", m.baseline);
    v("baseline_choice", m.baseline_choice);
    v("device", m.device);
    v("flush_bytes", m.flush_bytes);
    v("setup_seconds", m.setup_seconds);
    v("setup_split", m.setup_split);
    v("prepare_seconds", m.prepare_seconds);
    v("check_seconds", m.check_seconds);
    v("seconds", m.seconds);
    v("nvml_unavailable", m.nvml_unavailable);
  }
};

// One instrumented run. outputs and the input hashes are absent for host inputs (the fallback
// run, not compared).
struct InstrumentEvent {
  static constexpr EventKind kKind = EventKind::kInstrument;
  std::string workload;
  uint64_t seed = 0;
  std::string kernel;
  size_t launch_index = 0;
  bool host_inputs = false;
  bool waited_for_go = false;
  uint64_t cubin_crc = 0;
  uint32_t cupti_version = 0;
  std::string chip;
  double instrumented_seconds = 0;
  std::optional<std::vector<OutputHandle>> outputs;
  std::optional<uint64_t> input_hash_before;
  std::optional<uint64_t> input_hash_after;
  std::vector<PcRecord> records;                       // The submission's own module only.
  std::map<std::string, size_t> other_module_records;  // Function -> records of other modules.
  double seconds = 0;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("workload", m.workload);
    v("seed", AsDecimal(m.seed));
    v("kernel", m.kernel);
    v("launch_index", m.launch_index);
    v("host_inputs", m.host_inputs);
    v("waited_for_go", m.waited_for_go);
    v("cubin_crc", AsDecimal(m.cubin_crc));
    v("cupti_version", m.cupti_version);
    v("chip", m.chip);
    v("instrumented_seconds", m.instrumented_seconds);
    v("outputs", m.outputs);
    v("input_hash_before", AsDecimal(m.input_hash_before));
    v("input_hash_after", AsDecimal(m.input_hash_after));
    v("records", m.records);
    v("other_module_records", m.other_module_records);
    v("seconds", m.seconds);
  }
};

struct SassMapEvent {
  static constexpr EventKind kKind = EventKind::kSassMap;
  SassFamilyMap sass;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("sass", m.sass);
  }
};

// What a successful compile hands on: the module and the plan's kernels.
// One launch of the timed workload as the plan resolved it (plan.h ResolvedLaunch), for the
// compile stage's report: ptxas reports static shared memory only, and a TMA pipeline's ring is
// dynamic (197,696 B for the reference GEMM).
struct LaunchGeometry {
  std::string kernel;
  std::vector<uint32_t> grid;   // x, y, z.
  std::vector<uint32_t> block;  // x, y, z.
  int64_t dynamic_shared_bytes = 0;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("kernel", m.kernel);
    v("grid", m.grid);
    v("block", m.block);
    v("dynamic_shared_bytes", m.dynamic_shared_bytes);
  }
};

// What the module is and which toolchain made it (compile.h CompileResult): the compile cache
// keys an entry by the versions and refuses bytes that no longer hash to the SHA-256s.
struct ModuleIdentity {
  std::string cubin_sha256;
  std::string ptx_sha256;
  std::string nvrtc_version;
  std::string ptxas_version;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("cubin_sha256", m.cubin_sha256);
    v("ptx_sha256", m.ptx_sha256);
    v("nvrtc_version", m.nvrtc_version);
    v("ptxas_version", m.ptxas_version);
  }
};

struct CompiledModule {
  ModulePaths module;
  uint64_t cubin_bytes = 0;
  std::vector<std::string> launch_kernels;     // The timed workload's launches, in order.
  std::vector<LaunchGeometry> timed_launches;  // The same launches, resolved.
  ModuleIdentity identity;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("module", m.module);
    v("cubin_bytes", m.cubin_bytes);
    v("launch_kernels", m.launch_kernels);
    v("timed_launches", m.timed_launches);
    v("identity", m.identity);
  }
};

struct CompileEvent {
  static constexpr EventKind kKind = EventKind::kCompile;
  CompileOutcome outcome = CompileOutcome::kCompileError;
  nlohmann::json report;  // compile.h ToJson(CompileResult): the stage report's detail.
  std::string failure;    // compile.h CompileFailureName.
  std::string log;        // What the model reads.
  std::map<std::string, int> ptx_families;  // Family -> static count in the PTX.
  std::optional<std::string> plan_error;    // kPlanInvalid.
  std::optional<CompiledModule> compiled;   // kCompiled.
  double seconds = 0;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("outcome", m.outcome);
    v("report", m.report);
    v("failure", m.failure);
    v("log", m.log);
    v("ptx_families", m.ptx_families);
    v("plan_error", m.plan_error);
    v("compiled", m.compiled);
    v("seconds", m.seconds);
  }
};

struct HealthEvent {
  static constexpr EventKind kKind = EventKind::kHealth;
  DeviceDescription device;
  double seconds = 0;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("device", m.device);
    v("seconds", m.seconds);
  }
};

// The kernel faulted (or its launch was refused): a verdict about the kernel.
struct FaultEvent {
  static constexpr EventKind kKind = EventKind::kFault;
  FaultPhase during = FaultPhase::kTrial;
  std::string message;  // For the model: the CUDA error without our call site.
  std::string detail;   // For the audit record: with it.
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("during", m.during);
    v("message", m.message);
    v("detail", m.detail);
  }
};

// The plan cannot run against this module (found only at run time).
struct PlanInvalidEvent {
  static constexpr EventKind kKind = EventKind::kPlanInvalid;
  std::string message;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("message", m.message);
  }
};

// The evaluator failed for a reason of ours: nothing is known about the kernel.
struct ErrorEvent {
  static constexpr EventKind kKind = EventKind::kError;
  ErrorKind kind = ErrorKind::kInfrastructure;
  std::string message;
  std::string code;  // absl::StatusCodeToString.
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v("kind", m.kind);
    v("message", m.message);
    v("code", m.code);
  }
};

}  // namespace ptxbench::gpu

#endif  // PTXBENCH_WORKER_ENGINE_GPU_PROTOCOL_MESSAGES_H_
