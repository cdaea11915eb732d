/* PTXBENCH_PLAN
{"launches":[
  {"kernel":"attn_bwd_preprocess","grid":["ceil_div(B*H*S,8)"],"block":["256"],
   "args":[{"tensor":"O"},{"tensor":"dO"},{"scratch":"delta"},{"scratch":"dq_accum"},
           {"scalar":"B"},{"scalar":"H"},{"scalar":"S"}]},
  {"kernel":"attn_bwd_main","grid":["S/64","B*H"],"block":["128"],
   "dynamic_shared_bytes":"108608",
   "args":[{"tensor_map":"tmQ"},{"tensor_map":"tmK"},{"tensor_map":"tmV"},{"tensor_map":"tmdO"},
           {"tensor":"LSE"},{"scratch":"delta"},{"scratch":"dq_accum"},{"tensor":"dK"},
           {"tensor":"dV"},{"scalar":"S"},{"scalar":"scale"}]},
  {"kernel":"attn_bwd_dq_convert","grid":["ceil_div(B*H*S*D,1024)"],"block":["256"],
   "args":[{"scratch":"dq_accum"},{"tensor":"dQ"},{"scalar":"B"},{"scalar":"H"},{"scalar":"S"},
           {"scalar":"scale"}]}],
 "scratch":[{"name":"delta","bytes":"4*B*H*S"},{"name":"dq_accum","bytes":"4*B*H*S*D"}],
 "tensor_maps":[
  {"name":"tmQ","tensor":"Q","dims":["D","B*H*S"],"box":["64","64"],"swizzle":"128B",
   "l2_promotion":"128B"},
  {"name":"tmK","tensor":"K","dims":["D","B*H*S"],"box":["64","64"],"swizzle":"128B",
   "l2_promotion":"128B"},
  {"name":"tmV","tensor":"V","dims":["D","B*H*S"],"box":["64","64"],"swizzle":"128B",
   "l2_promotion":"128B"},
  {"name":"tmdO","tensor":"dO","dims":["D","B*H*S"],"box":["64","64"],"swizzle":"128B",
   "l2_promotion":"128B"}]}
*/
// VARIANT: reference solution
// Reference sm_90a solution for the attention backward tasks (mha_bwd_d128, and with kCausal
// true mha_bwd_d128_causal), written for PTXBench. A FlashAttention-2 style split in three
// launches, kept simple (one warpgroup per CTA, no warp specialization):
//
//  1. attn_bwd_preprocess: delta_i = sum_d dO_id * O_id per row (one warp per row) into scratch,
//     and zeroes the fp32 dQ accumulator row.
//  2. attn_bwd_main: one CTA per (b*h, 64 rows of K/V). K and V stay in shared memory; the CTA
//     walks the 64-row query blocks (TMA loads of Q and dO, bulk copies of LSE and delta, two
//     stages) and per block computes, with the key rows as the wgmma M dimension:
//       S^T  = K Q^T            (SS wgmma, both operands K-major)
//       dP^T = V dO^T           (SS wgmma)
//       P^T  = exp(scale S^T - LSE),  dS^T = P^T (dP^T - delta)       (registers)
//       dV  += P^T dO           (RS wgmma: P^T straight from the accumulators, dO MN-major)
//       dK  += dS^T Q           (RS wgmma, Q MN-major)
//       dQ_blk = dS K           (SS wgmma: dS^T stored to shared memory, read back MN-major;
//                                K MN-major), added to the fp32 accumulator with red.global.add
//     and finally writes dV and scale * dK.
//  3. attn_bwd_dq_convert: dQ = bf16(scale * accumulator).
//
// Assumptions (the task's): D = 128, S a multiple of 64, [B, H, S, D] bf16 tensors.
#include "ptxbench_hopper.cuh"

namespace {

namespace sm90 = ptxbench::sm90;
using u32 = sm90::u32;
using u64 = sm90::u64;

constexpr bool kCausal = false;

constexpr int kHeadDim = 128;
constexpr int kBlock = 64;                 // key rows per CTA and query rows per step
constexpr u32 kBoxBytes = 64 * 128;        // one TMA box: 64 rows x 64 bf16 (8 KiB)
constexpr u32 kTileBytes = 2 * kBoxBytes;  // 64 rows x 128 bf16: two boxes, d 0-63 | 64-127
constexpr u32 kOffK = 0;
constexpr u32 kOffV = kTileBytes;
constexpr u32 kOffStage = 2 * kTileBytes;           // stage s: Q at +2s*kTileBytes, dO after it
constexpr u32 kOffDS = kOffStage + 4 * kTileBytes;  // dS^T tile, 64 x 64 bf16, 128B-swizzled
constexpr u32 kOffVec = kOffDS + kBoxBytes;         // LSE[2][64], delta[2][64] fp32
constexpr u32 kOffBar = kOffVec + 4 * 64 * 4;       // kv_full, q_full[2]
constexpr u32 kSmemBytes = 1024 + kOffBar + 64;     // 1024: alignment slack for the 128B swizzle
static_assert(kSmemBytes == 108608, "keep the launch plan's dynamic_shared_bytes in sync");
constexpr u32 kStageTxBytes = 2 * kTileBytes + 2 * 64 * 4;  // Q, dO, LSE, delta
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ float bf16_to_float(unsigned short bits) {
  return __uint_as_float(static_cast<u32>(bits) << 16);
}

}  // namespace

// delta[r] = sum_d O[r][d] * dO[r][d] for each of the B*H*S rows (fp32, from the bf16 values),
// one warp per row, 4 elements per lane; the warp also zeroes dq_accum's row (128 floats).
extern "C" __global__ void __launch_bounds__(256)
    attn_bwd_preprocess(const unsigned short* O, const unsigned short* dO, float* delta,
                        float* dq_accum, int B, int H, int S) {
  const long long rows = static_cast<long long>(B) * H * S;
  const long long row = static_cast<long long>(blockIdx.x) * 8 + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  if (row >= rows) return;
  const u64 o4 = *reinterpret_cast<const u64*>(O + row * kHeadDim + lane * 4);
  const u64 g4 = *reinterpret_cast<const u64*>(dO + row * kHeadDim + lane * 4);
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    sum += bf16_to_float(static_cast<unsigned short>(o4 >> (16 * i))) *
           bf16_to_float(static_cast<unsigned short>(g4 >> (16 * i)));
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (lane == 0) delta[row] = sum;
  float* acc_row = dq_accum + row * kHeadDim + lane * 4;
  asm volatile("st.global.v4.f32 [%0], {%1, %1, %1, %1};" ::"l"(acc_row), "f"(0.f) : "memory");
}

extern "C" __global__ void __launch_bounds__(128, 1)
    attn_bwd_main(const __grid_constant__ CUtensorMap tmQ, const __grid_constant__ CUtensorMap tmK,
                  const __grid_constant__ CUtensorMap tmV, const __grid_constant__ CUtensorMap tmdO,
                  const float* lse, const float* delta, float* dq_accum, unsigned short* dK,
                  unsigned short* dV, int S, float scale) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024u - (sm90::smem_u32(smem_raw) & 1023u)) & 1023u);
  u64* kv_full = reinterpret_cast<u64*>(smem + kOffBar);
  u64* q_full = kv_full + 1;  // [2]
  // Causal: key block n has S/64 - n query blocks to visit; launch the long ones first.
  const int kv_block = static_cast<int>(gridDim.x - 1 - blockIdx.x);
  const int kv0 = kv_block * kBlock;
  const int row_base = static_cast<int>(blockIdx.y) * S;  // row of (b*h, s=0) in [B*H*S, D]
  const int first_q_block = kCausal ? kv_block : 0;
  const int num_steps = S / kBlock - first_q_block;
  const bool issuer = threadIdx.x == 0;

  auto q_tile = [&](int s) { return smem + kOffStage + 2 * s * kTileBytes; };
  auto do_tile = [&](int s) { return q_tile(s) + kTileBytes; };
  auto lse_vec = [&](int s) { return reinterpret_cast<float*>(smem + kOffVec) + 64 * s; };
  auto delta_vec = [&](int s) { return reinterpret_cast<float*>(smem + kOffVec) + 128 + 64 * s; };
  auto issue_step = [&](int step) {
    const int s = step & 1;
    const int row = row_base + (first_q_block + step) * kBlock;
    sm90::mbarrier_arrive_expect_tx(&q_full[s], kStageTxBytes);
    sm90::tma_load_2d(q_tile(s), &tmQ, &q_full[s], 0, row);
    sm90::tma_load_2d(q_tile(s) + kBoxBytes, &tmQ, &q_full[s], 64, row);
    sm90::tma_load_2d(do_tile(s), &tmdO, &q_full[s], 0, row);
    sm90::tma_load_2d(do_tile(s) + kBoxBytes, &tmdO, &q_full[s], 64, row);
    sm90::bulk_load_g2s(lse_vec(s), lse + row, 64 * 4, &q_full[s]);
    sm90::bulk_load_g2s(delta_vec(s), delta + row, 64 * 4, &q_full[s]);
  };

  if (issuer) {
    sm90::mbarrier_init(kv_full, 1);
    sm90::mbarrier_init(&q_full[0], 1);
    sm90::mbarrier_init(&q_full[1], 1);
    sm90::fence_mbarrier_init();
    sm90::prefetch_tensormap(&tmQ);
    sm90::prefetch_tensormap(&tmK);
    sm90::prefetch_tensormap(&tmV);
    sm90::prefetch_tensormap(&tmdO);
  }
  __syncthreads();
  if (issuer) {
    sm90::mbarrier_arrive_expect_tx(kv_full, 2 * kTileBytes);
    sm90::tma_load_2d(smem + kOffK, &tmK, kv_full, 0, row_base + kv0);
    sm90::tma_load_2d(smem + kOffK + kBoxBytes, &tmK, kv_full, 64, row_base + kv0);
    sm90::tma_load_2d(smem + kOffV, &tmV, kv_full, 0, row_base + kv0);
    sm90::tma_load_2d(smem + kOffV + kBoxBytes, &tmV, kv_full, 64, row_base + kv0);
    issue_step(0);
    if (num_steps > 1) issue_step(1);
  }

  const int warp = sm90::warp_index();
  const int lane = sm90::lane_index();
  // Accumulator coordinates (wgmma layout): element 4j+e of a 64 x N accumulator is row
  // 16*warp + lane/4 + 8*(e/2), column 8j + 2*(lane%4) + e%2.
  const int acc_row = 16 * warp + lane / 4;
  const int acc_col = 2 * (lane % 4);
  const u32 k_base = sm90::smem_u32(smem + kOffK);
  const u32 v_base = sm90::smem_u32(smem + kOffV);
  unsigned char* ds_tile = smem + kOffDS;
  const u32 ds_base = sm90::smem_u32(ds_tile);
  const float scale_log2 = scale * kLog2e;

  float dv[64];
  float dk[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) {
    dv[i] = 0.f;
    dk[i] = 0.f;
  }

  sm90::mbarrier_wait_parity(kv_full, 0);
  for (int step = 0; step < num_steps; ++step) {
    const int s = step & 1;
    const int q0 = (first_q_block + step) * kBlock;  // first query row of this block
    sm90::mbarrier_wait_parity(&q_full[s], (step >> 1) & 1);
    const u32 q_base = sm90::smem_u32(q_tile(s));
    const u32 do_base = sm90::smem_u32(do_tile(s));

    // S^T = K Q^T and dP^T = V dO^T: M = 64 key rows, N = 64 queries, K = d (8 steps of 16;
    // steps 0-3 in the first 64-column box, 4-7 in the second).
    // The first k-step overwrites (scale_d = 0): no zeroing, so ordinary code writes no
    // accumulator register right before the wgmma (ptxas then injects a warpgroup.arrive, C7519).
    float st[32];
    float dpt[32];
    sm90::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      const u32 off = (kk / 4) * kBoxBytes + (kk % 4) * 32;
      sm90::wgmma_m64n64k16_ss_bf16_t<0, 0>(st, sm90::make_smem_desc_sw128(k_base + off),
                                            sm90::make_smem_desc_sw128(q_base + off), kk > 0);
    }
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      const u32 off = (kk / 4) * kBoxBytes + (kk % 4) * 32;
      sm90::wgmma_m64n64k16_ss_bf16_t<0, 0>(dpt, sm90::make_smem_desc_sw128(v_base + off),
                                            sm90::make_smem_desc_sw128(do_base + off), kk > 0);
    }
    sm90::wgmma_commit_group();
    sm90::wgmma_wait_group<0>();
    sm90::wgmma_fence_operand(st);
    sm90::wgmma_fence_operand(dpt);

    // P^T and dS^T in place (st <- P^T, dpt <- dS^T); column = query, row = key.
    const float* lse_s = lse_vec(s);
    const float* delta_s = delta_vec(s);
    const bool diagonal = kCausal && step == 0;  // q0 == kv0: mask key > query
#pragma unroll
    for (int j = 0; j < 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = 8 * j + acc_col + (e & 1);
        const int row = acc_row + 8 * (e >> 1);
        float p = sm90::exp2_approx(fmaf(st[4 * j + e], scale_log2, -lse_s[col] * kLog2e));
        if (diagonal && row > col) p = 0.f;
        st[4 * j + e] = p;
        dpt[4 * j + e] = p * (dpt[4 * j + e] - delta_s[col]);
      }
    }
    // A fragments for k-step t (queries 16t..16t+15) straight from the accumulator layout.
    u32 p_frag[4][4];
    u32 ds_frag[4][4];
#pragma unroll
    for (int t = 0; t < 4; ++t) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        p_frag[t][r] = sm90::pack_bf16x2(st[8 * t + 2 * r], st[8 * t + 2 * r + 1]);
        ds_frag[t][r] = sm90::pack_bf16x2(dpt[8 * t + 2 * r], dpt[8 * t + 2 * r + 1]);
      }
    }
    // dS^T to shared memory as 64 key rows x 64 queries (128-byte rows, 128B swizzle): the
    // MN-major A operand of dQ = dS K. Fragment r of step t is row acc_row + 8*(r%2), query
    // column 16t + 8*(r/2) + acc_col.
#pragma unroll
    for (int t = 0; t < 4; ++t) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const u32 row = acc_row + 8 * (r % 2);
        const u32 col = 16 * t + 8 * (r / 2) + acc_col;
        *reinterpret_cast<u32*>(ds_tile + sm90::swizzle_128b_offset(row, col * 2)) = ds_frag[t][r];
      }
    }
    sm90::fence_proxy_async_shared();

    // dV += P^T dO and dK += dS^T Q: M = 64 keys, N = 128 = d, K = 64 queries; dO and Q are
    // MN-major here (each 128-byte row is one query's 64 d values; the two boxes are 8 KiB
    // apart).
    sm90::wgmma_fence();
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      sm90::wgmma_m64n128k16_rs_bf16_t<1>(
          dv, p_frag[t], sm90::make_smem_desc_sw128_mn(do_base + t * 2048, kBoxBytes), 1);
    }
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      sm90::wgmma_m64n128k16_rs_bf16_t<1>(
          dk, ds_frag[t], sm90::make_smem_desc_sw128_mn(q_base + t * 2048, kBoxBytes), 1);
    }
    sm90::wgmma_commit_group();
    __syncthreads();  // every warp's dS^T rows are in shared memory (after its proxy fence)
    sm90::wgmma_wait_group<0>();  // frees p_frag/ds_frag before dQ's accumulators are live

    // dQ block = dS K: M = 64 queries, N = 128 = d, K = 64 keys; A = dS (the stored dS^T read
    // MN-major), B = K (MN-major).
    float dq[64];
    sm90::wgmma_fence();
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      sm90::wgmma_m64n128k16_ss_bf16_t<1, 1>(
          dq, sm90::make_smem_desc_sw128_mn(ds_base + t * 2048, kBoxBytes),
          sm90::make_smem_desc_sw128_mn(k_base + t * 2048, kBoxBytes), t > 0);
    }
    sm90::wgmma_commit_group();
    sm90::wgmma_wait_group<0>();
    sm90::wgmma_fence_operand(dq);
    float* dq_rows = dq_accum + static_cast<long long>(row_base + q0 + acc_row) * kHeadDim;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int col = 8 * j + acc_col;
      sm90::red_add_v2_f32(dq_rows + col, dq[4 * j + 0], dq[4 * j + 1]);
      sm90::red_add_v2_f32(dq_rows + 8 * kHeadDim + col, dq[4 * j + 2], dq[4 * j + 3]);
    }

    // Every wgmma reading stage s and the dS^T tile has completed in every warp: refill.
    __syncthreads();
    if (issuer && step + 2 < num_steps) issue_step(step + 2);
  }
  sm90::wgmma_fence_operand(dv);
  sm90::wgmma_fence_operand(dk);

  const long long out_row = static_cast<long long>(row_base + kv0 + acc_row);
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const int col = 8 * j + acc_col;
    unsigned short* dv0 = dV + out_row * kHeadDim + col;
    unsigned short* dk0 = dK + out_row * kHeadDim + col;
    *reinterpret_cast<u32*>(dv0) = sm90::pack_bf16x2(dv[4 * j + 0], dv[4 * j + 1]);
    *reinterpret_cast<u32*>(dv0 + 8 * kHeadDim) = sm90::pack_bf16x2(dv[4 * j + 2], dv[4 * j + 3]);
    *reinterpret_cast<u32*>(dk0) = sm90::pack_bf16x2(dk[4 * j + 0] * scale, dk[4 * j + 1] * scale);
    *reinterpret_cast<u32*>(dk0 + 8 * kHeadDim) =
        sm90::pack_bf16x2(dk[4 * j + 2] * scale, dk[4 * j + 3] * scale);
  }
}

// dQ = bf16(scale * dq_accum), 4 elements per thread.
extern "C" __global__ void __launch_bounds__(256)
    attn_bwd_dq_convert(const float* dq_accum, unsigned short* dQ, int B, int H, int S,
                        float scale) {
  const long long count = static_cast<long long>(B) * H * S * kHeadDim;
  const long long i = (static_cast<long long>(blockIdx.x) * 256 + threadIdx.x) * 4;
  if (i >= count) return;
  float x, y, z, w;
  asm volatile("ld.global.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(x), "=f"(y), "=f"(z), "=f"(w)
               : "l"(dq_accum + i));
  const u32 lo = sm90::pack_bf16x2(x * scale, y * scale);
  const u32 hi = sm90::pack_bf16x2(z * scale, w * scale);
  asm volatile("st.global.v2.b32 [%0], {%1, %2};" ::"l"(dQ + i), "r"(lo), "r"(hi) : "memory");
}
