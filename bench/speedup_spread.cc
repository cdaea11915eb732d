#include "bench/speedup_spread.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ptxbench::bench {
namespace {

double MaxOverMin(std::vector<double>::const_iterator first,
                  std::vector<double>::const_iterator last) {
  const auto [low, high] = std::minmax_element(first, last);
  return *high / *low;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace

SpeedupSpread SpreadOf(const std::vector<double>& speedups) {
  std::vector<double> values;
  for (double s : speedups) {
    if (s > 0 && std::isfinite(s)) values.push_back(s);
  }
  SpeedupSpread spread;
  spread.evaluations = values.size();
  if (values.empty()) return spread;
  spread.max_over_min = MaxOverMin(values.begin(), values.end());
  if (values.size() >= 2) {
    const double n = static_cast<double>(values.size());
    const double mean = std::accumulate(values.begin(), values.end(), 0.0) / n;
    double squares = 0;
    for (double s : values) squares += (s - mean) * (s - mean);
    spread.relative_sd = std::sqrt(squares / (n - 1)) / mean;
  }
  if (values.size() >= kSpreadWindow) {
    std::vector<double> windows;
    for (size_t i = 0; i + kSpreadWindow <= values.size(); ++i) {
      const auto first = values.begin() + static_cast<std::ptrdiff_t>(i);
      windows.push_back(MaxOverMin(first, first + static_cast<std::ptrdiff_t>(kSpreadWindow)));
    }
    spread.window_max_over_min_median = Median(windows);
    spread.window_max_over_min_max = *std::max_element(windows.begin(), windows.end());
  }
  return spread;
}

nlohmann::json ToJson(const SpeedupSpread& spread) {
  return {{"evaluations", spread.evaluations},
          {"max_over_min", spread.max_over_min},
          {"relative_sd", spread.relative_sd},
          {"window", kSpreadWindow},
          {"window_max_over_min_median", spread.window_max_over_min_median},
          {"window_max_over_min_max", spread.window_max_over_min_max}};
}

}  // namespace ptxbench::bench
