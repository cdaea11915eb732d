// clang-format off
/* PTXBENCH_PLAN {"launches":[{"kernel":"vt_pack_kernel","grid":["S/128","B*H"],"block":["256"],"args":[{"tensor":"V"},{"scratch":"vt"},{"scalar":"S"}]},{"kernel":"mha_fp8_fwd_tcgen05","grid":["B*H","S/128"],"block":["192"],"cluster":[],"dynamic_shared_bytes":"99328","args":[{"tensor_map":"tmQ"},{"tensor_map":"tmK"},{"scratch":"vt"},{"tensor":"descale_q"},{"tensor":"descale_k"},{"tensor":"descale_v"},{"tensor":"O"},{"tensor":"LSE"},{"scalar":"S"},{"scalar":"scale"}]}],"scratch":[{"name":"vt","bytes":"B*H*S*D"}],"tensor_maps":[{"name":"tmQ","tensor":"Q","dims":["D","B*H*S"],"box":["128","128"],"element_strides":[],"swizzle":"128B","interleave":"none","l2_promotion":"256B","oob_fill":"zero"},{"name":"tmK","tensor":"K","dims":["D","B*H*S"],"box":["128","128"],"element_strides":[],"swizzle":"128B","interleave":"none","l2_promotion":"256B","oob_fill":"zero"}]} */
// clang-format on
//
// fp8 attention forward with log-sum-exp on Blackwell (sm_100a), for mha_fp8_with_lse_d128:
// s_ij = scale * descale_q * descale_k * Q_i . K_j, O_i = descale_v * softmax_j(s_i) V,
// LSE_i = ln sum_j exp(s_ij); Q, K, V e4m3 [B, H, S, 128], O bf16, LSE fp32, S a multiple of 128.
//
// STATUS: compiles for sm_100a (NVRTC + ptxas, tools/blackwell-check/check.sh: 211 registers, no
// spills) and passes the CPU emulator of the primitives (tools/blackwell-check/emulate.sh b128fp8,
// both MMA schedules, against fp64 and against a model of its own roundings), but has NEVER RUN on
// a GPU: no Blackwell GPU is lent. The task marks sm_100a runtime_unverified.
//
// The bf16 forward (tasks/mha_with_lse_d128/solutions/sm100a_tcgen05_fwd.cu) on
// tcgen05.mma.kind::f8f6f4 (e4m3 x e4m3 -> fp32, K = 32 per instruction) for both products:
// - f8f6f4 takes both operands K-major, so V enters as V^T: launch 1 (vt_pack_kernel) writes,
//   per (batch*head, 128-key block), the 16 KiB shared-memory image of the K-major V^T tile (128
//   head-dim rows of 128 key bytes, 128B-swizzled) into the scratch buffer `vt`; the TMA warp
//   brings it in with one bulk copy (a tensor map cannot describe a scratch buffer). Here P goes
//   through shared memory, so the keys stay in their natural order.
// - One CTA per (batch*head, 128-row query block); 6 warps: 0-3 softmax (thread t = query row t =
//   tensor-memory lane t), warp 4 allocates tensor memory and issues every TMA load and bulk
//   copy, warp 5's elected lane issues every tcgen05.mma and commit.
// - Tensor memory (512 columns): S0 = 0..127, S1 = 128..255 (key blocks j even / odd), PV =
//   256..383 (P_j V_j of one key block, a fresh accumulator per block), O = 384..511 (the running
//   output, written only by the softmax warps). Chains of fp8 MMAs never span more than one
//   block's 4 instructions: the running sum over blocks is fp32 arithmetic of the softmax threads
//   (O = (O + PV_j) * correction), as the tensor core's own fp8 accumulation keeps fewer bits.
// - Shared memory (1024-aligned): Q 16 KiB | stage s: K 16 KiB, V^T 16 KiB (2 stages) | P 16 KiB
//   (256 P in e4m3, 128 rows of 128 keys, 128B-swizzled K-major) = 96 KiB + alignment slack.
// Per key block j:
//   TMA:     K_j (tensor map), V^T_j (bulk copy) -> stage j%2              [kv_full / kv_empty]
//   MMA:     S_{j%2} = Q K_j^T (4 x m128n128k32 e4m3, both K-major) -> commit [s_full]; then,
//            once the softmax published P_{j-1} and merged PV_{j-2}: PV = P_{j-1} V_{j-1}
//            (4 x m128n128k32, A = P K-major, B = V^T K-major) -> commit [o_done], [kv_empty]
//   softmax: wait s_full; tcgen05.ld the row; arrive s_free; online softmax in base 2 with the
//            descales in the exponent; wait o_done of block j-1 (PV_{j-1} complete, the P buffer
//            free); O = (O + PV_{j-1}) * 2^(m_old - m_new) (tcgen05.ld / st); 256 P -> e4m3 ->
//            the P buffer; fence.proxy.async, tcgen05 fence, arrive p_full.
//   end:     wait o_done of the last block; O + PV_last, times descale_v / l, -> bf16 -> global;
//            LSE = (m * sl2 + log2 l - 8) * ln 2.
// Assumptions only a B200 run can confirm, beyond the bf16 forward's: the f8f6f4 instruction
// descriptor of make_idesc_e4m3_f32_kmajor (the fp8 GEMM's sm_100a solution uses it, also never
// run) and that a K = 32 step of 8-bit operands advances 32 bytes along the swizzled row.
#include "ptxbench_blackwell.cuh"

namespace {

using ptxbench::sm100::u16;
using ptxbench::sm100::u32;
using ptxbench::sm100::u64;
namespace bw = ptxbench::sm100;

enum : int {
  kBlockM = 128,  // Query rows per CTA.
  kBlockN = 128,  // Keys per block.
  kHeadDim = 128,
  kMmaK = 32,  // K per tcgen05.mma for 8-bit operands (32 bytes of a swizzled row).
  kThreads = 192,
  kSoftmaxThreads = 128,
  kTmaWarp = 4,
  kMmaWarp = 5,
  kChunk = 32,  // Columns per tcgen05.ld.32x32b.x32.
  kPackStride = 144,
};
enum : u32 {
  kTileBytes = 128 * 128,  // 128 x 128 e4m3: one 128B-swizzled box of 128-byte rows.
  kQOffset = 0,
  kStageOffset = kTileBytes,  // Stage s: K at kStageOffset + s * 2 * kTileBytes, V^T after it.
  kPOffset = kStageOffset + 4 * kTileBytes,
  kSmemBytes = kPOffset + kTileBytes,
  kTmemColumns = 512,
  kTmemS0 = 0,
  kTmemPV = 256,
  kTmemO = 384,
};

static_assert(kSmemBytes + 1024 == 99328, "plan's dynamic_shared_bytes is stale");

constexpr float kPScaleLog2 = 8.0f;  // P is rounded to e4m3 as 256 P

// Four floats rounded to e4m3 (nearest even, saturating) in one register, x0 in the low byte.
// cvt...e4m3x2 puts its first source in the upper byte.
__device__ __forceinline__ u32 pack_e4m3x4(float x0, float x1, float x2, float x3) {
  u32 packed;
  asm("{\n\t.reg .b16 lo, hi;\n\t"
      "cvt.rn.satfinite.e4m3x2.f32 lo, %2, %1;\n\t"
      "cvt.rn.satfinite.e4m3x2.f32 hi, %4, %3;\n\t"
      "mov.b32 %0, {lo, hi};\n\t}"
      : "=r"(packed)
      : "f"(x0), "f"(x1), "f"(x2), "f"(x3));
  return packed;
}

// Copies `bytes` (a multiple of 16) from global memory to this CTA's shared memory with the bulk
// copy engine (cp.async.bulk, no tensor map), signalling the bytes as complete_tx on `bar`.
__device__ __forceinline__ void bulk_load_g2s(void* smem_dst, const void* gmem_src, u32 bytes,
                                              u64* bar) {
  asm volatile(
      "{\n\t.reg .u64 g;\n\t"
      "cvta.to.global.u64 g, %1;\n\t"
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [g], %2, "
      "[%3];\n\t}" ::"r"(bw::smem_u32(smem_dst)),
      "l"(reinterpret_cast<u64>(gmem_src)), "r"(bytes), "r"(bw::smem_u32(bar))
      : "memory");
}

// O (tensor memory, this warp's lanes) = (O + PV) * correction, or PV * correction when `first`.
__device__ __forceinline__ void MergeBlock(u32 tmem_row, float correction, bool first) {
#pragma unroll 1
  for (int c = 0; c < kHeadDim / kChunk; ++c) {
    u32 pv[kChunk];
    u32 o[kChunk];
    bw::tmem_ld_32x32b_x32(tmem_row + kTmemPV + c * kChunk, pv);
    if (!first) bw::tmem_ld_32x32b_x32(tmem_row + kTmemO + c * kChunk, o);
    bw::tcgen05_wait_ld(pv);
    if (!first) bw::tcgen05_wait_ld(o);
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      const float sum = first ? __uint_as_float(pv[i])
                              : __uint_as_float(o[i]) + __uint_as_float(pv[i]);
      o[i] = __float_as_uint(sum * correction);
    }
    bw::tmem_st_32x32b_x32(tmem_row + kTmemO + c * kChunk, o);
  }
  bw::tcgen05_wait_st();
}

}  // namespace

// Launch 1: V [B*H*S, 128] e4m3 -> vt, per (bh, key block kb) the 16 KiB shared-memory image of
// the K-major V^T tile (row d = head dim, byte k of the row = key k of the block), 128B-swizzled
// as if it started 1024-byte aligned, at byte ((bh * S/128) + kb) * 16384.
extern "C" __global__ void __launch_bounds__(256)
    vt_pack_kernel(const unsigned char* V, unsigned char* vt, int S) {
  __shared__ alignas(16) unsigned char tile[kBlockN * kPackStride];
  const int kb = static_cast<int>(blockIdx.x);
  const int bh = static_cast<int>(blockIdx.y);
  const unsigned char* src = V + (static_cast<long long>(bh) * S + kb * kBlockN) * kHeadDim;
  unsigned char* dst = vt + (static_cast<long long>(bh) * (S / kBlockN) + kb) * kTileBytes;
  for (int i = static_cast<int>(threadIdx.x); i < 1024; i += 256) {
    const int key = i / 8, chunk = i % 8;
    *reinterpret_cast<uint4*>(tile + key * kPackStride + chunk * 16) =
        *reinterpret_cast<const uint4*>(src + key * kHeadDim + chunk * 16);
  }
  __syncthreads();
  // Output chunk i (16 bytes): row d = i / 8, physical chunk i % 8, which the swizzle fills
  // with the row's logical chunk (i % 8) ^ (d % 8): keys 16 * logical .. +15.
  for (int i = static_cast<int>(threadIdx.x); i < 1024; i += 256) {
    const int d = i / 8;
    const int key0 = 16 * ((i % 8) ^ (d % 8));
    u32 words[4];
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      u32 word = 0;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        word |= static_cast<u32>(tile[(key0 + 4 * w + e) * kPackStride + d]) << (8 * e);
      }
      words[w] = word;
    }
    *reinterpret_cast<uint4*>(dst + 16 * i) = make_uint4(words[0], words[1], words[2], words[3]);
  }
}

extern "C" __global__ void __launch_bounds__(kThreads, 1)
    mha_fp8_fwd_tcgen05(const __grid_constant__ CUtensorMap tmQ,
                        const __grid_constant__ CUtensorMap tmK, const unsigned char* vt,
                        const float* descale_q, const float* descale_k, const float* descale_v,
                        u16* O, float* LSE, int S, float scale) {
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
  const int q_block = static_cast<int>(blockIdx.y);
  const int num_kv_blocks = S / kBlockN;
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
  }
  if (warp == kTmaWarp) {
    // One CTA per SM (__launch_bounds__(192, 1); two would not fit 2 x 512 columns): all 512.
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
      const unsigned char* vt_head = vt + static_cast<long long>(bh) * num_kv_blocks * kTileBytes;
      for (int j = 0; j < num_kv_blocks; ++j) {
        const int stage = j % 2;
        const u32 round = static_cast<u32>(j / 2);
        bw::mbarrier_wait_parity(&kv_empty[stage], (round & 1u) ^ 1u);
        unsigned char* k_tile = smem + kStageOffset + stage * 2 * kTileBytes;
        unsigned char* v_tile = k_tile + kTileBytes;
        bw::mbarrier_arrive_expect_tx(&kv_full[stage], 2 * kTileBytes);
        bw::tma_load_2d(k_tile, &tmK, &kv_full[stage], 0, kv_row0 + j * kBlockN);
        bulk_load_g2s(v_tile, vt_head + static_cast<long long>(j) * kTileBytes, kTileBytes,
                      &kv_full[stage]);
      }
    }
    __syncwarp();
  } else if (warp == kMmaWarp) {
    if (bw::elect_one()) {
      constexpr u32 kIdesc = bw::make_idesc_e4m3_f32_kmajor(kBlockM, kBlockN);
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
            bw::mma_f8f6f4_ss(tmem_base + kTmemS0 + buffer * kBlockN,
                              bw::make_smem_desc_kmajor_sw128(q_addr + k * kMmaK),
                              bw::make_smem_desc_kmajor_sw128(k_addr + k * kMmaK), kIdesc,
                              /*accumulate=*/k > 0);
          }
          bw::tcgen05_commit(&s_full[buffer]);
        }
        if (j > 0) {
          const int prev = j - 1;
          const int stage = prev % 2;
          // P_{prev} is in the P buffer and PV_{prev-1} has been merged into O.
          bw::mbarrier_wait_parity(&p_full, static_cast<u32>(prev) & 1u);
          bw::tcgen05_fence_after_thread_sync();
          const u32 v_addr = smem_base + kStageOffset + stage * 2 * kTileBytes + kTileBytes;
#pragma unroll
          for (int k = 0; k < kBlockN / kMmaK; ++k) {
            // A = P (K = keys, contiguous), B = V^T (K = keys, contiguous): 32 keys = 32 bytes.
            bw::mma_f8f6f4_ss(tmem_base + kTmemPV, bw::make_smem_desc_kmajor_sw128(p_addr + k * kMmaK),
                              bw::make_smem_desc_kmajor_sw128(v_addr + k * kMmaK), kIdesc,
                              /*accumulate=*/k > 0);
          }
          bw::tcgen05_commit(&o_done);
          if (prev + 2 < num_kv_blocks) {
            // Frees the stage for block prev + 2 (only when that block exists, so no asynchronous
            // arrival is still in flight when the CTA exits).
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
    const u32 tmem_row = tmem_base + lane_field;
    // The logits in log2 units per unit of Q.K.
    const float sl2 = scale * (*descale_q) * (*descale_k) * 1.4426950408889634f;
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
        bw::tmem_ld_32x32b_x32(tmem_row + kTmemS0 + buffer * kBlockN + c * kChunk,
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
      float block_max = s[0];
#pragma unroll
      for (int c = 1; c < kBlockN; ++c) {
        block_max = fmaxf(block_max, s[c]);
      }
      // sl2 > 0, so the maximum of the scaled logits is the scaled maximum.
      const float new_max = fmaxf(row_max, block_max);
      const float correction = bw::exp2_approx((row_max - new_max) * sl2);  // 0 at j = 0.
      const float offset = new_max * sl2 - kPScaleLog2;
      float block_sum = 0.0f;
#pragma unroll
      for (int c = 0; c < kBlockN; ++c) {
        s[c] = bw::exp2_approx(fmaf(s[c], sl2, -offset));  // 256 P
        block_sum += s[c];
      }
      row_sum = row_sum * correction + block_sum;
      row_max = new_max;

      if (j > 0) {
        // PV_{j-1} has finished: the P buffer may be overwritten and PV is ready to merge.
        bw::mbarrier_wait_parity(&o_done, static_cast<u32>(j - 1) & 1u);
        bw::tcgen05_fence_after_thread_sync();
        __syncwarp();
        MergeBlock(tmem_row, correction, /*first=*/j == 1);
      }
#pragma unroll
      for (int chunk = 0; chunk < kBlockN / 16; ++chunk) {
        const float* p = &s[chunk * 16];
        bw::st_shared_v4(p_addr + bw::swizzle_128b_offset(row, static_cast<u32>(chunk) * 16),
                         pack_e4m3x4(p[0], p[1], p[2], p[3]), pack_e4m3x4(p[4], p[5], p[6], p[7]),
                         pack_e4m3x4(p[8], p[9], p[10], p[11]),
                         pack_e4m3x4(p[12], p[13], p[14], p[15]));
      }
      __syncwarp();
      // P (generic-proxy st.shared) is read by the tensor core (async proxy); the merge's
      // tcgen05.ld of PV precedes the MMA that overwrites it.
      bw::fence_proxy_async_shared();
      bw::tcgen05_fence_before_thread_sync();
      bw::mbarrier_arrive(&p_full);
    }

    // Epilogue: (O + PV_last) * descale_v / l in bf16, one row per thread; LSE in natural log.
    bw::mbarrier_wait_parity(&o_done, static_cast<u32>(num_kv_blocks - 1) & 1u);
    bw::tcgen05_fence_after_thread_sync();
    __syncwarp();
    const float factor = (*descale_v) / row_sum;
    const bool single_block = num_kv_blocks == 1;
    u16* o_row = O + static_cast<long long>(row0 + static_cast<int>(row)) * kHeadDim;
#pragma unroll 1
    for (int c = 0; c < kHeadDim / kChunk; ++c) {
      u32 pv[kChunk];
      u32 o[kChunk];
      bw::tmem_ld_32x32b_x32(tmem_row + kTmemPV + c * kChunk, pv);
      if (!single_block) bw::tmem_ld_32x32b_x32(tmem_row + kTmemO + c * kChunk, o);
      bw::tcgen05_wait_ld(pv);
      if (!single_block) bw::tcgen05_wait_ld(o);
#pragma unroll
      for (int v = 0; v < kChunk / 8; ++v) {
        u32 packed[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int e = 8 * v + 2 * i;
          const float lo = __uint_as_float(pv[e]) + (single_block ? 0.0f : __uint_as_float(o[e]));
          const float hi =
              __uint_as_float(pv[e + 1]) + (single_block ? 0.0f : __uint_as_float(o[e + 1]));
          packed[i] = bw::pack_bf16x2(lo * factor, hi * factor);
        }
        bw::st_global_v4(o_row + c * kChunk + 8 * v, packed[0], packed[1], packed[2], packed[3]);
      }
    }
    LSE[row0 + static_cast<int>(row)] =
        (row_max * sl2 + bw::log2_approx(row_sum) - kPScaleLog2) * 0.6931471805599453f;
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
