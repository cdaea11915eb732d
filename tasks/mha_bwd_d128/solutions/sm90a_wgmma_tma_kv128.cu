/* PTXBENCH_PLAN
{"launches":[
  {"kernel":"attn_bwd_preprocess","grid":["ceil_div(B*H*S,8)"],"block":["256"],
   "args":[{"tensor":"O"},{"tensor":"dO"},{"scratch":"delta"},{"scratch":"dq_accum"},
           {"scalar":"B"},{"scalar":"H"},{"scalar":"S"}]},
  {"kernel":"attn_bwd_main","grid":["S/128","B*H"],"block":["256"],
   "dynamic_shared_bytes":"232000",
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
// VARIANT: reference solution (kv128: two consumer warpgroups, 128 key rows per CTA)
// Attention backward, D = 128, bf16, sm_90a: one 256-thread CTA (two consumer warpgroups) per
// (b*h, 128 key rows), written for PTXBench. Same three kernels and arguments as
// tasks/mha_bwd_d128/solutions/sm90a_wgmma_tma.cu; differences:
//
//  * 128 key rows per CTA, warpgroup g owning keys 64g..64g+63 (dK, dV accumulators in
//    registers as before). Each Q / dO / LSE / delta tile is loaded ONCE for both warpgroups:
//    L2->SM load traffic per FLOP halves (reference: 32 KiB per 5.2 MFLOP per CTA step, i.e.
//    ~1.9 TB/s at its 310 TFLOP/s; here 32 KiB per 10.5 MFLOP).
//  * dQ_blk = dS K over all 128 keys is split by columns: warpgroup g computes dQ[:, 64g..64g+63]
//    (SS m64n64k16 x 8, A = the shared dS^T tile of both warpgroups read MN-major, B = K
//    MN-major), so a 64-query dQ block is reduced into global memory once per 128 keys instead
//    of once per 64 keys: atomic traffic halves (reference: 32 KiB of red.global.add.v2 per
//    64 keys per query block, 4096 RED instructions per CTA step).
//  * dQ reduction by the bulk-copy engine: each warp writes its 16 x 64 fp32 part of dQ_blk to
//    its own 4 KiB of shared memory (conflict-free st.shared.v4, 512 contiguous bytes per
//    instruction) and lane 0 issues one cp.reduce.async.bulk .add.f32 of 4 KiB to the
//    accumulator. No CTA-wide barrier for it. The fp32 accumulator therefore uses a
//    per-64-row-block FRAGMENT-ORDER layout (scratch, only this plan reads it): in the block of
//    global rows r0..r0+63 (8192 floats), float 1024*(4g+w) + 128*j + 4*lane + e holds
//    row r0 + 16w + lane/4 + 8(e/2), column 64g + 8j + 2(lane%4) + e%2 (the wgmma accumulator
//    layout of warp w of warpgroup g). attn_bwd_dq_convert undoes it (one float4 per thread).
//  * 3-stage TMA ring (Q, dO boxes + LSE, delta bulk copies on one mbarrier per stage), refilled
//    by thread 0 after the per-step barrier that also publishes dS^T; 2 dS^T buffers so the next
//    step's dS^T store never races the other warpgroup's dQ wgmma.
//  * intra-warpgroup overlap: S^T and dP^T are two commit groups; P^T = exp(..) is computed
//    while dP^T is still on the tensor core (wait_group 1), dV += P^T dO is issued before dS^T is
//    computed, dK += dS^T Q is in flight across the barrier.
//  * non-causal: CTA n starts its query walk at block 2n (rotation), so the 32 CTAs of a head
//    do not reduce into the same dQ block at the same time.
//
// Shared memory (1024-aligned base): K 32 KiB + V 32 KiB + 3 x (Q 16 + dO 16) KiB
// + 2 x dS^T 16 KiB + dQ staging 32 KiB + LSE/delta 3 x 512 B + barriers 64 B + 1024 slack
// = 232000 B (the sm_90 opt-in limit is 232448), 1 CTA (8 warps) per SM.
// Per SM per step: 10.5 MFLOP = 2560 tensor clocks at peak; shared-memory traffic (wgmma
// operands 2 x 128 KiB + TMA 32 KiB + dS^T 16 KiB + dQ staging 2 x 32 KiB) ~ 2900 clocks at
// 128 B/clk, so the step is shared-memory-bandwidth bound near 85-90 % of tensor peak; the
// reference's bounds are L2 traffic and serialization (31 % of peak measured).
// Causal (kCausal): key block n (128 keys) starts at query block 2n; steps whose query block
// starts before kv0 + 128 mask key > query (warpgroup 1 of the first step is fully masked).
#include "ptxbench_hopper.cuh"

namespace {

namespace sm90 = ptxbench::sm90;
using u32 = sm90::u32;
using u64 = sm90::u64;

constexpr bool kCausal = false;
constexpr bool kRotate = !kCausal;         // stagger the query walk of the CTAs of one head

constexpr int kHeadDim = 128;
constexpr int kKeys = 128;                 // key rows per CTA (64 per consumer warpgroup)
constexpr int kQBlock = 64;                // query rows per step
constexpr int kStages = 3;
constexpr u32 kBoxBytes = 64 * 128;        // one TMA box: 64 rows x 64 bf16 (8 KiB)
constexpr u32 kTileBytes = 2 * kBoxBytes;  // 64 rows x 128 bf16: two boxes, d 0-63 | 64-127
constexpr u32 kOffK = 0;                   // [key half h][d box b] at h*16K + b*8K
constexpr u32 kOffV = 2 * kTileBytes;
constexpr u32 kOffStage = 4 * kTileBytes;  // stage s: Q at +2s*kTileBytes, dO after it
constexpr u32 kOffDS = kOffStage + kStages * 2 * kTileBytes;  // 2 x (128 keys x 64 q bf16)
constexpr u32 kDSBytes = 2 * kBoxBytes;
constexpr u32 kOffDQ = kOffDS + 2 * kDSBytes;  // 8 warps x 4 KiB fp32 staging
constexpr u32 kOffVec = kOffDQ + 8 * 4096;     // LSE[3][64], delta[3][64]
constexpr u32 kOffBar = kOffVec + 2 * kStages * 64 * 4;  // kv_full, q_full[3]
constexpr u32 kSmemBytes = 1024 + kOffBar + 64;
static_assert(kSmemBytes == 232000, "keep the launch plan's dynamic_shared_bytes in sync");
constexpr u32 kStageTxBytes = 2 * kTileBytes + 2 * 64 * 4;
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ float bf16_to_float(unsigned short bits) {
  return __uint_as_float(static_cast<u32>(bits) << 16);
}

// dst[0..bytes/4) += src[..] (fp32, element-wise) by the bulk-copy engine; one bulk async-group
// operation of the issuing thread (close with sm90::tma_store_commit, wait with
// sm90::tma_store_wait_read / bulk_wait_all). The generic-proxy writes of the source must be
// fenced (fence_proxy_async_shared) and synchronized with the issuing thread first.
__device__ __forceinline__ void bulk_reduce_add_f32(float* dst, const void* smem_src, u32 bytes) {
  asm volatile(
      "{\n\t.reg .u64 g;\n\t"
      "cvta.to.global.u64 g, %0;\n\t"
      "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [g], [%1], %2;\n\t}" ::"l"(
          reinterpret_cast<u64>(dst)),
      "r"(sm90::smem_u32(smem_src)), "r"(bytes)
      : "memory");
}
__device__ __forceinline__ void bulk_wait_all() {
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

}  // namespace

// delta[r] = sum_d O[r][d] * dO[r][d] for each of the B*H*S rows (fp32, from the bf16 values),
// one warp per row, 4 elements per lane; the warp also zeroes dq_accum's 128 floats of that row
// (any layout of the accumulator is zero when every float is).
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

extern "C" __global__ void __launch_bounds__(256, 1)
    attn_bwd_main(const __grid_constant__ CUtensorMap tmQ, const __grid_constant__ CUtensorMap tmK,
                  const __grid_constant__ CUtensorMap tmV, const __grid_constant__ CUtensorMap tmdO,
                  const float* lse, const float* delta, float* dq_accum, unsigned short* dK,
                  unsigned short* dV, int S, float scale) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024u - (sm90::smem_u32(smem_raw) & 1023u)) & 1023u);
  u64* kv_full = reinterpret_cast<u64*>(smem + kOffBar);
  u64* q_full = kv_full + 1;  // [kStages]
  // Causal: key block n has S/64 - 2n query blocks to visit; launch the long ones first.
  const int kv_block = kCausal ? static_cast<int>(gridDim.x - 1 - blockIdx.x)
                               : static_cast<int>(blockIdx.x);
  const int kv0 = kv_block * kKeys;
  const int row_base = static_cast<int>(blockIdx.y) * S;  // row of (b*h, s=0) in [B*H*S, D]
  const int num_q_blocks = S / kQBlock;
  const int first_q_block = kCausal ? 2 * kv_block : 0;
  const int num_steps = num_q_blocks - first_q_block;
  const int rot = kRotate ? 2 * kv_block : 0;
  const bool issuer = threadIdx.x == 0;

  auto q_block_of = [&](int step) {
    int qb = first_q_block + step + rot;
    if (kRotate && qb >= num_q_blocks) qb -= num_q_blocks;
    return qb;
  };
  auto q_tile = [&](int s) { return smem + kOffStage + 2 * s * kTileBytes; };
  auto do_tile = [&](int s) { return q_tile(s) + kTileBytes; };
  auto lse_vec = [&](int s) { return reinterpret_cast<float*>(smem + kOffVec) + 64 * s; };
  auto delta_vec = [&](int s) {
    return reinterpret_cast<float*>(smem + kOffVec) + 64 * kStages + 64 * s;
  };
  auto issue_step = [&](int step) {
    const int s = step % kStages;
    const int row = row_base + q_block_of(step) * kQBlock;
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
    for (int s = 0; s < kStages; ++s) sm90::mbarrier_init(&q_full[s], 1);
    sm90::fence_mbarrier_init();
    sm90::prefetch_tensormap(&tmQ);
    sm90::prefetch_tensormap(&tmK);
    sm90::prefetch_tensormap(&tmV);
    sm90::prefetch_tensormap(&tmdO);
  }
  __syncthreads();
  if (issuer) {
    sm90::mbarrier_arrive_expect_tx(kv_full, 4 * kTileBytes);
    for (int h = 0; h < 2; ++h) {
      const int row = row_base + kv0 + 64 * h;
      sm90::tma_load_2d(smem + kOffK + h * kTileBytes, &tmK, kv_full, 0, row);
      sm90::tma_load_2d(smem + kOffK + h * kTileBytes + kBoxBytes, &tmK, kv_full, 64, row);
      sm90::tma_load_2d(smem + kOffV + h * kTileBytes, &tmV, kv_full, 0, row);
      sm90::tma_load_2d(smem + kOffV + h * kTileBytes + kBoxBytes, &tmV, kv_full, 64, row);
    }
    for (int st = 0; st < kStages && st < num_steps; ++st) issue_step(st);
  }

  const int warp = sm90::warp_index();  // 0..7
  const int wg = warp / 4;              // consumer warpgroup: keys 64wg..64wg+63 of the CTA
  const int wl = warp % 4;              // warp within the warpgroup
  const int lane = sm90::lane_index();
  // Accumulator coordinates (wgmma layout): element 4j+e of a 64 x N accumulator is row
  // 16*wl + lane/4 + 8*(e/2), column 8j + 2*(lane%4) + e%2.
  const int acc_row = 16 * wl + lane / 4;
  const int acc_col = 2 * (lane % 4);
  const u32 k_all = sm90::smem_u32(smem + kOffK);
  const u32 k_mine = k_all + wg * kTileBytes;                 // this warpgroup's 64 keys
  const u32 v_mine = sm90::smem_u32(smem + kOffV) + wg * kTileBytes;
  unsigned char* dq_stage = smem + kOffDQ + warp * 4096;      // this warp's 4 KiB
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
    const int s = step % kStages;
    const int q0 = q_block_of(step) * kQBlock;
    sm90::mbarrier_wait_parity(&q_full[s], (step / kStages) & 1);
    const u32 q_base = sm90::smem_u32(q_tile(s));
    const u32 do_base = sm90::smem_u32(do_tile(s));
    unsigned char* ds_tile = smem + kOffDS + (step & 1) * kDSBytes;
    const u32 ds_all = sm90::smem_u32(ds_tile);

    // S^T = K Q^T, dP^T = V dO^T (this warpgroup's 64 keys x 64 queries, K = d): two groups.
    float st[32];
    float dpt[32];
    sm90::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      const u32 off = (kk / 4) * kBoxBytes + (kk % 4) * 32;
      sm90::wgmma_m64n64k16_ss_bf16_t<0, 0>(st, sm90::make_smem_desc_sw128(k_mine + off),
                                            sm90::make_smem_desc_sw128(q_base + off), kk > 0);
    }
    sm90::wgmma_commit_group();
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      const u32 off = (kk / 4) * kBoxBytes + (kk % 4) * 32;
      sm90::wgmma_m64n64k16_ss_bf16_t<0, 0>(dpt, sm90::make_smem_desc_sw128(v_mine + off),
                                            sm90::make_smem_desc_sw128(do_base + off), kk > 0);
    }
    sm90::wgmma_commit_group();
    sm90::wgmma_wait_group<1>();  // S^T done, dP^T may still run
    sm90::wgmma_fence_operand(st);

    const float* lse_s = lse_vec(s);
    const float* delta_s = delta_vec(s);
    const bool diagonal = kCausal && q0 < kv0 + kKeys;  // some key > query in this block
    const int key_abs = kv0 + 64 * wg + acc_row;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = 8 * j + acc_col + (e & 1);
        float p = sm90::exp2_approx(fmaf(st[4 * j + e], scale_log2, -lse_s[col] * kLog2e));
        if (diagonal && key_abs + 8 * (e >> 1) > q0 + col) p = 0.f;
        st[4 * j + e] = p;
      }
    }
    u32 p_frag[4][4];
#pragma unroll
    for (int t = 0; t < 4; ++t) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        p_frag[t][r] = sm90::pack_bf16x2(st[8 * t + 2 * r], st[8 * t + 2 * r + 1]);
      }
    }
    // dV += P^T dO (RS, dO MN-major): in flight while dS^T is computed.
    sm90::wgmma_fence();
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      sm90::wgmma_m64n128k16_rs_bf16_t<1>(
          dv, p_frag[t], sm90::make_smem_desc_sw128_mn(do_base + t * 2048, kBoxBytes), 1);
    }
    sm90::wgmma_commit_group();
    sm90::wgmma_wait_group<1>();  // dP^T done (dV may still run)
    sm90::wgmma_fence_operand(dpt);

    u32 ds_frag[4][4];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = 8 * j + acc_col + (e & 1);
        dpt[4 * j + e] = st[4 * j + e] * (dpt[4 * j + e] - delta_s[col]);
      }
    }
#pragma unroll
    for (int t = 0; t < 4; ++t) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        ds_frag[t][r] = sm90::pack_bf16x2(dpt[8 * t + 2 * r], dpt[8 * t + 2 * r + 1]);
      }
    }
    // dS^T rows 64wg.. of the shared 128 x 64 tile (128-byte rows, 128B swizzle; the 8 KiB
    // half of warpgroup 1 keeps the swizzle phase since 8192 is a multiple of 1024).
    unsigned char* ds_mine = ds_tile + wg * kBoxBytes;
#pragma unroll
    for (int t = 0; t < 4; ++t) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const u32 row = acc_row + 8 * (r % 2);
        const u32 col = 16 * t + 8 * (r / 2) + acc_col;
        *reinterpret_cast<u32*>(ds_mine + sm90::swizzle_128b_offset(row, col * 2)) = ds_frag[t][r];
      }
    }
    sm90::fence_proxy_async_shared();
    // dK += dS^T Q (RS, Q MN-major).
    sm90::wgmma_fence();
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      sm90::wgmma_m64n128k16_rs_bf16_t<1>(
          dk, ds_frag[t], sm90::make_smem_desc_sw128_mn(q_base + t * 2048, kBoxBytes), 1);
    }
    sm90::wgmma_commit_group();

    // Both warpgroups' dS^T are stored, and (wait_group 0 at the end of the previous step)
    // every wgmma of step-1 has completed in both: step-1's stage is free for step+2.
    sm90::named_barrier_sync(1, 256);
    if (issuer && step >= 1 && step + 2 < num_steps) issue_step(step + 2);

    // dQ[:, 64wg..64wg+63] = dS K over the 128 keys: A = dS (the dS^T tile read MN-major,
    // M = 64 queries in one 128-byte row, K step of 16 keys = 2048 bytes), B = K columns
    // 64wg.. (MN-major: key h*64+r is row r of box wg of half h).
    float dq[32];
    sm90::wgmma_fence();
#pragma unroll
    for (int t = 0; t < 8; ++t) {
      sm90::wgmma_m64n64k16_ss_bf16_t<1, 1>(
          dq, sm90::make_smem_desc_sw128_mn(ds_all + t * 2048, kBoxBytes),
          sm90::make_smem_desc_sw128_mn(
              k_all + (t / 4) * kTileBytes + wg * kBoxBytes + (t % 4) * 2048, kBoxBytes),
          t > 0);
    }
    sm90::wgmma_commit_group();
    sm90::wgmma_wait_group<0>();
    sm90::wgmma_fence_operand(dq);

    // Stage this warp's 16 x 64 part (fragment order) and reduce it into the accumulator.
    if (lane == 0) sm90::tma_store_wait_read<0>();  // previous step's reduce has read the buffer
    __syncwarp();
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(
                       sm90::smem_u32(dq_stage + j * 512 + lane * 16)),
                   "f"(dq[4 * j + 0]), "f"(dq[4 * j + 1]), "f"(dq[4 * j + 2]), "f"(dq[4 * j + 3])
                   : "memory");
    }
    sm90::fence_proxy_async_shared();
    __syncwarp();
    if (lane == 0) {
      float* dst = dq_accum + static_cast<long long>(row_base + q0) * kHeadDim + warp * 1024;
      bulk_reduce_add_f32(dst, dq_stage, 4096);
      sm90::tma_store_commit();
    }
  }
  if (lane == 0) bulk_wait_all();
  sm90::wgmma_fence_operand(dv);
  sm90::wgmma_fence_operand(dk);

  const long long out_row = static_cast<long long>(row_base + kv0 + 64 * wg + acc_row);
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

// dQ = bf16(scale * dq_accum): one float4 of the fragment-order layout per thread (see the
// header: rows r, r+8 and columns c, c+1 of one 64-row block).
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
  const long long row0 = (i >> 13) << 6;  // 8192 floats = 64 rows per block
  const int r = static_cast<int>(i & 8191);
  const int gw = r >> 10;                 // 4g + w
  const int j = (r >> 7) & 7;
  const int ln = (r >> 2) & 31;
  const long long row = row0 + 16 * (gw & 3) + (ln >> 2);
  const int col = 64 * (gw >> 2) + 8 * j + 2 * (ln & 3);
  unsigned short* out = dQ + row * kHeadDim + col;
  *reinterpret_cast<u32*>(out) = sm90::pack_bf16x2(x * scale, y * scale);
  *reinterpret_cast<u32*>(out + 8 * kHeadDim) = sm90::pack_bf16x2(z * scale, w * scale);
}
