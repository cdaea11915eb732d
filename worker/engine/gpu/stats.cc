#include "worker/engine/gpu/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "worker/engine/gpu/philox.h"

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

namespace {

// A uniform double in [0, 1) from 53 bits of a keyed draw.
double Uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  const uint64_t r = Mix64(Mix64(seed ^ stream) + 0x9E3779B97F4A7C15ull * (index + 1));
  return static_cast<double>(r >> 11) * 0x1.0p-53;
}

constexpr uint64_t kPairStream = 0xc0417ed0;
constexpr uint64_t kConfigStream = 0xc0f16000;
constexpr uint64_t kJitterStream = 0x71773e00;

// The chance of each pair to be counted: `needed` is reached after about 2 x min_samples timed
// samples, within [0.02, 0.5].
double CountedRate(size_t needed, size_t min_samples) {
  const double horizon = 2.0 * static_cast<double>(std::max<size_t>(min_samples, 1));
  const double n = static_cast<double>(needed);
  return std::clamp(n / (n + horizon), 0.02, 0.5);
}

}  // namespace

CountedPlan PlanCountedLaunches(size_t configs, size_t per_config, size_t min_total,
                                size_t min_samples, uint64_t seed) {
  CountedPlan plan;
  if (configs == 0 || (per_config == 0 && min_total == 0)) return plan;
  // How many launches each configuration gets: `per_config`, the target FLOPs' one more (or
  // each one once when per_config is 0), then whole rounds of that, each in a keyed shuffled
  // order, until `needed` is covered: the top-up goes to the configurations of a secret draw.
  std::vector<size_t> round;
  for (size_t c = 0; c < configs; ++c) {
    for (size_t k = 0; k < per_config + (c == 0 ? 1 : 0); ++k) round.push_back(c);
  }
  if (round.empty()) {
    for (size_t c = 0; c < configs; ++c) round.push_back(c);
  }
  plan.needed = std::max(round.size(), min_total);
  uint64_t draw = 0;
  auto shuffle = [&](std::vector<size_t> v) {  // Fisher-Yates on keyed draws.
    for (size_t i = v.size(); i > 1; --i) {
      size_t j = static_cast<size_t>(Uniform(seed, kConfigStream, draw++) * static_cast<double>(i));
      std::swap(v[i - 1], v[std::min(j, i - 1)]);
    }
    return v;
  };
  std::vector<size_t> launches(configs, 0);
  for (size_t c : round) ++launches[c];
  for (size_t covered = round.size(); covered < plan.needed;) {
    for (size_t c : shuffle(round)) {
      if (covered == plan.needed) break;
      ++launches[c];
      ++covered;
    }
  }
  // Each configuration's launches in one block, the blocks in a keyed order: a CUPTI session
  // delivers only the configuration it was first started with, so every change of
  // configuration costs a new session and its first Start, 150-213 ms on the H200 against
  // 3-34 ms for a collection of the configuration in place (gpu_counters_test "the cost and
  // values of a collection, per session policy", 2026-12-03 run 7). Shuffled launch by launch,
  // nearly every counted launch changed it: 22 changes, ~3.7 s of the loop's ~4 s (issue 16).
  // Blocks change it `configs` times. What a kernel can learn is unchanged: which pairs are
  // counted is drawn independently per pair (IsCountedPair), and a new session's cost falls
  // after a counted launch (the loop prepares the next configuration there), never before one.
  std::vector<size_t> block_order(configs);
  for (size_t c = 0; c < configs; ++c) block_order[c] = c;
  for (size_t c : shuffle(block_order)) {
    plan.config_order.insert(plan.config_order.end(), launches[c], c);
  }
  plan.rate = CountedRate(plan.needed, min_samples);
  return plan;
}

CountedPlan PlanCountedPasses(size_t passes, size_t per_config, size_t min_total,
                              size_t min_samples) {
  CountedPlan plan;
  if (passes == 0 || (per_config == 0 && min_total == 0)) return plan;
  const size_t rounds = std::max(per_config + 1, (min_total + passes - 1) / passes);
  plan.passes_per_round = passes;
  for (size_t r = 0; r < rounds; ++r) {
    for (size_t p = 0; p < passes; ++p) plan.config_order.push_back(p);
  }
  plan.needed = plan.config_order.size();
  plan.rate = CountedRate(plan.needed, min_samples);
  return plan;
}

bool IsCountedPair(uint64_t seed, uint64_t pair, double rate) {
  return Uniform(seed, kPairStream, pair) < rate;
}

size_t CountedConfig(const CountedPlan& plan, size_t j) {
  if (plan.passes_per_round > 0) return j % plan.passes_per_round;
  if (plan.config_order.empty()) return 0;
  // Past the plan (the statistics went on after the counted launches were in): the last
  // block's configuration, which needs no new session.
  return plan.config_order[std::min(j, plan.config_order.size() - 1)];
}

double JitterMicros(uint64_t seed, uint64_t launch, double max_us) {
  if (max_us <= 0) return 0;
  return Uniform(seed, kJitterStream, launch) * max_us;
}

}  // namespace ptxbench::gpu
