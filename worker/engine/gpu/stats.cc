#include "worker/engine/gpu/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace ptxbench::gpu {

double Quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  double pos = q * static_cast<double>(values.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, values.size() - 1);
  double frac = pos - static_cast<double>(lo);
  return values[lo] + (values[hi] - values[lo]) * frac;
}

SampleSummary Summarize(const std::vector<double>& values) {
  SampleSummary s;
  s.count = values.size();
  if (values.empty()) {
    s.rse_median = std::numeric_limits<double>::infinity();
    return s;
  }
  std::vector<double> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  s.min = sorted.front();
  s.max = sorted.back();
  s.median = Quantile(sorted, 0.5);
  s.p10 = Quantile(sorted, 0.1);
  s.p90 = Quantile(sorted, 0.9);
  s.mean = std::accumulate(sorted.begin(), sorted.end(), 0.0) / static_cast<double>(s.count);
  std::vector<double> deviations;
  deviations.reserve(sorted.size());
  for (double v : sorted) deviations.push_back(std::abs(v - s.median));
  s.mad = Quantile(deviations, 0.5);
  if (s.count < 3 || s.median <= 0) {
    s.rse_median = std::numeric_limits<double>::infinity();
  } else {
    s.rse_median = 1.2533 * 1.4826 * s.mad / std::sqrt(static_cast<double>(s.count)) / s.median;
  }
  return s;
}

SampleStats ToStats(const SampleSummary& s) {
  return {s.count, s.median, s.mean,
          s.min,   s.max,    s.p10,
          s.p90,   s.mad,    std::isfinite(s.rse_median) ? s.rse_median : -1.0};
}

const char* ShouldStop(const StoppingRule& rule, const SampleSummary& candidate,
                       const SampleSummary& baseline, double elapsed_seconds) {
  size_t n = std::min(candidate.count, baseline.count);
  if (n >= rule.min_samples && candidate.rse_median < rule.target_rse &&
      baseline.rse_median < rule.target_rse) {
    return "converged";
  }
  if (n >= rule.max_samples) return "sample_cap";
  if (elapsed_seconds >= rule.max_seconds && n >= std::min<size_t>(rule.min_samples, 5)) {
    return "time_cap";
  }
  return "";
}

}  // namespace ptxbench::gpu
