// clang-format off
/* PTXBENCH_PLAN {"launches":[{"kernel":"mha_fwd_tcgen05","grid":["B*H","S/128"],"block":["192"],"cluster":[],"dynamic_shared_bytes":"197632","args":[{"tensor_map":"tmQ"},{"tensor_map":"tmK"},{"tensor_map":"tmV"},{"tensor":"O"},{"tensor":"LSE"},{"scalar":"S"},{"scalar":"scale"}]}],"scratch":[],"tensor_maps":[{"name":"tmQ","tensor":"Q","dims":["D","B*H*S"],"box":["64","128"],"element_strides":[],"swizzle":"128B","interleave":"none","l2_promotion":"256B","oob_fill":"zero"},{"name":"tmK","tensor":"K","dims":["D","B*H*S"],"box":["64","128"],"element_strides":[],"swizzle":"128B","interleave":"none","l2_promotion":"256B","oob_fill":"zero"},{"name":"tmV","tensor":"V","dims":["D","B*H*S"],"box":["64","128"],"element_strides":[],"swizzle":"128B","interleave":"none","l2_promotion":"256B","oob_fill":"zero"}]} */
// clang-format on
//
// Attention forward with log-sum-exp on Blackwell (sm_100a): O = softmax(scale * Q K^T) V and
// LSE = m + ln(l) per row, Q/K/V/O [B, H, S, 128] bf16, LSE [B, H, S] fp32, S a multiple of 128.
// mha_*_d128 and mha_*_d128_causal carry this same file except for the value of kCausal
// (tools/blackwell-check/census.sh checks that the two copies differ in that line only).
//
// STATUS: compiles for sm_100a (NVRTC + ptxas, tools/blackwell-check) but has NEVER RUN: no
// Blackwell GPU was available when it was written. The task marks sm_100a runtime_unverified.
//
// One CTA per (128-row query block, batch*head); 6 warps:
//   warps 0-3  softmax: thread t owns query row t of the block = tensor-memory lane t (warp w may
//              only touch lanes 32w..32w+31, PTX ISA "Tensor Memory" access restrictions).
//   warp 4     allocates tensor memory; one elected lane issues every TMA load.
//   warp 5     one elected lane issues every tcgen05.mma and tcgen05.commit (a commit tracks the
//              MMAs of the issuing thread only).
// Tensor memory (512 columns, one CTA per SM by shared memory): S0 = cols 0..127, S1 = 128..255
// (scores of key blocks j even / odd, so Q K_{j+1}^T runs while the softmax of block j reads
// S_j), O = 256..383 (fp32 accumulator, row i in lane i).
// Shared memory (1024-aligned, 128B swizzle, each 128 x 128 bf16 tile = two 128 x 64 TMA boxes of
// 16 KiB): Q 32 KiB | stage 0: K 32 KiB, V 32 KiB | stage 1: K, V | P 32 KiB = 192 KiB.
//
// Per key block j (pipeline, barriers in brackets):
//   TMA:     K_j, V_j -> stage j%2                                   [kv_full / kv_empty]
//   MMA:     S_{j%2} = Q K_j^T (8 x m128n128k16, both K-major)        -> commit [s_full]
//            then, once the softmax published P_{j-1}:  O (+)= P_{j-1} V_{j-1} (A = P K-major from
//            smem, B = V MN-major: V's contiguous dim is the head dim = N) -> commit [o_done],
//            commit [kv_empty]
//   softmax: wait s_full; tcgen05.ld the row (4 x 32 columns); arrive s_free (scores are in
//            registers, the MMA may overwrite S_{j%2} with block j+2); online softmax in base 2;
//            wait o_done of block j-1 (P buffer free, O stable); write P_j as bf16 into smem in
//            the 128B-swizzled K-major layout; rescale the O row in tensor memory by
//            2^(m_old - m_new) (tcgen05.ld / st; skipped when every row of the warp kept its max);
//            fence.proxy.async (generic smem writes -> tensor core reads), tcgen05 fence,
//            arrive p_full.
//   end:     wait o_done of the last block; O / l -> bf16 -> global; LSE = (m * scale * log2 e +
//            log2 l) * ln 2.
// Causal (kCausal): query block qb sees key blocks 0..qb; only block qb (the diagonal, processed
// last) is masked elementwise, keys past the row get -inf before the max. Every row keeps key 0
// so its max is finite. Query blocks are handed out heaviest first (blockIdx.y = 0 -> last block).
//
// Assumptions only a B200 run can confirm (beyond those of the GEMM reference solution, whose
// K-major descriptors and instruction descriptor this reuses):
//   - MN-major SW128 descriptor for V: LBO = 16384 (next 64-column TMA box), SBO = 1024, K
//     advanced by 2048 bytes per 16 keys (ptxbench_blackwell.cuh, make_smem_desc_mnmajor_sw128).
//   - tcgen05.mma instructions of one thread execute in issue order (the PTX ISA lists
//     mma -> mma of the same cta_group as an implicitly pipelined pair), so PV_{j-1} and S_{j+1}
//     need no wait between them.
#include "ptxbench_blackwell.cuh"

namespace {

using ptxbench::sm100::u16;
using ptxbench::sm100::u32;
using ptxbench::sm100::u64;
namespace bw = ptxbench::sm100;

enum : int {
  kCausal = 0,
  kBlockM = 128,  // Query rows per CTA.
  kBlockN = 128,  // Keys per block.
  kHeadDim = 128,
  kMmaK = 16,
  kThreads = 192,
  kSoftmaxThreads = 128,
  kTmaWarp = 4,
  kMmaWarp = 5,
  kChunk = 32,  // Columns per tcgen05.ld.32x32b.x32.
};
enum : u32 {
  kBoxBytes = 128 * 64 * 2,    // One TMA box: 128 rows x 64 bf16 (128 bytes, one swizzle row).
  kTileBytes = 2 * kBoxBytes,  // 128 x 128 bf16.
  kQOffset = 0,
  kStageOffset = kTileBytes,  // Stage s: K at kStageOffset + s * 2 * kTileBytes, V after it.
  kPOffset = kStageOffset + 4 * kTileBytes,
  kSmemBytes = kPOffset + kTileBytes,
  kTmemColumns = 512,
  kTmemS0 = 0,
  kTmemO = 256,
};

static_assert(kSmemBytes + 1024 == 197632, "plan's dynamic_shared_bytes is stale");
static_assert(kHeadDim == 2 * 64, "the head dim is two 128-byte swizzle rows");

// Byte offset of the 16-byte chunk `chunk16` (0..15) of row `row` inside a 128 x 128 bf16 tile
// stored as two 128B-swizzled 128 x 64 boxes (the layout TMA writes for the box [64, 128]).
__device__ __forceinline__ u32 tile_chunk_offset(u32 row, u32 chunk16) {
  return (chunk16 / 8) * kBoxBytes + bw::swizzle_128b_offset(row, (chunk16 % 8) * 16);
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 1)
    mha_fwd_tcgen05(const __grid_constant__ CUtensorMap tmQ,
                    const __grid_constant__ CUtensorMap tmK,
                    const __grid_constant__ CUtensorMap tmV, u16* O, float* LSE, int S,
                    float scale) {
  __shared__ alignas(8) u64 q_full;
  __shared__ alignas(8) u64 kv_full[2];
  __shared__ alignas(8) u64 kv_empty[2];
  __shared__ alignas(8) u64 s_full[2];
  __shared__ alignas(8) u64 s_free[2];
  __shared__ alignas(8) u64 p_full;
  __shared__ alignas(8) u64 o_done;
  __shared__ u32 tmem_base_slot;
  extern __shared__ unsigned char dynamic_smem[];

  // TMA's 128B swizzle and the MMA descriptors (base offset 0) agree only for 1024-byte aligned
  // tiles.
  const u32 misalignment = bw::smem_u32(dynamic_smem) & 1023u;
  unsigned char* smem = dynamic_smem + ((1024u - misalignment) & 1023u);
  const u32 smem_base = bw::smem_u32(smem);

  const int warp = bw::warp_index();
  const int lane = bw::lane_index();
  const int bh = static_cast<int>(blockIdx.x);
  const int num_q_blocks = S / kBlockM;
  // Heaviest causal blocks first: blockIdx.y = 0 takes the last query block.
  const int q_block = num_q_blocks - 1 - static_cast<int>(blockIdx.y);
  const int num_kv_blocks = kCausal ? q_block + 1 : S / kBlockN;
  const int row0 = bh * S + q_block * kBlockM;  // Row of the [B*H*S, 128] view.
  const int kv_row0 = bh * S;

  if (warp == kTmaWarp && bw::elect_one()) {
    bw::mbarrier_init(&q_full, 1);
    for (int s = 0; s < 2; ++s) {
      bw::mbarrier_init(&kv_full[s], 1);
      bw::mbarrier_init(&kv_empty[s], 1);
      bw::mbarrier_init(&s_full[s], 1);
      bw::mbarrier_init(&s_free[s], kSoftmaxThreads);
    }
    bw::mbarrier_init(&p_full, kSoftmaxThreads);
    bw::mbarrier_init(&o_done, 1);
    bw::fence_mbarrier_init();
    bw::prefetch_tensormap(&tmQ);
    bw::prefetch_tensormap(&tmK);
    bw::prefetch_tensormap(&tmV);
  }
  if (warp == kTmaWarp) {
    // 192 KiB of shared memory per CTA: one CTA per SM, so all 512 columns are free.
    bw::tmem_alloc(&tmem_base_slot, kTmemColumns);
    bw::tmem_relinquish_alloc_permit();
  }
  bw::tcgen05_fence_before_thread_sync();
  __syncthreads();
  bw::tcgen05_fence_after_thread_sync();
  const u32 tmem_base = tmem_base_slot;

  if (warp == kTmaWarp) {
    if (bw::elect_one()) {
      bw::mbarrier_arrive_expect_tx(&q_full, kTileBytes);
      bw::tma_load_2d(smem + kQOffset, &tmQ, &q_full, 0, row0);
      bw::tma_load_2d(smem + kQOffset + kBoxBytes, &tmQ, &q_full, 64, row0);
      for (int j = 0; j < num_kv_blocks; ++j) {
        const int stage = j % 2;
        const u32 round = static_cast<u32>(j / 2);
        bw::mbarrier_wait_parity(&kv_empty[stage], (round & 1u) ^ 1u);
        unsigned char* k_tile = smem + kStageOffset + stage * 2 * kTileBytes;
        unsigned char* v_tile = k_tile + kTileBytes;
        const int kv_row = kv_row0 + j * kBlockN;
        bw::mbarrier_arrive_expect_tx(&kv_full[stage], 2 * kTileBytes);
        bw::tma_load_2d(k_tile, &tmK, &kv_full[stage], 0, kv_row);
        bw::tma_load_2d(k_tile + kBoxBytes, &tmK, &kv_full[stage], 64, kv_row);
        bw::tma_load_2d(v_tile, &tmV, &kv_full[stage], 0, kv_row);
        bw::tma_load_2d(v_tile + kBoxBytes, &tmV, &kv_full[stage], 64, kv_row);
      }
    }
    __syncwarp();
  } else if (warp == kMmaWarp) {
    if (bw::elect_one()) {
      constexpr u32 kIdescQK = bw::make_idesc_bf16_f32_kmajor(kBlockM, kBlockN);
      constexpr u32 kIdescPV = bw::make_idesc_f16(kBlockM, kHeadDim, /*inputs_bf16=*/true,
                                                  /*accum_f32=*/true, /*a_mn_major=*/false,
                                                  /*b_mn_major=*/true);
      const u32 q_addr = smem_base + kQOffset;
      const u32 p_addr = smem_base + kPOffset;
      bw::mbarrier_wait_parity(&q_full, 0);
      bw::tcgen05_fence_after_thread_sync();
      for (int j = 0; j <= num_kv_blocks; ++j) {
        if (j < num_kv_blocks) {
          const int stage = j % 2;
          const int buffer = j % 2;
          bw::mbarrier_wait_parity(&kv_full[stage], static_cast<u32>(j / 2) & 1u);
          if (j >= 2) {
            // The softmax has read S_{j-2} out of this buffer.
            bw::mbarrier_wait_parity(&s_free[buffer], static_cast<u32>(j / 2 - 1) & 1u);
          }
          bw::tcgen05_fence_after_thread_sync();
          const u32 k_addr = smem_base + kStageOffset + stage * 2 * kTileBytes;
#pragma unroll
          for (int k = 0; k < kHeadDim / kMmaK; ++k) {
            // 16 head-dim elements = 32 bytes along the swizzled row; 4 steps per 64-wide box.
            const u32 offset = (k / 4) * kBoxBytes + (k % 4) * kMmaK * 2;
            bw::mma_f16_ss(tmem_base + kTmemS0 + buffer * kBlockN,
                           bw::make_smem_desc_kmajor_sw128(q_addr + offset),
                           bw::make_smem_desc_kmajor_sw128(k_addr + offset), kIdescQK,
                           /*accumulate=*/k > 0);
          }
          bw::tcgen05_commit(&s_full[buffer]);
        }
        if (j > 0) {
          const int prev = j - 1;
          const int stage = prev % 2;
          bw::mbarrier_wait_parity(&p_full, static_cast<u32>(prev) & 1u);
          bw::tcgen05_fence_after_thread_sync();
          const u32 v_addr = smem_base + kStageOffset + stage * 2 * kTileBytes + kTileBytes;
#pragma unroll
          for (int k = 0; k < kBlockN / kMmaK; ++k) {
            // A = P (K = keys, contiguous): 32 bytes per step inside the swizzled row.
            // B = V (K = keys = rows of the box, N = head dim contiguous): 16 rows = 2048 bytes
            // per step; the second 64-column box is the next MN span (LBO).
            const u32 p_offset = (k / 4) * kBoxBytes + (k % 4) * kMmaK * 2;
            bw::mma_f16_ss(tmem_base + kTmemO, bw::make_smem_desc_kmajor_sw128(p_addr + p_offset),
                           bw::make_smem_desc_mnmajor_sw128(v_addr + k * kMmaK * 128, kBoxBytes),
                           kIdescPV, /*accumulate=*/prev > 0 || k > 0);
          }
          bw::tcgen05_commit(&o_done);
          if (prev + 2 < num_kv_blocks) {
            // Frees the stage for block prev + 2. Only when that block exists, so no
            // asynchronous arrival is still in flight when the CTA exits.
            bw::tcgen05_commit(&kv_empty[stage]);
          }
        }
      }
    }
    __syncwarp();
  } else {
    // Softmax warps 0-3: thread owns query row `row` = tensor-memory lane `row`.
    const u32 row = static_cast<u32>(warp * 32 + lane);
    const u32 lane_field = static_cast<u32>(warp * 32) << 16;
    const float scale_log2 = scale * 1.4426950408889634f;
    float row_max = -__int_as_float(0x7f800000);  // -inf: no key seen yet.
    float row_sum = 0.0f;
    const u32 p_addr = smem_base + kPOffset;

    for (int j = 0; j < num_kv_blocks; ++j) {
      const int buffer = j % 2;
      bw::mbarrier_wait_parity(&s_full[buffer], static_cast<u32>(j / 2) & 1u);
      bw::tcgen05_fence_after_thread_sync();
      __syncwarp();  // tcgen05.ld is .sync.aligned; lanes leave the spin at different times.
      u32 bits[kBlockN];
#pragma unroll
      for (int c = 0; c < kBlockN / kChunk; ++c) {
        bw::tmem_ld_32x32b_x32(tmem_base + lane_field + kTmemS0 + buffer * kBlockN + c * kChunk,
                               *reinterpret_cast<u32(*)[kChunk]>(&bits[c * kChunk]));
      }
      bw::tcgen05_wait_ld(bits);
      bw::tcgen05_fence_before_thread_sync();
      bw::mbarrier_arrive(&s_free[buffer]);

      float s[kBlockN];
#pragma unroll
      for (int c = 0; c < kBlockN; ++c) {
        s[c] = __uint_as_float(bits[c]);
      }
      if (kCausal && j == q_block) {
        // Diagonal block: key c (same offset as the row's block) is visible iff c <= row.
#pragma unroll
        for (int c = 0; c < kBlockN; ++c) {
          if (static_cast<u32>(c) > row) s[c] = -__int_as_float(0x7f800000);
        }
      }
      float block_max = s[0];
#pragma unroll
      for (int c = 1; c < kBlockN; ++c) {
        block_max = fmaxf(block_max, s[c]);
      }
      const float new_max = fmaxf(row_max, block_max);  // Finite: key 0 is always visible.
      const float correction = bw::exp2_approx((row_max - new_max) * scale_log2);  // 0 at j = 0.
      const float offset = new_max * scale_log2;
      float block_sum = 0.0f;
#pragma unroll
      for (int c = 0; c < kBlockN; ++c) {
        s[c] = bw::exp2_approx(fmaf(s[c], scale_log2, -offset));
        block_sum += s[c];
      }
      row_sum = row_sum * correction + block_sum;
      row_max = new_max;

      if (j > 0) {
        // PV_{j-1} has finished: the P buffer may be overwritten and O is stable.
        bw::mbarrier_wait_parity(&o_done, static_cast<u32>(j - 1) & 1u);
        bw::tcgen05_fence_after_thread_sync();
      }
#pragma unroll
      for (int chunk = 0; chunk < kBlockN / 8; ++chunk) {
        const float* p = &s[chunk * 8];
        bw::st_shared_v4(p_addr + tile_chunk_offset(row, static_cast<u32>(chunk)),
                         bw::pack_bf16x2(p[0], p[1]), bw::pack_bf16x2(p[2], p[3]),
                         bw::pack_bf16x2(p[4], p[5]), bw::pack_bf16x2(p[6], p[7]));
      }
      __syncwarp();
      // Warp-uniform skip: tcgen05.ld/st are warp-collective, and scaling by 1 is the identity.
      if (j > 0 && !__all_sync(0xffffffffu, correction == 1.0f)) {
#pragma unroll 1
        for (int c = 0; c < kHeadDim / kChunk; ++c) {
          const u32 taddr = tmem_base + lane_field + kTmemO + c * kChunk;
          u32 o[kChunk];
          bw::tmem_ld_32x32b_x32(taddr, o);
          bw::tcgen05_wait_ld(o);
#pragma unroll
          for (int i = 0; i < kChunk; ++i) {
            o[i] = __float_as_uint(__uint_as_float(o[i]) * correction);
          }
          bw::tmem_st_32x32b_x32(taddr, o);
        }
        bw::tcgen05_wait_st();
      }
      // P (generic-proxy st.shared) is read by the tensor core (async proxy); O's rescale
      // (tcgen05.st) precedes the MMA that accumulates into it.
      bw::fence_proxy_async_shared();
      bw::tcgen05_fence_before_thread_sync();
      bw::mbarrier_arrive(&p_full);
    }

    // Epilogue: O / l in bf16, one row per thread; LSE in natural log.
    bw::mbarrier_wait_parity(&o_done, static_cast<u32>(num_kv_blocks - 1) & 1u);
    bw::tcgen05_fence_after_thread_sync();
    __syncwarp();
    const float inv_sum = 1.0f / row_sum;
    u16* o_row = O + static_cast<long long>(row0 + static_cast<int>(row)) * kHeadDim;
#pragma unroll 1
    for (int c = 0; c < kHeadDim / kChunk; ++c) {
      u32 o[kChunk];
      bw::tmem_ld_32x32b_x32(tmem_base + lane_field + kTmemO + c * kChunk, o);
      bw::tcgen05_wait_ld(o);
#pragma unroll
      for (int v = 0; v < kChunk / 8; ++v) {
        u32 packed[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          packed[i] = bw::pack_bf16x2(__uint_as_float(o[8 * v + 2 * i]) * inv_sum,
                                      __uint_as_float(o[8 * v + 2 * i + 1]) * inv_sum);
        }
        bw::st_global_v4(o_row + c * kChunk + 8 * v, packed[0], packed[1], packed[2], packed[3]);
      }
    }
    LSE[row0 + static_cast<int>(row)] =
        (row_max * scale_log2 + bw::log2_approx(row_sum)) * 0.6931471805599453f;
  }

  // Every tensor-memory access has completed (wait::ld / wait::st above, MMAs waited for through
  // o_done); order them before the deallocation by the allocating warp.
  bw::tcgen05_fence_before_thread_sync();
  __syncthreads();
  if (warp == kTmaWarp) {
    __syncwarp();
    bw::tcgen05_fence_after_thread_sync();
    bw::tmem_dealloc(tmem_base, kTmemColumns);
  }
}
