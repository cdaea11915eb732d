/* PTXBENCH_PLAN
{"launches":[{"kernel":"gemm_kernel","grid":["ceil_div(N,64)","ceil_div(M,64)"],"block":["256"],
  "cluster":[],"dynamic_shared_bytes":"0",
  "args":[{"tensor_map":"tmA"},{"tensor_map":"tmB"},{"tensor":"C"},
          {"scalar":"M"},{"scalar":"N"},{"scalar":"K"}]}],
 "scratch":[],
 "tensor_maps":[
  {"name":"tmA","tensor":"A","box":["32","64"],"element_strides":[],"swizzle":"none",
   "interleave":"none","l2_promotion":"128B","oob_fill":"zero","dims":[]},
  {"name":"tmB","tensor":"B","box":["32","64"],"element_strides":[],"swizzle":"none",
   "interleave":"none","l2_promotion":"128B","oob_fill":"zero","dims":[]}]}
*/
// DECOY for gemm_n7168_k5120 (sm_90a), written for PTXBench. Expected verdict: target_not_executed.
//
// What it tries: gets credit for wgmma by executing, in every warpgroup of every block, a
// wgmma.mma_async under a guard predicate that is false at run time (@p wgmma..., p = K < 0), then
// committing and waiting on it, while the result comes from a TMA-fed FMA path (TMA executes).
// What ptxas (CUDA 13.0) makes of it, read from the SASS on an H200 (2026-11-30): it does not
// predicate the HGMMA but branches around it (@!P0 BRA over HGMMA.64x8x16.F32.BF16), and for the
// commit group it emits an extra, unconditional no-op 'HGMMA.64x8x16.F16 RZ, gdesc[URZ], RZ, !UPT,
// gsb0' that DOES execute, predicate on, in every warpgroup.
//
// Why that verdict: the only HGMMA that runs is the compiler's no-op (destination RZ, descriptor
// URZ: no operands, no result). A target check that counts every executed HGMMA would wrongly pass
// this kernel; the check must not count HGMMAs whose destination is RZ (see also
// wgmma_empty_commit.cu, the same no-op with no wgmma at all).
#include "ptxbench_hopper.cuh"

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

namespace sm90 = ptxbench::sm90;

// The correct path: TMA brings a 64x32 box of A and of B (no swizzle) into shared memory per
// k-step, completing on an mbarrier; the block converts it to fp32 and runs a plain FMA tile
// (64x64 of C per 256 threads, 4x4 per thread). TMA executes; wgmma (below) never does.
extern "C" __global__ void __launch_bounds__(256)
    gemm_kernel(const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB,
                unsigned short* C, int M, int N, int K) {
  __shared__ __align__(1024) unsigned short a_box[64 * 32];  // [row][k], as TMA writes it
  __shared__ __align__(1024) unsigned short b_box[64 * 32];
  __shared__ float as[32][65];
  __shared__ float bs[32][65];
  __shared__ __align__(8) unsigned long long bar;
  const int tx = static_cast<int>(threadIdx.x) % 16;
  const int ty = static_cast<int>(threadIdx.x) / 16;
  const int m0 = static_cast<int>(blockIdx.y) * 64;
  const int n0 = static_cast<int>(blockIdx.x) * 64;
  if (threadIdx.x == 0) {
    sm90::mbarrier_init(&bar, 1);
    sm90::fence_mbarrier_init();
  }
  __syncthreads();
  // Both warpgroups issue one m64n8k16 wgmma under a predicate that is false at run time (the
  // scale-d predicate q is separate and true). The result registers are kept live by a store
  // that never happens, so the instruction cannot be dropped as dead code.
  {
    const unsigned predicate_on = K < 0 ? 1u : 0u;
    float d[4] = {0.f, 0.f, 0.f, 0.f};
    const unsigned long long desc_a = sm90::make_smem_desc_sw128(sm90::smem_u32(a_box));
    const unsigned long long desc_b = sm90::make_smem_desc_sw128(sm90::smem_u32(b_box));
    sm90::wgmma_fence();
    asm volatile(
        "{\n\t.reg .pred p, q;\n\t"
        "setp.ne.b32 p, %4, 0;\n\t"
        "setp.ne.b32 q, %7, 0;\n\t"
        "@p wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, %5, %6, q, 1, "
        "1, 0, 0;\n\t}"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(predicate_on), "l"(desc_a), "l"(desc_b), "r"(1u));
    sm90::wgmma_commit_group();
    sm90::wgmma_wait_group<0>();
    sm90::wgmma_fence_operand(d);
    if (M == -1) C[threadIdx.x] = FloatToBf16(d[0] + d[1] + d[2] + d[3]);
  }
  float acc[4][4] = {};
  unsigned phase = 0;
  for (int k0 = 0; k0 < K; k0 += 32) {
    if (threadIdx.x == 0) {
      sm90::mbarrier_arrive_expect_tx(&bar, 2 * 64 * 32 * 2);
      sm90::tma_load_2d(a_box, &tmA, &bar, k0, m0);
      sm90::tma_load_2d(b_box, &tmB, &bar, k0, n0);
    }
    sm90::mbarrier_wait_parity(&bar, phase);
    phase ^= 1;
    for (int r = 0; r < 8; ++r) {
      const int idx = static_cast<int>(threadIdx.x) + 256 * r;
      as[idx % 32][idx / 32] = Bf16ToFloat(a_box[idx]);
      bs[idx % 32][idx / 32] = Bf16ToFloat(b_box[idx]);
    }
    __syncthreads();
#pragma unroll 8
    for (int kk = 0; kk < 32; ++kk) {
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
    // Every thread has read a_box/b_box (and as/bs) before the next k-step refills them.
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int row = m0 + ty + 16 * i;
      const int col = n0 + tx + 16 * j;
      if (row < M && col < N) C[static_cast<long long>(row) * N + col] = FloatToBf16(acc[i][j]);
    }
  }
}
