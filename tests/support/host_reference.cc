#include "tests/support/host_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ptxbench::testing {

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
      double max = -std::numeric_limits<double>::infinity();
      for (size_t j = 0; j < keys; ++j) {
        double dot = 0;
        for (size_t x = 0; x < d; ++x) {
          dot += static_cast<double>(q[base + i * d + x]) * k[base + j * d + x];
        }
        logits[j] = dot * scale;
        max = std::max(max, logits[j]);
      }
      double sum = 0;
      for (size_t j = 0; j < keys; ++j) sum += std::exp(logits[j] - max);
      const double row_lse = max + std::log(sum);
      lse[bh * a.s + i] = row_lse;
      for (size_t j = 0; j < keys; ++j) {
        const double p = std::exp(logits[j] - row_lse);
        for (size_t x = 0; x < d; ++x) o[base + i * d + x] += p * v[base + j * d + x];
      }
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
