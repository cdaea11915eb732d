// The sketch comparison (sketch.h): honest outputs with errors as large as the tolerance allows
// pass under every key; outputs that a cheating kernel writes on samples it hopes are not
// compared (nothing: the NaN poison; zeros; another sample's answer) fail; the subset arithmetic
// gives the detection it promises.
#include "worker/engine/gpu/sketch.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "worker/engine/gpu/philox.h"

namespace ptxbench::gpu {
namespace {

ToleranceRule AllClose() {
  ToleranceRule rule;
  rule.atol = 0.01;
  rule.rtol = 0.01;
  return rule;
}

// GEMM-like outputs: N(0, 70^2) (a bf16 GEMM with K = 5120 of N(0,1) inputs has sd ~71).
std::vector<double> Outputs(uint64_t seed, size_t n, double sd = 70) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0, sd);
  std::vector<double> v(n);
  for (double& x : v) x = normal(rng);
  return v;
}

SampleSketches One(size_t sample, uint64_t seed, const TensorSketch& t, size_t k) {
  SampleSketches s;
  s.projections = k;
  s.tensors = {"C"};
  s.samples.push_back({sample, false, seed, {t}});
  return s;
}

SketchComparison Compare(const std::vector<double>& got, const std::vector<double>& ref,
                         uint64_t key, const ToleranceRule& rule, size_t k = 4) {
  const bool allclose = rule.kind == ToleranceRule::Kind::kAllClose;
  SampleSketches candidate = One(0, 1, SketchOnHost(got, key, 0, k, 0, 0), k);
  SampleSketches reference = One(
      0, 1, SketchOnHost(ref, key, 0, k, allclose ? rule.atol : 0, allclose ? rule.rtol : 0), k);
  auto c = CompareSketches(candidate, reference, rule);
  REQUIRE(c.ok());
  return *c;
}

TEST_CASE("the host sketch is the +-1 projection of the Philox bits", "[sketch]") {
  std::vector<double> v = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  const uint64_t key = SketchKey(42, 7);
  TensorSketch s = SketchOnHost(v, key, 2, 3, 0.5, 0.1);
  REQUIRE(s.projections.size() == 3);
  for (unsigned j = 0; j < 3; ++j) {
    double expected = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      Philox4 r = Philox4x32_10(i >> 3, kSketchStream + 2, key);
      expected += SketchWeightNegative(r, static_cast<unsigned>(i & 7) * 16 + j) ? -v[i] : v[i];
    }
    CHECK(s.projections[j] == expected);
  }
  CHECK(s.abs_sum == 66);
  CHECK(s.square_sum == 506);
  // tol = max(0.5, 0.1 |x|): 0.5 for x <= 5, then 0.6 .. 1.1.
  CHECK(s.tolerance_sum == Approx(5 * 0.5 + 0.6 + 0.7 + 0.8 + 0.9 + 1.0 + 1.1));
  // The weights are balanced and differ between keys and between tensors.
  std::vector<double> ones(4096, 1.0);
  TensorSketch a = SketchOnHost(ones, key, 0, 4, 0, 0);
  TensorSketch b = SketchOnHost(ones, SketchKey(43, 7), 0, 4, 0, 0);
  TensorSketch c = SketchOnHost(ones, key, 1, 4, 0, 0);
  for (size_t j = 0; j < 4; ++j) CHECK(std::abs(a.projections[j]) < 4 * 64);  // 4 sd.
  CHECK(a.projections != b.projections);
  CHECK(a.projections != c.projections);
  // Non-finite elements are counted, not summed.
  std::vector<double> poisoned = {1, std::nan(""), INFINITY, 2};
  CHECK(SketchOnHost(poisoned, key, 0, 2, 0, 0).nonfinite == 2);
}

TEST_CASE("sample keys are distinct and need the secret", "[sketch]") {
  std::set<uint64_t> keys;
  for (uint64_t seed = 0; seed < 1000; ++seed) keys.insert(SketchKey(99, seed));
  CHECK(keys.size() == 1000);
  CHECK(SketchKey(99, 5) != SketchKey(100, 5));
}

TEST_CASE("honest outputs at the edge of the tolerance pass under every key", "[sketch]") {
  const std::vector<double> ref = Outputs(1, 20000);
  const ToleranceRule rule = AllClose();
  // The worst an accepted output can be: every element off by its full tolerance, the signs
  // chosen by the kernel (here: with the sign of the value, and alternating) without the key.
  std::vector<double> with_sign(ref.size()), alternating(ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    const double tol = 0.999 * std::max(rule.atol, rule.rtol * std::abs(ref[i]));
    with_sign[i] = ref[i] + (ref[i] >= 0 ? tol : -tol);
    alternating[i] = ref[i] + (i % 2 ? tol : -tol);
  }
  double max_ratio = 0;
  for (uint64_t k = 0; k < 300; ++k) {
    for (const std::vector<double>* got :
         std::vector<const std::vector<double>*>{&with_sign, &alternating, &ref}) {
      SketchComparison c = Compare(*got, ref, SketchKey(k, 3), rule);
      CHECK(c.pass);
      max_ratio = std::max(max_ratio, c.max_ratio);
    }
  }
  // |sum w e| / (9 sqrt(sum tol^2)) is a N(0,1)/9 draw: 1200 draws stay below ~4/9.
  CHECK(max_ratio < 0.6);
  CHECK(max_ratio > 0.05);  // The errors are seen, not lost in rounding.
}

TEST_CASE("what a cheating kernel writes on unchecked samples fails", "[sketch]") {
  const std::vector<double> ref = Outputs(1, 20000);
  const std::vector<double> other = Outputs(2, 20000);  // Another sample's answer (stale copy).
  const std::vector<double> zeros(ref.size(), 0.0);
  std::vector<double> unwritten = ref;  // The poison stays where nothing was written.
  for (size_t i = 0; i < unwritten.size(); i += 97) unwritten[i] = std::nan("");
  std::vector<double> half = ref;  // Half the output written.
  for (size_t i = half.size() / 2; i < half.size(); ++i) half[i] = 0;
  for (uint64_t k = 0; k < 200; ++k) {
    const uint64_t key = SketchKey(k, 3);
    CHECK_FALSE(Compare(zeros, ref, key, AllClose()).pass);
    CHECK_FALSE(Compare(other, ref, key, AllClose()).pass);
    CHECK_FALSE(Compare(half, ref, key, AllClose()).pass);
    SketchComparison u = Compare(unwritten, ref, key, AllClose());
    CHECK_FALSE(u.pass);
    REQUIRE_FALSE(u.mismatches.empty());
    CHECK(u.mismatches[0].certain);
  }
  // One element far outside the deterministic bound: certain.
  std::vector<double> spike = ref;
  spike[123] += 1e9;
  SketchComparison s = Compare(spike, ref, SketchKey(1, 1), AllClose());
  CHECK_FALSE(s.pass);
  CHECK(s.mismatches.at(0).certain);
  CHECK(s.reason.find("timed sample 0, tensor C") != std::string::npos);
}

TEST_CASE("a relative-norm rule bounds the error norm by eps ||ref||", "[sketch]") {
  ToleranceRule rule;
  rule.kind = ToleranceRule::Kind::kRelativeNorm;
  rule.max_relative_norm = 0.01;
  const std::vector<double> ref = Outputs(5, 20000, 1.0);
  std::mt19937_64 rng(9);
  std::normal_distribution<double> normal(0, 1);
  std::vector<double> honest(ref.size());
  for (size_t i = 0; i < ref.size(); ++i) honest[i] = ref[i] * (1 + 0.0099 * normal(rng));
  const std::vector<double> zeros(ref.size(), 0.0);
  for (uint64_t k = 0; k < 100; ++k) {
    CHECK(Compare(honest, ref, SketchKey(k, 1), rule).pass);
    CHECK_FALSE(Compare(zeros, ref, SketchKey(k, 1), rule).pass);
  }
}

TEST_CASE("the comparison refuses what it cannot bound or match", "[sketch]") {
  const std::vector<double> ref = Outputs(1, 100);
  TensorSketch t = SketchOnHost(ref, 1, 0, 4, 0.01, 0.01);
  ToleranceRule partial = AllClose();
  partial.matched_ratio = 0.99;
  auto refused = CompareSketches(One(0, 1, t, 4), One(0, 1, t, 4), partial);
  CHECK(refused.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(refused.status().message()).find("matched_ratio") != std::string::npos);
  TensorSketch three = SketchOnHost(ref, 1, 0, 3, 0, 0);
  CHECK_FALSE(CompareSketches(One(0, 1, three, 3), One(0, 1, t, 4), AllClose()).ok());
  SampleSketches renamed = One(0, 1, t, 4);
  renamed.tensors = {"D"};
  CHECK_FALSE(CompareSketches(renamed, One(0, 1, t, 4), AllClose()).ok());
  // A reference of a seed the candidate never ran.
  CHECK_FALSE(CompareSketches(One(0, 1, t, 4), One(0, 2, t, 4), AllClose()).ok());
  // A non-finite reference cannot judge anything.
  TensorSketch bad = t;
  bad.nonfinite = 1;
  CHECK_FALSE(CompareSketches(One(0, 1, t, 4), One(0, 1, bad, 4), AllClose()).ok());
  // Candidate samples without a reference sketch are counted as unverified.
  SampleSketches two = One(0, 1, t, 4);
  two.samples.push_back({1, true, 9, {t}});
  auto c = CompareSketches(two, One(0, 1, t, 4), AllClose());
  REQUIRE(c.ok());
  CHECK(c->pass);
  CHECK(c->samples_compared == 1);
  CHECK(c->samples_unverified == 1);
  CHECK(c->false_alarm_bound > 0);
  CHECK(c->false_alarm_bound < 1e-16);
  CHECK(ToJson(*c)["samples_unverified"] == 1);
}

TEST_CASE("the verified subset is as large as the promised detection needs", "[sketch]") {
  CHECK(SubsetMissProbability(400, 20, 0) == 1.0);
  CHECK(SubsetMissProbability(400, 20, 381) == 0.0);
  CHECK(SubsetMissProbability(10, 1, 5) == Approx(0.5));
  const size_t n = SketchSubsetSize(400, 0.05, 1e-6);
  CHECK(SubsetMissProbability(400, 20, n) <= 1e-6);
  CHECK(SubsetMissProbability(400, 20, n - 1) > 1e-6);
  CHECK(n < 270);  // Fewer than with replacement: (0.95)^270 = 1e-6.
  // With a sketch that lets a wrong sample through 1 time in 1000, a few more.
  const size_t m = SketchSubsetSize(400, 0.05, 1e-6, 1e-3);
  CHECK(m >= n);
  CHECK(std::pow(1 - 0.05 + 0.05 * 1e-3, static_cast<double>(m)) <= 1e-6);
  // Too few samples for the fraction to be one sample: all of them.
  CHECK(SketchSubsetSize(10, 0.05, 1e-6) == 10);
  std::vector<size_t> subset = ChooseSketchSubset(400, n, 77);
  CHECK(subset.size() == n);
  CHECK(std::set<size_t>(subset.begin(), subset.end()).size() == n);
  CHECK(std::is_sorted(subset.begin(), subset.end()));
  CHECK(subset.back() < 400);
  CHECK(ChooseSketchSubset(400, n, 78) != subset);
  CHECK(ChooseSketchSubset(5, 9, 1).size() == 5);
  // Within budget (GEMM: ~1 ms per reference seed, 100 launches, 2 s): every launch.
  CHECK(SketchSamplesToVerify(100, 0.001, 2.0, 5).size() == 100);
  // Over budget: the subset that keeps the 5 % / 1e-6 promise.
  std::vector<size_t> chosen = SketchSamplesToVerify(400, 0.05, 2.0, 5);
  CHECK(chosen.size() == n);
  CHECK(chosen == ChooseSketchSubset(400, n, 5));
}

}  // namespace
}  // namespace ptxbench::gpu
