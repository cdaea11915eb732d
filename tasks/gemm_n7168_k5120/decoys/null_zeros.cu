/* PTXBENCH_PLAN
{"launches":[{"kernel":"null_kernel","grid":["ceil_div(N,256)","M"],
  "block":["256"],"cluster":[],"dynamic_shared_bytes":"0",
  "args":[{"tensor":"A"},{"tensor":"B"},{"tensor":"C"},
          {"scalar":"M"},{"scalar":"N"},{"scalar":"K"}]}],
 "scratch":[],
 "tensor_maps":[]}
*/
// DECOY for gemm_n7168_k5120 (sm_90a), written for PTXBench. Expected verdict: wrong_result.
//
// What it tries: C = 0 everywhere (what an empty kernel would leave, were C not poisoned).
// No matrix product at all.
//
// Why that verdict: C[m][n] is a sum of K = 5120 products of N(0, 1) values (standard
// deviation sqrt(K) = 72 on the timed workload, 16 on small_square); all-close with rtol 1e-2
// allows about 0.01 * |C| + 0.01 there, so nearly every element fails - the null kernels of the
// issue's tolerance audit (a sound checker and today's rule agree).

namespace {

__device__ __forceinline__ unsigned short FloatToBf16(float value) {
  unsigned short bits;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(bits) : "f"(value));
  return bits;
}

}  // namespace

// One block per 256 columns of one row of C.
extern "C" __global__ void __launch_bounds__(256)
    null_kernel(const unsigned short* A, const unsigned short* B, unsigned short* C, int M, int N,
                int K) {
  (void)B;
  (void)M;
  const long long row = blockIdx.y;
  const int n = static_cast<int>(blockIdx.x) * 256 + static_cast<int>(threadIdx.x);
  (void)A;
  const float value = 0.0f;
  if (n < N) C[row * N + n] = FloatToBf16(value);
}
