// Timing statistics and the adaptive stopping rule.
#include "worker/engine/gpu/stats.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <vector>

namespace ptxbench::gpu {
namespace {

TEST_CASE("quantiles interpolate between order statistics", "[stats]") {
  CHECK(Quantile({4, 1, 3, 2}, 0.5) == Approx(2.5));
  CHECK(Quantile({4, 1, 3, 2}, 0.0) == 1);
  CHECK(Quantile({4, 1, 3, 2}, 1.0) == 4);
  CHECK(Quantile({5}, 0.9) == 5);
}

TEST_CASE("the summary's median is robust and its RSE follows the formula", "[stats]") {
  std::vector<double> v = {1.00, 1.01, 0.99, 1.02, 0.98, 1.00, 50.0};  // one preempted sample
  SampleSummary s = Summarize(v);
  CHECK(s.count == 7);
  CHECK(s.median == Approx(1.00));
  CHECK(s.max == 50.0);
  CHECK(s.mad == Approx(0.01));
  CHECK(s.rse_median == Approx(1.2533 * 1.4826 * 0.01 / std::sqrt(7.0) / 1.0));
}

TEST_CASE("fewer than three samples have an infinite RSE", "[stats]") {
  CHECK(std::isinf(Summarize({1.0, 2.0}).rse_median));
  CHECK(std::isinf(Summarize({}).rse_median));
}

TEST_CASE("stopping: converged, sample cap, time cap", "[stats]") {
  StoppingRule rule;
  rule.min_samples = 10;
  rule.max_samples = 50;
  rule.max_seconds = 1.0;
  rule.target_rse = 0.005;
  std::vector<double> tight(10, 1.0), noisy;
  for (int i = 0; i < 10; ++i) noisy.push_back(1.0 + (i % 2 ? 0.2 : -0.2));
  CHECK(std::string(ShouldStop(rule, Summarize(tight), Summarize(tight), 0.1)) == "converged");
  CHECK(std::string(ShouldStop(rule, Summarize(noisy), Summarize(tight), 0.1)).empty());
  CHECK(std::string(ShouldStop(rule, Summarize(noisy), Summarize(tight), 1.5)) == "time_cap");
  std::vector<double> many;
  for (int i = 0; i < 50; ++i) many.push_back(1.0 + (i % 2 ? 0.2 : -0.2));
  CHECK(std::string(ShouldStop(rule, Summarize(many), Summarize(many), 0.1)) == "sample_cap");
  // Not converged below the minimum, however tight.
  std::vector<double> few(5, 1.0);
  CHECK(std::string(ShouldStop(rule, Summarize(few), Summarize(few), 0.1)).empty());
}

TEST_CASE("counted launches cover every configuration, the target's once more, in blocks",
          "[stats]") {
  CountedPlan plan = PlanCountedLaunches(8, 2, 20, 20, 1234);
  CHECK(plan.needed == 20);  // 8 x 2 + 1 = 17 < the total asked for.
  CHECK(plan.rate == Approx(20.0 / 60.0));
  REQUIRE(plan.config_order.size() == plan.needed);
  // Config 0 at least three times, every other at least twice; the 3 of the top-up go to 3
  // launches of a drawn round.
  std::map<size_t, int> launches;
  for (size_t j = 0; j < plan.needed; ++j) ++launches[CountedConfig(plan, j)];
  CHECK(launches.size() == 8);
  CHECK(launches[0] >= 3);
  int total = 0;
  for (const auto& [c, n] : launches) {
    if (c != 0) CHECK(n >= 2);
    total += n;
  }
  CHECK(total == 20);
  // Each configuration's launches in one block: 7 changes, one new CUPTI session per
  // configuration (stats.cc: a change costs 150-213 ms on the H200, a collection 3-34 ms).
  int changes = 0;
  for (size_t j = 1; j < plan.needed; ++j) {
    changes += CountedConfig(plan, j) != CountedConfig(plan, j - 1) ? 1 : 0;
  }
  CHECK(changes == 7);
  // Past the plan the last block goes on: no new session for the loop's extra counted launches.
  CHECK(CountedConfig(plan, plan.needed) == CountedConfig(plan, plan.needed - 1));
  CHECK(CountedConfig(plan, plan.needed + 50) == CountedConfig(plan, plan.needed - 1));
  // The blocks' order and the top-up are the secret's: over 200 secrets every configuration
  // comes first sometimes, and the top-up does not always go to the same configurations.
  std::set<size_t> firsts;
  std::set<std::map<size_t, int>> top_ups;
  for (uint64_t secret = 0; secret < 200; ++secret) {
    CountedPlan p = PlanCountedLaunches(8, 2, 20, 20, secret);
    firsts.insert(CountedConfig(p, 0));
    std::map<size_t, int> counts;
    for (size_t j = 0; j < p.needed; ++j) ++counts[CountedConfig(p, j)];
    top_ups.insert(counts);
  }
  CHECK(firsts.size() == 8);
  CHECK(top_ups.size() > 10);
  CountedPlan other = PlanCountedLaunches(8, 2, 20, 20, 1235);
  CHECK(other.config_order != plan.config_order);
  // No top-up: exactly the round.
  CountedPlan exact = PlanCountedLaunches(4, 2, 0, 20, 7);
  CHECK(exact.needed == 9);
  std::map<size_t, int> exact_launches;
  for (size_t c : exact.config_order) ++exact_launches[c];
  CHECK(exact_launches == std::map<size_t, int>{{0, 3}, {1, 2}, {2, 2}, {3, 2}});
  // Off, and a rate within its bounds for long and short loops.
  CHECK(PlanCountedLaunches(0, 2, 20, 20, 1).needed == 0);
  CHECK(PlanCountedLaunches(8, 0, 0, 20, 1).needed == 0);
  CHECK(PlanCountedLaunches(1, 2, 3, 1, 1).rate == 0.5);
  CHECK(PlanCountedLaunches(1, 1, 2, 10000, 1).rate == 0.02);
}

TEST_CASE("counted passes come in whole rounds, in pass order, the loop's extras too", "[stats]") {
  // 8 passes, 2 per metric plus the target's one more, 20 in all: 3 rounds of 8.
  CountedPlan plan = PlanCountedPasses(8, 2, 20, 20);
  CHECK(plan.passes_per_round == 8);
  CHECK(plan.needed == 24);
  CHECK(plan.rate == Approx(24.0 / 64.0));
  REQUIRE(plan.config_order.size() == plan.needed);
  for (size_t j = 0; j < plan.needed; ++j) CHECK(CountedConfig(plan, j) == j % 8);
  // Past the plan the next round begins at pass 0 and goes on in order (CUPTI's passes cannot
  // be skipped or repeated within a round).
  CHECK(CountedConfig(plan, plan.needed) == 0);
  CHECK(CountedConfig(plan, plan.needed + 5) == 5);
  // The total asked for rounds up to whole rounds: 50 in 6 passes is 9 rounds.
  CHECK(PlanCountedPasses(6, 2, 50, 20).needed == 54);
  // per_config + 1 rounds when they are more than the total needs.
  CHECK(PlanCountedPasses(8, 4, 20, 20).needed == 40);
  // One pass: every counted launch is a whole round.
  CountedPlan one = PlanCountedPasses(1, 2, 20, 20);
  CHECK(one.needed == 20);
  CHECK(CountedConfig(one, 7) == 0);
  // Off.
  CHECK(PlanCountedPasses(0, 2, 20, 20).needed == 0);
  CHECK(PlanCountedPasses(8, 0, 0, 20).needed == 0);
}

TEST_CASE("a counted pair is unpredictable at every position of the loop", "[stats]") {
  const double rate = 1.0 / 3;
  // Over many secrets: the first pair, a middle one and the 400th are counted at the same rate
  // (no safe first or last samples, no safe zone late in a loop stalled to its cap), and a
  // counted pair says nothing about the next.
  const int secrets = 20000;
  int first = 0, middle = 0, late = 0, after_counted = 0, counted_before = 0;
  for (int s = 0; s < secrets; ++s) {
    const uint64_t seed = 0x51ed0000ull + static_cast<uint64_t>(s) * 7919;
    first += IsCountedPair(seed, 0, rate);
    middle += IsCountedPair(seed, 57, rate);
    late += IsCountedPair(seed, 399, rate);
    if (IsCountedPair(seed, 100, rate)) {
      ++counted_before;
      after_counted += IsCountedPair(seed, 101, rate);
    }
  }
  const double tolerance = 4 * std::sqrt(rate * (1 - rate) / secrets);  // 4 sd.
  CHECK(std::abs(first / double(secrets) - rate) < tolerance);
  CHECK(std::abs(middle / double(secrets) - rate) < tolerance);
  CHECK(std::abs(late / double(secrets) - rate) < tolerance);
  CHECK(std::abs(after_counted / double(counted_before) - rate) < 2.5 * tolerance);
  // One secret's loop: the share of counted pairs over 30,000 pairs.
  int counted = 0;
  for (uint64_t p = 0; p < 30000; ++p) counted += IsCountedPair(99, p, rate);
  CHECK(std::abs(counted / 30000.0 - rate) < 0.015);
  CHECK_FALSE(IsCountedPair(99, 5, 0.0));
}

TEST_CASE("the jitter is uniform within its bound", "[stats]") {
  double sum = 0, lo = 1e9, hi = -1;
  for (uint64_t launch = 0; launch < 20000; ++launch) {
    double d = JitterMicros(7, launch, 200);
    sum += d;
    lo = std::min(lo, d);
    hi = std::max(hi, d);
  }
  CHECK(lo >= 0);
  CHECK(hi <= 200);
  CHECK(lo < 1);
  CHECK(hi > 199);
  CHECK(sum / 20000 == Approx(100).epsilon(0.02));
  CHECK(JitterMicros(7, 3, 0) == 0);
  CHECK(JitterMicros(7, 3, 200) != JitterMicros(8, 3, 200));
}

}  // namespace
}  // namespace ptxbench::gpu
