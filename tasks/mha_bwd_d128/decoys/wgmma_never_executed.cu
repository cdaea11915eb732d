/* PTXBENCH_PLAN
{"launches":[
  {"kernel":"attn_bwd_preprocess","grid":["ceil_div(B*H*S,8)"],"block":["256"],
   "args":[{"tensor":"O"},{"tensor":"dO"},{"scratch":"delta"},{"scratch":"dq_accum"},
           {"scalar":"B"},{"scalar":"H"},{"scalar":"S"}]},
  {"kernel":"attn_bwd_main","grid":["S/64","B*H"],"block":["256"],
   "dynamic_shared_bytes":"199696",
   "args":[{"tensor_map":"tmQ"},{"tensor_map":"tmK"},{"tensor_map":"tmV"},{"tensor_map":"tmdO"},
           {"tensor":"LSE"},{"scratch":"delta"},{"scratch":"dq_accum"},{"tensor":"dK"},
           {"tensor":"dV"},{"scalar":"S"},{"scalar":"scale"}]},
  {"kernel":"attn_bwd_dq_convert","grid":["ceil_div(B*H*S*D,1024)"],"block":["256"],
   "args":[{"scratch":"dq_accum"},{"tensor":"dQ"},{"scalar":"B"},{"scalar":"H"},{"scalar":"S"},
           {"scalar":"scale"}]}],
 "scratch":[{"name":"delta","bytes":"4*B*H*S"},{"name":"dq_accum","bytes":"4*B*H*S*D"}],
 "tensor_maps":[
  {"name":"tmQ","tensor":"Q","dims":["D","B*H*S"],"box":["64","64"],"swizzle":"none"},
  {"name":"tmK","tensor":"K","dims":["D","B*H*S"],"box":["64","64"],"swizzle":"none"},
  {"name":"tmV","tensor":"V","dims":["D","B*H*S"],"box":["64","64"],"swizzle":"none"},
  {"name":"tmdO","tensor":"dO","dims":["D","B*H*S"],"box":["64","64"],"swizzle":"none"}]}
*/
// VARIANT: wgmma never executed
// DECOY for mha_bwd_d128 (sm_90a), written for PTXBench. Expected verdict: target_not_executed.
//
// What it tries: credit for wgmma without executing it. The gradients are correct and computed
// with plain fp32 FMA from shared memory; the tiles arrive by TMA (cp.async.bulk.tensor, which
// does execute), and a wgmma.mma_async (SASS HGMMA) is compiled into the main kernel behind a
// branch that no workload takes (S < 0).
//
// Why that verdict: the outputs pass every workload, but the instrumented run counts no
// executed HGMMA; presence in the SASS earns nothing.
//
// Structure: the same three launches and arguments as the reference solution. The main kernel
// (256 threads per 64 key rows) converts each TMA-loaded bf16 tile to a padded fp32 copy and
// runs S^T, dP^T, dV, dK and the dQ block as 4x4 / 4x8 register-tiled FMA loops; dQ goes to the
// fp32 accumulator with red.global.add.
#include "ptxbench_hopper.cuh"

namespace {

namespace sm90 = ptxbench::sm90;
using u32 = sm90::u32;
using u64 = sm90::u64;

constexpr bool kCausal = false;

constexpr int kHeadDim = 128;
constexpr int kBlock = 64;
constexpr int kRowF = kHeadDim + 1;  // padded fp32 row of a 64 x 128 tile
constexpr int kRowP = kBlock + 1;    // padded fp32 row of a 64 x 64 tile
constexpr u32 kBoxBytes = 64 * 128;  // 64 rows x 64 bf16
constexpr u32 kTileBytes = 2 * kBoxBytes;
constexpr u32 kOffLand = 0;  // two bf16 tiles as TMA writes them (no swizzle): K,V then Q,dO
constexpr u32 kOffF = 2 * kTileBytes;                // Kf, Vf, Qf, dOf: [64][129] fp32 each
constexpr u32 kOffP = kOffF + 4 * 64 * kRowF * 4;    // Pt, dSt: [64][65] fp32 each
constexpr u32 kOffVec = kOffP + 2 * 64 * kRowP * 4;  // lse[64], delta[64]
constexpr u32 kOffBar = kOffVec + 2 * 64 * 4;
constexpr u32 kSmemBytes = 1024 + kOffBar + 16;
static_assert(kSmemBytes == 199696, "keep the launch plan's dynamic_shared_bytes in sync");
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ float bf16_to_float(unsigned short bits) {
  return __uint_as_float(static_cast<u32>(bits) << 16);
}

// bf16 tile (two 64x64 boxes, row-major, no swizzle) -> padded fp32 [64][129].
__device__ __forceinline__ void tile_to_f32(const unsigned short* land, float* dst) {
  for (int i = static_cast<int>(threadIdx.x); i < 64 * kHeadDim; i += 256) {
    const int row = i / kHeadDim;
    const int d = i % kHeadDim;
    dst[row * kRowF + d] = bf16_to_float(land[(d / 64) * 4096 + row * 64 + d % 64]);
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(256)
    attn_bwd_preprocess(const unsigned short* O, const unsigned short* dO, float* delta,
                        float* dq_accum, int B, int H, int S) {
  const long long rows = static_cast<long long>(B) * H * S;
  const long long row = static_cast<long long>(blockIdx.x) * 8 + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  if (row >= rows) return;
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    sum += bf16_to_float(O[row * kHeadDim + lane * 4 + i]) *
           bf16_to_float(dO[row * kHeadDim + lane * 4 + i]);
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (lane == 0) delta[row] = sum;
#pragma unroll
  for (int i = 0; i < 4; ++i) dq_accum[row * kHeadDim + lane * 4 + i] = 0.f;
}

extern "C" __global__ void __launch_bounds__(256)
    attn_bwd_main(const __grid_constant__ CUtensorMap tmQ, const __grid_constant__ CUtensorMap tmK,
                  const __grid_constant__ CUtensorMap tmV, const __grid_constant__ CUtensorMap tmdO,
                  const float* lse, const float* delta, float* dq_accum, unsigned short* dK,
                  unsigned short* dV, int S, float scale) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024u - (sm90::smem_u32(smem_raw) & 1023u)) & 1023u);
  unsigned short* land = reinterpret_cast<unsigned short*>(smem + kOffLand);
  float* kf = reinterpret_cast<float*>(smem + kOffF);
  float* vf = kf + 64 * kRowF;
  float* qf = vf + 64 * kRowF;
  float* dof = qf + 64 * kRowF;
  float* pt = reinterpret_cast<float*>(smem + kOffP);
  float* dst = pt + 64 * kRowP;
  float* lse_s = reinterpret_cast<float*>(smem + kOffVec);
  float* delta_s = lse_s + 64;
  u64* bar = reinterpret_cast<u64*>(smem + kOffBar);
  const int kv_block = static_cast<int>(gridDim.x - 1 - blockIdx.x);
  const int kv0 = kv_block * kBlock;
  const int row_base = static_cast<int>(blockIdx.y) * S;
  const int first_q_block = kCausal ? kv_block : 0;
  const int tid = static_cast<int>(threadIdx.x);
  const int ty = tid / 16;
  const int tx = tid % 16;

  if (tid == 0) {
    sm90::mbarrier_init(bar, 1);
    sm90::fence_mbarrier_init();
  }
  __syncthreads();

  // Never true for a valid workload, but unknown to the compiler, so the wgmma stays in the SASS.
  if (S < 0) {
    float d[32];
    sm90::wgmma_fence();
    sm90::wgmma_m64n64k16_ss_bf16_t<0, 0>(d, sm90::make_smem_desc_sw128(sm90::smem_u32(land)),
                                          sm90::make_smem_desc_sw128(sm90::smem_u32(land)), 0);
    sm90::wgmma_commit_group();
    sm90::wgmma_wait_group<0>();
    sm90::wgmma_fence_operand(d);
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < 32; ++i) sum += d[i];
    dK[tid] = static_cast<unsigned short>(__float_as_uint(sum) >> 16);
    return;
  }

  u32 phase = 0;
  if (tid == 0) {
    sm90::mbarrier_arrive_expect_tx(bar, 2 * kTileBytes);
    sm90::tma_load_2d(land, &tmK, bar, 0, row_base + kv0);
    sm90::tma_load_2d(land + 4096, &tmK, bar, 64, row_base + kv0);
    sm90::tma_load_2d(land + 8192, &tmV, bar, 0, row_base + kv0);
    sm90::tma_load_2d(land + 12288, &tmV, bar, 64, row_base + kv0);
  }
  sm90::mbarrier_wait_parity(bar, phase);
  phase ^= 1;
  tile_to_f32(land, kf);
  tile_to_f32(land + 8192, vf);
  __syncthreads();

  float dv[4][8] = {};
  float dk[4][8] = {};
  const float scale_log2 = scale * kLog2e;
  for (int qb = first_q_block; qb < S / kBlock; ++qb) {
    const int q0 = qb * kBlock;
    if (tid == 0) {
      sm90::mbarrier_arrive_expect_tx(bar, 2 * kTileBytes);
      sm90::tma_load_2d(land, &tmQ, bar, 0, row_base + q0);
      sm90::tma_load_2d(land + 4096, &tmQ, bar, 64, row_base + q0);
      sm90::tma_load_2d(land + 8192, &tmdO, bar, 0, row_base + q0);
      sm90::tma_load_2d(land + 12288, &tmdO, bar, 64, row_base + q0);
    }
    if (tid < 64) lse_s[tid] = lse[row_base + q0 + tid];
    if (tid >= 64 && tid < 128) delta_s[tid - 64] = delta[row_base + q0 + tid - 64];
    sm90::mbarrier_wait_parity(bar, phase);
    phase ^= 1;
    tile_to_f32(land, qf);
    tile_to_f32(land + 8192, dof);
    __syncthreads();

    // S^T and dP^T: key rows 4ty+i, query columns tx+16jj.
    float s[4][4] = {};
    float dp[4][4] = {};
    for (int d = 0; d < kHeadDim; ++d) {
      float kr[4], vr[4], qc[4], oc[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        kr[i] = kf[(4 * ty + i) * kRowF + d];
        vr[i] = vf[(4 * ty + i) * kRowF + d];
        qc[i] = qf[(tx + 16 * i) * kRowF + d];
        oc[i] = dof[(tx + 16 * i) * kRowF + d];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) {
          s[i][jj] = fmaf(kr[i], qc[jj], s[i][jj]);
          dp[i][jj] = fmaf(vr[i], oc[jj], dp[i][jj]);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) {
        const int kv = 4 * ty + i;
        const int q = tx + 16 * jj;
        float p = sm90::exp2_approx(fmaf(s[i][jj], scale_log2, -lse_s[q] * kLog2e));
        if (kCausal && kv0 + kv > q0 + q) p = 0.f;
        pt[kv * kRowP + q] = p;
        dst[kv * kRowP + q] = p * (dp[i][jj] - delta_s[q]);
      }
    }
    __syncthreads();

    // dV += P^T dO, dK += dS^T Q: key rows 4ty+i, d columns tx+16jj.
    for (int q = 0; q < kBlock; ++q) {
      float pr[4], dr[4], oc[8], qc[8];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        pr[i] = pt[(4 * ty + i) * kRowP + q];
        dr[i] = dst[(4 * ty + i) * kRowP + q];
      }
#pragma unroll
      for (int jj = 0; jj < 8; ++jj) {
        oc[jj] = dof[q * kRowF + tx + 16 * jj];
        qc[jj] = qf[q * kRowF + tx + 16 * jj];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int jj = 0; jj < 8; ++jj) {
          dv[i][jj] = fmaf(pr[i], oc[jj], dv[i][jj]);
          dk[i][jj] = fmaf(dr[i], qc[jj], dk[i][jj]);
        }
      }
    }
    // dQ block = dS K: query rows 4ty+i, d columns tx+16jj.
    float dq[4][8] = {};
    for (int kv = 0; kv < kBlock; ++kv) {
      float dr[4], kc[8];
#pragma unroll
      for (int i = 0; i < 4; ++i) dr[i] = dst[kv * kRowP + 4 * ty + i];
#pragma unroll
      for (int jj = 0; jj < 8; ++jj) kc[jj] = kf[kv * kRowF + tx + 16 * jj];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int jj = 0; jj < 8; ++jj) dq[i][jj] = fmaf(dr[i], kc[jj], dq[i][jj]);
      }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float* row = dq_accum + static_cast<long long>(row_base + q0 + 4 * ty + i) * kHeadDim;
#pragma unroll
      for (int jj = 0; jj < 8; ++jj) {
        asm volatile("red.global.add.f32 [%0], %1;" ::"l"(row + tx + 16 * jj), "f"(dq[i][jj])
                     : "memory");
      }
    }
    __syncthreads();  // qf, dof, pt, dst and the landing zone are reused by the next block
  }

#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const long long row = static_cast<long long>(row_base + kv0 + 4 * ty + i) * kHeadDim;
#pragma unroll
    for (int jj = 0; jj < 8; ++jj) {
      asm volatile("cvt.rn.bf16.f32 %0, %1;" : "=h"(dV[row + tx + 16 * jj]) : "f"(dv[i][jj]));
      asm volatile("cvt.rn.bf16.f32 %0, %1;"
                   : "=h"(dK[row + tx + 16 * jj])
                   : "f"(dk[i][jj] * scale));
    }
  }
}

extern "C" __global__ void __launch_bounds__(256)
    attn_bwd_dq_convert(const float* dq_accum, unsigned short* dQ, int B, int H, int S,
                        float scale) {
  const long long count = static_cast<long long>(B) * H * S * kHeadDim;
  const long long i = (static_cast<long long>(blockIdx.x) * 256 + threadIdx.x) * 4;
  if (i >= count) return;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    asm volatile("cvt.rn.bf16.f32 %0, %1;" : "=h"(dQ[i + k]) : "f"(dq_accum[i + k] * scale));
  }
}
