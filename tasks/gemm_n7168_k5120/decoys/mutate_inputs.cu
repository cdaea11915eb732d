/* PTXBENCH_PLAN
{"launches":[{"kernel":"gemm_fma_kernel","grid":["ceil_div(N,64)","ceil_div(M,64)"],
  "block":["256"],"cluster":[],"dynamic_shared_bytes":"0",
  "args":[{"tensor":"A"},{"tensor":"B"},{"tensor":"C"},
          {"scalar":"M"},{"scalar":"N"},{"scalar":"K"}]}],
 "scratch":[],
 "tensor_maps":[]}
*/
// DECOY for gemm_n7168_k5120 (sm_90a), written for PTXBench. Expected verdict: input_mutated.
//
// What it tries: computes C correctly, then the last block to finish zeroes A, so that a harness
// computing its reference after the candidate (from the same buffers) would compare against zeros,
// and a later timed launch would run on degenerate data.
//
// Why that verdict: the harness checks the inputs against a snapshot taken before the launch; any
// change is input_mutated, whatever the output.

namespace {

__device__ __forceinline__ float Bf16ToFloat(unsigned short bits) {
  return __uint_as_float(static_cast<unsigned>(bits) << 16);
}

__device__ __forceinline__ unsigned short FloatToBf16(float value) {
  unsigned short bits;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(bits) : "f"(value));
  return bits;
}

__device__ unsigned g_blocks_done;

}  // namespace

// Plain shared-memory-tiled FMA GEMM (no tensor cores): a 64x64 tile of C per 256-thread block,
// K in steps of 16, each thread 4x4 outputs strided by 16 so shared-memory reads do not conflict.
extern "C" __global__ void __launch_bounds__(256)
    gemm_fma_kernel(const unsigned short* A, const unsigned short* B, unsigned short* C, int M,
                    int N, int K) {
  __shared__ float as[16][65];
  __shared__ float bs[16][65];
  const int tx = static_cast<int>(threadIdx.x) % 16;
  const int ty = static_cast<int>(threadIdx.x) / 16;
  const int m0 = static_cast<int>(blockIdx.y) * 64;
  const int n0 = static_cast<int>(blockIdx.x) * 64;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < K; k0 += 16) {
    for (int r = 0; r < 4; ++r) {
      const int idx = static_cast<int>(threadIdx.x) + 256 * r;
      const int row = idx / 16;
      const int gk = k0 + idx % 16;
      as[idx % 16][row] = (m0 + row < M && gk < K)
                              ? Bf16ToFloat(A[static_cast<long long>(m0 + row) * K + gk])
                              : 0.f;
      bs[idx % 16][row] = (n0 + row < N && gk < K)
                              ? Bf16ToFloat(B[static_cast<long long>(n0 + row) * K + gk])
                              : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < 16; ++kk) {
      float a[4];
      float b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        a[i] = as[kk][ty + 16 * i];
        b[i] = bs[kk][tx + 16 * i];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int row = m0 + ty + 16 * i;
      const int col = n0 + tx + 16 * j;
      if (row < M && col < N) {
        C[static_cast<long long>(row) * N + col] = FloatToBf16(acc[i][j]);
      }
    }
  }
  // The last block to finish zeroes A (after every block has read it).
  __threadfence();
  __syncthreads();
  __shared__ bool last;
  if (threadIdx.x == 0) {
    const unsigned total = gridDim.x * gridDim.y;
    last = atomicAdd(&g_blocks_done, 1u) + 1 == total;
    if (last) g_blocks_done = 0;
  }
  __syncthreads();
  if (last) {
    unsigned short* a = const_cast<unsigned short*>(A);
    const long long count = static_cast<long long>(M) * K;
    for (long long i = threadIdx.x; i < count; i += 256) a[i] = 0;
  }
}
