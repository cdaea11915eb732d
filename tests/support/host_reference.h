// Double-precision host references of the task definitions, for the GPU tests that measure a
// library baseline's own error (the evidence behind each task's tolerance) and for CPU tests of
// the definitions themselves. Inputs are the exact values the GPU saw (bf16 / e4m3 decoded to
// float); every product and sum is formed in double.
#ifndef PTXBENCH_TESTS_SUPPORT_HOST_REFERENCE_H_
#define PTXBENCH_TESTS_SUPPORT_HOST_REFERENCE_H_

#include <cstddef>
#include <cstdint>
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

// The value of an fp8 e4m3 (OCP "E4M3FN") code: 1 sign, 4 exponent (bias 7), 3 mantissa bits;
// exponent 0 is subnormal (m · 2⁻⁹), no infinities, S.1111.111 the only NaN; largest 448.
float DecodeE4M3(uint8_t code);

// The fp8 attention forward (mha_fp8_with_lse_d128): Q, K, V as e4m3 codes [B, H, S, D] and the
// per-tensor descales. S_ij = scale · descale_q · descale_k · Σ_d Q[i][d]·K[j][d], O_i =
// descale_v · Σ_j softmax_j(S)_ij V[j], LSE_i = ln Σ_j exp(S_ij): the task's definition, P never
// quantized (the tolerance is set from the library's error against exactly this). The descales
// are applied to the decoded operands (an e4m3 value times a (1 + m/8)·2^e descale is exact in
// float), then AttentionForward runs in double.
void AttentionFp8Forward(const AttentionShape& a, double scale, const std::vector<uint8_t>& q,
                         const std::vector<uint8_t>& k, const std::vector<uint8_t>& v,
                         float descale_q, float descale_k, float descale_v, std::vector<double>& o,
                         std::vector<double>& lse);

// A model of what an fp8 attention library computes on top of the definition: P rounded to
// e4m3 after scaling by `p_scale` (and dequantized), and O rounded to e4m3 in units of V (O /
// descale_v) when `o_e4m3`, else kept in double. Everything else in double. For the CPU tests'
// estimate of the tolerance the library needs (docs/task-authoring.md, "The fp8 attention
// forward task"); the GPU measures the real figure.
void AttentionFp8ForwardQuantized(const AttentionShape& a, double scale,
                                  const std::vector<uint8_t>& q, const std::vector<uint8_t>& k,
                                  const std::vector<uint8_t>& v, float descale_q, float descale_k,
                                  float descale_v, double p_scale, bool o_e4m3,
                                  std::vector<double>& o, std::vector<double>& lse);

// The e4m3 value nearest to `x` (round to nearest, ties to even), saturated at ±448.
double RoundToE4M3(double x);

// Block-scaled fp8 GEMM shape (DeepSeek-V3 / DeepGEMM style): A [M, K] and B [N, K] row-major
// (K contiguous, e4m3 decoded to float), A's scales [M, ceil(K/128)] (one per 1 x 128 block of a
// row), B's scales [ceil(N/128), ceil(K/128)] (one per 128 x 128 block), C [M, N].
struct BlockScaledGemmShape {
  int m = 128, n = 128, k = 128;
  static constexpr int kBlock = 128;
  int KBlocks() const { return (k + kBlock - 1) / kBlock; }
  int NBlocks() const { return (n + kBlock - 1) / kBlock; }
};

// C[m][n] = Σ_kb a_scale[m][kb] · b_scale[n / 128][kb] · Σ_{k in block kb} A[m][k] · B[n][k]:
// every product and sum in double, the scales applied per 128-wide K block as the dequantised
// operands define it (A[m][k] · a_scale[m][k / 128] times B[n][k] · b_scale[n / 128][k / 128]).
void BlockScaledGemm(const BlockScaledGemmShape& s, const std::vector<float>& a,
                     const std::vector<float>& a_scale, const std::vector<float>& b,
                     const std::vector<float>& b_scale, std::vector<double>& c);

// ‖got − ref‖₂ / ‖ref‖₂ (the relative_norm rule); +inf when `got` has a non-finite element.
double RelativeNorm(const std::vector<float>& got, const std::vector<double>& ref);

// Elements failing allclose(atol, rtol) as the tasks state it: |got − ref| > atol AND
// |got − ref| > rtol·|ref|, or got not finite.
size_t AllCloseFailures(const std::vector<float>& got, const std::vector<double>& ref, double atol,
                        double rtol);

}  // namespace ptxbench::testing

#endif  // PTXBENCH_TESTS_SUPPORT_HOST_REFERENCE_H_
