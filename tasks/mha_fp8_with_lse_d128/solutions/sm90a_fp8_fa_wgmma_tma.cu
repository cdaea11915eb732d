/* PTXBENCH_PLAN
{"launches":[
  {"kernel":"vt_pack_kernel","grid":["S/128","B*H"],"block":["256"],
   "args":[{"tensor":"V"},{"scratch":"vt"},{"scalar":"S"}]},
  {"kernel":"attn_fwd_fp8_kernel","grid":["S/128","B*H"],"block":["384"],"cluster":[],
   "dynamic_shared_bytes":"214168",
   "args":[{"tensor_map":"tmQ"},{"tensor_map":"tmK"},{"scratch":"vt"},{"tensor":"descale_q"},
           {"tensor":"descale_k"},{"tensor":"descale_v"},{"tensor":"O"},{"tensor":"LSE"},
           {"scalar":"scale"},{"scalar":"S"}]}],
 "scratch":[{"name":"vt","bytes":"B*H*S*D"}],
 "tensor_maps":[
  {"name":"tmQ","tensor":"Q","dims":["D","B*H*S"],"box":["128","128"],"element_strides":[],
   "swizzle":"128B","interleave":"none","l2_promotion":"256B","oob_fill":"zero"},
  {"name":"tmK","tensor":"K","dims":["D","B*H*S"],"box":["128","128"],"element_strides":[],
   "swizzle":"128B","interleave":"none","l2_promotion":"256B","oob_fill":"zero"}]}
*/
// Reference solution for mha_fp8_with_lse_d128 on sm_90a (H100/H200), written for PTXBench.
//
// s_ij = scale * descale_q * descale_k * Q_i . K_j, O_i = descale_v * softmax_j(s_i) V and
// LSE_i = ln sum_j exp(s_ij), per (batch, head); Q, K, V e4m3 [B, H, S, 128], O bf16, LSE fp32.
// The bf16 forward (tasks/mha_with_lse_d128/solutions/sm90a_fa_wgmma_tma.cu) with both products
// on e4m3 wgmma (m64n128k32, fp32 accumulation):
//
// - fp8 wgmma has no transpose: both operands must be K-major. S = Q K^T is (Q and K rows are
//   D-contiguous), O += P V is not: its B operand must be V^T, keys contiguous per head dim.
//   Launch 1 (vt_pack_kernel) therefore writes, per (batch*head, block of 128 keys), the exact
//   16 KiB shared-memory image of that V^T tile into the scratch buffer `vt`: 128 rows (d) of
//   128 bytes (keys) in the 128B swizzle, so launch 2 copies it with one bulk copy (a tensor map
//   cannot describe a scratch buffer) and describes it with make_smem_desc_sw128 like a TMA
//   tile. Costs one read and one write of V (2 x 100 MB on the timed shape, ~5 % of the time).
// - The keys of each 32-key group are stored in V^T in a permuted order, so that P needs no
//   shuffles: the S accumulator gives a thread, in row r, the columns 8j + 2c + {0, 1} (c = lane
//   % 4) of every column block j, while the A fragment of an RS wgmma k32 with 8-bit A wants k =
//   4c..4c+3 (register 0, row r; register 1 row r+8) and 16+4c..16+4c+3 (registers 2, 3). So
//   A position k of key group t holds the key KeyOfPosition(k) (below) of the group: the
//   thread's own four columns 2c, 2c+1, 8+2c, 9+2c at 4c..4c+3, and 16+2c, 17+2c, 24+2c, 25+2c
//   at 16+4c..19+4c. Summing over keys does not depend on their order, so V^T's columns are
//   permuted the same way and the product is unchanged.
// - Warpgroup 0 produces (one elected thread): Q once (one 128 x 128-byte TMA box), then per
//   stage K by TMA and V^T by a bulk copy, 16 KiB each, into a kStages-deep ring (full barriers
//   for K and V separately, one empty barrier per stage).
// - Warpgroups 1 and 2 consume 64 query rows each: S = Q K^T (four SS wgmma m64n128k32 e4m3),
//   online softmax in fp32 with the logits scaled by scale * descale_q * descale_k * log2(e),
//   P = exp2(s - m) scaled by 256 (P <= 1: e4m3 normals start at 2^-6, so 256 P keeps the
//   probabilities down to 2^-14 normal) and rounded to e4m3 in registers (cvt.rn.satfinite), then
//   PV = P V^T (four RS wgmma m64n128k32 e4m3) into a fresh fp32 accumulator per key block,
//   added to O in fp32 (o = (o + PV) * correction): the tensor core's fp8 accumulation keeps
//   fewer than fp32's bits (see wgmma_m64n128k32_ss_e4m3 in the header), so a chain of wgmmas
//   never spans more than the 128 keys of one block. The row sums l add the unrounded 256 P.
//   The S wgmmas of block j+1 are issued before the P V wgmmas of block j; the softmax of
//   block j+1 overlaps P V of block j.
// - Epilogue: O = o * descale_v / l (the 256 cancels: both o and l carry it) to bf16;
//   LSE = (m + log2(l) - 8) * ln 2.
//
// Assumptions (every task workload satisfies them, the task says so): D == 128 and S a multiple
// of 128; B and H arbitrary.
#include "ptxbench_hopper.cuh"

namespace {

namespace sm90 = ptxbench::sm90;
using u32 = sm90::u32;
using u64 = sm90::u64;

constexpr int kHeadDim = 128;
constexpr int kBlockM = 128;  // query rows per CTA (two consumer warpgroups of 64)
constexpr int kBlockN = 128;  // keys per pipeline stage
constexpr int kStages = 6;
constexpr int kConsumerWarps = 8;

constexpr u32 kTileBytes = 128 * 128;  // a 128 x 128 e4m3 tile: 16 KiB, one 128B-swizzled box
constexpr u32 kQOffset = 0;
constexpr u32 kKOffset = kTileBytes;
constexpr u32 kVOffset = kKOffset + kStages * kTileBytes;
constexpr u32 kBarrierOffset = kVOffset + kStages * kTileBytes;
constexpr u32 kNumBarriers = 1 + 3 * kStages;  // q_full, k_full[], v_full[], empty[]
// 1024 bytes of alignment slack: 128B-swizzled tiles must start 1024-byte aligned.
constexpr u32 kSmemBytes = 1024 + kBarrierOffset + kNumBarriers * 8;
static_assert(kSmemBytes == 214168, "keep the launch plan's dynamic_shared_bytes in sync");

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr float kPScaleLog2 = 8.0f;  // P is rounded to e4m3 as 256 P

// The key (0..31 within its group of 32) that V^T holds at A position k of an RS wgmma k32:
// positions 4c..4c+3 take keys 2c, 2c+1, 8+2c, 9+2c, positions 16+4c..19+4c keys 16 higher.
__device__ __forceinline__ int KeyOfPosition(int k) {
  const int c = (k % 16) / 4, e = k % 4;
  return 16 * (k / 16) + 8 * (e / 2) + 2 * c + e % 2;
}

constexpr int kPackStride = 144;  // bytes per key row of the staging tile (16-byte aligned)

}  // namespace

// Launch 1: V [B*H*S, 128] e4m3 -> vt, per (bh, key block kb) the 16 KiB shared-memory image of
// the K-major V^T tile (row d = head dim, byte p of the row = key KeyOfPosition(p % 32) of group
// p / 32), 128B-swizzled as if it started 1024-byte aligned. Chunk (bh, kb) is at byte
// ((bh * S/128) + kb) * 16384, so the buffer is B*H*S*D bytes.
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
  // with the row's logical chunk (i % 8) ^ (d % 8): positions 16 * logical .. +15.
  for (int i = static_cast<int>(threadIdx.x); i < 1024; i += 256) {
    const int d = i / 8;
    const int position0 = 16 * ((i % 8) ^ (d % 8));
    u32 words[4];
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      u32 word = 0;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int position = position0 + 4 * w + e;
        const int key = 32 * (position / 32) + KeyOfPosition(position % 32);
        word |= static_cast<u32>(tile[key * kPackStride + d]) << (8 * e);
      }
      words[w] = word;
    }
    *reinterpret_cast<uint4*>(dst + 16 * i) = make_uint4(words[0], words[1], words[2], words[3]);
  }
}

namespace {

// D[64x128] (fp32) = A[64x32] (e4m3, REGISTERS) * B[32x128] (e4m3, shared memory, K-major) +
// (scale_d ? D : 0). A fragment (8-bit, k32; per warp w rows 16w..16w+15, lane l, c = l % 4):
// a[0] = row 16w + l/4, k 4c..4c+3 (byte e = k 4c+e), a[1] = row + 8, same k,
// a[2] = row 16w + l/4, k 16+4c..16+4c+3, a[3] = row + 8, same k.
__device__ __forceinline__ void wgmma_m64n128k32_rs_e4m3(float (&d)[64], const u32 (&a)[4],
                                                         u64 desc_b, int scale_d) {
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "setp.ne.b32 p, %69, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "{%64, %65, %66, %67}, %68, p, 1, 1;\n\t}"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
}

// Four floats rounded to e4m3 (nearest even, saturating to +-448) in one register, x0 in the
// low byte. cvt...e4m3x2 puts its first source in the upper byte.
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

// S[64 x 128] = Q[rows of this warpgroup] * K[stage]^T over d = 0..127 (4 k-steps of 32 bytes).
__device__ __forceinline__ void IssueQK(float (&s)[64], u32 q_base, u32 k_base) {
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 32; ++kk) {
    sm90::wgmma_m64n128k32_ss_e4m3(s, sm90::make_smem_desc_sw128(q_base + kk * 32),
                                   sm90::make_smem_desc_sw128(k_base + kk * 32), kk > 0 ? 1 : 0);
  }
}

// PV[64 x 128] = P[64 x 128 keys] * V[stage] (4 k-steps of 32 keys; V^T K-major, keys permuted
// as P's fragments). A fresh accumulator: the first k-step overwrites it.
__device__ __forceinline__ void IssuePV(float (&pv)[64], const u32 (&p)[16], u32 v_base) {
#pragma unroll
  for (int t = 0; t < kBlockN / 32; ++t) {
    const u32(&a)[4] = *reinterpret_cast<const u32(*)[4]>(&p[4 * t]);
    wgmma_m64n128k32_rs_e4m3(pv, a, sm90::make_smem_desc_sw128(v_base + t * 32), t > 0 ? 1 : 0);
  }
}

__device__ __forceinline__ float QuadMax(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

__device__ __forceinline__ float QuadSum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// Online-softmax step on one S block in the wgmma accumulator layout (this thread: rows
// r0 = 16*warp + lane/4 (s[4j], s[4j+1]) and r0 + 8 (s[4j+2], s[4j+3]), columns
// 8j + 2*(lane%4) + {0,1}). Replaces s by 256 * exp2(s*sl2 - m_new), updates m (log2 units) and
// the per-thread partial row sums l (of 256 P), and returns the factors by which O must be
// rescaled.
__device__ __forceinline__ void SoftmaxStep(float (&s)[64], float sl2, float (&m)[2], float (&l)[2],
                                            float (&correction)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float block_max = s[2 * h];
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      block_max = fmaxf(block_max, fmaxf(s[4 * j + 2 * h], s[4 * j + 2 * h + 1]));
    }
    // sl2 > 0 (a product of positive factors), so the maximum of the scaled logits is the
    // scaled maximum.
    const float m_new = fmaxf(m[h], QuadMax(block_max) * sl2);
    correction[h] = sm90::exp2_approx(m[h] - m_new);  // exp2(-inf) = 0 on the first block
    m[h] = m_new;
    const float bias = kPScaleLog2 - m_new;
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      s[4 * j + 2 * h] = sm90::exp2_approx(fmaf(s[4 * j + 2 * h], sl2, bias));
      s[4 * j + 2 * h + 1] = sm90::exp2_approx(fmaf(s[4 * j + 2 * h + 1], sl2, bias));
      sum += s[4 * j + 2 * h] + s[4 * j + 2 * h + 1];
    }
    l[h] = l[h] * correction[h] + sum;
  }
}

// e4m3 A fragments of 256 P for the RS wgmma: k-step t (keys 32t..32t+31, accumulator column
// blocks 4t..4t+3) takes, in row r0, columns 2c, 2c+1 of blocks 4t and 4t+1 (register 0) and of
// blocks 4t+2 and 4t+3 (register 2); registers 1 and 3 the same in row r0 + 8.
__device__ __forceinline__ void ConvertP(const float (&s)[64], u32 (&p)[16]) {
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    const int b = 16 * t;
    p[4 * t + 0] = pack_e4m3x4(s[b + 0], s[b + 1], s[b + 4], s[b + 5]);
    p[4 * t + 1] = pack_e4m3x4(s[b + 2], s[b + 3], s[b + 6], s[b + 7]);
    p[4 * t + 2] = pack_e4m3x4(s[b + 8], s[b + 9], s[b + 12], s[b + 13]);
    p[4 * t + 3] = pack_e4m3x4(s[b + 10], s[b + 11], s[b + 14], s[b + 15]);
  }
}

// o = (o + pv) * correction (the block's product added, then rescaled to the next maximum).
__device__ __forceinline__ void AccumulateO(float (&o)[64], const float (&pv)[64],
                                            const float (&correction)[2]) {
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    o[4 * j + 0] = (o[4 * j + 0] + pv[4 * j + 0]) * correction[0];
    o[4 * j + 1] = (o[4 * j + 1] + pv[4 * j + 1]) * correction[0];
    o[4 * j + 2] = (o[4 * j + 2] + pv[4 * j + 2]) * correction[1];
    o[4 * j + 3] = (o[4 * j + 3] + pv[4 * j + 3]) * correction[1];
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(384, 1)
    attn_fwd_fp8_kernel(const __grid_constant__ CUtensorMap tmQ,
                        const __grid_constant__ CUtensorMap tmK, const unsigned char* vt,
                        const float* descale_q, const float* descale_k, const float* descale_v,
                        unsigned short* O, float* LSE, float scale, int S) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024u - (sm90::smem_u32(smem_raw) & 1023u)) & 1023u);
  u64* q_full = reinterpret_cast<u64*>(smem + kBarrierOffset);
  u64* k_full = q_full + 1;
  u64* v_full = k_full + kStages;
  u64* empty = v_full + kStages;

  const int q_tile = static_cast<int>(blockIdx.x);
  const int bh = static_cast<int>(blockIdx.y);
  const int head_row0 = bh * S;  // first row of this head in the [B*H*S, D] view
  const int q0 = q_tile * kBlockM;
  const int num_kv_blocks = S / kBlockN;
  const int warpgroup = sm90::warpgroup_index();

  if (threadIdx.x == 0) {
    sm90::mbarrier_init(q_full, 1);
    for (int s = 0; s < kStages; ++s) {
      sm90::mbarrier_init(&k_full[s], 1);
      sm90::mbarrier_init(&v_full[s], 1);
      sm90::mbarrier_init(&empty[s], kConsumerWarps);
    }
    sm90::fence_mbarrier_init();
  }
  __syncthreads();

  if (warpgroup == 0) {
    sm90::setmaxnreg_dec<24>();
    if (sm90::warp_index() == 0 && sm90::elect_one()) {
      sm90::prefetch_tensormap(&tmQ);
      sm90::prefetch_tensormap(&tmK);
      sm90::mbarrier_arrive_expect_tx(q_full, kTileBytes);
      sm90::tma_load_2d(smem + kQOffset, &tmQ, q_full, 0, head_row0 + q0);
      const unsigned char* vt_head = vt + static_cast<long long>(bh) * num_kv_blocks * kTileBytes;
      for (int j = 0; j < num_kv_blocks; ++j) {
        const int s = j % kStages;
        sm90::mbarrier_wait_parity(&empty[s], ((j / kStages) & 1) ^ 1);
        sm90::mbarrier_arrive_expect_tx(&k_full[s], kTileBytes);
        sm90::tma_load_2d(smem + kKOffset + s * kTileBytes, &tmK, &k_full[s], 0,
                          head_row0 + j * kBlockN);
        sm90::mbarrier_arrive_expect_tx(&v_full[s], kTileBytes);
        sm90::bulk_load_g2s(smem + kVOffset + s * kTileBytes,
                            vt_head + static_cast<long long>(j) * kTileBytes, kTileBytes,
                            &v_full[s]);
      }
    }
    __syncwarp();
  } else {
    sm90::setmaxnreg_inc<240>();
    const int consumer = warpgroup - 1;
    const int warp_in_group = sm90::thread_index_in_warpgroup() / 32;
    const int lane = sm90::lane_index();
    // This thread's first query row within the head (the second is 8 rows further).
    const int query0 = q0 + consumer * 64 + warp_in_group * 16 + lane / 4;
    // The logits in log2 units: scale * descale_q * descale_k * log2(e) per unit of Q.K.
    const float sl2 = scale * (*descale_q) * (*descale_k) * kLog2e;
    const float out_scale = *descale_v;
    const u32 q_base = sm90::smem_u32(smem + kQOffset) + consumer * 64 * 128;
    const u32 k_base = sm90::smem_u32(smem + kKOffset);
    const u32 v_base = sm90::smem_u32(smem + kVOffset);

    float o[64];
    float pv[64];
    float s[64];
    u32 p[16];
    float m[2] = {-__int_as_float(0x7f800000), -__int_as_float(0x7f800000)};
    float l[2] = {0.0f, 0.0f};
    float correction[2];
#pragma unroll
    for (int i = 0; i < 64; ++i) o[i] = 0.0f;

    // Prologue: S and P of block 0.
    sm90::mbarrier_wait_parity(q_full, 0);
    sm90::mbarrier_wait_parity(&k_full[0], 0);
    sm90::wgmma_fence();
    IssueQK(s, q_base, k_base);
    sm90::wgmma_commit_group();
    sm90::wgmma_wait_group<0>();
    sm90::wgmma_fence_operand(s);
    SoftmaxStep(s, sl2, m, l, correction);
    ConvertP(s, p);

    // Steady state: every iteration has a next block (the last one is peeled, so that the
    // wgmma issue stays unconditional inside the loop).
    for (int j = 0; j + 1 < num_kv_blocks; ++j) {
      const int stage = j % kStages;
      const int next = j + 1;
      sm90::wgmma_fence();  // P, O and S were written by ordinary code
      sm90::mbarrier_wait_parity(&k_full[next % kStages], (next / kStages) & 1);
      IssueQK(s, q_base, k_base + (next % kStages) * kTileBytes);
      sm90::wgmma_commit_group();
      sm90::mbarrier_wait_parity(&v_full[stage], (j / kStages) & 1);
      IssuePV(pv, p, v_base + stage * kTileBytes);
      sm90::wgmma_commit_group();
      // Groups complete in order: with one pending, the S group (issued first) is done, and the
      // softmax of block j+1 overlaps P V of block j.
      sm90::wgmma_wait_group<1>();
      sm90::wgmma_fence_operand(s);
      SoftmaxStep(s, sl2, m, l, correction);
      sm90::wgmma_wait_group<0>();
      sm90::wgmma_fence_operand(pv);
      // Both K[stage] (read by S of block j) and V[stage] are no longer read by this warp.
      if (lane == 0) sm90::mbarrier_arrive(&empty[stage]);
      AccumulateO(o, pv, correction);
      ConvertP(s, p);
    }
    {
      // Last block: P V only.
      const int j = num_kv_blocks - 1;
      const int stage = j % kStages;
      sm90::wgmma_fence();
      sm90::mbarrier_wait_parity(&v_full[stage], (j / kStages) & 1);
      IssuePV(pv, p, v_base + stage * kTileBytes);
      sm90::wgmma_commit_group();
      sm90::wgmma_wait_group<0>();
      sm90::wgmma_fence_operand(pv);
      if (lane == 0) sm90::mbarrier_arrive(&empty[stage]);
#pragma unroll
      for (int i = 0; i < 64; ++i) o[i] += pv[i];
    }

    // Epilogue.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      l[h] = QuadSum(l[h]);
      const float factor = out_scale / l[h];
      const long long row = static_cast<long long>(head_row0) + query0 + 8 * h;
      unsigned short* o_row = O + row * kHeadDim;
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        *reinterpret_cast<u32*>(o_row + 8 * j + 2 * (lane % 4)) =
            sm90::pack_bf16x2(o[4 * j + 2 * h] * factor, o[4 * j + 2 * h + 1] * factor);
      }
      if (lane % 4 == 0) LSE[row] = (m[h] + __log2f(l[h]) - kPScaleLog2) * kLn2;
    }
  }
}
