#include "bench/speedup_spread.h"

#include <catch2/catch.hpp>
#include <vector>

namespace ptxbench::bench {
namespace {

TEST_CASE("speedup spread: max/min, relative sd and windows of five in run order") {
  // Service bench run 18's 20 GEMM jobs of the mix, in the order they finished
  // (docs/results/2026-12-07-h100-service-bench-18/pipeline-2-gemm-and-mix.json).
  const std::vector<double> mix = {0.9860, 0.9865, 0.9882, 0.9893, 0.9862, 0.9851, 0.9874,
                                   0.9831, 0.9877, 0.9878, 0.9870, 0.9887, 0.9848, 0.9868,
                                   0.9850, 0.9862, 0.9882, 0.9860, 0.9865, 0.9858};
  const SpeedupSpread s = SpreadOf(mix);
  CHECK(s.evaluations == 20);
  CHECK(s.max_over_min == Approx(0.9893 / 0.9831));
  CHECK(s.relative_sd == Approx(0.00150).margin(0.00002));
  // 16 windows; the one holding both 0.9893 and 0.9831 (jobs 4-8) is the largest.
  CHECK(s.window_max_over_min_max == Approx(0.9893 / 0.9831));
  CHECK(s.window_max_over_min_median > 1.003);
  CHECK(s.window_max_over_min_median < 1.0045);
  CHECK(s.window_max_over_min_median < s.max_over_min);
}

TEST_CASE("speedup spread: windows follow the run order, not the sorted values") {
  // A step between the first five and the last five: every window that straddles it sees the
  // step, the two that do not see nothing.
  const std::vector<double> step = {1.0, 1.0, 1.0, 1.0, 1.0, 1.01, 1.01, 1.01, 1.01, 1.01};
  const SpeedupSpread s = SpreadOf(step);
  CHECK(s.window_max_over_min_max == Approx(1.01));
  // 6 windows: [0,5) and [5,10) flat, the 4 between them straddle the step: median 1.01.
  CHECK(s.window_max_over_min_median == Approx(1.01));
  const std::vector<double> alternating = {1.0, 1.01, 1.0, 1.01, 1.0, 1.01, 1.0, 1.01, 1.0, 1.01};
  CHECK(SpreadOf(alternating).window_max_over_min_median == Approx(1.01));
}

TEST_CASE("speedup spread: missing speedups are left out, short runs have no windows") {
  const SpeedupSpread none = SpreadOf({});
  CHECK(none.evaluations == 0);
  CHECK(none.max_over_min == 0);
  CHECK(none.relative_sd == 0);
  const SpeedupSpread one = SpreadOf({0.0, 0.97, -1.0});
  CHECK(one.evaluations == 1);
  CHECK(one.max_over_min == 1.0);
  CHECK(one.relative_sd == 0);
  const SpeedupSpread four = SpreadOf({0.97, 0.98, 0.97, 0.98});
  CHECK(four.evaluations == 4);
  CHECK(four.window_max_over_min_median == 0);
  CHECK(four.window_max_over_min_max == 0);
  const nlohmann::json j = ToJson(four);
  CHECK(j["window"] == kSpreadWindow);
  CHECK(j["max_over_min"].get<double>() == Approx(0.98 / 0.97));
}

}  // namespace
}  // namespace ptxbench::bench
