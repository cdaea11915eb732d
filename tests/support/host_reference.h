// Double-precision host references of the task definitions, for the GPU tests that measure a
// library baseline's own error (the evidence behind each task's tolerance) and for CPU tests of
// the definitions themselves. Inputs are the exact values the GPU saw (bf16 / e4m3 decoded to
// float); every product and sum is formed in double.
#ifndef PTXBENCH_TESTS_SUPPORT_HOST_REFERENCE_H_
#define PTXBENCH_TESTS_SUPPORT_HOST_REFERENCE_H_

#include <cstddef>
#include <vector>

namespace ptxbench::testing {

// Attention forward shape: Q, K, V, O [B, H, S, D] row-major, LSE [B, H, S].
struct AttentionShape {
  int b = 1, h = 1, s = 128, d = 128;
  bool causal = false;
  size_t Elements() const { return static_cast<size_t>(b) * h * s * d; }
  size_t Rows() const { return static_cast<size_t>(b) * h * s; }
};

// O = softmax(scale · Q·Kᵀ [causal mask]) · V and LSE = the natural-log log-sum-exp of each
// row of scaled logits, as the mha_with_lse_* tasks define them.
void AttentionForward(const AttentionShape& a, double scale, const std::vector<float>& q,
                      const std::vector<float>& k, const std::vector<float>& v,
                      std::vector<double>& o, std::vector<double>& lse);

// ‖got − ref‖₂ / ‖ref‖₂ (the relative_norm rule); +inf when `got` has a non-finite element.
double RelativeNorm(const std::vector<float>& got, const std::vector<double>& ref);

// Elements failing allclose(atol, rtol) as the tasks state it: |got − ref| > atol AND
// |got − ref| > rtol·|ref|, or got not finite.
size_t AllCloseFailures(const std::vector<float>& got, const std::vector<double>& ref, double atol,
                        double rtol);

}  // namespace ptxbench::testing

#endif  // PTXBENCH_TESTS_SUPPORT_HOST_REFERENCE_H_
