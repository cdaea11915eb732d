// The timing stage's measurement loop (docs/measurement.md gives the method and its reasons).
// Candidate and baseline are timed interleaved in one process on one stream: for every sample,
// fresh inputs from a never-repeated seed, outputs poisoned, L2 flushed (2x its size, persisting
// lines reset), then CUDA events around exactly the launches. The order alternates per pair.
// Sampling is adaptive (stats.h StoppingRule). Some candidate samples, one at a secret random
// position in each block of `check_every`, are handed to `on_check` so that the outputs of timed
// launches are compared with the reference too.
#ifndef PTXBENCH_WORKER_ENGINE_GPU_TIMING_H_
#define PTXBENCH_WORKER_ENGINE_GPU_TIMING_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
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
};
// As the timing event reports it.
TimingMeasurement ToMeasurement(const TimingResult& result);

// on_check(sample_index, seed) runs right after a checked candidate sample (its outputs are
// still on the device).
absl::StatusOr<TimingResult> TimeInterleaved(
    const TimedSide& candidate, const TimedSide& baseline, Builtins& builtins, cudaStream_t stream,
    const NvmlMonitor* nvml, const TimingConfig& config,
    const std::function<absl::Status(size_t, uint64_t)>& on_check);

}  // namespace ptxbench::gpu

#endif  // PTXBENCH_WORKER_ENGINE_GPU_TIMING_H_
