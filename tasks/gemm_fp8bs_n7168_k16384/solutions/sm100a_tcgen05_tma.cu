/* PTXBENCH_PLAN
{"launches":[{"kernel":"gemm_fp8bs_tcgen05_tma",
  "grid":["ceil_div(N,128)","ceil_div(M,128)"],"block":["192"],"cluster":[],
  "dynamic_shared_bytes":"132096",
  "args":[{"tensor_map":"tmA"},{"tensor_map":"tmB"},{"tensor":"SA"},{"tensor":"SB"},
          {"tensor":"C"},{"scalar":"M"},{"scalar":"N"},{"scalar":"K"}]}],
 "scratch":[],
 "tensor_maps":[
  {"name":"tmA","tensor":"A","box":["128","128"],"element_strides":[],"swizzle":"128B",
   "interleave":"none","l2_promotion":"256B","oob_fill":"zero","dims":[]},
  {"name":"tmB","tensor":"B","box":["128","128"],"element_strides":[],"swizzle":"128B",
   "interleave":"none","l2_promotion":"256B","oob_fill":"zero","dims":[]}]}
*/
//
// Reference solution for gemm_fp8bs_n7168_k16384 on Blackwell (sm_100a), written for PTXBench:
// C[m][n] = Σ_kb SA[kb][m] · SB[n/128][kb] · Σ_{k in block kb} A[m][k] · B[n][k], e4m3 A and B,
// fp32 scales, bf16 C. The bf16 tcgen05 solution (gemm_n7168_k5120) adapted to fp8 block
// scaling.
//
// STATUS: compiles for sm_100a but has NEVER RUN: no Blackwell GPU was available when it was
// written. The task marks sm_100a runtime_unverified; expect "compiled" in compile-only scope.
//
// Design (one 128 x 128 output tile per CTA; 128 columns so that one SB value per K block
// scales the whole tile):
//   - 6 warps. Warp 4: one elected lane issues the TMA loads of A and B (128 e4m3 along K = one
//     128-byte swizzle row per box row) into a 4-stage ring (32 KiB a stage). Warp 5: one
//     elected lane issues tcgen05.mma .kind::f8f6f4 (K = 32, four per 128-wide scale block) and
//     allocates / frees tensor memory. Warps 0-3 promote and store: warp w owns tensor-memory
//     lanes (tile rows) 32w .. 32w+31.
//   - Tensor memory holds two 128-column fp32 partial accumulators. K block kb goes into
//     partial kb % 2, written fresh (accumulate = false on its first MMA): no sum ever spans two
//     scale blocks inside the tensor core, whose fp8 accumulation keeps ~14 bits (DeepSeek-V3
//     report, 3.3.2). While the MMAs fill one partial, warps 0-3 read the other
//     (tcgen05.ld 32x32b.x32), multiply by SA[kb][row] · SB[n0/128][kb] and add into 128 fp32
//     registers per thread (the promotion), then release it.
//   - Barriers: full[s] (TMA -> MMA, bytes), empty[s] (MMA commit -> TMA), tmem_full[b] (MMA
//     commit -> promotion), tmem_empty[b] (4 promotion warps -> MMA).
//   - SA[kb][m] has M contiguous: the 32 lanes of a promotion warp read 32 consecutive floats.
//   - Ragged M and N: TMA zero-fills, the epilogue skips rows >= M and columns >= N.
// Assumptions only a B200 run can confirm (besides those of the bf16 solution): the kind::f8f6f4
// instruction descriptor (E4M3 = format 0 in bits 7..9 / 10..12, F32 D = 1 in bits 4..5) and
// K = 32 per instruction stepping 32 bytes in the swizzled row.
#include "ptxbench_blackwell.cuh"

namespace {

using ptxbench::sm100::u16;
using ptxbench::sm100::u32;
using ptxbench::sm100::u64;
namespace bw = ptxbench::sm100;

enum : int {
  kBlockM = 128,
  kBlockN = 128,
  kBlockK = 128,  // One scale block: 128 e4m3 = 128 bytes, one 128B-swizzle row.
  kMmaK = 32,     // K per tcgen05.mma for 8-bit inputs.
  kStages = 4,
  kPromotionWarps = 4,
  kProducerWarp = 4,
  kMmaWarp = 5,
  kThreads = 32 * 6,
  kColumnsPerLoad = 32,
};
enum : u32 {
  kTileABytes = kBlockM * kBlockK,
  kTileBBytes = kBlockN * kBlockK,
  kStageBytes = kTileABytes + kTileBBytes,
  kPartialColumns = kBlockN,
  kTmemColumns = 2 * kPartialColumns,  // Two partials; a power of two >= 32.
};

static_assert(kStages * kStageBytes + 1024 == 132096, "plan's dynamic_shared_bytes is stale");
static_assert(kTileABytes % 1024 == 0 && kTileBBytes % 1024 == 0,
              "every tile must stay 1024-byte aligned for the 128B swizzle");

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 1)
    gemm_fp8bs_tcgen05_tma(const __grid_constant__ CUtensorMap tmA,
                           const __grid_constant__ CUtensorMap tmB, const float* __restrict__ SA,
                           const float* __restrict__ SB, u16* C, int M, int N, int K) {
  __shared__ alignas(8) u64 full_bar[kStages];
  __shared__ alignas(8) u64 empty_bar[kStages];
  __shared__ alignas(8) u64 tmem_full_bar[2];
  __shared__ alignas(8) u64 tmem_empty_bar[2];
  __shared__ u32 tmem_base_slot;
  extern __shared__ unsigned char dynamic_smem[];

  const u32 misalignment = bw::smem_u32(dynamic_smem) & 1023u;
  unsigned char* ring = dynamic_smem + ((1024u - misalignment) & 1023u);

  const int warp = bw::warp_index();
  const int lane = bw::lane_index();
  const int m0 = static_cast<int>(blockIdx.y) * kBlockM;
  const int n0 = static_cast<int>(blockIdx.x) * kBlockN;
  const int num_k_blocks = (K + kBlockK - 1) / kBlockK;
  const int sb_stride = 4 * ((num_k_blocks + 3) / 4);  // SB's padded row (the task's layout).

  if (warp == kProducerWarp && bw::elect_one()) {
    for (int s = 0; s < kStages; ++s) {
      bw::mbarrier_init(&full_bar[s], 1);
      bw::mbarrier_init(&empty_bar[s], 1);
    }
    for (int b = 0; b < 2; ++b) {
      bw::mbarrier_init(&tmem_full_bar[b], 1);
      bw::mbarrier_init(&tmem_empty_bar[b], kPromotionWarps);
    }
    bw::fence_mbarrier_init();
    bw::prefetch_tensormap(&tmA);
    bw::prefetch_tensormap(&tmB);
  }
  if (warp == kMmaWarp) {
    bw::tmem_alloc(&tmem_base_slot, kTmemColumns);
    bw::tmem_relinquish_alloc_permit();
  }
  bw::tcgen05_fence_before_thread_sync();
  __syncthreads();
  bw::tcgen05_fence_after_thread_sync();
  const u32 tmem_base = tmem_base_slot;

  if (warp == kProducerWarp) {
    if (bw::elect_one()) {
      for (int kb = 0; kb < num_k_blocks; ++kb) {
        const int stage = kb % kStages;
        const u32 round = static_cast<u32>(kb / kStages);
        bw::mbarrier_wait_parity(&empty_bar[stage], (round & 1u) ^ 1u);
        unsigned char* tile_a = ring + stage * kStageBytes;
        unsigned char* tile_b = tile_a + kTileABytes;
        bw::mbarrier_arrive_expect_tx(&full_bar[stage], kStageBytes);
        bw::tma_load_2d(tile_a, &tmA, &full_bar[stage], kb * kBlockK, m0);
        bw::tma_load_2d(tile_b, &tmB, &full_bar[stage], kb * kBlockK, n0);
      }
    }
    __syncwarp();
  } else if (warp == kMmaWarp) {
    if (bw::elect_one()) {
      constexpr u32 kIdesc = bw::make_idesc_e4m3_f32_kmajor(kBlockM, kBlockN);
      for (int kb = 0; kb < num_k_blocks; ++kb) {
        const int stage = kb % kStages;
        const u32 round = static_cast<u32>(kb / kStages);
        const int buffer = kb % 2;
        const u32 use = static_cast<u32>(kb / 2);
        // The promotion of this partial's previous block (kb - 2) must have read it.
        bw::mbarrier_wait_parity(&tmem_empty_bar[buffer], (use & 1u) ^ 1u);
        bw::mbarrier_wait_parity(&full_bar[stage], round & 1u);
        bw::tcgen05_fence_after_thread_sync();
        const u32 a_addr = bw::smem_u32(ring + stage * kStageBytes);
        const u32 b_addr = a_addr + kTileABytes;
        const u32 d_tmem = tmem_base + static_cast<u32>(buffer) * kPartialColumns;
#pragma unroll
        for (int k = 0; k < kBlockK / kMmaK; ++k) {
          // K step k: 32 e4m3 = 32 bytes into each 128-byte swizzled row.
          const u64 a_desc = bw::make_smem_desc_kmajor_sw128(a_addr + k * kMmaK);
          const u64 b_desc = bw::make_smem_desc_kmajor_sw128(b_addr + k * kMmaK);
          bw::mma_f8f6f4_ss(d_tmem, a_desc, b_desc, kIdesc, /*accumulate=*/k > 0);
        }
        bw::tcgen05_commit(&empty_bar[stage]);
        bw::tcgen05_commit(&tmem_full_bar[buffer]);
      }
    }
    __syncwarp();
  } else {
    // Promotion and epilogue, warps 0-3: this thread's tile row is quarter * 32 + lane.
    const int quarter = warp % 4;
    const int row_in_tile = quarter * 32 + lane;
    const long long row = static_cast<long long>(m0) + row_in_tile;
    const bool row_valid = row < M;
    const float* sb_row = SB + static_cast<long long>(n0 / 128) * sb_stride;
    float acc[kBlockN];
#pragma unroll
    for (int i = 0; i < kBlockN; ++i) acc[i] = 0.0f;

    for (int kb = 0; kb < num_k_blocks; ++kb) {
      const int buffer = kb % 2;
      const u32 use = static_cast<u32>(kb / 2);
      // Scales first: their loads overlap the wait. SA[kb][row]: the warp's 32 rows are 32
      // consecutive floats.
      const float sa = row_valid ? SA[static_cast<long long>(kb) * M + row] : 0.0f;
      const float scale = sa * sb_row[kb];
      bw::mbarrier_wait_parity(&tmem_full_bar[buffer], use & 1u);
      bw::tcgen05_fence_after_thread_sync();
#pragma unroll
      for (int c = 0; c < kBlockN; c += kColumnsPerLoad) {
        u32 partial[kColumnsPerLoad];
        __syncwarp();
        bw::tmem_ld_32x32b_x32(
            bw::tmem_address(tmem_base, quarter * 32,
                             static_cast<u32>(buffer) * kPartialColumns + static_cast<u32>(c)),
            partial);
        bw::tcgen05_wait_ld(partial);
#pragma unroll
        for (int i = 0; i < kColumnsPerLoad; ++i) {
          acc[c + i] = fmaf(__uint_as_float(partial[i]), scale, acc[c + i]);
        }
      }
      // This warp's loads of the partial are complete (wait::ld): order them before the MMA
      // warp overwrites it.
      bw::tcgen05_fence_before_thread_sync();
      __syncwarp();
      if (lane == 0) bw::mbarrier_arrive(&tmem_empty_bar[buffer]);
    }

    if (row_valid) {
      u16* c_row = C + row * static_cast<long long>(N);
      const bool vector_ok = (N % 8) == 0;
#pragma unroll
      for (int c = 0; c < kBlockN; c += 8) {
        const int col = n0 + c;
        if (col >= N) break;
        u32 packed[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) packed[i] = bw::pack_bf16x2(acc[c + 2 * i], acc[c + 2 * i + 1]);
        if (vector_ok && col + 8 <= N) {
          bw::st_global_v4(c_row + col, packed[0], packed[1], packed[2], packed[3]);
        } else {
          for (int i = 0; i < 8 && col + i < N; ++i) {
            c_row[col + i] = static_cast<u16>(packed[i / 2] >> (16 * (i % 2)));
          }
        }
      }
    }
  }

  bw::tcgen05_fence_before_thread_sync();
  __syncthreads();
  if (warp == kMmaWarp) {
    __syncwarp();
    bw::tcgen05_fence_after_thread_sync();
    bw::tmem_dealloc(tmem_base, kTmemColumns);
  }
}
