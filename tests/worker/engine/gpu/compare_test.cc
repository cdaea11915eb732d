// Output comparison: the task's AND rule, NaN/Inf never passing, unwritten elements, the
// relative-norm rule, and thread-count independence.
#include "worker/engine/gpu/compare.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <vector>

#include "worker/engine/gpu/poison.h"

namespace ptxbench::gpu {
namespace {

uint16_t Bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<uint16_t>((bits + 0x7FFF + ((bits >> 16) & 1)) >>
                               16);  // round to nearest even
}

std::vector<uint16_t> Bf16Vector(const std::vector<float>& v) {
  std::vector<uint16_t> out;
  for (float f : v) out.push_back(Bf16(f));
  return out;
}

ToleranceRule AllClose() { return ToleranceRule{}; }  // atol = rtol = 1e-2, matched ratio 1.0.

TEST_CASE("identical bf16 outputs pass with zero error", "[compare]") {
  auto a = Bf16Vector({1.0f, -2.5f, 100.0f, 0.0f, 3.25f, -7.0f});
  CompareReport r = CompareOutputs(a.data(), a.data(), a.size(), ElementType::kBF16, {2, 3},
                                   AllClose(), kPoisonBF16, 2);
  REQUIRE(r.pass);
  CHECK(r.max_abs_error == 0);
  CHECK(r.matched_ratio == 1.0);
  CHECK(r.first_mismatches.empty());
  CHECK(r.reference_norm > 0);
}

TEST_CASE("an element fails only when outside atol AND rtol", "[compare]") {
  // ref 100: abs error 0.5 > atol but 0.5 <= rtol*100 = 1.0 -> matches.
  // ref 0.5: abs error 0.25 > atol and > rtol*0.5 -> mismatch.
  auto expected = Bf16Vector({100.0f, 0.5f});
  auto got = Bf16Vector({100.5f, 0.75f});
  CompareReport r = CompareOutputs(got.data(), expected.data(), 2, ElementType::kBF16, {2},
                                   AllClose(), kPoisonBF16, 1);
  CHECK_FALSE(r.pass);
  CHECK(r.mismatched == 1);
  REQUIRE(r.first_mismatches.size() == 1);
  CHECK(r.first_mismatches[0].index == 1);
  CHECK(r.first_mismatches[0].kind == "mismatch");
  CHECK(r.max_abs_error == Approx(0.5));
  CHECK(r.matched_ratio == Approx(0.5));
}

TEST_CASE("a matched ratio below 1 tolerates exactly that fraction", "[compare]") {
  std::vector<float> e(1000, 1.0f), g(1000, 1.0f);
  for (int i = 0; i < 5; ++i) g[i * 100] = 2.0f;
  auto expected = Bf16Vector(e), got = Bf16Vector(g);
  ToleranceRule rule = AllClose();
  rule.matched_ratio = 0.995;
  CHECK(CompareOutputs(got.data(), expected.data(), 1000, ElementType::kBF16, {1000}, rule,
                       kPoisonBF16, 3)
            .pass);
  rule.matched_ratio = 0.996;
  CHECK_FALSE(CompareOutputs(got.data(), expected.data(), 1000, ElementType::kBF16, {1000}, rule,
                             kPoisonBF16, 3)
                  .pass);
}

TEST_CASE("NaN and Inf never pass, even with a loose tolerance", "[compare]") {
  auto expected = Bf16Vector({1.0f, 2.0f, 3.0f});
  auto got = Bf16Vector({1.0f, std::nanf(""), INFINITY});
  ToleranceRule rule = AllClose();
  rule.atol = rule.rtol = 1e9;
  rule.matched_ratio = 0.0;
  CompareReport r =
      CompareOutputs(got.data(), expected.data(), 3, ElementType::kBF16, {3}, rule, kPoisonBF16, 1);
  CHECK_FALSE(r.pass);
  CHECK(r.nonfinite == 2);
  CHECK(r.first_mismatches[0].kind == "nan");
  CHECK(r.first_mismatches[1].kind == "inf");
}

TEST_CASE("elements still holding the poison are reported as unwritten, with coordinates",
          "[compare]") {
  std::vector<uint16_t> expected = Bf16Vector(std::vector<float>(12, 1.5f));
  std::vector<uint16_t> got = expected;
  got[11] = static_cast<uint16_t>(kPoisonBF16 & 0xFFFF);  // C[2][3] never written
  CompareReport r = CompareOutputs(got.data(), expected.data(), 12, ElementType::kBF16, {3, 4},
                                   AllClose(), kPoisonBF16, 4);
  CHECK_FALSE(r.pass);
  CHECK(r.unwritten == 1);
  REQUIRE(r.first_mismatches.size() == 1);
  CHECK(r.first_mismatches[0].kind == "unwritten");
  CHECK(r.first_mismatches[0].coordinates == std::vector<int64_t>{2, 3});
  CHECK(r.reason.find("never written") != std::string::npos);
}

TEST_CASE("the poison patterns are NaN in their formats", "[compare]") {
  uint16_t bf = kPoisonBF16 & 0xFFFF, hf = kPoisonFP16 & 0xFFFF;
  uint32_t f = kPoisonFP32;
  uint8_t e4 = kPoisonFP8E4M3 & 0xFF;
  CHECK(std::isnan(DecodeElement(&bf, 0, ElementType::kBF16)));
  CHECK(std::isnan(DecodeElement(&hf, 0, ElementType::kFP16)));
  CHECK(std::isnan(DecodeElement(&f, 0, ElementType::kFP32)));
  CHECK(std::isnan(DecodeElement(&e4, 0, ElementType::kFP8E4M3)));
}

TEST_CASE("decoding fp16 and e4m3 is exact", "[compare]") {
  uint16_t one = 0x3C00, minus_two = 0xC000, tiny = 0x0001;
  CHECK(DecodeElement(&one, 0, ElementType::kFP16) == 1.0);
  CHECK(DecodeElement(&minus_two, 0, ElementType::kFP16) == -2.0);
  CHECK(DecodeElement(&tiny, 0, ElementType::kFP16) == std::ldexp(1.0, -24));
  uint8_t e4_one = 0x38, e4_max = 0x7E;
  CHECK(DecodeElement(&e4_one, 0, ElementType::kFP8E4M3) == 1.0);
  CHECK(DecodeElement(&e4_max, 0, ElementType::kFP8E4M3) == 448.0);
}

TEST_CASE("the relative-norm rule judges the whole tensor", "[compare]") {
  std::vector<float> e(100), g(100);
  for (int i = 0; i < 100; ++i) {
    e[i] = static_cast<float>(i % 7) - 3.0f;
    g[i] = e[i];
  }
  g[5] += 0.5f;  // One large pointwise error, small in norm.
  ToleranceRule rule;
  rule.all_close = false;
  rule.max_relative_norm = 0.05;
  CompareReport r =
      CompareOutputs(g.data(), e.data(), 100, ElementType::kFP32, {100}, rule, kPoisonFP32, 2);
  CHECK(r.pass);
  CHECK(r.relative_norm > 0);
  rule.max_relative_norm = 0.001;
  CHECK_FALSE(
      CompareOutputs(g.data(), e.data(), 100, ElementType::kFP32, {100}, rule, kPoisonFP32, 2)
          .pass);
}

TEST_CASE("results do not depend on the number of threads", "[compare]") {
  std::vector<float> e(100003), g(100003);
  for (size_t i = 0; i < e.size(); ++i) {
    e[i] = std::sin(static_cast<float>(i)) * 10;
    g[i] = e[i] + ((i % 997 == 0) ? 1.0f : 0.001f);
  }
  CompareReport one = CompareOutputs(g.data(), e.data(), e.size(), ElementType::kFP32,
                                     {static_cast<int64_t>(e.size())}, AllClose(), kPoisonFP32, 1);
  CompareReport many = CompareOutputs(g.data(), e.data(), e.size(), ElementType::kFP32,
                                      {static_cast<int64_t>(e.size())}, AllClose(), kPoisonFP32, 8);
  CHECK(one.mismatched == many.mismatched);
  CHECK(one.max_abs_error == many.max_abs_error);
  CHECK(one.relative_norm == Approx(many.relative_norm).epsilon(1e-12));
  REQUIRE(one.first_mismatches.size() == many.first_mismatches.size());
  CHECK(one.first_mismatches[0].index == many.first_mismatches[0].index);
}

TEST_CASE("a report survives its JSON round trip, non-finite values included", "[compare]") {
  auto expected = Bf16Vector({1.0f, 2.0f, 3.0f, 4.0f});
  auto got = Bf16Vector({1.0f, std::nanf(""), -INFINITY, 4.5f});
  got[0] = static_cast<uint16_t>(kPoisonBF16 & 0xFFFF);
  CompareReport r = CompareOutputs(got.data(), expected.data(), 4, ElementType::kBF16, {2, 2},
                                   AllClose(), kPoisonBF16, 1);
  REQUIRE(r.first_mismatches.size() == 4);
  auto back = CompareReportFromJson(nlohmann::json::parse(ToJson(r).dump()));
  REQUIRE(back.ok());
  CHECK(ToJson(*back) == ToJson(r));
  CHECK(std::isnan(back->first_mismatches[1].got));
  CHECK(back->first_mismatches[2].got == -INFINITY);
  CHECK(back->first_mismatches[0].kind == "unwritten");
  CHECK(back->first_mismatches[3].coordinates == std::vector<int64_t>{1, 1});

  // An all-zero reference: relative norm infinite (JSON null), read back as such.
  std::vector<float> zero(3, 0.0f), one(3, 1.0f);
  CompareReport z = CompareOutputs(one.data(), zero.data(), 3, ElementType::kFP32, {3}, AllClose(),
                                   kPoisonFP32, 1);
  auto zb = CompareReportFromJson(nlohmann::json::parse(ToJson(z).dump()));
  REQUIRE(zb.ok());
  CHECK(std::isinf(zb->relative_norm));

  nlohmann::json broken = ToJson(r);
  broken.erase("mismatched");
  auto bad = CompareReportFromJson(broken);
  REQUIRE_FALSE(bad.ok());
  CHECK(std::string(bad.status().message()).find("mismatched") != std::string::npos);
  CHECK_FALSE(CompareReportFromJson(nlohmann::json::array()).ok());
}

TEST_CASE("FinishCompareReport judges from counts and sums alone", "[compare]") {
  CompareReport r;
  r.elements = 1000;
  r.mismatched = 3;
  ToleranceRule rule = AllClose();
  rule.matched_ratio = 0.997;
  FinishCompareReport(rule, 4.0, 16.0, &r);
  CHECK(r.pass);
  CHECK(r.matched_ratio == Approx(0.997));
  CHECK(r.relative_norm == Approx(0.5));
  CHECK(r.reference_norm == Approx(4.0));
  rule.matched_ratio = 0.9975;
  FinishCompareReport(rule, 4.0, 16.0, &r);
  CHECK_FALSE(r.pass);
  r.unwritten = r.nonfinite = 1;
  FinishCompareReport(rule, 4.0, 16.0, &r);
  CHECK(r.reason.find("never written") != std::string::npos);
}

}  // namespace
TEST_CASE("both rules must hold when a task declares both, and both figures are reported",
          "[compare]") {
  // Attention-forward-like outputs: |O| ~ 0.02, so atol 1e-2 hides a uniform 3 % error (the
  // fp8-P decoy); the norm bound does not.
  std::vector<float> e(1000), g(1000);
  for (int i = 0; i < 1000; ++i) {
    e[i] = 0.02f * std::sin(static_cast<float>(i));
    g[i] = e[i] * 1.03f;
  }
  ToleranceRule rule;  // all-close 1e-2 / 1e-2
  CompareReport close_only =
      CompareOutputs(g.data(), e.data(), 1000, ElementType::kFP32, {1000}, rule, kPoisonFP32, 2);
  CHECK(close_only.pass);
  CHECK(close_only.all_close_checked);
  CHECK_FALSE(close_only.relative_norm_checked);
  CHECK(close_only.relative_norm == Approx(0.03).epsilon(0.01));  // Reported all the same.
  rule.max_relative_norm = 0.009;
  CompareReport both =
      CompareOutputs(g.data(), e.data(), 1000, ElementType::kFP32, {1000}, rule, kPoisonFP32, 2);
  CHECK_FALSE(both.pass);
  CHECK(both.all_close_pass);
  CHECK_FALSE(both.relative_norm_pass);
  CHECK(both.reason.find("relative norm 0.03 exceeds 0.009") != std::string::npos);
  // The report round-trips with its rules.
  auto back = CompareReportFromJson(ToJson(both));
  REQUIRE(back.ok());
  CHECK(back->relative_norm_checked);
  CHECK_FALSE(back->relative_norm_pass);
  CHECK(back->all_close_pass);
  // Both failing: the reason names both.
  for (int i = 0; i < 1000; ++i) g[i] = e[i] + 0.5f;
  CompareReport neither =
      CompareOutputs(g.data(), e.data(), 1000, ElementType::kFP32, {1000}, rule, kPoisonFP32, 2);
  CHECK_FALSE(neither.pass);
  CHECK(neither.reason.find("outside atol") != std::string::npos);
  CHECK(neither.reason.find("relative norm") != std::string::npos);
  // The task's declaration maps onto the rule.
  Tolerance t;
  t.all_close = false;
  t.max_relative_norm = 0.01;
  ToleranceRule from_task = RuleOf(t);
  CHECK_FALSE(from_task.all_close);
  CHECK(from_task.max_relative_norm == 0.01);
}

TEST_CASE("the block rule catches work skipped on a few rows that the overall norm dilutes",
          "[compare]") {
  // 16 blocks of 4 rows x 8 columns; the candidate zeroes block 13 (a skipped key block): its
  // relative norm is 1.0, the overall one only ~sqrt(1/16) = 0.25.
  constexpr int kRows = 64, kColumns = 8, kCount = kRows * kColumns;
  std::vector<float> e(kCount), g(kCount);
  for (int i = 0; i < kCount; ++i) {
    e[i] = 1.0f + 0.5f * std::sin(static_cast<float>(i));
    g[i] = e[i] * 1.001f;
  }
  for (int i = 13 * 4 * kColumns; i < 14 * 4 * kColumns; ++i) g[i] = 0;
  ToleranceRule rule;
  rule.all_close = false;
  rule.max_relative_norm = 0.3;
  CompareReport overall_only = CompareOutputs(g.data(), e.data(), kCount, ElementType::kFP32,
                                              {kRows, kColumns}, rule, kPoisonFP32, 3);
  CHECK(overall_only.pass);  // The gap the block rule closes.
  CHECK_FALSE(overall_only.block_norm_checked);
  rule.block_rows = 4;
  rule.max_block_relative_norm = 0.03;
  for (int threads : {1, 3}) {  // Thread ranges straddle blocks with 3.
    CompareReport r = CompareOutputs(g.data(), e.data(), kCount, ElementType::kFP32,
                                     {kRows, kColumns}, rule, kPoisonFP32, threads);
    CHECK_FALSE(r.pass);
    CHECK(r.relative_norm_pass);
    CHECK(r.block_norm_checked);
    CHECK_FALSE(r.block_norm_pass);
    CHECK(r.worst_block == 13);
    CHECK(r.worst_block_relative_norm == Approx(1.0));
    CHECK(r.reason.find("block 13 (rows 52..55) relative norm 1 exceeds 0.03") !=
          std::string::npos);
    auto back = CompareReportFromJson(ToJson(r));
    REQUIRE(back.ok());
    CHECK(back->block_norm_checked);
    CHECK_FALSE(back->block_norm_pass);
    CHECK(back->worst_block == 13);
    CHECK(back->block_rows == 4);
    CHECK(back->worst_block_relative_norm == Approx(1.0));
  }
  // Honest: every block at 1e-3, passes with its worst figure reported.
  for (int i = 0; i < kCount; ++i) g[i] = e[i] * 1.001f;
  CompareReport honest = CompareOutputs(g.data(), e.data(), kCount, ElementType::kFP32,
                                        {kRows, kColumns}, rule, kPoisonFP32, 2);
  CHECK(honest.pass);
  CHECK(honest.block_norm_pass);
  CHECK(honest.worst_block_relative_norm == Approx(0.001).epsilon(0.01));
  // A zero reference block is neither a division by zero nor a free pass: its error counts
  // against a tenth of an RMS block's norm.
  for (int i = 5 * 4 * kColumns; i < 6 * 4 * kColumns; ++i) {
    e[i] = 0;
    g[i] = 0;
  }
  CompareReport zero_block = CompareOutputs(g.data(), e.data(), kCount, ElementType::kFP32,
                                            {kRows, kColumns}, rule, kPoisonFP32, 2);
  CHECK(zero_block.pass);
  CHECK(std::isfinite(zero_block.worst_block_relative_norm));
  for (int i = 5 * 4 * kColumns; i < 6 * 4 * kColumns; ++i) g[i] = 0.5f;
  CompareReport garbage = CompareOutputs(g.data(), e.data(), kCount, ElementType::kFP32,
                                         {kRows, kColumns}, rule, kPoisonFP32, 2);
  CHECK_FALSE(garbage.pass);
  CHECK(garbage.worst_block == 5);
  CHECK(std::isfinite(garbage.worst_block_relative_norm));
  CHECK(garbage.worst_block_relative_norm > 1.0);
  // A short last block (rows not a multiple of block_rows) is judged too.
  rule.block_rows = 60;
  for (int i = 0; i < kCount; ++i) g[i] = e[i];
  for (int i = 60 * kColumns; i < kCount; ++i) g[i] = e[i] * 1.5f;
  CompareReport short_last = CompareOutputs(g.data(), e.data(), kCount, ElementType::kFP32,
                                            {kRows, kColumns}, rule, kPoisonFP32, 2);
  CHECK_FALSE(short_last.pass);
  CHECK(short_last.worst_block == 1);
  // The GPU path hands block sums to FinishCompareReport; without them the rule cannot pass.
  CompareReport no_sums;
  no_sums.elements = kCount;
  FinishCompareReport(rule, 0.0, 1.0, &no_sums);
  CHECK_FALSE(no_sums.pass);
  CHECK(no_sums.reason.find("no block sums") != std::string::npos);
  // The task's declaration maps onto the rule.
  Tolerance t;
  t.block_rows = 64;
  t.max_block_relative_norm = 0.03;
  CHECK(RuleOf(t).block_rows == 64);
  CHECK(RuleOf(t).max_block_relative_norm == 0.03);
  CHECK(BlockElements(RuleOf(t), {2, 128, 128}, 2 * 128 * 128) == 64 * 128);
}

TEST_CASE("the fp64 reference rule: figure, verdict and reason, and its JSON", "[compare]") {
  // bf16 outputs against an fp64 reference off by a uniform 1 % (relative norm 0.01 up to the
  // bf16 rounding of each element, < 2^-9 relative).
  constexpr int kCount = 4096;
  std::vector<double> ref(kCount);
  std::vector<float> got_f(kCount);
  for (int i = 0; i < kCount; ++i) {
    ref[i] = std::sin(0.37 * i) + 0.1;
    got_f[i] = static_cast<float>(ref[i] * 1.01);
  }
  std::vector<uint16_t> got = Bf16Vector(got_f);
  const Fp64Sums sums = Fp64ErrorSums(got.data(), ElementType::kBF16, ref.data(), kCount);
  double err_sq = 0, ref_sq = 0;
  for (int i = 0; i < kCount; ++i) {
    const double g = DecodeElement(got.data(), i, ElementType::kBF16);
    err_sq += (g - ref[i]) * (g - ref[i]);
    ref_sq += ref[i] * ref[i];
  }
  CHECK(sums.err_sq == Approx(err_sq).epsilon(1e-12));
  CHECK(sums.ref_sq == Approx(ref_sq).epsilon(1e-12));
  CHECK(Fp64RelativeNorm(sums) == Approx(0.01).epsilon(0.05));

  // A passing library comparison, then the fp64 rule at 0.006: fails, naming rule and figures.
  CompareReport r;
  r.elements = kCount;
  r.pass = true;
  ApplyFp64Reference(sums, 0.006, 0.0023, &r);
  CHECK_FALSE(r.pass);
  CHECK(r.fp64_measured);
  CHECK(r.fp64_checked);
  CHECK_FALSE(r.fp64_pass);
  CHECK(r.reason.rfind("relative norm 0.01", 0) == 0);
  CHECK(r.reason.find("against the fp64 reference exceeds 0.006") != std::string::npos);
  auto back = CompareReportFromJson(ToJson(r));
  REQUIRE(back.ok());
  CHECK(back->fp64_measured);
  CHECK(back->fp64_checked);
  CHECK_FALSE(back->fp64_pass);
  CHECK(back->fp64_relative_norm == Approx(r.fp64_relative_norm));
  CHECK(back->fp64_max_relative_norm == 0.006);
  CHECK(back->library_fp64_relative_norm == 0.0023);
  CHECK(ToJson(r)["rules"]["fp64_reference"] == nlohmann::json{{"checked", true}, {"pass", false}});

  // At 0.02 it passes; an output the rule does not list (bound 0) is measured, not judged.
  for (double bound : {0.02, 0.0}) {
    CompareReport ok;
    ok.elements = kCount;
    ok.pass = true;
    ApplyFp64Reference(sums, bound, -1, &ok);
    CHECK(ok.pass);
    CHECK(ok.fp64_pass);
    CHECK(ok.fp64_checked == (bound > 0));
    CHECK(ok.reason.empty());
  }
  // A library failure keeps its reason first; the fp64 failure is appended.
  CompareReport both;
  both.elements = kCount;
  both.pass = false;
  both.reason = "relative norm 0.02 exceeds 0.01";
  ApplyFp64Reference(sums, 0.006, -1, &both);
  CHECK_FALSE(both.pass);
  CHECK(both.reason.rfind("relative norm 0.02 exceeds 0.01; relative norm 0.01", 0) == 0);
  // A zero fp64 reference is no free pass.
  CompareReport zero;
  zero.pass = true;
  ApplyFp64Reference(Fp64Sums{0, 0}, 0.006, -1, &zero);
  CHECK_FALSE(zero.pass);
  CHECK(zero.reason == "the fp64 reference is zero");
  // Reports without the rule carry no fp64 figures.
  CompareReport plain;
  CHECK_FALSE(ToJson(plain).contains("fp64_reference"));
  auto plain_back = CompareReportFromJson(ToJson(plain));
  REQUIRE(plain_back.ok());
  CHECK_FALSE(plain_back->fp64_measured);
  CHECK(plain_back->library_fp64_relative_norm < 0);
}

namespace {

// The forward pass in fp64 (O and the natural-log LSE), for finite differences of
// L = sum dO . O, whose gradients the backward's definition gives.
void ForwardFp64(const SdpaFp64Shape& shape, const std::vector<double>& q,
                 const std::vector<double>& k, const std::vector<double>& v, std::vector<double>* o,
                 std::vector<double>* lse) {
  const int64_t s = shape.s, d = shape.d;
  o->assign(q.size(), 0.0);
  lse->assign(shape.heads * s, 0.0);
  for (int64_t h = 0; h < shape.heads; ++h) {
    for (int64_t i = 0; i < s; ++i) {
      const int64_t keys = shape.causal ? i + 1 : s;
      std::vector<double> score(keys);
      double top = -INFINITY;
      for (int64_t j = 0; j < keys; ++j) {
        double x = 0;
        for (int64_t c = 0; c < d; ++c) x += q[(h * s + i) * d + c] * k[(h * s + j) * d + c];
        score[j] = shape.scale * x;
        top = std::max(top, score[j]);
      }
      double sum = 0;
      for (double x : score) sum += std::exp(x - top);
      (*lse)[h * s + i] = top + std::log(sum);
      for (int64_t j = 0; j < keys; ++j) {
        const double p = std::exp(score[j] - (*lse)[h * s + i]);
        for (int64_t c = 0; c < d; ++c) (*o)[(h * s + i) * d + c] += p * v[(h * s + j) * d + c];
      }
    }
  }
}

}  // namespace

TEST_CASE("the host fp64 SDPA backward is the gradient of dO . O", "[compare]") {
  for (bool causal : {false, true}) {
    SdpaFp64Shape shape{2, 5, 3, 0.7, causal};
    const size_t n = static_cast<size_t>(shape.heads * shape.s * shape.d);
    std::vector<double> q(n), k(n), v(n), d_o(n);
    for (size_t i = 0; i < n; ++i) {
      q[i] = std::sin(1.3 * i);
      k[i] = std::cos(0.7 * i + 0.2);
      v[i] = std::sin(0.45 * i + 1.0);
      d_o[i] = std::cos(1.9 * i);
    }
    std::vector<double> o, lse, dq, dk, dv;
    ForwardFp64(shape, q, k, v, &o, &lse);
    SdpaBackwardFp64Host(shape, q, k, v, o, d_o, lse, &dq, &dk, &dv);
    auto loss = [&](const std::vector<double>& q2, const std::vector<double>& k2,
                    const std::vector<double>& v2) {
      std::vector<double> o2, lse2;
      ForwardFp64(shape, q2, k2, v2, &o2, &lse2);
      double l = 0;
      for (size_t i = 0; i < n; ++i) l += d_o[i] * o2[i];
      return l;
    };
    constexpr double kH = 1e-6;
    for (size_t i = 0; i < n; ++i) {
      auto central = [&](int which) {
        std::vector<double> a = q, b = k, c = v;
        std::vector<double>& x = which == 0 ? a : (which == 1 ? b : c);
        x[i] += kH;
        const double up = loss(a, b, c);
        x[i] -= 2 * kH;
        return (up - loss(a, b, c)) / (2 * kH);
      };
      CHECK(dq[i] == Approx(central(0)).margin(1e-7));
      CHECK(dk[i] == Approx(central(1)).margin(1e-7));
      CHECK(dv[i] == Approx(central(2)).margin(1e-7));
    }
    if (causal) {
      // Row 0 sees key 0 alone: P = 1, so dS = 0 and dQ's row 0 is exactly zero.
      for (int64_t c = 0; c < shape.d; ++c) CHECK(dq[c] == 0);
    }
  }
}

}  // namespace ptxbench::gpu
