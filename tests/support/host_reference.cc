#include "tests/support/host_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ptxbench::testing {
namespace {

// The scaled logits of one query row against the first `keys` keys of its head (`k_head`: key 0
// of the head, rows of `d`), into `logits`; returns the row's natural-log log-sum-exp in the
// stable form (max + ln sum exp(l - max)).
double RowLogits(const float* q_row, const float* k_head, size_t keys, size_t d, double scale,
                 std::vector<double>& logits) {
  double max = -std::numeric_limits<double>::infinity();
  for (size_t j = 0; j < keys; ++j) {
    double dot = 0;
    for (size_t x = 0; x < d; ++x) dot += static_cast<double>(q_row[x]) * k_head[j * d + x];
    logits[j] = dot * scale;
    max = std::max(max, logits[j]);
  }
  double sum = 0;
  for (size_t j = 0; j < keys; ++j) sum += std::exp(logits[j] - max);
  return max + std::log(sum);
}

}  // namespace

void AttentionForward(const AttentionShape& a, double scale, const std::vector<float>& q,
                      const std::vector<float>& k, const std::vector<float>& v,
                      std::vector<double>& o, std::vector<double>& lse) {
  o.assign(a.Elements(), 0);
  lse.assign(a.Rows(), 0);
  std::vector<double> logits(static_cast<size_t>(a.s));
  const size_t d = static_cast<size_t>(a.d);
  for (size_t bh = 0; bh < static_cast<size_t>(a.b) * a.h; ++bh) {
    const size_t base = bh * a.s * d;
    for (size_t i = 0; i < static_cast<size_t>(a.s); ++i) {
      const size_t keys = a.causal ? i + 1 : static_cast<size_t>(a.s);
      const double row_lse = RowLogits(&q[base + i * d], &k[base], keys, d, scale, logits);
      lse[bh * a.s + i] = row_lse;
      for (size_t j = 0; j < keys; ++j) {
        const double p = std::exp(logits[j] - row_lse);
        for (size_t x = 0; x < d; ++x) o[base + i * d + x] += p * v[base + j * d + x];
      }
    }
  }
}

float DecodeE4M3(uint8_t code) {
  const int exponent = (code >> 3) & 0xF, mantissa = code & 7;
  if (exponent == 0xF && mantissa == 7) return std::numeric_limits<float>::quiet_NaN();
  const float magnitude = exponent == 0
                              ? std::ldexp(static_cast<float>(mantissa), -9)
                              : std::ldexp(static_cast<float>(mantissa | 8), exponent - 10);
  return (code & 0x80) != 0 ? -magnitude : magnitude;
}

namespace {

std::vector<float> DecodeScaled(const std::vector<uint8_t>& codes, float descale) {
  std::vector<float> out(codes.size());
  for (size_t i = 0; i < codes.size(); ++i) out[i] = DecodeE4M3(codes[i]) * descale;
  return out;
}

}  // namespace

void AttentionFp8Forward(const AttentionShape& a, double scale, const std::vector<uint8_t>& q,
                         const std::vector<uint8_t>& k, const std::vector<uint8_t>& v,
                         float descale_q, float descale_k, float descale_v, std::vector<double>& o,
                         std::vector<double>& lse) {
  AttentionForward(a, scale, DecodeScaled(q, descale_q), DecodeScaled(k, descale_k),
                   DecodeScaled(v, descale_v), o, lse);
}

double RoundToE4M3(double x) {
  if (std::isnan(x)) return x;
  const double magnitude = std::min(std::abs(x), 448.0);
  // The grid spacing at |x|: 2^(e-3) for normals (e = floor(log2 |x|) >= -6), 2^-9 below.
  int exponent = 0;
  std::frexp(magnitude, &exponent);  // magnitude = f · 2^exponent, f in [0.5, 1).
  const int e = std::max(exponent - 1, -6);
  const double step = std::ldexp(1.0, e - 3);
  const double rounded = std::nearbyint(magnitude / step) * step;  // Ties to even (FE_TONEAREST).
  return std::copysign(std::min(rounded, 448.0), x);
}

void AttentionFp8ForwardQuantized(const AttentionShape& a, double scale,
                                  const std::vector<uint8_t>& q, const std::vector<uint8_t>& k,
                                  const std::vector<uint8_t>& v, float descale_q, float descale_k,
                                  float descale_v, double p_scale, bool o_e4m3,
                                  std::vector<double>& o, std::vector<double>& lse) {
  const std::vector<float> qf = DecodeScaled(q, descale_q), kf = DecodeScaled(k, descale_k),
                           vf = DecodeScaled(v, 1.0f);
  o.assign(a.Elements(), 0);
  lse.assign(a.Rows(), 0);
  std::vector<double> logits(static_cast<size_t>(a.s));
  const size_t d = static_cast<size_t>(a.d);
  for (size_t bh = 0; bh < static_cast<size_t>(a.b) * a.h; ++bh) {
    const size_t base = bh * a.s * d;
    for (size_t i = 0; i < static_cast<size_t>(a.s); ++i) {
      const size_t keys = a.causal ? i + 1 : static_cast<size_t>(a.s);
      const double row_lse = RowLogits(&qf[base + i * d], &kf[base], keys, d, scale, logits);
      lse[bh * a.s + i] = row_lse;
      double* row = &o[base + i * d];
      for (size_t j = 0; j < keys; ++j) {
        const double p = RoundToE4M3(std::exp(logits[j] - row_lse) * p_scale) / p_scale;
        for (size_t x = 0; x < d; ++x) row[x] += p * vf[base + j * d + x];
      }
      for (size_t x = 0; x < d; ++x) {
        row[x] = (o_e4m3 ? RoundToE4M3(row[x]) : row[x]) * static_cast<double>(descale_v);
      }
    }
  }
}

void BlockScaledGemm(const BlockScaledGemmShape& s, const std::vector<float>& a,
                     const std::vector<float>& a_scale, const std::vector<float>& b,
                     const std::vector<float>& b_scale, std::vector<double>& c) {
  const size_t m_count = static_cast<size_t>(s.m), n_count = static_cast<size_t>(s.n),
               k_count = static_cast<size_t>(s.k), k_blocks = static_cast<size_t>(s.KBlocks());
  const size_t block = BlockScaledGemmShape::kBlock;
  c.assign(m_count * n_count, 0);
  for (size_t m = 0; m < m_count; ++m) {
    for (size_t n = 0; n < n_count; ++n) {
      double sum = 0;
      for (size_t kb = 0; kb < k_blocks; ++kb) {
        double partial = 0;
        for (size_t k = kb * block; k < std::min(k_count, (kb + 1) * block); ++k) {
          partial += static_cast<double>(a[m * k_count + k]) * b[n * k_count + k];
        }
        sum += partial * a_scale[m * k_blocks + kb] * b_scale[(n / block) * k_blocks + kb];
      }
      c[m * n_count + n] = sum;
    }
  }
}

double RelativeNorm(const std::vector<float>& got, const std::vector<double>& ref) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) return std::numeric_limits<double>::infinity();
    err += (got[i] - ref[i]) * (got[i] - ref[i]);
    norm += ref[i] * ref[i];
  }
  return std::sqrt(err / norm);
}

size_t AllCloseFailures(const std::vector<float>& got, const std::vector<double>& ref, double atol,
                        double rtol) {
  size_t failures = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double err = std::abs(got[i] - ref[i]);
    if (!std::isfinite(got[i]) || (err > atol && err > rtol * std::abs(ref[i]))) ++failures;
  }
  return failures;
}

}  // namespace ptxbench::testing
