// Sample statistics of the timing stage (CPU only; tests/worker/engine/gpu/stats_test.cc).
#ifndef PTXBENCH_WORKER_ENGINE_GPU_STATS_H_
#define PTXBENCH_WORKER_ENGINE_GPU_STATS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "worker/engine/gpu/protocol_messages.h"

namespace ptxbench::gpu {

struct SampleSummary {
  size_t count = 0;
  double median = 0;
  double mean = 0;
  double min = 0;
  double max = 0;
  double p10 = 0;
  double p90 = 0;
  double mad = 0;  // Median absolute deviation.
  // Relative standard error of the median: 1.2533 · (1.4826 · MAD) / sqrt(n) / median. The
  // asymptotic standard error of a sample median is sqrt(pi/2)·sigma/sqrt(n) for normal data;
  // 1.4826·MAD estimates sigma robustly, so a few preempted or clock-ramping samples do not
  // inflate it. +inf with fewer than 3 samples.
  double rse_median = 0;
};

// Linear-interpolated quantile q in [0,1] of unsorted `values` (copied).
double Quantile(std::vector<double> values, double q);
SampleSummary Summarize(const std::vector<double>& values);
// As the timing event reports it (rse_median -1 when infinite).
SampleStats ToStats(const SampleSummary& summary);

// The adaptive stopping rule of the timing loop: stop once both sides have at least
// `min_samples` and the relative standard error of both medians is below `target_rse`, or once
// `max_samples` or `max_seconds` is reached. Returns the reason ("converged", "sample_cap",
// "time_cap") or "" to continue.
struct StoppingRule {
  size_t min_samples = 20;
  size_t max_samples = 400;
  double max_seconds = 2.0;
  double target_rse = 0.005;
};
const char* ShouldStop(const StoppingRule& rule, const SampleSummary& candidate,
                       const SampleSummary& baseline, double elapsed_seconds);

// Where the timing loop's counted launches go (timing.h, docs/measurement.md "Counted
// samples"). Pair p of the recorded loop is a counted pair with probability `rate`,
// independently of every other pair (a keyed draw of p): at every launch the kernel sees, the
// chance that it is counted is `rate` whatever the kernel saw before, from the first pair to the
// last. The rate never falls off later in the loop (a kernel that stalls the loop to its cap
// would otherwise find a safe zone), and the loop does not stop before `needed` counted launches
// were taken (it goes on with more pairs, counted at the same rate, timed ones added to the
// statistics). The first candidate launch is a warm-up launch and the last a timed sample, so no
// counted launch sits at a predictable end.
struct CountedPlan {
  size_t needed = 0;  // 0: no counted launches.
  double rate = 0;
  // Configuration of the j-th counted launch, `needed` entries: each configuration
  // `per_config` times and configuration 0 (the target family's FLOPs) once more, topped up to
  // `needed` by a keyed draw; each configuration's launches in one block, the blocks in a keyed
  // order (a change of configuration costs a new CUPTI session: stats.cc).
  std::vector<size_t> config_order;
  // PlanCountedPasses: the passes of a round; counted launch j is pass j % passes_per_round,
  // past the plan too. 0 under PlanCountedLaunches.
  size_t passes_per_round = 0;
};
// `configs` single-pass configurations; at least `per_config` each and `min_total` in all;
// the rate is set so that `needed` is reached after about 2 x min_samples timed samples,
// within [0.02, 0.5].
CountedPlan PlanCountedLaunches(size_t configs, size_t per_config, size_t min_total,
                                size_t min_samples, uint64_t seed);
// One configuration collected in `passes` passes, one counted launch each, in pass order
// (cupti_counters.h CounterSession::kOneSessionPassPerLaunch): whole rounds, enough that every
// metric is collected per_config + 1 times (what the target family's FLOPs get above) and that
// min_total launches are counted in all; the rate as above. Nothing is secret in the order:
// which pairs are counted is (IsCountedPair), and which pass a launch serves changes nothing a
// kernel can see.
CountedPlan PlanCountedPasses(size_t passes, size_t per_config, size_t min_total,
                              size_t min_samples);
bool IsCountedPair(uint64_t seed, uint64_t pair, double rate);
// Counted launch j's inputs come from SampleSeed(candidate base, kCountedSeedOffset + j): the
// candidate's never-repeated sequence, far from the timed samples' indices (from which the
// supervisor derives the checked samples' seeds).
inline constexpr uint64_t kCountedSeedOffset = uint64_t{1} << 40;
// The configuration of counted launch j; past the plan, the last block's (under
// PlanCountedPasses, the pass that comes next).
size_t CountedConfig(const CountedPlan& plan, size_t j);
// The host delay before launch number `launch` of the loop (both sides, warm-up included),
// uniform in [0, max_us] microseconds.
double JitterMicros(uint64_t seed, uint64_t launch, double max_us);

}  // namespace ptxbench::gpu

#endif  // PTXBENCH_WORKER_ENGINE_GPU_STATS_H_
