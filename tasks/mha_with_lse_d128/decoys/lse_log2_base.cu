/* PTXBENCH_PLAN
{"launches":[{"kernel":"attn_fwd_kernel",
  "grid":["S/64","B*H"],"block":["128"],"cluster":[],
  "dynamic_shared_bytes":"82968",
  "args":[{"tensor_map":"tmQ"},{"tensor_map":"tmK"},{"tensor_map":"tmV"},
          {"tensor":"O"},{"tensor":"LSE"},{"scalar":"scale"},{"scalar":"S"}]}],
 "scratch":[],
 "tensor_maps":[
  {"name":"tmQ","tensor":"Q","dims":["D","B*H*S"],"box":["64","64"],"element_strides":[],
   "swizzle":"128B","interleave":"none","l2_promotion":"256B","oob_fill":"zero"},
  {"name":"tmK","tensor":"K","dims":["D","B*H*S"],"box":["64","64"],"element_strides":[],
   "swizzle":"128B","interleave":"none","l2_promotion":"256B","oob_fill":"zero"},
  {"name":"tmV","tensor":"V","dims":["D","B*H*S"],"box":["64","64"],"element_strides":[],
   "swizzle":"128B","interleave":"none","l2_promotion":"256B","oob_fill":"zero"}]}
*/
// DECOY for mha_with_lse_d128 (sm_90a), written for PTXBench.
// Expected verdict: wrong_result.
//
// The defect: LSE is written as a base-2 log-sum-exp (m2 + log2 l) instead of the natural
// log; O is correct. This is the contract's "wrong LSE base" decoy.
//
// The attention itself is a plain FlashAttention-2 kernel on the pre-Hopper tensor-core path:
// TMA loads Q, K and V tiles (64 rows x 128 columns, two 128B-swizzled boxes each; K and V
// double-buffered), each of the 4 warps owns 16 query rows, S = Q K^T and O += P V are
// mma.sync.m16n8k16 (bf16 in, fp32 out) with operands from ldmatrix (ldmatrix.trans for V), and
// the online softmax is fp32 with exp2. Correct and reasonably fast where the decoy's defect
// does not change it.
#include "ptxbench_hopper.cuh"

namespace {

namespace sm90 = ptxbench::sm90;
using u32 = sm90::u32;
using u64 = sm90::u64;

constexpr bool kCausal = false;
constexpr int kHeadDim = 128;
constexpr int kBlockM = 64;
constexpr int kBlockN = 64;
constexpr u32 kBoxBytes = 64 * 64 * 2;     // 64 rows x 64 columns: 8 KiB
constexpr u32 kTileBytes = 2 * kBoxBytes;  // 64 x 128: 16 KiB
constexpr u32 kKOffset = kTileBytes;
constexpr u32 kVOffset = kKOffset + 2 * kTileBytes;
constexpr u32 kBarrierOffset = kVOffset + 2 * kTileBytes;
constexpr u32 kSmemBytes = 1024 + kBarrierOffset + 3 * 8;  // q_full, kv_full[2]
static_assert(kSmemBytes == 82968, "keep the launch plan's dynamic_shared_bytes in sync");
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

__device__ __forceinline__ void LdmatrixX4Trans(u32 (&r)[4], u32 address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address)
               : "memory");
}

__device__ __forceinline__ void LdmatrixX4(u32 (&r)[4], u32 address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address)
               : "memory");
}

// c[4] += a[16x16] * b[16x8], bf16 in, fp32 accumulate.
__device__ __forceinline__ void Mma16816(float (&c)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Shared address of element (row, col) of a 64 x 128 tile stored as two 128B-swizzled boxes.
__device__ __forceinline__ u32 TileAddress(u32 tile, int row, int col) {
  return tile + (col / 64) * kBoxBytes + sm90::swizzle_128b_offset(row, (col % 64) * 2);
}

__device__ __forceinline__ float QuadMax(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

__device__ __forceinline__ float QuadSum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

}  // namespace

extern "C" __global__ void __launch_bounds__(128)
    attn_fwd_kernel(const __grid_constant__ CUtensorMap tmQ,
                    const __grid_constant__ CUtensorMap tmK,
                    const __grid_constant__ CUtensorMap tmV, unsigned short* O, float* LSE,
                    float scale, int S) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024u - (sm90::smem_u32(smem_raw) & 1023u)) & 1023u);
  u64* q_full = reinterpret_cast<u64*>(smem + kBarrierOffset);
  u64* kv_full = q_full + 1;
  const int q_tile =
      kCausal ? static_cast<int>(gridDim.x - 1 - blockIdx.x) : static_cast<int>(blockIdx.x);
  const int head_row0 = static_cast<int>(blockIdx.y) * S;
  const int q0 = q_tile * kBlockM;
  const int num_kv_blocks = kCausal ? q_tile + 1 : S / kBlockN;
  const bool issuer = threadIdx.x == 0;
  const int warp = sm90::warp_index();
  const int lane = sm90::lane_index();
  const u32 q_tile_addr = sm90::smem_u32(smem);

  auto issue_kv = [&](int j) {
    const int s = j & 1;
    const int row = head_row0 + j * kBlockN;
    unsigned char* k_tile = smem + kKOffset + s * kTileBytes;
    unsigned char* v_tile = smem + kVOffset + s * kTileBytes;
    sm90::mbarrier_arrive_expect_tx(&kv_full[s], 2 * kTileBytes);
    sm90::tma_load_2d(k_tile, &tmK, &kv_full[s], 0, row);
    sm90::tma_load_2d(k_tile + kBoxBytes, &tmK, &kv_full[s], 64, row);
    sm90::tma_load_2d(v_tile, &tmV, &kv_full[s], 0, row);
    sm90::tma_load_2d(v_tile + kBoxBytes, &tmV, &kv_full[s], 64, row);
  };

  if (issuer) {
    sm90::mbarrier_init(q_full, 1);
    sm90::mbarrier_init(&kv_full[0], 1);
    sm90::mbarrier_init(&kv_full[1], 1);
    sm90::fence_mbarrier_init();
  }
  __syncthreads();
  if (issuer) {
    sm90::mbarrier_arrive_expect_tx(q_full, kTileBytes);
    sm90::tma_load_2d(smem, &tmQ, q_full, 0, head_row0 + q0);
    sm90::tma_load_2d(smem + kBoxBytes, &tmQ, q_full, 64, head_row0 + q0);
    issue_kv(0);
    if (num_kv_blocks > 1) issue_kv(1);
  }
  // A fragments of this warp's 16 Q rows for the 8 k-steps over d.
  sm90::mbarrier_wait_parity(q_full, 0);
  u32 qf[8][4];
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) {
    LdmatrixX4(qf[kk], TileAddress(q_tile_addr, warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8,
                                   kk * 16 + (lane >> 4) * 8));
  }

  const float sl2 = scale * kLog2e;
  const int query0 = q0 + warp * 16 + lane / 4;  // this thread's rows: query0, query0 + 8
  float o[16][4];
#pragma unroll
  for (int i = 0; i < 16; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float m[2] = {-__int_as_float(0x7f800000), -__int_as_float(0x7f800000)};
  float l[2] = {0.0f, 0.0f};

  for (int j = 0; j < num_kv_blocks; ++j) {
    const int s = j & 1;
    sm90::mbarrier_wait_parity(&kv_full[s], (j >> 1) & 1);
    const u32 k_tile = sm90::smem_u32(smem + kKOffset + s * kTileBytes);
    const u32 v_tile = sm90::smem_u32(smem + kVOffset + s * kTileBytes);

    float sc[8][4];
#pragma unroll
    for (int n = 0; n < 8; ++n) sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < 8; ++kk) {
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        u32 b[4];
        LdmatrixX4(b, TileAddress(k_tile, np * 16 + (lane & 7) + ((lane >> 4) & 1) * 8,
                                  kk * 16 + ((lane >> 3) & 1) * 8));
        Mma16816(sc[2 * np], qf[kk], b[0], b[1]);
        Mma16816(sc[2 * np + 1], qf[kk], b[2], b[3]);
      }
    }
    if (kCausal && j == num_kv_blocks - 1) {
      // Diagonal block: key 64j + column is hidden from query query0 + row when greater.
#pragma unroll
      for (int n = 0; n < 8; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = j * kBlockN + 8 * n + 2 * (lane % 4) + (e & 1);
          if (key > query0 + (e >> 1) * 8) sc[n][e] = -__int_as_float(0x7f800000);
        }
      }
    }
    // Online softmax (log2 units), rows query0 (h = 0) and query0 + 8 (h = 1).
    float correction[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float block_max = sc[0][2 * h];
#pragma unroll
      for (int n = 0; n < 8; ++n)
        block_max = fmaxf(block_max, fmaxf(sc[n][2 * h], sc[n][2 * h + 1]));
      const float m_new = fmaxf(m[h], QuadMax(block_max) * sl2);
      correction[h] = sm90::exp2_approx(m[h] - m_new);
      m[h] = m_new;
      float sum = 0.0f;
#pragma unroll
      for (int n = 0; n < 8; ++n) {
        sc[n][2 * h] = sm90::exp2_approx(fmaf(sc[n][2 * h], sl2, -m_new));
        sc[n][2 * h + 1] = sm90::exp2_approx(fmaf(sc[n][2 * h + 1], sl2, -m_new));
        sum += sc[n][2 * h] + sc[n][2 * h + 1];
      }
      l[h] = l[h] * correction[h] + sum;
    }
#pragma unroll
    for (int n = 0; n < 16; ++n) {
      o[n][0] *= correction[0];
      o[n][1] *= correction[0];
      o[n][2] *= correction[1];
      o[n][3] *= correction[1];
    }
    // O += P V: P's A fragments come straight from the S accumulators.
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      const u32 a[4] = {sm90::pack_bf16x2(sc[2 * t][0], sc[2 * t][1]),
                        sm90::pack_bf16x2(sc[2 * t][2], sc[2 * t][3]),
                        sm90::pack_bf16x2(sc[2 * t + 1][0], sc[2 * t + 1][1]),
                        sm90::pack_bf16x2(sc[2 * t + 1][2], sc[2 * t + 1][3])};
#pragma unroll
      for (int dp = 0; dp < 8; ++dp) {
        u32 b[4];
        LdmatrixX4Trans(b, TileAddress(v_tile, t * 16 + (lane & 7) + ((lane >> 3) & 1) * 8,
                                       dp * 16 + (lane >> 4) * 8));
        Mma16816(o[2 * dp], a, b[0], b[1]);
        Mma16816(o[2 * dp + 1], a, b[2], b[3]);
      }
    }
    // Every warp is done with slot s before it is refilled.
    __syncthreads();
    if (issuer && j + 2 < num_kv_blocks) issue_kv(j + 2);
  }

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] = QuadSum(l[h]);
    const float inv = 1.0f / l[h];
    const long long row = static_cast<long long>(head_row0) + query0 + 8 * h;
    unsigned short* o_row = O + row * kHeadDim;
#pragma unroll
    for (int n = 0; n < 16; ++n) {
      *reinterpret_cast<u32*>(o_row + 8 * n + 2 * (lane % 4)) =
          sm90::pack_bf16x2(o[n][2 * h] * inv, o[n][2 * h + 1] * inv);
    }
    // THE DEFECT: the log-sum-exp in base 2 (m and log2 l are in log2 units), not the natural
    // log the task asks for: every LSE is 1/ln(2) = 1.4427 times too large. O is correct.
    if (lane % 4 == 0) LSE[row] = m[h] + __log2f(l[h]);
  }
}
