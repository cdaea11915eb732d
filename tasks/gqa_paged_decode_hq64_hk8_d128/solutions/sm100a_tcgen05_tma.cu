/* PTXBENCH_PLAN
{"launches":[{"kernel":"gqa_paged_decode_split",
  "grid":["ceil_div(PPS,16)","HK","B"],"block":["160"],"cluster":[],
  "dynamic_shared_bytes":"205952",
  "args":[{"tensor_map":"tmQ"},{"tensor_map":"tmK"},{"tensor_map":"tmV"},
          {"tensor":"page_table"},{"tensor":"seq_lens"},{"scratch":"partial_o"},
          {"scratch":"partial_ml"},{"scalar":"scale"},{"scalar":"HK"},{"scalar":"PPS"}]},
  {"kernel":"gqa_paged_decode_combine",
  "grid":["B*HQ"],"block":["64"],"cluster":[],"dynamic_shared_bytes":"0",
  "args":[{"scratch":"partial_o"},{"scratch":"partial_ml"},{"tensor":"seq_lens"},
          {"tensor":"O"},{"tensor":"LSE"},{"scalar":"HQ"},{"scalar":"PPS"}]}],
 "scratch":[{"name":"partial_o","bytes":"4*B*HQ*ceil_div(PPS,16)*D"},
            {"name":"partial_ml","bytes":"8*B*HQ*ceil_div(PPS,16)"}],
 "tensor_maps":[
  {"name":"tmQ","tensor":"Q","dims":["D","B*HQ"],"box":["64","8"],"element_strides":[],
   "swizzle":"128B","interleave":"none","l2_promotion":"none","oob_fill":"zero"},
  {"name":"tmK","tensor":"K_cache","dims":["D","NP*HK*PS"],"box":["64","64"],
   "element_strides":[],"swizzle":"128B","interleave":"none","l2_promotion":"256B",
   "oob_fill":"zero"},
  {"name":"tmV","tensor":"V_cache","dims":["D","NP*HK*PS"],"box":["64","64"],
   "element_strides":[],"swizzle":"128B","interleave":"none","l2_promotion":"256B",
   "oob_fill":"zero"}]}
*/
// Reference solution for gqa_paged_decode_hq64_hk8_d128 on sm_100a (B200), written for PTXBench.
//
// STATUS: compiles for sm_100a (NVRTC + ptxas) and passes the CPU emulator
// (tools/blackwell-check/emulate.sh gqa100), but has NEVER RUN on a Blackwell GPU: none is lent
// to this project. The task marks sm_100a runtime_unverified.
//
// The algorithm and the launch plan are the sm_90a solution's (sm90a_wgmma_tma.cu): per
// (sequence b, key/value head g) the G = 8 query heads h = 8g .. 8g+7 attend to the
// L = seq_lens[b] tokens of the pages page_table[b][0 .. ceil(L/64)-1]; the products are computed
// transposed (keys or d on M, the group's heads on N); CTA (s, g, b) takes pages 16s .. 16s+15
// and writes an unnormalized partial; the combine kernel merges the splits by log-sum-exp.
//
// What changes on Blackwell (the tcgen05 shape rules, tasks/_shared/contract/arch_sm_100a.md):
// - tcgen05.mma kind::f16 with cta_group::1 has M = 64 (N % 8 == 0) or M = 128 (N % 16 == 0).
//   M = 64 places its rows in a lane pattern of its own; M = 128 puts row i in tensor-memory lane
//   i, which the four softmax warps read as their own lane quarters. So M = 128, and:
//     S^T[128 keys, 16]   = K_pair[128 keys, 128 d] . Q16^T     8 x m128n16k16 (both K-major)
//     O^T[128 d, 16]      = V_pair^T[128 d, 128 keys] . P16^T   8 x m128n16k16 (A MN-major)
//   where a "pair" is two consecutive pages of the split (128 keys = M) and N = 16 is the group's
//   8 heads plus 8 zero rows (Q rows 8-15 and P^T rows 8-15 are zeroed once): N = 8 is not a
//   legal shape with M = 128. The padding doubles the MMA FLOPs (16 columns for 8 heads); the
//   work is memory-bound (8 FLOPs per cache byte), so the tensor core has the time, and every
//   executed multiply-add is still a tcgen05 one (share_of_executed unaffected).
// - Two pages per stage: the stage holds [K page a, d 0-63][K page b, d 0-63][K a, d 64-127]
//   [K b, d 64-127] (8 KiB boxes), so the 128 keys of a pair are 128 consecutive 128-byte rows
//   of each d half: one K-major A operand (SBO 1024) for S^T, and for O^T the MN-major A operand
//   with its two 64-d spans 16 KiB apart (LBO). An odd last pair (only at the sequence's end: a
//   split has 16 pages) loads its first page twice; the copy's keys are past L and masked, and its
//   values are finite data multiplied by an exact 0.
// - Accumulators in tensor memory (32 columns: S^T at 0, O^T at 16); each pair's O^T is a fresh
//   product (enable_input_d false on its first step) that the softmax threads add to the running
//   O in registers after rescaling it, so tensor memory is never rescaled in place (no
//   tcgen05.st).
// - Roles (160 threads): warps 0-3 are the softmax; thread t of warp w owns key 32w + t of the
//   pair's S^T and d = 32w + t of O^T (its lane quarter). An elected lane of warp 0 issues the
//   MMAs and their commits. Warp 4's elected lane issues the TMA loads (Q once; per page four
//   64-row boxes at row (page*HK + g)*64) into a 3-stage ring; the commit after a pair's
//   O^T MMAs frees its stage (tcgen05.commit tracks every earlier MMA of its thread, and the
//   pair's S^T MMAs completed before the softmax started).
// - Shared memory: Q16 4 KiB | P16 4 KiB | 3 stages x (K 32 KiB + V 32 KiB) | 32 floats, plus
//   1024 bytes of alignment slack: 205952 bytes, one CTA per SM (the same 6 pages per SM in
//   flight as the sm_90a solution's 2 CTAs x 3 pages).
//
// Assumptions (every workload satisfies them; the task's prompt says so): D == 128, PS == 64,
// HQ / HK == 8.
#include "ptxbench_blackwell.cuh"

namespace {

namespace bw = ptxbench::sm100;
using u16 = bw::u16;
using u32 = bw::u32;
using u64 = bw::u64;

enum : int {
  kHeadDim = 128,
  kPageSize = 64,
  kGroup = 8,           // Query heads per key/value head.
  kMmaN = 16,           // The group padded to tcgen05's smallest N for M = 128.
  kPairKeys = 128,      // Two pages: the MMA's M.
  kPagesPerSplit = 16,  // The plan's ceil_div(PPS,16).
  kStages = 3,
  kSoftmaxThreads = 128,
  kTmaWarp = 4,
};
enum : u32 {
  kQBoxBytes = kGroup * 64 * 2,        // 8 rows x 64 d: one 1 KiB swizzle atom.
  kHalf16Bytes = kMmaN * 128,          // 16 rows of 128 bytes: one 64-wide half of Q16 or P16.
  kPageBoxBytes = kPageSize * 64 * 2,  // 64 rows x 64 d: 8 KiB.
  kPairHalfBytes = 2 * kPageBoxBytes,  // 128 keys x 64 d: one d half of a pair.
  kPairBytes = 2 * kPairHalfBytes,     // K (or V) of one pair: 32 KiB.
  kQOffset = 0,
  kPOffset = kQOffset + 2 * kHalf16Bytes,
  kStageOffset = kPOffset + 2 * kHalf16Bytes,  // Stage s: K at + s * 2 * kPairBytes, V after.
  kReduceOffset = kStageOffset + kStages * 2 * kPairBytes,  // [4 warps][8 heads] floats.
  kSmemBytes = kReduceOffset + 4 * kGroup * 4,
  kTmemColumns = 32,  // The minimum allocation; S^T and O^T take 16 each.
  kTmemS = 0,
  kTmemO = 16,
};
static_assert(kSmemBytes + 1024 == 205952, "keep the launch plan's dynamic_shared_bytes in sync");
static_assert(kHeadDim == 2 * 64, "the head dim is two 128-byte swizzle rows");

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

}  // namespace

extern "C" __global__ void __launch_bounds__(160, 1)
    gqa_paged_decode_split(const __grid_constant__ CUtensorMap tmQ,
                           const __grid_constant__ CUtensorMap tmK,
                           const __grid_constant__ CUtensorMap tmV, const int* page_table,
                           const int* seq_lens, float* partial_o, float* partial_ml, float scale,
                           int HK, int PPS) {
  __shared__ alignas(8) u64 q_full;
  __shared__ alignas(8) u64 full[kStages];
  __shared__ alignas(8) u64 empty[kStages];
  __shared__ alignas(8) u64 s_full;
  __shared__ alignas(8) u64 o_full;
  __shared__ u32 tmem_base_slot;
  extern __shared__ unsigned char dynamic_smem[];

  const int split = static_cast<int>(blockIdx.x);
  const int g = static_cast<int>(blockIdx.y);
  const int b = static_cast<int>(blockIdx.z);
  const int length = seq_lens[b];
  const int pages = (length + kPageSize - 1) / kPageSize;
  const int first = split * kPagesPerSplit;
  const int count = min(static_cast<int>(kPagesPerSplit), pages - first);
  if (count <= 0) return;  // Uniform over the CTA: nothing initialized or allocated yet.
  const int pairs = (count + 1) / 2;
  const int HQ = HK * kGroup;
  const int splits_max = (PPS + kPagesPerSplit - 1) / kPagesPerSplit;

  // TMA's 128B swizzle and the MMA descriptors (base offset 0) agree only for 1024-byte aligned
  // tiles.
  const u32 misalignment = bw::smem_u32(dynamic_smem) & 1023u;
  unsigned char* smem = dynamic_smem + ((1024u - misalignment) & 1023u);
  const u32 smem_base = bw::smem_u32(smem);
  float* reduce = reinterpret_cast<float*>(smem + kReduceOffset);

  const int warp = bw::warp_index();
  const int lane = bw::lane_index();

  if (warp == kTmaWarp && bw::elect_one()) {
    bw::mbarrier_init(&q_full, 1);
    for (int s = 0; s < kStages; ++s) {
      bw::mbarrier_init(&full[s], 1);
      bw::mbarrier_init(&empty[s], 1);  // One tcgen05.commit per use.
    }
    bw::mbarrier_init(&s_full, 1);
    bw::mbarrier_init(&o_full, 1);
    bw::fence_mbarrier_init();
    bw::prefetch_tensormap(&tmQ);
    bw::prefetch_tensormap(&tmK);
    bw::prefetch_tensormap(&tmV);
  }
  if (warp == 0) {
    // 201 KiB of shared memory: one CTA per SM, 32 of the 512 columns.
    bw::tmem_alloc(&tmem_base_slot, kTmemColumns);
    bw::tmem_relinquish_alloc_permit();
  }
  if (warp < 4) {
    // The padding rows 8-15 of Q16 and P16 (both 64-wide halves of each): zero, so the padded
    // columns of S^T and O^T are exact zeros. The TMA writes rows 0-7 only; the softmax rows
    // 0-7 of P16 only. 128 threads x 2 x 16 bytes = the four 1 KiB padding atoms.
    for (int i = static_cast<int>(threadIdx.x); i < 256; i += kSoftmaxThreads) {
      const u32 atom = static_cast<u32>(i / 64);  // Q lo, Q hi, P lo, P hi.
      const u32 address = smem_base + atom * kHalf16Bytes + kQBoxBytes + (i % 64) * 16;
      bw::st_shared_v4(address, 0u, 0u, 0u, 0u);
    }
    bw::fence_proxy_async_shared();  // The MMAs (async proxy) read these rows.
  }
  bw::tcgen05_fence_before_thread_sync();
  __syncthreads();
  bw::tcgen05_fence_after_thread_sync();
  const u32 tmem_base = tmem_base_slot;

  if (warp == kTmaWarp) {
    // Producer: Q's 8 rows once, then both pages of each pair.
    if (bw::elect_one()) {
      const int q_row = b * HQ + g * kGroup;
      bw::mbarrier_arrive_expect_tx(&q_full, 2 * kQBoxBytes);
      bw::tma_load_2d(smem + kQOffset, &tmQ, &q_full, 0, q_row);
      bw::tma_load_2d(smem + kQOffset + kHalf16Bytes, &tmQ, &q_full, 64, q_row);
      const int* row_pages = page_table + static_cast<long long>(b) * PPS + first;
      for (int i = 0; i < pairs; ++i) {
        const int stage = i % kStages;
        bw::mbarrier_wait_parity(&empty[stage], ((i / kStages) & 1) ^ 1);
        bw::mbarrier_arrive_expect_tx(&full[stage], 2 * kPairBytes);
        unsigned char* k_dst = smem + kStageOffset + stage * 2 * kPairBytes;
        unsigned char* v_dst = k_dst + kPairBytes;
        for (int half = 0; half < 2; ++half) {
          // An odd last pair repeats its first page: never an entry at or past the sequence's
          // ceil(L / PS) (the copy's keys are masked as past L).
          const int index = min(2 * i + half, count - 1);
          const int row = (row_pages[index] * HK + g) * kPageSize;
          const u32 slot = half * kPageBoxBytes;
          bw::tma_load_2d(k_dst + slot, &tmK, &full[stage], 0, row);
          bw::tma_load_2d(k_dst + kPairHalfBytes + slot, &tmK, &full[stage], 64, row);
          bw::tma_load_2d(v_dst + slot, &tmV, &full[stage], 0, row);
          bw::tma_load_2d(v_dst + kPairHalfBytes + slot, &tmV, &full[stage], 64, row);
        }
      }
    }
    return;
  }

  // Softmax warps 0-3: this thread's key of S^T and d of O^T are both 32 * warp + lane, its
  // tensor-memory lane (warp w reads lanes 32w .. 32w+31 only).
  const int row = 32 * warp + lane;
  const u32 lane_field = static_cast<u32>(32 * warp) << 16;
  const float scale_log2 = scale * kLog2e;
  const u32 q_addr = smem_base + kQOffset;
  const u32 p_addr = smem_base + kPOffset;
  unsigned char* p_tile = smem + kPOffset;
  constexpr u32 kIdescS = bw::make_idesc_bf16_f32_kmajor(kPairKeys, kMmaN);
  constexpr u32 kIdescO = bw::make_idesc_f16(kHeadDim, kMmaN, /*inputs_bf16=*/true,
                                             /*accum_f32=*/true, /*a_mn_major=*/true,
                                             /*b_mn_major=*/false);

  float o[kGroup], m[kGroup], l[kGroup];
#pragma unroll
  for (int h = 0; h < kGroup; ++h) {
    o[h] = 0.0f;
    m[h] = -__int_as_float(0x7f800000);
    l[h] = 0.0f;
  }

  if (warp == 0) bw::mbarrier_wait_parity(&q_full, 0);
  for (int i = 0; i < pairs; ++i) {
    const int stage = i % kStages;
    const u32 k_addr = smem_base + kStageOffset + stage * 2 * kPairBytes;
    const u32 v_addr = k_addr + kPairBytes;

    // S^T = K_pair . Q16^T over d in 8 steps of 16 (two 64-d halves, 32 bytes a step).
    if (warp == 0) {
      bw::mbarrier_wait_parity(&full[stage], (i / kStages) & 1);
      __syncwarp();
      bw::tcgen05_fence_after_thread_sync();
      if (bw::elect_one()) {
#pragma unroll
        for (int kk = 0; kk < kHeadDim / 16; ++kk) {
          const u32 offset = (kk / 4) * kPairHalfBytes + (kk % 4) * 32;
          const u32 q_offset = (kk / 4) * kHalf16Bytes + (kk % 4) * 32;
          bw::mma_f16_ss(tmem_base + kTmemS, bw::make_smem_desc_kmajor_sw128(k_addr + offset),
                         bw::make_smem_desc_kmajor_sw128(q_addr + q_offset), kIdescS, kk > 0);
        }
        bw::tcgen05_commit(&s_full);
      }
      __syncwarp();
    }
    bw::mbarrier_wait_parity(&s_full, i & 1);
    __syncwarp();
    bw::tcgen05_fence_after_thread_sync();
    u32 s_bits[kGroup];
    bw::tmem_ld_32x32b_x8(tmem_base + lane_field + kTmemS, s_bits);
    bw::tcgen05_wait_ld(s_bits);

    // Scaled to log2 units; the keys past the sequence's length (the partial last page, the
    // repeated page of an odd last pair) do not exist.
    const bool valid = (first + 2 * i) * kPageSize + row < length;
    float s[kGroup], page_max[kGroup];
#pragma unroll
    for (int h = 0; h < kGroup; ++h) {
      s[h] = valid ? __uint_as_float(s_bits[h]) * scale_log2 : -__int_as_float(0x7f800000);
      page_max[h] = s[h];
#pragma unroll
      for (int offset = 1; offset < 32; offset *= 2) {
        page_max[h] = fmaxf(page_max[h], __shfl_xor_sync(0xffffffffu, page_max[h], offset));
      }
    }
    if (lane == 0) {
#pragma unroll
      for (int h = 0; h < kGroup; ++h) reduce[warp * kGroup + h] = page_max[h];
    }
    bw::named_barrier_sync(1, kSoftmaxThreads);
    float alpha[kGroup];
#pragma unroll
    for (int h = 0; h < kGroup; ++h) {
      float mx = reduce[h];
#pragma unroll
      for (int w = 1; w < 4; ++w) mx = fmaxf(mx, reduce[w * kGroup + h]);
      const float m_new = fmaxf(m[h], mx);  // Finite: a pair's first page holds a key < L.
      alpha[h] = bw::exp2_approx(m[h] - m_new);
      m[h] = m_new;
      const float p = bw::exp2_approx(s[h] - m_new);
      l[h] = l[h] * alpha[h] + p;
      // P16^T[head][key] as bf16: two 64-key halves of 16 rows x 128 bytes, 128B-swizzled.
      *reinterpret_cast<u16*>(
          p_tile + (row / 64) * kHalf16Bytes +
          bw::swizzle_128b_offset(static_cast<u32>(h), static_cast<u32>(row % 64) * 2)) =
          static_cast<u16>(bw::pack_bf16x2(p, 0.0f) & 0xFFFFu);
    }
    bw::fence_proxy_async_shared();          // P16 is read by the MMA (async proxy).
    bw::tcgen05_fence_before_thread_sync();  // This thread's S^T load precedes the next S^T MMA.
    bw::named_barrier_sync(1, kSoftmaxThreads);

    // O^T = V_pair^T . P16^T over the pair's 128 keys in 8 steps of 16: A = V read MN-major (d
    // contiguous, the two d halves 16 KiB apart), 16 keys = 2048 bytes a step.
    if (warp == 0) {
      bw::tcgen05_fence_after_thread_sync();
      if (bw::elect_one()) {
#pragma unroll
        for (int kk = 0; kk < kPairKeys / 16; ++kk) {
          const u32 p_offset = (kk / 4) * kHalf16Bytes + (kk % 4) * 32;
          bw::mma_f16_ss(tmem_base + kTmemO,
                         bw::make_smem_desc_mnmajor_sw128(v_addr + kk * 2048, kPairHalfBytes),
                         bw::make_smem_desc_kmajor_sw128(p_addr + p_offset), kIdescO, kk > 0);
        }
        bw::tcgen05_commit(&empty[stage]);
        bw::tcgen05_commit(&o_full);
      }
      __syncwarp();
    }
    bw::mbarrier_wait_parity(&o_full, i & 1);
    __syncwarp();
    bw::tcgen05_fence_after_thread_sync();
    u32 o_bits[kGroup];
    bw::tmem_ld_32x32b_x8(tmem_base + lane_field + kTmemO, o_bits);
    bw::tcgen05_wait_ld(o_bits);
#pragma unroll
    for (int h = 0; h < kGroup; ++h) o[h] = o[h] * alpha[h] + __uint_as_float(o_bits[h]);
    // This O^T load precedes the next pair's O^T MMA (issued after the next barrier).
    bw::tcgen05_fence_before_thread_sync();
  }

  // The split's l per head: the warp's 32 keys, then the 4 warps. Every read of `reduce` for the
  // last page maximum happened before the last barrier above.
#pragma unroll
  for (int h = 0; h < kGroup; ++h) {
#pragma unroll
    for (int offset = 1; offset < 32; offset *= 2) {
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], offset);
    }
  }
  if (lane == 0) {
#pragma unroll
    for (int h = 0; h < kGroup; ++h) reduce[warp * kGroup + h] = l[h];
  }
  bw::named_barrier_sync(1, kSoftmaxThreads);
  const long long head_base = static_cast<long long>(b) * HQ + g * kGroup;
  if (warp == 0 && lane < kGroup) {
    float total = 0.0f, m_lane = 0.0f;
#pragma unroll
    for (int w = 0; w < 4; ++w) total += reduce[w * kGroup + lane];
#pragma unroll
    for (int h = 0; h < kGroup; ++h) m_lane = lane == h ? m[h] : m_lane;
    const long long slot = (head_base + lane) * splits_max + split;
    partial_ml[2 * slot] = m_lane;
    partial_ml[2 * slot + 1] = total;
  }
#pragma unroll
  for (int h = 0; h < kGroup; ++h) {
    const long long slot = (head_base + h) * splits_max + split;
    partial_o[slot * kHeadDim + row] = o[h];
  }

  // Every MMA completed (o_full waited) and every tcgen05.ld waited for: free tensor memory.
  bw::named_barrier_sync(1, kSoftmaxThreads);
  if (warp == 0) {
    bw::tcgen05_fence_after_thread_sync();
    bw::tmem_dealloc(tmem_base, kTmemColumns);
  }
}

// O[b][h] and LSE[b][h] from the splits of (b, h): weights 2^(m_s - M) with M the largest m_s
// (as the sm_90a solution's combine). Thread j owns d = 2j, 2j+1.
extern "C" __global__ void __launch_bounds__(64)
    gqa_paged_decode_combine(const float* partial_o, const float* partial_ml, const int* seq_lens,
                             u32* O, float* LSE, int HQ, int PPS) {
  const int bh = static_cast<int>(blockIdx.x);
  const int b = bh / HQ;
  const int splits_max = (PPS + kPagesPerSplit - 1) / kPagesPerSplit;
  const int pages = (seq_lens[b] + kPageSize - 1) / kPageSize;
  const int splits = (pages + kPagesPerSplit - 1) / kPagesPerSplit;
  const long long base = static_cast<long long>(bh) * splits_max;
  float top = -__int_as_float(0x7f800000);
  for (int s = 0; s < splits; ++s) top = fmaxf(top, partial_ml[2 * (base + s)]);
  float sum = 0.0f, o0 = 0.0f, o1 = 0.0f;
  const int j = static_cast<int>(threadIdx.x);
  for (int s = 0; s < splits; ++s) {
    const float weight = exp2f(partial_ml[2 * (base + s)] - top);
    sum += weight * partial_ml[2 * (base + s) + 1];
    const float* row = partial_o + (base + s) * kHeadDim;
    o0 += weight * row[2 * j];
    o1 += weight * row[2 * j + 1];
  }
  const float inverse = 1.0f / sum;
  O[static_cast<long long>(bh) * (kHeadDim / 2) + j] = bw::pack_bf16x2(o0 * inverse, o1 * inverse);
  if (j == 0) LSE[bh] = (top + log2f(sum)) * kLn2;
}
