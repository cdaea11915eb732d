// The double-precision references that judge the libraries (tests/gpu) against properties that
// hold by construction, for the head dims and masks of the attention tasks.
#include "tests/support/host_reference.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace ptxbench::testing {
namespace {

std::vector<float> Normal(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> out(count);
  for (float& x : out) x = normal(rng);
  return out;
}

TEST_CASE("attention forward: equal keys give the mean of the visible values and log(count)") {
  for (int d : {64, 256}) {
    for (bool causal : {false, true}) {
      AttentionShape a{1, 2, 16, d, causal};
      std::vector<float> q = Normal(a.Elements(), 1), v = Normal(a.Elements(), 2);
      std::vector<float> k(a.Elements());
      const std::vector<float> key = Normal(static_cast<size_t>(d), 3);
      for (size_t row = 0; row < a.Rows(); ++row) {
        for (int x = 0; x < d; ++x) k[row * d + x] = key[x];
      }
      const double scale = 1.0 / std::sqrt(static_cast<double>(d));
      std::vector<double> o, lse;
      AttentionForward(a, scale, q, k, v, o, lse);
      for (size_t bh = 0; bh < 2; ++bh) {
        for (int i = 0; i < a.s; ++i) {
          const int visible = causal ? i + 1 : a.s;
          double logit = 0;
          for (int x = 0; x < d; ++x) logit += double(q[(bh * a.s + i) * d + x]) * key[x];
          CHECK(lse[bh * a.s + i] == Approx(logit * scale + std::log(visible)).epsilon(1e-12));
          for (int x = 0; x < d; x += 17) {
            double mean = 0;
            for (int j = 0; j < visible; ++j) mean += v[(bh * a.s + j) * d + x];
            CHECK(o[(bh * a.s + i) * d + x] == Approx(mean / visible).margin(1e-12));
          }
        }
      }
    }
  }
}

TEST_CASE("attention forward: matches the unshifted softmax formula and the causal first row") {
  for (int d : {64, 256}) {
    for (bool causal : {false, true}) {
      AttentionShape a{2, 1, 24, d, causal};
      const std::vector<float> q = Normal(a.Elements(), 4), k = Normal(a.Elements(), 5),
                               v = Normal(a.Elements(), 6);
      const double scale = 1.0 / std::sqrt(static_cast<double>(d));
      std::vector<double> o, lse;
      AttentionForward(a, scale, q, k, v, o, lse);
      for (size_t bh = 0; bh < 2; ++bh) {
        const size_t base = bh * a.s * d;
        for (int i = 0; i < a.s; ++i) {
          // Logits of N(0,1) rows at scale 1/sqrt(D) are about N(0, 1): exp without the max
          // shift is exact enough in long double.
          long double z = 0;
          std::vector<long double> num(static_cast<size_t>(d), 0);
          for (int j = 0; j < (causal ? i + 1 : a.s); ++j) {
            long double dot = 0;
            for (int x = 0; x < d; ++x)
              dot += static_cast<long double>(q[base + size_t(i) * d + x]) *
                     k[base + size_t(j) * d + x];
            const long double e = std::exp(dot * scale);
            z += e;
            for (int x = 0; x < d; ++x) num[x] += e * v[base + size_t(j) * d + x];
          }
          CHECK(lse[bh * a.s + i] == Approx(static_cast<double>(std::log(z))).epsilon(1e-12));
          for (int x = 0; x < d; ++x) {
            CHECK(o[base + size_t(i) * d + x] ==
                  Approx(static_cast<double>(num[x] / z)).margin(1e-12));
          }
        }
        if (causal) {  // Row 0 sees key 0 only: O is V's row 0, LSE its logit.
          for (int x = 0; x < d; ++x) CHECK(o[base + x] == Approx(v[base + x]).margin(1e-15));
        }
      }
    }
  }
}

TEST_CASE("e4m3 decoding: normals, subnormals, the largest value, signed zero and NaN") {
  CHECK(DecodeE4M3(0x38) == 1.0f);    // exponent 7 = bias, mantissa 0.
  CHECK(DecodeE4M3(0x3C) == 1.5f);    // mantissa 4/8.
  CHECK(DecodeE4M3(0x7E) == 448.0f);  // S.1111.110: the largest finite value.
  CHECK(DecodeE4M3(0xFE) == -448.0f);
  CHECK(DecodeE4M3(0x08) == 0.015625f);     // 2^-6, the smallest normal.
  CHECK(DecodeE4M3(0x01) == 0.001953125f);  // 2^-9, the smallest subnormal.
  CHECK(DecodeE4M3(0x07) == 7.0f / 512);
  CHECK(DecodeE4M3(0x00) == 0.0f);
  CHECK(std::signbit(DecodeE4M3(0x80)));
  CHECK(std::isnan(DecodeE4M3(0x7F)));
  CHECK(std::isnan(DecodeE4M3(0xFF)));
  // Every other code is finite and the positive codes are increasing.
  for (int code = 1; code < 0x7F; ++code) {
    CHECK(DecodeE4M3(static_cast<uint8_t>(code)) > DecodeE4M3(static_cast<uint8_t>(code - 1)));
    CHECK(DecodeE4M3(static_cast<uint8_t>(code | 0x80)) == -DecodeE4M3(static_cast<uint8_t>(code)));
  }
}

// Values on the e4m3 grid, as the generator will produce them (|x| <= 448).
std::vector<float> E4M3Values(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> code(0, 0xFD);  // 0x7F and 0xFF are NaN: skipped.
  std::vector<float> out(count);
  for (float& x : out) {
    int c = code(rng);
    if (c >= 0x7F) ++c;
    x = DecodeE4M3(static_cast<uint8_t>(c));
  }
  return out;
}

TEST_CASE("block-scaled GEMM: unit scales give the plain product; each scale weights its block") {
  // K = 320: two full K blocks and a partial one; N = 200: a full N block and a partial one.
  const BlockScaledGemmShape s{3, 200, 320};
  REQUIRE(s.KBlocks() == 3);
  REQUIRE(s.NBlocks() == 2);
  const std::vector<float> a = E4M3Values(size_t(s.m) * s.k, 7),
                           b = E4M3Values(size_t(s.n) * s.k, 8);
  // The per-block dot products, the definition written out with no scale.
  auto block_dot = [&](int m, int n, int kb) {
    double sum = 0;
    for (int k = kb * 128; k < std::min(s.k, kb * 128 + 128); ++k) {
      sum += double(a[size_t(m) * s.k + k]) * b[size_t(n) * s.k + k];
    }
    return sum;
  };
  std::vector<double> c;
  BlockScaledGemm(s, a, std::vector<float>(size_t(s.m) * 3, 1.0f), b,
                  std::vector<float>(size_t(2) * 3, 1.0f), c);
  for (int m = 0; m < s.m; ++m) {
    for (int n = 0; n < s.n; n += 13) {
      CHECK(c[size_t(m) * s.n + n] ==
            Approx(block_dot(m, n, 0) + block_dot(m, n, 1) + block_dot(m, n, 2)).epsilon(1e-14));
    }
  }
  // Distinct powers of two per block (exact in every precision): A's scale of (m, kb) and B's of
  // (n / 128, kb) multiply exactly that block's products.
  std::vector<float> a_scale(size_t(s.m) * 3), b_scale(size_t(2) * 3);
  for (int m = 0; m < s.m; ++m) {
    for (int kb = 0; kb < 3; ++kb) a_scale[m * 3 + kb] = std::ldexp(1.0f, -(m * 3 + kb));
  }
  for (int nb = 0; nb < 2; ++nb) {
    for (int kb = 0; kb < 3; ++kb) b_scale[nb * 3 + kb] = std::ldexp(1.0f, 4 * (nb * 3 + kb));
  }
  BlockScaledGemm(s, a, a_scale, b, b_scale, c);
  for (int m = 0; m < s.m; ++m) {
    for (int n : {0, 127, 128, 199}) {
      double expected = 0;
      for (int kb = 0; kb < 3; ++kb) {
        expected += block_dot(m, n, kb) * a_scale[m * 3 + kb] * b_scale[(n / 128) * 3 + kb];
      }
      CHECK(c[size_t(m) * s.n + n] == Approx(expected).epsilon(1e-14));
    }
  }
  // The per-tensor shortcut (one scale per operand, here the mean of the block scales) is a
  // different computation: the failure mode the fp8 task's decoys model.
  double mean_a = 0, mean_b = 0;
  for (float x : a_scale) mean_a += x / static_cast<double>(a_scale.size());
  for (float x : b_scale) mean_b += x / static_cast<double>(b_scale.size());
  std::vector<double> per_tensor;
  BlockScaledGemm(s, a, std::vector<float>(a_scale.size(), float(mean_a)), b,
                  std::vector<float>(b_scale.size(), float(mean_b)), per_tensor);
  std::vector<float> per_tensor_f(per_tensor.begin(), per_tensor.end());
  CHECK(RelativeNorm(per_tensor_f, c) > 0.5);
}

TEST_CASE("allclose fails an element only past both bounds, and every non-finite one") {
  const std::vector<double> ref = {1.0, 100.0, 0.0, 5.0, 2.0};
  const std::vector<float> got = {1.02f, 100.5f, 0.009f, NAN, INFINITY};
  // 0.02 > atol 0.01 and > rtol·1 = 0.01: fails; 0.5 > atol but < 1: passes; 0.009 < atol.
  CHECK(AllCloseFailures(got, ref, 0.01, 0.01) == 3);
  CHECK(std::isinf(RelativeNorm(got, ref)));
  const std::vector<float> close = {1.0f, 101.0f, 0.0f, 5.0f, 2.0f};
  CHECK(RelativeNorm(close, ref) == Approx(1.0 / std::sqrt(1.0 + 10000.0 + 25.0 + 4.0)));
}

// ---------------------------------------------------------------------------------------------
// The fp8 attention forward (mha_fp8_with_lse_d128).

// The e4m3 code of a value on the grid (an exhaustive search: the test's own encoder).
uint8_t EncodeE4M3(double value) {
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7F) == 0x7F) continue;  // NaN.
    if (static_cast<double>(DecodeE4M3(static_cast<uint8_t>(code))) == value) {
      return static_cast<uint8_t>(code);
    }
  }
  return 0x7F;
}

// e4m3 codes of 64·N(0, 1) rounded and saturated: the task's fp8_normal inputs, drawn here with
// the standard library (the generator's own stream is tested in host_generate_test.cc).
std::vector<uint8_t> Fp8Normal(size_t count, uint32_t seed) {
  std::vector<uint8_t> out(count);
  const std::vector<float> x = Normal(count, seed);
  for (size_t i = 0; i < count; ++i) out[i] = EncodeE4M3(RoundToE4M3(64.0 * x[i]));
  return out;
}

TEST_CASE("e4m3 rounding: every code is a fixed point, midpoints tie to even, saturation at 448") {
  for (int code = 0; code < 0x7F; ++code) {
    const double value = DecodeE4M3(static_cast<uint8_t>(code));
    INFO("code " << code);
    CHECK(RoundToE4M3(value) == value);
    CHECK(RoundToE4M3(-value) == -value);
    if (code + 1 < 0x7F) {
      const double next = DecodeE4M3(static_cast<uint8_t>(code + 1));
      const double midpoint = (value + next) / 2;
      CHECK(RoundToE4M3(midpoint) == ((code & 1) == 0 ? value : next));
      CHECK(RoundToE4M3(std::nextafter(midpoint, 0.0)) == value);
      CHECK(RoundToE4M3(std::nextafter(midpoint, 1e9)) == next);
    }
  }
  CHECK(RoundToE4M3(1e6) == 448.0);
  CHECK(RoundToE4M3(-465.0) == -448.0);
  CHECK(RoundToE4M3(std::ldexp(1.0, -11)) == 0.0);  // Below half the smallest subnormal 2^-9.
  CHECK(EncodeE4M3(448.0) == 0x7E);
  CHECK(EncodeE4M3(-1.0) == 0xB8);
}

TEST_CASE(
    "fp8 attention forward: equal keys give descale_v times the mean value, LSE from both "
    "descales") {
  AttentionShape a{1, 2, 32, 128, false};
  const std::vector<uint8_t> q = Fp8Normal(a.Elements(), 11), v = Fp8Normal(a.Elements(), 12);
  const std::vector<uint8_t> key = Fp8Normal(128, 13);
  std::vector<uint8_t> k(a.Elements());
  for (size_t row = 0; row < a.Rows(); ++row) {
    for (int x = 0; x < a.d; ++x) k[row * a.d + x] = key[x];
  }
  const double scale = 1.0 / std::sqrt(128.0);
  const float descale_q = 1.125f / 64, descale_k = 1.875f / 64, descale_v = 1.5f / 64;
  std::vector<double> o, lse;
  AttentionFp8Forward(a, scale, q, k, v, descale_q, descale_k, descale_v, o, lse);
  for (size_t bh = 0; bh < 2; ++bh) {
    for (int i = 0; i < a.s; ++i) {
      double dot = 0;
      for (int x = 0; x < a.d; ++x) {
        dot += double(DecodeE4M3(q[(bh * a.s + i) * a.d + x])) * DecodeE4M3(key[x]);
      }
      CHECK(lse[bh * a.s + i] ==
            Approx(scale * descale_q * descale_k * dot + std::log(a.s)).epsilon(1e-12));
      for (int x = 0; x < a.d; x += 13) {
        double mean = 0;
        for (int j = 0; j < a.s; ++j) mean += DecodeE4M3(v[(bh * a.s + j) * a.d + x]);
        CHECK(o[(bh * a.s + i) * a.d + x] == Approx(descale_v * mean / a.s).margin(1e-12));
      }
    }
  }
}

TEST_CASE(
    "fp8 attention forward: only the product descale_q · descale_k matters, O is linear in "
    "descale_v") {
  AttentionShape a{1, 1, 64, 128, false};
  const std::vector<uint8_t> q = Fp8Normal(a.Elements(), 21), k = Fp8Normal(a.Elements(), 22),
                             v = Fp8Normal(a.Elements(), 23);
  const double scale = 1.0 / std::sqrt(128.0);
  std::vector<double> o1, lse1, o2, lse2;
  AttentionFp8Forward(a, scale, q, k, v, 1.0f / 64, 1.75f / 64, 1.25f / 64, o1, lse1);
  AttentionFp8Forward(a, scale, q, k, v, 1.75f / 64, 1.0f / 64, 2.5f / 64, o2, lse2);
  for (size_t i = 0; i < lse1.size(); ++i) CHECK(lse2[i] == Approx(lse1[i]).epsilon(1e-13));
  for (size_t i = 0; i < o1.size(); ++i) CHECK(o2[i] == Approx(2 * o1[i]).margin(1e-15));
  // And the descales do matter: the logits of N(0,1)-sized operands (rows of |q|·|k| ~ 128) are
  // O(1); without them (descales 1) they would be 4096x larger.
  double lse_spread = 0;
  for (double x : lse1) lse_spread = std::max(lse_spread, std::abs(x - std::log(a.s)));
  CHECK(lse_spread > 0.2);
  CHECK(lse_spread < 20);
}

// The tolerance estimate of the fp8 attention task (docs/task-authoring.md, "The fp8 attention
// forward task"): a library that quantizes P to e4m3 (scale 256), without and with an e4m3 O,
// against the definition, on the task's small workload shape with the largest and smallest
// descales. Printed; the GPU measures cuDNN's real figures (gpu_runtime_test.cc).
TEST_CASE("fp8 attention forward: the error of P (and O) in e4m3 against the definition") {
  const AttentionShape a{1, 2, 384, 128, false};
  const std::vector<uint8_t> q = Fp8Normal(a.Elements(), 31), k = Fp8Normal(a.Elements(), 32),
                             v = Fp8Normal(a.Elements(), 33);
  const double scale = 1.0 / std::sqrt(128.0);
  for (float descale : {0.75f / 64, 1.375f / 64}) {  // tensor_descale's extremes.
    std::vector<double> o, lse;
    AttentionFp8Forward(a, scale, q, k, v, descale, descale, descale, o, lse);
    for (bool o_e4m3 : {false, true}) {
      std::vector<double> qo, qlse;
      AttentionFp8ForwardQuantized(a, scale, q, k, v, descale, descale, descale, 256.0, o_e4m3, qo,
                                   qlse);
      std::vector<float> got(qo.size());
      double max_abs = 0, max_ref = 0;
      for (size_t i = 0; i < qo.size(); ++i) {
        // bf16 O when not e4m3: the task's output type, rounded as a kernel stores it.
        got[i] = static_cast<float>(qo[i]);
        max_abs = std::max(max_abs, std::abs(qo[i] - o[i]));
        max_ref = std::max(max_ref, std::abs(o[i]));
      }
      const double norm = RelativeNorm(got, o);
      const double matched =
          1.0 - static_cast<double>(AllCloseFailures(got, o, 1e-2, 1e-2)) / got.size();
      std::vector<float> lse_got(qlse.begin(), qlse.end());
      const double lse_norm = RelativeNorm(lse_got, lse);
      WARN("descale " << descale * 64 << "/64, P e4m3 x256" << (o_e4m3 ? ", O e4m3" : "")
                      << ": O relative norm " << norm << ", max abs error " << max_abs
                      << " (max |O| " << max_ref << "), matched at 1e-2/1e-2 " << matched
                      << "; LSE relative norm " << lse_norm);
      CHECK(norm > 1e-4);  // Quantizing P is visible...
      CHECK(norm < 0.05);  // ...but an error of a few percent at most.
      // LSE comes from the logits, before P is quantized (float's rounding of it only).
      CHECK(lse_norm < 1e-7);
    }
  }
}

}  // namespace
}  // namespace ptxbench::testing
