/* PTXBENCH_PLAN
{"launches":[{"kernel":"gqa_paged_decode_split",
  "grid":["ceil_div(PPS,16)","HK","B"],"block":["160"],"cluster":[],
  "dynamic_shared_bytes":"102584",
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
// Reference solution for gqa_paged_decode_hq64_hk8_d128 on sm_90a (H100/H200), written for
// PTXBench.
//
// One decode step of grouped-query attention over a paged cache: per (sequence b, key/value head
// g) the G = 8 query heads h = 8g .. 8g+7 attend to the L = seq_lens[b] tokens whose keys and
// values sit in the pages page_table[b][0 .. ceil(L/64)-1].
//
// Design (the matrix work on wgmma with no padded rows; flash-decoding split over pages):
// - The query side is tiny (8 heads, one token) and the key side long, so the products are
//   computed TRANSPOSED, keys as wgmma's M = 64 (one page) and the 8 heads as N = 8:
//     S^T[64 keys, 8 heads]  = K_page[64 keys, 128 d] . Q_group^T    8 x wgmma m64n8k16
//                              (A = the K page from shared memory, K-major; B = the Q group,
//                              8 rows of 128 d, K-major: Q's own layout)
//     O^T[128 d, 8 heads]   += V_page^T[128 d, 64 keys] . P^T        2 halves x 4 x m64n8k16
//                              (A = the V page read MN-major: the transposed-A form that bf16
//                              wgmma allows from shared memory; B = P^T stored K-major by the
//                              softmax, 8 rows of 64 keys)
//   Every wgmma row is a real key (or d) and every column a real head: the executed wgmma FLOPs
//   are the task's 4*HQ*D per token, plus the unused slots of each sequence's last page (on
//   average half a page of 64 per sequence, 0.8 % on the timed workload).
// - Split over pages: CTA (s, g, b) takes pages 16s .. 16s+15 of sequence b (grid x =
//   ceil(PPS/16), CTAs past the sequence's last page exit at once), so the 64 x 8 (b, g) pairs
//   become ~2300 CTAs of at most 16 pages for 132 SMs (2 CTAs per SM by shared memory). Each
//   writes its unnormalized O^T, running max m and sum l (log2 units) to scratch; the second
//   kernel combines the splits of each (b, h) with their log-sum-exps and writes O (bf16) and
//   LSE (natural log).
// - Warp 4 is the producer: one elected thread loads the Q group once (two 8 x 64 TMA boxes) and
//   then, per page, reads the page index from page_table and issues four TMA boxes of 64 rows x
//   64 d (K and V, d 0-63 and 64-127) at row (page*HK + g)*64 of the cache viewed as NP*HK*64
//   rows of 128 (per-page coordinates in the instruction, one tensor map per cache), into a
//   kStages-deep ring with full/empty mbarriers.
// - Warps 0-3 (one warpgroup) consume: S^T by wgmma, slots t >= L masked to -inf, the per-head
//   page max by shuffles (lanes with the same l%4 hold the same heads) and one exchange through
//   shared memory across the 4 warps, the online rescale of O^T and l, P^T to shared memory as
//   bf16 (128B-swizzled, the layout wgmma's K-major descriptor reads), then O^T by wgmma.
//
// Assumptions (every workload satisfies them; the task's prompt says so): D == 128, PS == 64,
// HQ / HK == 8.
#include "ptxbench_hopper.cuh"

namespace {

namespace sm90 = ptxbench::sm90;
using u32 = sm90::u32;
using u64 = sm90::u64;

constexpr int kHeadDim = 128;
constexpr int kPageSize = 64;
constexpr int kGroup = 8;           // query heads per key/value head: wgmma's N
constexpr int kPagesPerSplit = 16;  // the plan's ceil_div(PPS,16)
constexpr int kStages = 3;
constexpr int kConsumerThreads = 128;

constexpr u32 kQBoxBytes = kGroup * 64 * 2;        // 8 rows x 64 d: 1 KiB, one swizzle atom
constexpr u32 kPageBoxBytes = kPageSize * 64 * 2;  // 64 rows x 64 d: 8 KiB
constexpr u32 kPageBytes = 2 * kPageBoxBytes;      // one page of one head, K or V: 16 KiB
constexpr u32 kQOffset = 0;
constexpr u32 kPOffset = kQOffset + 2 * kQBoxBytes;  // P^T: 8 rows x 64 keys bf16, 1 KiB
constexpr u32 kKOffset = kPOffset + 1024;
constexpr u32 kVOffset = kKOffset + kStages * kPageBytes;
constexpr u32 kReduceOffset = kVOffset + kStages * kPageBytes;  // [4 warps][8 heads] floats
constexpr u32 kBarrierOffset = kReduceOffset + 4 * kGroup * 4;
constexpr u32 kNumBarriers = 1 + 2 * kStages;  // q_full, full[], empty[]
// 1024 bytes of alignment slack: 128B-swizzled tiles must start 1024-byte aligned.
constexpr u32 kSmemBytes = 1024 + kBarrierOffset + kNumBarriers * 8;
static_assert(kSmemBytes == 102584, "keep the launch plan's dynamic_shared_bytes in sync");

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

__device__ __forceinline__ u32 Bf16Bits(float x) { return sm90::pack_bf16x2(x, 0.0f) & 0xFFFFu; }

}  // namespace

extern "C" __global__ void __launch_bounds__(160, 1)
    gqa_paged_decode_split(const __grid_constant__ CUtensorMap tmQ,
                           const __grid_constant__ CUtensorMap tmK,
                           const __grid_constant__ CUtensorMap tmV, const int* page_table,
                           const int* seq_lens, float* partial_o, float* partial_ml, float scale,
                           int HK, int PPS) {
  const int split = static_cast<int>(blockIdx.x);
  const int g = static_cast<int>(blockIdx.y);
  const int b = static_cast<int>(blockIdx.z);
  const int length = seq_lens[b];
  const int pages = (length + kPageSize - 1) / kPageSize;
  const int first = split * kPagesPerSplit;
  const int count = min(kPagesPerSplit, pages - first);
  if (count <= 0) return;  // Uniform over the CTA: nothing initialized yet.
  const int HQ = HK * kGroup;
  const int splits_max = (PPS + kPagesPerSplit - 1) / kPagesPerSplit;

  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<unsigned long long>(smem_raw) + 1023) & ~1023ull);
  u64* q_full = reinterpret_cast<u64*>(smem + kBarrierOffset);
  u64* full = q_full + 1;
  u64* empty = full + kStages;
  float* reduce = reinterpret_cast<float*>(smem + kReduceOffset);

  const int warp = sm90::warp_index();
  const int lane = sm90::lane_index();
  if (threadIdx.x == 0) {
    sm90::mbarrier_init(q_full, 1);
    for (int s = 0; s < kStages; ++s) {
      sm90::mbarrier_init(&full[s], 1);
      sm90::mbarrier_init(&empty[s], 4);  // One arrival per consumer warp.
    }
    sm90::fence_mbarrier_init();
  }
  __syncthreads();

  if (warp == 4) {
    // Producer.
    if (sm90::elect_one()) {
      sm90::prefetch_tensormap(&tmQ);
      sm90::prefetch_tensormap(&tmK);
      sm90::prefetch_tensormap(&tmV);
      const int q_row = b * HQ + g * kGroup;
      sm90::mbarrier_arrive_expect_tx(q_full, 2 * kQBoxBytes);
      sm90::tma_load_2d(smem + kQOffset, &tmQ, q_full, 0, q_row);
      sm90::tma_load_2d(smem + kQOffset + kQBoxBytes, &tmQ, q_full, 64, q_row);
      const int* row_pages = page_table + static_cast<long long>(b) * PPS + first;
      for (int i = 0; i < count; ++i) {
        const int stage = i % kStages;
        sm90::mbarrier_wait_parity(&empty[stage], ((i / kStages) & 1) ^ 1);
        const int page = row_pages[i];
        const int row = (page * HK + g) * kPageSize;
        sm90::mbarrier_arrive_expect_tx(&full[stage], 2 * kPageBytes);
        unsigned char* k_dst = smem + kKOffset + stage * kPageBytes;
        unsigned char* v_dst = smem + kVOffset + stage * kPageBytes;
        sm90::tma_load_2d(k_dst, &tmK, &full[stage], 0, row);
        sm90::tma_load_2d(k_dst + kPageBoxBytes, &tmK, &full[stage], 64, row);
        sm90::tma_load_2d(v_dst, &tmV, &full[stage], 0, row);
        sm90::tma_load_2d(v_dst + kPageBoxBytes, &tmV, &full[stage], 64, row);
      }
    }
    return;
  }

  // Consumer warpgroup: this thread's keys (S^T rows) and d rows (O^T rows) are 16w + l/4 and
  // +8; its heads (columns) are 2(l%4) and 2(l%4)+1, the same in both products.
  const int row0 = 16 * warp + lane / 4;
  const int head0 = 2 * (lane % 4);
  const float scale_log2 = scale * kLog2e;
  const u32 q_base = sm90::smem_u32(smem + kQOffset);
  const u32 p_base = sm90::smem_u32(smem + kPOffset);
  unsigned char* p_tile = smem + kPOffset;

  float o[2][4];  // O^T halves d 0-63 and 64-127.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
#pragma unroll
    for (int j = 0; j < 4; ++j) o[h][j] = 0.0f;
  }
  float m[2] = {-__int_as_float(0x7f800000), -__int_as_float(0x7f800000)};
  float l[2] = {0.0f, 0.0f};

  sm90::mbarrier_wait_parity(q_full, 0);
  for (int i = 0; i < count; ++i) {
    const int stage = i % kStages;
    sm90::mbarrier_wait_parity(&full[stage], (i / kStages) & 1);
    const u32 k_base = sm90::smem_u32(smem + kKOffset + stage * kPageBytes);
    const u32 v_base = sm90::smem_u32(smem + kVOffset + stage * kPageBytes);

    // S^T = K_page . Q_group^T over d in 8 steps of 16 (two 64-d boxes, 32 bytes a step).
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    sm90::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      const u32 offset = (kk / 4) * kPageBoxBytes + (kk % 4) * 32;
      const u32 q_offset = (kk / 4) * kQBoxBytes + (kk % 4) * 32;
      sm90::wgmma_m64n8k16_ss_bf16_t<0, 0>(s, sm90::make_smem_desc_sw128(k_base + offset),
                                           sm90::make_smem_desc_sw128(q_base + q_offset),
                                           kk > 0 ? 1 : 0);
    }
    sm90::wgmma_commit_group();
    sm90::wgmma_wait_group<0>();
    sm90::wgmma_fence_operand(s);

    // Scaled to log2 units; the slots past the sequence's length do not exist.
    const int token0 = (first + i) * kPageSize + row0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int token = token0 + (j >= 2 ? 8 : 0);
      s[j] = token < length ? s[j] * scale_log2 : -__int_as_float(0x7f800000);
    }
    // The page max of each head: over this thread's two keys, the 8 lanes holding the same
    // heads (lane bits 2..4), then the 4 warps.
    float page_max[2] = {fmaxf(s[0], s[2]), fmaxf(s[1], s[3])};
#pragma unroll
    for (int c = 0; c < 2; ++c) {
#pragma unroll
      for (int offset = 4; offset < 32; offset *= 2) {
        page_max[c] = fmaxf(page_max[c], __shfl_xor_sync(0xffffffffu, page_max[c], offset));
      }
    }
    if (lane < 4) {
      reduce[warp * kGroup + head0] = page_max[0];
      reduce[warp * kGroup + head0 + 1] = page_max[1];
    }
    sm90::named_barrier_sync(1, kConsumerThreads);
    float alpha[2];
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      float mx = reduce[head0 + c];
#pragma unroll
      for (int w = 1; w < 4; ++w) mx = fmaxf(mx, reduce[w * kGroup + head0 + c]);
      const float m_new = fmaxf(m[c], mx);  // Finite: every page holds a token < length.
      alpha[c] = sm90::exp2_approx(m[c] - m_new);
      m[c] = m_new;
    }
    float p[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) p[j] = sm90::exp2_approx(s[j] - m[j % 2]);
    l[0] = l[0] * alpha[0] + p[0] + p[2];
    l[1] = l[1] * alpha[1] + p[1] + p[3];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      o[h][0] *= alpha[0];
      o[h][1] *= alpha[1];
      o[h][2] *= alpha[0];
      o[h][3] *= alpha[1];
    }
    // P^T[head][key] as bf16, 8 rows of 128 bytes with the 128B swizzle.
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const u32 head = static_cast<u32>(head0 + (j % 2));
      const u32 key = static_cast<u32>(row0 + (j >= 2 ? 8 : 0));
      *reinterpret_cast<unsigned short*>(p_tile + sm90::swizzle_128b_offset(head, key * 2)) =
          static_cast<unsigned short>(Bf16Bits(p[j]));
    }
    sm90::fence_proxy_async_shared();
    sm90::named_barrier_sync(1, kConsumerThreads);

    // O^T += V_page^T . P^T: A = V read MN-major (d contiguous), 16 keys (2048 bytes) a step.
    sm90::wgmma_fence_operand(o[0]);
    sm90::wgmma_fence_operand(o[1]);
    sm90::wgmma_fence();
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int kk = 0; kk < kPageSize / 16; ++kk) {
        sm90::wgmma_m64n8k16_ss_bf16_t<1, 0>(
            o[h],
            sm90::make_smem_desc_sw128_mn(v_base + h * kPageBoxBytes + kk * 2048, kPageBoxBytes),
            sm90::make_smem_desc_sw128(p_base + kk * 32), 1);
      }
    }
    sm90::wgmma_commit_group();
    sm90::wgmma_wait_group<0>();
    sm90::wgmma_fence_operand(o[0]);
    sm90::wgmma_fence_operand(o[1]);
    if (lane == 0) sm90::mbarrier_arrive(&empty[stage]);
  }

  // The split's l per head: the 8 lanes of each head pair, then the 4 warps.
#pragma unroll
  for (int c = 0; c < 2; ++c) {
#pragma unroll
    for (int offset = 4; offset < 32; offset *= 2) {
      l[c] += __shfl_xor_sync(0xffffffffu, l[c], offset);
    }
  }
  sm90::named_barrier_sync(1, kConsumerThreads);  // Every page-max read of `reduce` is done.
  if (lane < 4) {
    reduce[warp * kGroup + head0] = l[0];
    reduce[warp * kGroup + head0 + 1] = l[1];
  }
  sm90::named_barrier_sync(1, kConsumerThreads);
  const long long head_base = static_cast<long long>(b) * HQ + g * kGroup;
  if (warp == 0 && lane < 4) {
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      float total = 0.0f;
#pragma unroll
      for (int w = 0; w < 4; ++w) total += reduce[w * kGroup + head0 + c];
      const long long slot = (head_base + head0 + c) * splits_max + split;
      partial_ml[2 * slot] = m[c];
      partial_ml[2 * slot + 1] = total;
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int d = 64 * h + row0 + (j >= 2 ? 8 : 0);
      const long long slot = (head_base + head0 + (j % 2)) * splits_max + split;
      partial_o[slot * kHeadDim + d] = o[h][j];
    }
  }
}

// O[b][h] and LSE[b][h] from the splits of (b, h): weights 2^(m_s - M) with M the largest m_s.
// Thread j owns d = 2j, 2j+1.
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
  O[static_cast<long long>(bh) * (kHeadDim / 2) + j] =
      sm90::pack_bf16x2(o0 * inverse, o1 * inverse);
  if (j == 0) LSE[bh] = (top + log2f(sum)) * kLn2;
}
