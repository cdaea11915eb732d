// The timing stage's measurement loop (docs/measurement.md gives the method and its reasons).
// Candidate and baseline are timed interleaved in one process on one stream: for every sample,
// fresh inputs from a never-repeated seed, outputs poisoned, L2 flushed (2x its size, persisting
// lines reset), then CUDA events around exactly the launches. The order alternates per pair.
// Sampling is adaptive (stats.h StoppingRule). Some candidate samples, one at a secret random
// position in each block of `check_every`, are handed to `on_check` so that the outputs of timed
// launches are compared with the reference too; every candidate launch is handed to
// `on_candidate` (its sketch, sketch.h).
//
// Counted launches (stats.h CountedPlan): pairs at secret random positions whose candidate
// launch runs inside a hardware-counter range (cupti_counters.h) instead of being a timed
// sample: prepared exactly like one (fresh inputs of a never-repeated seed, poisoned outputs, L2
// flush), its baseline launch run as in any pair, its time kept apart from the statistics.
// Jitter: before every launch of either side a host delay drawn uniformly in [0, jitter_us_max].
// Gap equalizer: while counting, every launch of either side also waits a pad of at least the
// idle time a counted launch's collection puts before it (the counters' Begin runs with the GPU
// idle, ~ms), and a counted launch's own wait is shortened by the running estimate of that idle
// time, so the gap a kernel can measure before its launch (%globaltimer against its previous
// launch) has the same distribution on counted and timed launches (docs/measurement.md, "Counted
// launches cannot be told apart by their gap").
#ifndef PTXBENCH_WORKER_ENGINE_GPU_TIMING_H_
#define PTXBENCH_WORKER_ENGINE_GPU_TIMING_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/engine/gpu/nvml_monitor.h"
#include "worker/engine/gpu/runtime.h"
#include "worker/engine/gpu/stats.h"

namespace ptxbench::gpu {

struct TimedSide {
  // Outside the timed region: fresh inputs for `seed`, poisoned outputs, zeroed scratch.
  std::function<absl::Status(uint64_t seed)> prepare;
  // Inside the timed region: exactly the launches (asynchronous on the stream).
  std::function<absl::Status()> run;
};

struct TimingConfig {
  StoppingRule rule;
  double warmup_seconds = 0.3;  // Shared warm-up, both sides alternating, not recorded.
  size_t warmup_min_pairs = 3;
  size_t check_every = 16;           // One checked candidate sample per block of this many...
  size_t max_checks = 4;             // ...at most this many.
  uint64_t candidate_seed_base = 0;  // Secret; sample i uses Mix64(base + i).
  uint64_t baseline_seed_base = 0;   // Secret, distinct: the baseline never computes the
                                     // candidate's answer inside the candidate's process.
  uint64_t check_position_seed = 0;  // Secret: where in each block the check falls.
  size_t clock_sample_every = 8;     // NVML sample every this many pairs.
  CountedPlan counted;               // needed 0: no counted launches.
  uint64_t counter_seed = 0;         // Secret: counted pairs and the jitter.
  double jitter_us_max = 0;
  double gap_pad_max_us = 0;  // TimingLoopOptions::gap_pad_max_us (0: no pad).
};

// The counters around counted launches (cupti_counters.h HardwareCounters::Begin/End).
struct CountingHooks {
  std::function<absl::Status(size_t config)> begin;
  std::function<absl::StatusOr<std::map<std::string, double>>()> end;
  // Host work for configuration `config` that may run long before its Begin (HardwareCounters::
  // Prepare): called right after each End for the next counted launch, where its time shows
  // only after a counted launch, never before one. May be empty.
  std::function<absl::Status(size_t config)> prepare;
};

struct SampleHooks {
  // Right after a checked timed sample (its outputs are still on the device).
  std::function<absl::Status(size_t sample, uint64_t seed)> on_check;
  // Right after every candidate launch of the recorded loop, timed (index = its sample index)
  // or counted (index = its position): the outputs are still on the device. May be empty.
  std::function<absl::Status(size_t index, uint64_t seed, bool counted)> on_candidate;
  // Empty: no counted launches even if the plan asks for some.
  std::optional<CountingHooks> counting;
};

struct TimingResult {
  std::vector<double> candidate_ms;
  std::vector<double> baseline_ms;
  SampleSummary candidate;
  SampleSummary baseline;
  double speedup = 0;  // baseline median / candidate median.
  std::string stop_reason;
  size_t warmup_pairs = 0;
  double warmup_seconds = 0;
  double sampling_seconds = 0;  // Wall time of the recorded loop.
  double kernel_ms_total = 0;   // Sum of every timed region (both sides, warm-up included).
  std::vector<ClockSample> clocks;
  std::vector<std::pair<size_t, uint64_t>> checked;  // (sample index, seed) handed to on_check.
  std::vector<CountedSample> counted;
  std::vector<double> counted_ms;  // Event time of each counted launch (not in the statistics).
  size_t pairs = 0;                // Recorded pairs, counted ones included.
  double counted_seconds = 0;
  double counted_end_seconds = 0;      // Inside counted_seconds: the counters' End...
  double counted_prepare_seconds = 0;  // ...and arming the next pass.
  double hook_seconds = 0;             // Wall time of on_candidate (the sketches).
  double jitter_us_total = 0;
  size_t launches = 0;  // Every launch of the loop, both sides, warm-up included.
  // The gap equalizer (counting only; all 0 without counted launches).
  double gap_pad_us = 0;            // The pad at the end of the loop (it only grows).
  double gap_pad_seconds = 0;       // GPU wait it added, both sides, warm-up included.
  double timed_idle_us_mean = 0;    // Idle GPU between the wait's end and a timed launch.
  double counted_idle_us_mean = 0;  // ...and a counted launch (the counters' Begin).
  size_t gap_pad_exceeded = 0;      // Counted launches whose idle outgrew wait + pad.
};
// As the timing event reports it.
TimingMeasurement ToMeasurement(const TimingResult& result);

absl::StatusOr<TimingResult> TimeInterleaved(const TimedSide& candidate, const TimedSide& baseline,
                                             Builtins& builtins, cudaStream_t stream,
                                             const NvmlMonitor* nvml, const TimingConfig& config,
                                             const SampleHooks& hooks);

}  // namespace ptxbench::gpu

#endif  // PTXBENCH_WORKER_ENGINE_GPU_TIMING_H_
