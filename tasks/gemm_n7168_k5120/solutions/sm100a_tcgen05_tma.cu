/* PTXBENCH_PLAN {"launches":[{"kernel":"gemm_bf16_tcgen05_tma","grid":["ceil_div(N,256)","ceil_div(M,128)"],"block":["128"],"cluster":[],"dynamic_shared_bytes":"197632","args":[{"tensor_map":"tmA"},{"tensor_map":"tmB"},{"tensor":"C"},{"scalar":"M"},{"scalar":"N"},{"scalar":"K"}]}],"scratch":[],"tensor_maps":[{"name":"tmA","tensor":"A","box":["64","128"],"element_strides":[],"swizzle":"128B","interleave":"none","l2_promotion":"256B","oob_fill":"zero","dims":[]},{"name":"tmB","tensor":"B","box":["64","256"],"element_strides":[],"swizzle":"128B","interleave":"none","l2_promotion":"256B","oob_fill":"zero","dims":[]}]} */
//
// Reference solution for gemm_n7168_k5120 on Blackwell (sm_100a): C = A * B^T, A (M x K) and
// B (N x K) bf16 row-major, C (M x N) bf16 row-major, fp32 accumulation in tensor memory.
//
// STATUS: compiles for sm_100a (NVRTC + nvJitLink, see tools/blackwell-check/check.sh) but has
// NEVER RUN: no Blackwell GPU was available when it was written. The task marks sm_100a
// runtime_unverified; expect "compiled" in compile-only scope.
//
// Design (one output tile of 128 x 256 per CTA, not persistent):
//   - 4 warps. Warp 0: one elected lane issues TMA loads. Warp 1: one elected lane issues
//     tcgen05.mma. Warp 2: allocates and frees tensor memory. Afterwards all 4 warps run the
//     epilogue, warp w reading tensor-memory lanes 32*w..32*w+31 (rows of the tile).
//   - K is consumed in blocks of 64 (128 bytes of bf16 = one 128B-swizzle row) through a
//     4-stage ring of shared memory: A stage 128x64 (16 KiB) + B stage 256x64 (32 KiB) = 48 KiB,
//     4 stages = 192 KiB + 1 KiB of slack to align the ring to 1024 bytes.
//   - full_bar[s]: TMA -> MMA (1 arrival + 49152 transaction bytes). empty_bar[s]: MMA -> TMA
//     (1 arrival from tcgen05.commit when the MMAs that read stage s are done). accum_bar: MMA ->
//     epilogue (tcgen05.commit after the last K block).
//   - Ragged M and N: TMA zero-fills rows past the end of A and B, and the epilogue skips rows
//     >= M and columns >= N. Ragged K: the last block's columns past K are zero in both
//     operands, so they add nothing. Requires K % 8 == 0 (TMA global strides are multiples of
//     16 bytes) and a 16-byte aligned C when N % 8 == 0 (the vector-store path).
//
// Assumptions that only a B200 run can confirm:
//   - Instruction descriptor bit positions (D format bit 4, A/B format bits 7/10, N>>3 at 17,
//     M>>4 at 24) and the sm_100 smem descriptor (version bit 46 = 1, swizzle code 2 = 128B at
//     bits 61..63, SBO 1024, LBO unused for swizzled K-major).
//   - Advancing the descriptor start address by 32 bytes per K=16 step inside a 128B-swizzled,
//     1024-byte-aligned tile selects the next 16 K elements (the swizzle XOR is applied on the
//     absolute address bits).
//   - Scalars M, N, K arrive as 32-bit ints.
//   - The harness raises the kernel's dynamic shared memory limit to dynamic_shared_bytes.
// Known performance limits: no epilogue/mainloop overlap (one tile per CTA, 1 CTA per SM by
// shared memory), uncoalesced 16-byte stores in the epilogue, no 2-CTA MMA or multicast.
#include "ptxbench_blackwell.cuh"

namespace {

using ptxbench::sm100::u16;
using ptxbench::sm100::u32;
using ptxbench::sm100::u64;
namespace bw = ptxbench::sm100;

// Tile configuration as enumerators: namespace-scope constexpr variables would be emitted by
// NVRTC as .global data (44 bytes of gmem), enumerators never are.
enum : int {
  kBlockM = 128,
  kBlockN = 256,
  kBlockK = 64,  // 64 bf16 = 128 bytes: exactly one 128B-swizzle row.
  kMmaK = 16,    // K per tcgen05.mma for 16-bit inputs.
  kStages = 4,
  kThreads = 128,
  kEpilogueColumns = 32,  // Columns per tcgen05.ld (32x32b.x32).
};
enum : u32 {
  kTileABytes = kBlockM * kBlockK * 2,
  kTileBBytes = kBlockN * kBlockK * 2,
  kStageBytes = kTileABytes + kTileBBytes,
  // fp32 accumulator of 128 x 256: lane = row, one column per output column. Power of two, >= 32.
  kTmemColumns = kBlockN,
};

static_assert(kStages * kStageBytes + 1024 == 197632, "plan's dynamic_shared_bytes is stale");
static_assert(kTileABytes % 1024 == 0 && kTileBBytes % 1024 == 0,
              "every tile must stay 1024-byte aligned for the 128B swizzle");
static_assert(kBlockM == 128 && kBlockN % 16 == 0 && kBlockN <= 256,
              "tcgen05.mma cta_group::1 with M = 128 needs N a multiple of 16 up to 256");

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 1)
    gemm_bf16_tcgen05_tma(const __grid_constant__ CUtensorMap tmA,
                          const __grid_constant__ CUtensorMap tmB, u16* C, int M, int N, int K) {
  __shared__ alignas(8) u64 full_bar[kStages];
  __shared__ alignas(8) u64 empty_bar[kStages];
  __shared__ alignas(8) u64 accum_bar;
  __shared__ u32 tmem_base_slot;
  extern __shared__ unsigned char dynamic_smem[];

  // The 128B swizzle pattern is a function of address bits 4..9, so each tile must start on a
  // 1024-byte boundary for TMA's writes and the MMA descriptor (base offset 0) to agree.
  const u32 misalignment = bw::smem_u32(dynamic_smem) & 1023u;
  unsigned char* ring = dynamic_smem + ((1024u - misalignment) & 1023u);

  const int warp = bw::warp_index();
  const int lane = bw::lane_index();
  const int m0 = static_cast<int>(blockIdx.y) * kBlockM;
  const int n0 = static_cast<int>(blockIdx.x) * kBlockN;
  const int num_k_blocks = (K + kBlockK - 1) / kBlockK;

  if (warp == 0 && bw::elect_one()) {
    for (int s = 0; s < kStages; ++s) {
      bw::mbarrier_init(&full_bar[s], 1);
      bw::mbarrier_init(&empty_bar[s], 1);
    }
    bw::mbarrier_init(&accum_bar, 1);
    bw::fence_mbarrier_init();
    bw::prefetch_tensormap(&tmA);
    bw::prefetch_tensormap(&tmB);
  }
  if (warp == 2) {
    // One whole warp allocates; with 192 KiB of shared memory per CTA only one CTA fits on an
    // SM, so 256 of the 512 columns are always free and the allocation cannot stall.
    bw::tmem_alloc(&tmem_base_slot, kTmemColumns);
    bw::tmem_relinquish_alloc_permit();
  }
  // The allocation result is written by the tensor-memory allocator; the fences order it with
  // the barrier so every thread reads a valid base address below.
  bw::tcgen05_fence_before_thread_sync();
  __syncthreads();
  bw::tcgen05_fence_after_thread_sync();
  const u32 tmem_base = tmem_base_slot;

  if (warp == 0) {
    // TMA producer.
    if (bw::elect_one()) {
      for (int kb = 0; kb < num_k_blocks; ++kb) {
        const int stage = kb % kStages;
        const u32 round = static_cast<u32>(kb / kStages);
        // Round 0 waits on parity 1, which a fresh barrier reports as complete: all slots
        // start free. Round r waits for the MMA commit of round r - 1.
        bw::mbarrier_wait_parity(&empty_bar[stage], (round & 1u) ^ 1u);
        unsigned char* tile_a = ring + stage * kStageBytes;
        unsigned char* tile_b = tile_a + kTileABytes;
        // Full box bytes even when the box hangs past M, N or K: TMA still delivers them
        // (zero-filled), and the phase only completes once every byte has arrived.
        bw::mbarrier_arrive_expect_tx(&full_bar[stage], kStageBytes);
        bw::tma_load_2d(tile_a, &tmA, &full_bar[stage], kb * kBlockK, m0);
        bw::tma_load_2d(tile_b, &tmB, &full_bar[stage], kb * kBlockK, n0);
      }
    }
    __syncwarp();
  } else if (warp == 1) {
    // MMA issuer: one thread issues every tcgen05.mma and tcgen05.commit, because commit only
    // tracks the MMAs of the thread that executes it.
    if (bw::elect_one()) {
      constexpr u32 kIdesc = bw::make_idesc_bf16_f32_kmajor(kBlockM, kBlockN);
      for (int kb = 0; kb < num_k_blocks; ++kb) {
        const int stage = kb % kStages;
        const u32 round = static_cast<u32>(kb / kStages);
        bw::mbarrier_wait_parity(&full_bar[stage], round & 1u);
        bw::tcgen05_fence_after_thread_sync();
        const u32 a_addr = bw::smem_u32(ring + stage * kStageBytes);
        const u32 b_addr = a_addr + kTileABytes;
#pragma unroll
        for (int k = 0; k < kBlockK / kMmaK; ++k) {
          // K step k starts k * 16 elements = 32 bytes into each 128-byte swizzled row.
          const u64 a_desc = bw::make_smem_desc_kmajor_sw128(a_addr + k * kMmaK * 2);
          const u64 b_desc = bw::make_smem_desc_kmajor_sw128(b_addr + k * kMmaK * 2);
          bw::mma_f16_ss(tmem_base, a_desc, b_desc, kIdesc, /*accumulate=*/kb > 0 || k > 0);
        }
        // Frees the stage for TMA once these MMAs have finished reading it.
        bw::tcgen05_commit(&empty_bar[stage]);
      }
      if (num_k_blocks > 0) {
        bw::tcgen05_commit(&accum_bar);
      }
    }
    __syncwarp();
  }

  // Epilogue, all 4 warps: warp w owns tensor-memory lanes (tile rows) 32*w .. 32*w + 31.
  const int quarter = warp % 4;
  const int row_in_tile = quarter * 32 + lane;
  const long long row = static_cast<long long>(m0) + row_in_tile;
  const bool row_valid = row < M;
  const bool vector_ok = (N % 8) == 0;
  u16* c_row = C + row * static_cast<long long>(N);

  if (num_k_blocks > 0) {
    bw::mbarrier_wait_parity(&accum_bar, 0);
    bw::tcgen05_fence_after_thread_sync();
  }

#pragma unroll 1
  for (int c = 0; c < kBlockN; c += kEpilogueColumns) {
    const int col = n0 + c;
    if (col >= N) {
      break;  // Warp-uniform: col does not depend on the lane.
    }
    u32 acc[kEpilogueColumns];
    if (num_k_blocks > 0) {
      // .sync.aligned: all 32 lanes, converged (lanes leave the barrier spin and the previous
      // iteration's stores at different times), even lanes whose row is past M.
      __syncwarp();
      bw::tmem_ld_32x32b_x32(bw::tmem_address(tmem_base, quarter * 32, c), acc);
      bw::tcgen05_wait_ld(acc);
    } else {
#pragma unroll
      for (int i = 0; i < kEpilogueColumns; ++i) {
        acc[i] = 0;  // K == 0: the product is all zeros.
      }
    }
    if (row_valid) {
      u32 packed[kEpilogueColumns / 2];
#pragma unroll
      for (int i = 0; i < kEpilogueColumns / 2; ++i) {
        packed[i] = bw::pack_bf16x2_bits(acc[2 * i], acc[2 * i + 1]);
      }
      if (vector_ok && col + kEpilogueColumns <= N) {
#pragma unroll
        for (int v = 0; v < kEpilogueColumns / 8; ++v) {
          bw::st_global_v4(c_row + col + 8 * v, packed[4 * v], packed[4 * v + 1], packed[4 * v + 2],
                           packed[4 * v + 3]);
        }
      } else {
#pragma unroll
        for (int i = 0; i < kEpilogueColumns; ++i) {
          if (col + i < N) {
            c_row[col + i] = static_cast<u16>(packed[i / 2] >> (16 * (i % 2)));
          }
        }
      }
    }
  }

  // Every warp's tensor-memory loads have completed (wait::ld above); order them before the
  // deallocation by the warp that allocated.
  bw::tcgen05_fence_before_thread_sync();
  __syncthreads();
  if (warp == 2) {
    __syncwarp();
    bw::tcgen05_fence_after_thread_sync();
    bw::tmem_dealloc(tmem_base, kTmemColumns);
  }
}
