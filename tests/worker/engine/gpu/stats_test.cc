// Timing statistics and the adaptive stopping rule.
#include "worker/engine/gpu/stats.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
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

}  // namespace
}  // namespace ptxbench::gpu
