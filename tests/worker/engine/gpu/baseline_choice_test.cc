// The fair baseline's choice and the worker's cache of it (worker/engine/gpu/baseline_choice.h).
#include "worker/engine/gpu/baseline_choice.h"

#include <catch2/catch.hpp>

namespace ptxbench::gpu {
namespace {

BaselineCandidateFigure Timed(size_t index, double median_ms, bool eligible = true) {
  BaselineCandidateFigure f;
  f.index = index;
  f.median_ms = median_ms;
  f.runs = 15;
  f.eligible = eligible;
  if (!eligible) f.note = "output C differs";
  return f;
}

TEST_CASE("baseline choice: the fastest eligible candidate wins", "[baseline_choice]") {
  auto chosen = ChooseFastestBaseline({Timed(0, 0.78), Timed(1, 0.75), Timed(2, 0.76)});
  REQUIRE(chosen.ok());
  CHECK(*chosen == 1);
}

TEST_CASE("baseline choice: a faster candidate whose outputs differ never wins",
          "[baseline_choice]") {
  // The attack on a fair baseline is a library candidate that is fast because it is wrong
  // (e.g. a split-K reduction in lower precision): it must not make every submission look slow.
  auto chosen = ChooseFastestBaseline({Timed(0, 0.78), Timed(1, 0.50, false), Timed(2, 0.77)});
  REQUIRE(chosen.ok());
  CHECK(*chosen == 2);
}

TEST_CASE("baseline choice: differences within the tie fraction keep the library's order",
          "[baseline_choice]") {
  // 0.2 % faster is noise (kBaselineTieFraction 0.3 %): the first choice stays, so two workers
  // of one GPU model choose alike.
  auto chosen = ChooseFastestBaseline({Timed(0, 0.7800), Timed(1, 0.7785)});
  REQUIRE(chosen.ok());
  CHECK(*chosen == 0);
  // Listed out of order, the earlier-ranked of two equal later candidates is chosen.
  chosen = ChooseFastestBaseline({Timed(2, 0.7000), Timed(0, 0.78), Timed(1, 0.7001)});
  REQUIRE(chosen.ok());
  CHECK(*chosen == 1);
}

TEST_CASE("baseline choice: untimed candidates are skipped, a missing first choice is an error",
          "[baseline_choice]") {
  BaselineCandidateFigure untimed = Timed(1, 0.1);
  untimed.runs = 0;
  auto chosen = ChooseFastestBaseline({Timed(0, 0.78), untimed});
  REQUIRE(chosen.ok());
  CHECK(*chosen == 0);
  auto missing = ChooseFastestBaseline({Timed(1, 0.75)});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message().find("first choice (0) is missing") != std::string::npos);
  // The library's failure: infrastructure (Internal), never plan_invalid (InvalidArgument).
  CHECK(absl::IsInternal(missing.status()));
  auto not_eligible = ChooseFastestBaseline({Timed(0, 0.78, false), Timed(1, 0.75)});
  REQUIRE_FALSE(not_eligible.ok());
  CHECK(absl::IsInternal(not_eligible.status()));
  CHECK(not_eligible.status().message().find("output C differs") != std::string::npos);
  CHECK_FALSE(ChooseFastestBaseline({}).ok());
}

TEST_CASE("baseline choice: the key names everything the choice depends on", "[baseline_choice]") {
  const std::map<std::string, int64_t> axes = {{"M", 8192}, {"N", 7168}, {"K", 5120}};
  const std::string key =
      BaselineChoiceKey("abc", "timed", axes, "NVIDIA H200", "cublaslt", "gemm_a_bt_bf16");
  CHECK(key ==
        BaselineChoiceKey("abc", "timed", axes, "NVIDIA H200", "cublaslt", "gemm_a_bt_bf16"));
  CHECK(key !=
        BaselineChoiceKey("abd", "timed", axes, "NVIDIA H200", "cublaslt", "gemm_a_bt_bf16"));
  CHECK(key !=
        BaselineChoiceKey("abc", "small", axes, "NVIDIA H200", "cublaslt", "gemm_a_bt_bf16"));
  CHECK(key != BaselineChoiceKey("abc", "timed", {{"M", 4096}, {"N", 7168}, {"K", 5120}},
                                 "NVIDIA H200", "cublaslt", "gemm_a_bt_bf16"));
  CHECK(key != BaselineChoiceKey("abc", "timed", axes, "NVIDIA H100 80GB HBM3", "cublaslt",
                                 "gemm_a_bt_bf16"));
}

TEST_CASE("baseline choice: the worker's cache keeps the last choice per key",
          "[baseline_choice]") {
  BaselineChoiceCache cache;
  CHECK_FALSE(cache.Find("k").has_value());
  cache.Store("k", {3, {{"algorithm", "heuristic #3"}}});
  REQUIRE(cache.Find("k").has_value());
  CHECK(cache.Find("k")->index == 3);
  cache.Store("k", {1, {{"algorithm", "heuristic #1"}}});
  CHECK(cache.Find("k")->index == 1);
  CHECK(cache.size() == 1);
  cache.Clear();
  CHECK(cache.size() == 0);
}

TEST_CASE("baseline choice: the cache remembers each ordinal's GPU model until cleared",
          "[baseline_choice]") {
  // What a candidate process started before the GPU answered is keyed by (CandidateProcess::
  // StartEarly): an ordinal never seen has no model, so no choice is handed ahead.
  BaselineChoiceCache cache;
  CHECK_FALSE(cache.GpuName(0).has_value());
  cache.NoteGpu(0, "NVIDIA H100 80GB HBM3");
  cache.NoteGpu(1, "NVIDIA H200");
  REQUIRE(cache.GpuName(0).has_value());
  CHECK(*cache.GpuName(0) == "NVIDIA H100 80GB HBM3");
  CHECK(*cache.GpuName(1) == "NVIDIA H200");
  CHECK_FALSE(cache.GpuName(2).has_value());
  cache.Clear();
  CHECK_FALSE(cache.GpuName(0).has_value());
}

TEST_CASE("baseline choice: candidates are timed in rotated rounds, never one after another",
          "[baseline_choice]") {
  // A drift of the GPU's speed over the choice (clock ramp, power-cap throttle) must fall on every
  // candidate alike: each runs once per round, and over n rounds at every position once.
  const size_t n = 5, rounds = 10;
  const std::vector<size_t> order = InterleavedRunOrder(n, rounds);
  REQUIRE(order.size() == n * rounds);
  std::vector<std::vector<size_t>> at_position(n, std::vector<size_t>(n, 0));
  for (size_t r = 0; r < rounds; ++r) {
    std::vector<size_t> seen(n, 0);
    for (size_t j = 0; j < n; ++j) {
      const size_t k = order[r * n + j];
      REQUIRE(k < n);
      ++seen[k];
      ++at_position[k][j];
    }
    CHECK(seen == std::vector<size_t>(n, 1));
  }
  for (size_t k = 0; k < n; ++k) CHECK(at_position[k] == std::vector<size_t>(n, rounds / n));
  // A linear drift in time: every candidate's mean position over the runs is the same, so equal
  // candidates get equal medians whatever the drift's slope.
  std::vector<double> mean_time(n, 0);
  for (size_t i = 0; i < order.size(); ++i) mean_time[order[i]] += static_cast<double>(i) / rounds;
  for (size_t k = 1; k < n; ++k) CHECK(mean_time[k] == Approx(mean_time[0]).epsilon(0.05));
  // The old order (all of 0, then all of 1, ...) failed that: 0's mean time was 4.5, 4's 44.5.
  CHECK(InterleavedRunOrder(1, 3) == std::vector<size_t>{0, 0, 0});
  CHECK(InterleavedRunOrder(0, 3).empty());
}

}  // namespace
}  // namespace ptxbench::gpu
