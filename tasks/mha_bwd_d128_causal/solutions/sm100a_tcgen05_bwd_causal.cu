// clang-format off
/* PTXBENCH_PLAN {"launches":[{"kernel":"mha_bwd_delta","grid":["ceil_div(B*H*S,16)"],"block":["256"],"cluster":[],"dynamic_shared_bytes":"0","args":[{"tensor":"O"},{"tensor":"dO"},{"scratch":"delta"},{"scalar":"B"},{"scalar":"H"},{"scalar":"S"}]},{"kernel":"mha_bwd_tcgen05","grid":["B*H","S/128"],"block":["192"],"cluster":[],"dynamic_shared_bytes":"197632","args":[{"tensor_map":"tmQ"},{"tensor_map":"tmK"},{"tensor_map":"tmV"},{"tensor_map":"tmdO"},{"tensor":"LSE"},{"scratch":"delta"},{"scratch":"dq_accum"},{"tensor":"dK"},{"tensor":"dV"},{"scalar":"S"},{"scalar":"scale"}]},{"kernel":"mha_bwd_dq_convert","grid":["ceil_div(B*H*S*D,2048)"],"block":["256"],"cluster":[],"dynamic_shared_bytes":"0","args":[{"scratch":"dq_accum"},{"tensor":"dQ"},{"scalar":"B"},{"scalar":"H"},{"scalar":"S"},{"scalar":"D"},{"scalar":"scale"}]}],"scratch":[{"name":"delta","bytes":"4*B*H*S"},{"name":"dq_accum","bytes":"4*B*H*S*D"}],"tensor_maps":[{"name":"tmQ","tensor":"Q","dims":["D","B*H*S"],"box":["64","128"],"element_strides":[],"swizzle":"128B","interleave":"none","l2_promotion":"256B","oob_fill":"zero"},{"name":"tmK","tensor":"K","dims":["D","B*H*S"],"box":["64","128"],"element_strides":[],"swizzle":"128B","interleave":"none","l2_promotion":"256B","oob_fill":"zero"},{"name":"tmV","tensor":"V","dims":["D","B*H*S"],"box":["64","128"],"element_strides":[],"swizzle":"128B","interleave":"none","l2_promotion":"256B","oob_fill":"zero"},{"name":"tmdO","tensor":"dO","dims":["D","B*H*S"],"box":["64","128"],"element_strides":[],"swizzle":"128B","interleave":"none","l2_promotion":"256B","oob_fill":"zero"}]} */
// clang-format on
//
// Attention backward on Blackwell (sm_100a), FlashAttention-2 style, head dim 128:
// given Q, K, V, O, dO [B, H, S, 128] bf16 and LSE [B, H, S] fp32 (natural log), computes
//   P = exp(scale * Q K^T - LSE), dV = P^T dO, dP = dO V^T, Delta_i = rowsum(dO_i * O_i),
//   dS = P * (dP - Delta), dQ = scale * dS K, dK = scale * dS^T Q.
// mha_*_d128 and mha_*_d128_causal carry this same file except for the value of kCausal
// (tools/blackwell-check/census.sh checks that the two copies differ in that line only).
//
// STATUS: compiles for sm_100a (NVRTC + ptxas, tools/blackwell-check) but has NEVER RUN: no
// Blackwell GPU was available when it was written. The task marks sm_100a runtime_unverified.
//
// Three launches (the harness zero-fills scratch before every run):
//   1. mha_bwd_delta: Delta[row] = sum_d dO * O in fp32 -> scratch `delta`.
//   2. mha_bwd_tcgen05: one CTA per (batch*head, 128-key block); loops over the query blocks
//      (causal: only those at or below the diagonal), keeps dK and dV in tensor memory, and adds
//      each query block's dQ contribution (unscaled) into the fp32 scratch `dq_accum` with vector
//      atomics.
//   3. mha_bwd_dq_convert: dQ = bf16(scale * dq_accum).
//
// Main kernel, 6 warps:
//   warps 0-3  compute: thread t owns tensor-memory lane t (warp w may only touch lanes
//              32w..32w+31): key row t of the transposed scores, of dV and of dK; query row t of
//              the dQ block.
//   warp 4     allocates tensor memory; one elected lane issues the TMA loads.
//   warp 5     one elected lane issues every tcgen05.mma and tcgen05.commit.
// Tensor memory (512 columns; one CTA per SM by shared memory):
//   0..127 S^T = K Q^T (lane = key, column = query), later reused for dQ = dS K (lane = query);
//   128..255 dP^T = V dO^T; 256..383 dV; 384..511 dK (fp32 accumulators, lane = key).
// Shared memory (1024-aligned; every 128 x 128 bf16 tile = two 128B-swizzled 128 x 64 boxes):
//   K, V (resident), Q_i, dO_i (one query block at a time), P^T, dS^T (written by the compute
//   warps, rows = keys, columns = queries) = 6 x 32 KiB = 192 KiB.
// The same smem tile serves two MMA roles through the descriptor's major-ness: a tile stored
// [rows][128 contiguous] is K-major when the contiguous dim is the reduction dim and MN-major when
// it is the output dim:
//   S^T  = K  Q^T   A = K (K-major), B = Q (K-major)          M = keys, N = queries, K = d
//   dP^T = V  dO^T  A = V (K-major), B = dO (K-major)         M = keys, N = queries, K = d
//   dV  += P^T dO   A = P^T (K-major), B = dO (MN-major)      M = keys, N = d, K = queries
//   dK  += dS^T Q   A = dS^T (K-major), B = Q (MN-major)      M = keys, N = d, K = queries
//   dQ   = dS K     A = dS^T read M-major, B = K (MN-major)   M = queries, N = d, K = keys
// Per query block i (barriers in brackets):
//   TMA:     Q_i, dO_i                                            [qdo_full / qdo_empty]
//   MMA:     wait dQ_{i-1} read out [dq_read]; S^T, dP^T -> commit [s_full];
//            wait P^T, dS^T written [pds_full]; dV, dK, dQ -> commit [dq_full], [qdo_empty]
//   compute: LSE*log2(e) and Delta of the block -> smem; wait s_full; per 32 queries:
//            tcgen05.ld S^T and dP^T, P^T = 2^(S^T * scale * log2 e - LSE * log2 e) (causal
//            diagonal: 0 where key > query), dS^T = P^T (dP^T - Delta), both as bf16 into smem
//            (K-major swizzled rows); fence.proxy.async; arrive pds_full; wait dq_full;
//            tcgen05.ld the dQ row, red.global.add.v4.f32 into dq_accum; arrive dq_read.
//   end:     dV -> bf16, dK * scale -> bf16, one key row per thread.
// The P^T / dS^T buffers are free again at dq_full (its commit follows the MMAs that read them).
//
// Assumptions only a B200 run can confirm (beyond the GEMM reference solution's K-major
// descriptors and instruction descriptor): the MN-major SW128 descriptor (LBO = 16384 for the
// next 64-column box, SBO = 1024, K advanced 2048 bytes per 16 rows) for both A (transpose-A bit)
// and B; and that tcgen05.mma instructions of one thread execute in issue order, so dQ may
// overwrite the S^T columns right after the MMAs that wrote them (mma -> mma of one cta_group is
// an implicitly pipelined pair in the PTX ISA).
// Known performance limits: Q_i / dO_i single-buffered (no room next to 6 tiles), the compute
// warps wait for every MMA group, dQ atomics are 16 bytes per thread on separate rows.
#include "ptxbench_blackwell.cuh"

namespace {

using ptxbench::sm100::u16;
using ptxbench::sm100::u32;
using ptxbench::sm100::u64;
namespace bw = ptxbench::sm100;

enum : int {
  kCausal = 1,
  kBlock = 128,  // Keys per CTA and queries per inner step.
  kHeadDim = 128,
  kMmaK = 16,
  kThreads = 192,
  kComputeThreads = 128,
  kTmaWarp = 4,
  kMmaWarp = 5,
  kChunk = 32,          // Columns per tcgen05.ld.32x32b.x32.
  kComputeBarrier = 1,  // Named barrier id among the compute warps (0 is __syncthreads).
};
enum : u32 {
  kBoxBytes = 128 * 64 * 2,  // One TMA box: 128 rows x 64 bf16 (one 128-byte swizzle row each).
  kTileBytes = 2 * kBoxBytes,
  kKOffset = 0,
  kVOffset = kKOffset + kTileBytes,
  kQOffset = kVOffset + kTileBytes,
  kDOOffset = kQOffset + kTileBytes,
  kPTOffset = kDOOffset + kTileBytes,
  kDSTOffset = kPTOffset + kTileBytes,
  kSmemBytes = kDSTOffset + kTileBytes,
  kTmemColumns = 512,
  kTmemS = 0,  // S^T, then dQ.
  kTmemDP = 128,
  kTmemDV = 256,
  kTmemDK = 384,
};

static_assert(kSmemBytes + 1024 == 197632, "plan's dynamic_shared_bytes is stale");

// Byte offset of 16-byte chunk `chunk16` (0..15) of row `row` in a 128 x 128 bf16 tile stored as
// two 128B-swizzled 128 x 64 boxes (the layout TMA writes for the box [64, 128]).
__device__ __forceinline__ u32 tile_chunk_offset(u32 row, u32 chunk16) {
  return (chunk16 / 8) * kBoxBytes + bw::swizzle_128b_offset(row, (chunk16 % 8) * 16);
}

// K-major operand, reduction step k (16 elements = 32 bytes along the swizzled rows).
__device__ __forceinline__ u64 kmajor_desc(u32 tile_addr, int k) {
  return bw::make_smem_desc_kmajor_sw128(tile_addr + (k / 4) * kBoxBytes + (k % 4) * kMmaK * 2);
}

// MN-major operand, reduction step k (16 rows = 2048 bytes); the second 64-column box is the
// next MN span.
__device__ __forceinline__ u64 mnmajor_desc(u32 tile_addr, int k) {
  return bw::make_smem_desc_mnmajor_sw128(tile_addr + k * kMmaK * 128, kBoxBytes);
}

}  // namespace

// Delta[row] = sum_d dO[row][d] * O[row][d]; 16 threads per row (8 elements each), 16 rows per
// block of 256 threads.
extern "C" __global__ void __launch_bounds__(256)
    mha_bwd_delta(const u16* O, const u16* dO, float* delta, int B, int H, int S) {
  const long long rows = static_cast<long long>(B) * H * S;
  const long long row = static_cast<long long>(blockIdx.x) * 16 + threadIdx.x / 16;
  const int part = static_cast<int>(threadIdx.x % 16);
  float sum = 0.0f;
  if (row < rows) {
    u32 o[4];
    u32 d[4];
    bw::ld_global_nc_v4(O + row * kHeadDim + part * 8, o);
    bw::ld_global_nc_v4(dO + row * kHeadDim + part * 8, d);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      sum = fmaf(bw::bf16_lo_to_float(o[i]), bw::bf16_lo_to_float(d[i]), sum);
      sum = fmaf(bw::bf16_hi_to_float(o[i]), bw::bf16_hi_to_float(d[i]), sum);
    }
  }
  // The 16 lanes of a row are aligned 16-lane groups of the warp.
#pragma unroll
  for (int offset = 8; offset > 0; offset /= 2) {
    sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  }
  if (row < rows && part == 0) {
    delta[row] = sum;
  }
}

extern "C" __global__ void __launch_bounds__(kThreads, 1)
    mha_bwd_tcgen05(const __grid_constant__ CUtensorMap tmQ,
                    const __grid_constant__ CUtensorMap tmK,
                    const __grid_constant__ CUtensorMap tmV,
                    const __grid_constant__ CUtensorMap tmdO, const float* LSE, const float* delta,
                    float* dq_accum, u16* dK, u16* dV, int S, float scale) {
  __shared__ alignas(8) u64 kv_full;
  __shared__ alignas(8) u64 qdo_full;
  __shared__ alignas(8) u64 qdo_empty;
  __shared__ alignas(8) u64 s_full;
  __shared__ alignas(8) u64 pds_full;
  __shared__ alignas(8) u64 dq_full;
  __shared__ alignas(8) u64 dq_read;
  __shared__ u32 tmem_base_slot;
  __shared__ float lse_log2_s[kBlock];
  __shared__ float delta_s[kBlock];
  extern __shared__ unsigned char dynamic_smem[];

  const u32 misalignment = bw::smem_u32(dynamic_smem) & 1023u;
  unsigned char* smem = dynamic_smem + ((1024u - misalignment) & 1023u);
  const u32 smem_base = bw::smem_u32(smem);

  const int warp = bw::warp_index();
  const int lane = bw::lane_index();
  const int bh = static_cast<int>(blockIdx.x);
  const int k_block = static_cast<int>(blockIdx.y);  // Causal: y = 0 has the most work.
  const int num_q_blocks_total = S / kBlock;
  const int q_begin = kCausal ? k_block : 0;
  const int num_q_blocks = num_q_blocks_total - q_begin;  // >= 1.
  const int k_row0 = bh * S + k_block * kBlock;           // Row of the [B*H*S, 128] view.

  if (warp == kTmaWarp && bw::elect_one()) {
    bw::mbarrier_init(&kv_full, 1);
    bw::mbarrier_init(&qdo_full, 1);
    bw::mbarrier_init(&qdo_empty, 1);
    bw::mbarrier_init(&s_full, 1);
    bw::mbarrier_init(&pds_full, kComputeThreads);
    bw::mbarrier_init(&dq_full, 1);
    bw::mbarrier_init(&dq_read, kComputeThreads);
    bw::fence_mbarrier_init();
    bw::prefetch_tensormap(&tmQ);
    bw::prefetch_tensormap(&tmK);
    bw::prefetch_tensormap(&tmV);
    bw::prefetch_tensormap(&tmdO);
  }
  if (warp == kTmaWarp) {
    bw::tmem_alloc(&tmem_base_slot, kTmemColumns);
    bw::tmem_relinquish_alloc_permit();
  }
  bw::tcgen05_fence_before_thread_sync();
  __syncthreads();
  bw::tcgen05_fence_after_thread_sync();
  const u32 tmem_base = tmem_base_slot;

  if (warp == kTmaWarp) {
    if (bw::elect_one()) {
      bw::mbarrier_arrive_expect_tx(&kv_full, 2 * kTileBytes);
      bw::tma_load_2d(smem + kKOffset, &tmK, &kv_full, 0, k_row0);
      bw::tma_load_2d(smem + kKOffset + kBoxBytes, &tmK, &kv_full, 64, k_row0);
      bw::tma_load_2d(smem + kVOffset, &tmV, &kv_full, 0, k_row0);
      bw::tma_load_2d(smem + kVOffset + kBoxBytes, &tmV, &kv_full, 64, k_row0);
      for (int i = 0; i < num_q_blocks; ++i) {
        // Round i waits for the MMAs of round i - 1 (a fresh barrier passes parity 1).
        bw::mbarrier_wait_parity(&qdo_empty, (static_cast<u32>(i) & 1u) ^ 1u);
        const int q_row = bh * S + (q_begin + i) * kBlock;
        bw::mbarrier_arrive_expect_tx(&qdo_full, 2 * kTileBytes);
        bw::tma_load_2d(smem + kQOffset, &tmQ, &qdo_full, 0, q_row);
        bw::tma_load_2d(smem + kQOffset + kBoxBytes, &tmQ, &qdo_full, 64, q_row);
        bw::tma_load_2d(smem + kDOOffset, &tmdO, &qdo_full, 0, q_row);
        bw::tma_load_2d(smem + kDOOffset + kBoxBytes, &tmdO, &qdo_full, 64, q_row);
      }
    }
    __syncwarp();
  } else if (warp == kMmaWarp) {
    if (bw::elect_one()) {
      // Both operands K-major (S^T, dP^T); B MN-major (dV, dK); both MN-major (dQ).
      constexpr u32 kIdescKK = bw::make_idesc_bf16_f32_kmajor(kBlock, kBlock);
      constexpr u32 kIdescKM =
          bw::make_idesc_f16(kBlock, kHeadDim, true, true, /*a_mn_major=*/false,
                             /*b_mn_major=*/true);
      constexpr u32 kIdescMM = bw::make_idesc_f16(kBlock, kHeadDim, true, true, /*a_mn_major=*/true,
                                                  /*b_mn_major=*/true);
      const u32 k_addr = smem_base + kKOffset;
      const u32 v_addr = smem_base + kVOffset;
      const u32 q_addr = smem_base + kQOffset;
      const u32 do_addr = smem_base + kDOOffset;
      const u32 pt_addr = smem_base + kPTOffset;
      const u32 dst_addr = smem_base + kDSTOffset;
      bw::mbarrier_wait_parity(&kv_full, 0);
      for (int i = 0; i < num_q_blocks; ++i) {
        const u32 parity = static_cast<u32>(i) & 1u;
        bw::mbarrier_wait_parity(&qdo_full, parity);
        if (i > 0) {
          // dQ_{i-1} (in the S^T columns) has been read out.
          bw::mbarrier_wait_parity(&dq_read, parity ^ 1u);
        }
        bw::tcgen05_fence_after_thread_sync();
#pragma unroll
        for (int k = 0; k < kHeadDim / kMmaK; ++k) {
          bw::mma_f16_ss(tmem_base + kTmemS, kmajor_desc(k_addr, k), kmajor_desc(q_addr, k),
                         kIdescKK, k > 0);
        }
#pragma unroll
        for (int k = 0; k < kHeadDim / kMmaK; ++k) {
          bw::mma_f16_ss(tmem_base + kTmemDP, kmajor_desc(v_addr, k), kmajor_desc(do_addr, k),
                         kIdescKK, k > 0);
        }
        bw::tcgen05_commit(&s_full);

        bw::mbarrier_wait_parity(&pds_full, parity);
        bw::tcgen05_fence_after_thread_sync();
#pragma unroll
        for (int k = 0; k < kBlock / kMmaK; ++k) {
          bw::mma_f16_ss(tmem_base + kTmemDV, kmajor_desc(pt_addr, k), mnmajor_desc(do_addr, k),
                         kIdescKM, i > 0 || k > 0);
        }
#pragma unroll
        for (int k = 0; k < kBlock / kMmaK; ++k) {
          bw::mma_f16_ss(tmem_base + kTmemDK, kmajor_desc(dst_addr, k), mnmajor_desc(q_addr, k),
                         kIdescKM, i > 0 || k > 0);
        }
#pragma unroll
        for (int k = 0; k < kBlock / kMmaK; ++k) {
          // A = dS (M = queries, K = keys) is the dS^T tile read with keys as rows: M-major.
          bw::mma_f16_ss(tmem_base + kTmemS, mnmajor_desc(dst_addr, k), mnmajor_desc(k_addr, k),
                         kIdescMM, k > 0);
        }
        bw::tcgen05_commit(&dq_full);
        if (i + 1 < num_q_blocks) {
          // Frees Q / dO for the next block. Only when there is one, so no asynchronous arrival
          // is still in flight when the CTA exits.
          bw::tcgen05_commit(&qdo_empty);
        }
      }
    }
    __syncwarp();
  } else {
    // Compute warps 0-3.
    const int t = warp * 32 + lane;
    const u32 key = static_cast<u32>(t);  // Key row (S^T, dP^T, dV, dK) and query row (dQ).
    const u32 lane_field = static_cast<u32>(warp * 32) << 16;
    const float scale_log2 = scale * 1.4426950408889634f;
    const u32 pt_addr = smem_base + kPTOffset;
    const u32 dst_addr = smem_base + kDSTOffset;

    for (int i = 0; i < num_q_blocks; ++i) {
      const u32 parity = static_cast<u32>(i) & 1u;
      const int q_block = q_begin + i;
      const int q_row0 = bh * S + q_block * kBlock;
      // Everyone finished reading the previous block's LSE / Delta before they are replaced.
      bw::named_barrier_sync(kComputeBarrier, kComputeThreads);
      lse_log2_s[t] = LSE[q_row0 + t] * 1.4426950408889634f;
      delta_s[t] = delta[q_row0 + t];
      bw::named_barrier_sync(kComputeBarrier, kComputeThreads);

      bw::mbarrier_wait_parity(&s_full, parity);
      bw::tcgen05_fence_after_thread_sync();
      __syncwarp();
      const bool diagonal = kCausal && q_block == k_block;
#pragma unroll 1
      for (int c = 0; c < kBlock / kChunk; ++c) {
        u32 s_bits[kChunk];
        u32 dp_bits[kChunk];
        bw::tmem_ld_32x32b_x32(tmem_base + lane_field + kTmemS + c * kChunk, s_bits);
        bw::tmem_ld_32x32b_x32(tmem_base + lane_field + kTmemDP + c * kChunk, dp_bits);
        bw::tcgen05_wait_ld(s_bits);
        bw::tcgen05_wait_ld(dp_bits);
        u32 p_packed[kChunk / 2];
        u32 ds_packed[kChunk / 2];
#pragma unroll
        for (int e = 0; e < kChunk; e += 2) {
          float p[2];
          float ds[2];
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int q = c * kChunk + e + h;
            const float logit = fmaf(__uint_as_float(s_bits[e + h]), scale_log2, -lse_log2_s[q]);
            p[h] = bw::exp2_approx(logit);
            if (diagonal && key > static_cast<u32>(q)) p[h] = 0.0f;
            ds[h] = p[h] * (__uint_as_float(dp_bits[e + h]) - delta_s[q]);
          }
          p_packed[e / 2] = bw::pack_bf16x2(p[0], p[1]);
          ds_packed[e / 2] = bw::pack_bf16x2(ds[0], ds[1]);
        }
#pragma unroll
        for (int v = 0; v < kChunk / 8; ++v) {
          const u32 offset = tile_chunk_offset(key, static_cast<u32>(c * (kChunk / 8) + v));
          bw::st_shared_v4(pt_addr + offset, p_packed[4 * v], p_packed[4 * v + 1],
                           p_packed[4 * v + 2], p_packed[4 * v + 3]);
          bw::st_shared_v4(dst_addr + offset, ds_packed[4 * v], ds_packed[4 * v + 1],
                           ds_packed[4 * v + 2], ds_packed[4 * v + 3]);
        }
      }
      // P^T and dS^T (generic-proxy stores) are read by the tensor core (async proxy); the
      // tcgen05 fence orders this thread's S^T / dP^T loads before the MMAs that overwrite them.
      bw::fence_proxy_async_shared();
      bw::tcgen05_fence_before_thread_sync();
      bw::mbarrier_arrive(&pds_full);

      // dQ block: lane = query row of this block, 128 head-dim columns.
      bw::mbarrier_wait_parity(&dq_full, parity);
      bw::tcgen05_fence_after_thread_sync();
      __syncwarp();
      float* dq_row = dq_accum + static_cast<long long>(q_row0 + t) * kHeadDim;
#pragma unroll 1
      for (int c = 0; c < kHeadDim / kChunk; ++c) {
        u32 dq[kChunk];
        bw::tmem_ld_32x32b_x32(tmem_base + lane_field + kTmemS + c * kChunk, dq);
        bw::tcgen05_wait_ld(dq);
#pragma unroll
        for (int v = 0; v < kChunk / 4; ++v) {
          bw::red_add_global_v4_f32(dq_row + c * kChunk + 4 * v, __uint_as_float(dq[4 * v]),
                                    __uint_as_float(dq[4 * v + 1]), __uint_as_float(dq[4 * v + 2]),
                                    __uint_as_float(dq[4 * v + 3]));
        }
      }
      bw::tcgen05_fence_before_thread_sync();
      bw::mbarrier_arrive(&dq_read);
    }

    // dV and dK: complete, since the last dq_full commit followed every MMA of this CTA.
    u16* dv_row = dV + static_cast<long long>(k_row0 + t) * kHeadDim;
    u16* dk_row = dK + static_cast<long long>(k_row0 + t) * kHeadDim;
#pragma unroll 1
    for (int c = 0; c < 2 * (kHeadDim / kChunk); ++c) {
      const bool is_dk = c >= kHeadDim / kChunk;
      const int col = (c % (kHeadDim / kChunk)) * kChunk;
      const float factor = is_dk ? scale : 1.0f;
      u32 acc[kChunk];
      __syncwarp();
      bw::tmem_ld_32x32b_x32(tmem_base + lane_field + (is_dk ? kTmemDK : kTmemDV) + col, acc);
      bw::tcgen05_wait_ld(acc);
      u16* out = (is_dk ? dk_row : dv_row) + col;
#pragma unroll
      for (int v = 0; v < kChunk / 8; ++v) {
        u32 packed[4];
#pragma unroll
        for (int h = 0; h < 4; ++h) {
          packed[h] = bw::pack_bf16x2(__uint_as_float(acc[8 * v + 2 * h]) * factor,
                                      __uint_as_float(acc[8 * v + 2 * h + 1]) * factor);
        }
        bw::st_global_v4(out + 8 * v, packed[0], packed[1], packed[2], packed[3]);
      }
    }
  }

  bw::tcgen05_fence_before_thread_sync();
  __syncthreads();
  if (warp == kTmaWarp) {
    __syncwarp();
    bw::tcgen05_fence_after_thread_sync();
    bw::tmem_dealloc(tmem_base, kTmemColumns);
  }
}

// dQ = bf16(scale * dq_accum), 8 elements per thread (two 16-byte loads, one 16-byte store).
extern "C" __global__ void __launch_bounds__(256)
    mha_bwd_dq_convert(const float* dq_accum, u16* dQ, int B, int H, int S, int D, float scale) {
  const long long count = static_cast<long long>(B) * H * S * D;
  const long long first = (static_cast<long long>(blockIdx.x) * 256 + threadIdx.x) * 8;
  if (first >= count) return;  // count is a multiple of 8 (D = 128).
  u32 lo[4];
  u32 hi[4];
  bw::ld_global_nc_v4(dq_accum + first, lo);
  bw::ld_global_nc_v4(dq_accum + first + 4, hi);
  bw::st_global_v4(dQ + first,
                   bw::pack_bf16x2(__uint_as_float(lo[0]) * scale, __uint_as_float(lo[1]) * scale),
                   bw::pack_bf16x2(__uint_as_float(lo[2]) * scale, __uint_as_float(lo[3]) * scale),
                   bw::pack_bf16x2(__uint_as_float(hi[0]) * scale, __uint_as_float(hi[1]) * scale),
                   bw::pack_bf16x2(__uint_as_float(hi[2]) * scale, __uint_as_float(hi[3]) * scale));
}
