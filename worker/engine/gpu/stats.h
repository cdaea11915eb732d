// Sample statistics of the timing stage (CPU only; tests/worker/engine/gpu/stats_test.cc).
#ifndef PTXBENCH_WORKER_ENGINE_GPU_STATS_H_
#define PTXBENCH_WORKER_ENGINE_GPU_STATS_H_

#include <cstddef>
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

}  // namespace ptxbench::gpu

#endif  // PTXBENCH_WORKER_ENGINE_GPU_STATS_H_
