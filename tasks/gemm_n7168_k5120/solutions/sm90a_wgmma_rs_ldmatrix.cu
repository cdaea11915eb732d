/* PTXBENCH_PLAN
{"launches":[{"kernel":"gemm_rs_kernel",
  "grid":["ceil_div(N,128)","ceil_div(M,64)"],"block":["128"],"cluster":[],
  "dynamic_shared_bytes":"50192",
  "args":[{"tensor_map":"tmA"},{"tensor_map":"tmB"},{"tensor":"C"},
          {"scalar":"M"},{"scalar":"N"},{"scalar":"K"}]}],
 "scratch":[],
 "tensor_maps":[
  {"name":"tmA","tensor":"A","box":["64","64"],"element_strides":[],"swizzle":"128B",
   "interleave":"none","l2_promotion":"128B","oob_fill":"zero","dims":[]},
  {"name":"tmB","tensor":"B","box":["64","128"],"element_strides":[],"swizzle":"128B",
   "interleave":"none","l2_promotion":"128B","oob_fill":"zero","dims":[]}]}
*/
// A second, deliberately simple reference solution for gemm_n7168_k5120 on sm_90a, written for
// PTXBench: one warpgroup per 64x128 tile of C, a 2-stage TMA double buffer, and the REGISTER
// form of wgmma (A fragments loaded from the swizzled tile with ldmatrix, B from shared memory).
// It is correct and executes both target families but is far from the library's speed; it is
// the "passes, slow" reference and the user of the RS-form and ldmatrix template functions.
//
// C[M][N] = A[M][K] * B[N][K]^T, bf16 in/out, fp32 accumulation.
// Assumptions: K % 8 == 0 (TMA global stride), N % 2 == 0 (bf16x2 stores), K >= 1. Loads past
// the edges are zero-filled by TMA; stores are bounds-checked.
#include "ptxbench_hopper.cuh"

namespace {

namespace sm90 = ptxbench::sm90;
using u32 = sm90::u32;
using u64 = sm90::u64;

constexpr int kBlockM = 64;
constexpr int kBlockN = 128;
constexpr int kBlockK = 64;
constexpr u32 kATileBytes = kBlockM * kBlockK * 2;  // 8 KiB
constexpr u32 kBTileBytes = kBlockN * kBlockK * 2;  // 16 KiB
constexpr u32 kStageBytes = kATileBytes + kBTileBytes;
// 1024 alignment slack + 2 stages + 2 full barriers.
constexpr u32 kSmemBytes = 1024 + 2 * kStageBytes + 2 * 8;
static_assert(kSmemBytes == 50192, "keep the launch plan's dynamic_shared_bytes in sync");

}  // namespace

extern "C" __global__ void __launch_bounds__(128, 1)
    gemm_rs_kernel(const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB,
                   unsigned short* C, int M, int N, int K) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024u - (sm90::smem_u32(smem_raw) & 1023u)) & 1023u);
  u64* full = reinterpret_cast<u64*>(smem + 2 * kStageBytes);
  const int m0 = static_cast<int>(blockIdx.y) * kBlockM;
  const int n0 = static_cast<int>(blockIdx.x) * kBlockN;
  const int num_k_steps = (K + kBlockK - 1) / kBlockK;
  const bool issuer = threadIdx.x == 0;

  auto a_tile = [&](int s) { return smem + s * kStageBytes; };
  auto b_tile = [&](int s) { return smem + s * kStageBytes + kATileBytes; };
  auto issue = [&](int k) {
    const int s = k & 1;
    sm90::mbarrier_arrive_expect_tx(&full[s], kStageBytes);
    sm90::tma_load_2d(a_tile(s), &tmA, &full[s], k * kBlockK, m0);
    sm90::tma_load_2d(b_tile(s), &tmB, &full[s], k * kBlockK, n0);
  };

  if (issuer) {
    sm90::mbarrier_init(&full[0], 1);
    sm90::mbarrier_init(&full[1], 1);
    sm90::fence_mbarrier_init();
    sm90::prefetch_tensormap(&tmA);
    sm90::prefetch_tensormap(&tmB);
  }
  __syncthreads();
  if (issuer) {
    issue(0);
    if (num_k_steps > 1) issue(1);
  }

  const int warp = sm90::warp_index();
  const int lane = sm90::lane_index();
  // ldmatrix x4 lane roles for a 16x16 A block: lanes 8i..8i+7 give the rows of matrix i, and
  // the matrices are (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15),
  // (rows 8-15, k 8-15): exactly the wgmma A-fragment registers a[0..3].
  const u32 a_row = warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
  const u32 a_k_half = (lane >> 4) * 8;

  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.0f;

  for (int k = 0; k < num_k_steps; ++k) {
    const int s = k & 1;
    sm90::mbarrier_wait_parity(&full[s], (k >> 1) & 1);
    u32 a_frag[kBlockK / 16][4];
#pragma unroll
    for (int kk = 0; kk < kBlockK / 16; ++kk) {
      sm90::ldmatrix_x4(a_frag[kk],
                        a_tile(s) + sm90::swizzle_128b_offset(a_row, (kk * 16 + a_k_half) * 2));
    }
    const u32 b_base = sm90::smem_u32(b_tile(s));
    // The A registers were just written by ldmatrix: fence before wgmma reads them.
    sm90::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBlockK / 16; ++kk) {
      sm90::wgmma_m64n128k16_rs_bf16(acc, a_frag[kk], sm90::make_smem_desc_sw128(b_base + kk * 32),
                                     1);
    }
    sm90::wgmma_commit_group();
    sm90::wgmma_wait_group<0>();
    // Every warp has finished reading slot s (ldmatrix and wgmma) before it is refilled.
    __syncthreads();
    if (issuer && k + 2 < num_k_steps) issue(k + 2);
  }
  sm90::wgmma_fence_operand(acc);

  // Direct bf16x2 stores from the accumulator layout: column block j holds columns
  // 8j + 2(lane%4) + {0,1} of rows lane/4 and lane/4 + 8 of this warp's 16-row slab.
  const int row0 = m0 + warp * 16 + lane / 4;
#pragma unroll
  for (int j = 0; j < kBlockN / 8; ++j) {
    const int col = n0 + 8 * j + 2 * (lane % 4);
    if (col >= N) continue;
    if (row0 < M) {
      *reinterpret_cast<u32*>(C + static_cast<long long>(row0) * N + col) =
          sm90::pack_bf16x2(acc[4 * j + 0], acc[4 * j + 1]);
    }
    if (row0 + 8 < M) {
      *reinterpret_cast<u32*>(C + static_cast<long long>(row0 + 8) * N + col) =
          sm90::pack_bf16x2(acc[4 * j + 2], acc[4 * j + 3]);
    }
  }
}
