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
// What it tries: C[m][n] = mean over k of A[m][k], the row mean of A broadcast along n
// (a statistic of the input, cheap to compute).
// No matrix product at all.
//
// Why that verdict: C[m][n] is a sum of K = 5120 products of N(0, 1) values (standard
// deviation sqrt(K) = 72 on the timed workload, 16 on small_square); all-close with rtol 1e-2
// allows about 0.01 * |C| + 0.01 there, so nearly every element fails - the null kernels of the
// issue's tolerance audit (a sound checker and today's rule agree).

namespace {

__device__ __forceinline__ float Bf16ToFloat(unsigned short bits) {
  return __uint_as_float(static_cast<unsigned>(bits) << 16);
}

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
  // The block's 256 threads sum row m of A, then each writes one column of C.
  __shared__ float partial[256];
  float sum = 0.0f;
  for (int k = static_cast<int>(threadIdx.x); k < K; k += 256) sum += Bf16ToFloat(A[row * K + k]);
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int stride = 128; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride)
      partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  const float value = partial[0] / static_cast<float>(K);
  if (n < N) C[row * N + n] = FloatToBf16(value);
}
