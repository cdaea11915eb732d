/* PTXBENCH_PLAN
{"launches":[{"kernel":"gemm_fp8_kernel","grid":["ceil_div(N,128)","ceil_div(M,64)"],
  "block":["128"],"cluster":[],"dynamic_shared_bytes":"74760",
  "args":[{"tensor_map":"tmA"},{"tensor_map":"tmB"},{"tensor":"C"},
          {"scalar":"M"},{"scalar":"N"},{"scalar":"K"}]}],
 "scratch":[],
 "tensor_maps":[
  {"name":"tmA","tensor":"A","box":["64","64"],"element_strides":[],"swizzle":"128B",
   "interleave":"none","l2_promotion":"128B","oob_fill":"zero","dims":[]},
  {"name":"tmB","tensor":"B","box":["64","128"],"element_strides":[],"swizzle":"128B",
   "interleave":"none","l2_promotion":"128B","oob_fill":"zero","dims":[]}]}
*/
// DECOY for gemm_n7168_k5120 (sm_90a), written for PTXBench. Expected verdict: wrong_result.
//
// What it tries: lower precision inside the tolerance? fp8 e4m3 operands through QGMMA (twice
// the bf16 tensor throughput on Hopper): TMA loads bf16 tiles of A and B, the warpgroup rounds
// them to e4m3 (cvt.rn.satfinite, no scaling: N(0, 1) values fit e4m3's range) into 128B-
// swizzled fp8 tiles, and wgmma m64n128k32 .e4m3 multiplies them with fp32 accumulation.
//
// Why that verdict: e4m3 keeps 3 mantissa bits (relative rounding up to 2^-4), so each product
// is off by ~5 % and a dot product of K = 5120 terms by ~3.7 (standard deviation) against
// |C| ~ 72: simulated, 83 % of the elements fail all-close 1e-2 / 1e-2 (relative norm 0.038,
// against ~0.002 for the library's bf16 rounding). A sound checker and today's rule agree.
//
// Kernel: one warpgroup per 64x128 tile of C, k-steps of 128: per step two 64-column TMA boxes
// of A and two of B (bf16, staged), converted into one 64 x 128-byte A tile and one 128 x
// 128-byte B tile of e4m3 (k-step 32 of QGMMA = the same 32 bytes of a row as 16 bf16, so the
// swizzle and descriptors are the bf16 ones), fence for the async proxy, 4 wgmmas, wait.
#include "ptxbench_hopper.cuh"

namespace {

namespace sm90 = ptxbench::sm90;
using u16 = sm90::u16;
using u32 = sm90::u32;
using u64 = sm90::u64;

constexpr int kTileM = 64;
constexpr int kTileN = 128;
constexpr int kTileK = 128;                  // fp8 elements per k-step: one 128-byte row
constexpr u32 kABoxBytes = kTileM * 64 * 2;  // a bf16 box: 64 rows x 64 k (8 KiB)
constexpr u32 kBBoxBytes = kTileN * 64 * 2;  // 128 rows x 64 k (16 KiB)
constexpr u32 kA8Bytes = kTileM * kTileK;    // fp8 tiles: 8 KiB and 16 KiB
constexpr u32 kB8Bytes = kTileN * kTileK;
constexpr u32 kOffA16 = 0;  // two A boxes, then two B boxes (bf16)
constexpr u32 kOffB16 = 2 * kABoxBytes;
constexpr u32 kOffA8 = kOffB16 + 2 * kBBoxBytes;
constexpr u32 kOffB8 = kOffA8 + kA8Bytes;
constexpr u32 kOffBar = kOffB8 + kB8Bytes;
constexpr u32 kSmemBytes = 1024 + kOffBar + 8;
static_assert(kSmemBytes == 74760, "keep the launch plan's dynamic_shared_bytes in sync");
constexpr u32 kStageTxBytes = 2 * kABoxBytes + 2 * kBBoxBytes;

// D[64x128] += A[64x32] * B[32x128], fp8 e4m3 operands in shared memory (K-major, 128B swizzle:
// a k-step of 32 one-byte elements spans the same 32 bytes of a row as 16 bf16 do, so the
// descriptors are the bf16 ones), fp32 accumulators in the layout of the bf16 forms. QGMMA.
__device__ __forceinline__ void WgmmaM64N128K32E4m3(float (&d)[64], u64 desc_a, u64 desc_b) {
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "setp.ne.b32 p, 1, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1;\n\t}"
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
      : "l"(desc_a), "l"(desc_b));
}

// Two floats to two e4m3 bytes, round to nearest, saturating: `lo` in the low byte.
__device__ __forceinline__ u32 PackE4m3x2(float lo, float hi) {
  unsigned short pair;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(pair) : "f"(hi), "f"(lo));
  return pair;
}

// Row `row`, 16-byte chunk `chunk` (k = 16*chunk .. +15) of an e4m3 tile, from the two 128B-
// swizzled bf16 boxes at `boxes` (k 0-63, then k 64-127, `box_bytes` apart).
__device__ __forceinline__ void ConvertChunkToE4m3(const unsigned char* boxes, u32 box_bytes,
                                                   unsigned char* tile8, u32 row, u32 chunk) {
  const unsigned char* box = boxes + (chunk / 4) * box_bytes;
  const u32 byte_in_row = (chunk % 4) * 32;  // 16 bf16 = two 16-byte chunks
  const uint4 lo =
      *reinterpret_cast<const uint4*>(box + sm90::swizzle_128b_offset(row, byte_in_row));
  const uint4 hi =
      *reinterpret_cast<const uint4*>(box + sm90::swizzle_128b_offset(row, byte_in_row + 16));
  const u32 w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  u32 out[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const u32 a = w[2 * i];
    const u32 b = w[2 * i + 1];
    out[i] = PackE4m3x2(__uint_as_float(a << 16), __uint_as_float(a & 0xFFFF0000u)) |
             (PackE4m3x2(__uint_as_float(b << 16), __uint_as_float(b & 0xFFFF0000u)) << 16);
  }
  *reinterpret_cast<uint4*>(tile8 + sm90::swizzle_128b_offset(row, chunk * 16)) =
      make_uint4(out[0], out[1], out[2], out[3]);
}

// Stores this warpgroup's 64x128 fp32 accumulator tile (wgmma layout: element 4j+e is row
// 16*warp + lane/4 + 8*(e/2), column 8j + 2*(lane%4) + e%2) to C at (m0, n0) as bf16, skipping
// what lies past M or N.
__device__ __forceinline__ void StoreTile(const float (&acc)[64], u16* C, int M, int N, int m0,
                                          int n0) {
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const bool pairs = N % 2 == 0;
#pragma unroll
  for (int j = 0; j < 16; ++j) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = m0 + 16 * warp + lane / 4 + 8 * h;
      const int col = n0 + 8 * j + 2 * (lane % 4);
      if (row >= M || col >= N) continue;
      const u32 packed = sm90::pack_bf16x2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
      u16* dst = C + static_cast<long long>(row) * N + col;
      if (pairs) {
        *reinterpret_cast<u32*>(dst) = packed;
      } else {
        dst[0] = static_cast<u16>(packed & 0xFFFFu);
        if (col + 1 < N) dst[1] = static_cast<u16>(packed >> 16);
      }
    }
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(128)
    gemm_fp8_kernel(const __grid_constant__ CUtensorMap tmA,
                    const __grid_constant__ CUtensorMap tmB, u16* C, int M, int N, int K) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024u - (sm90::smem_u32(smem_raw) & 1023u)) & 1023u);
  unsigned char* a16 = smem + kOffA16;
  unsigned char* b16 = smem + kOffB16;
  unsigned char* a8 = smem + kOffA8;
  unsigned char* b8 = smem + kOffB8;
  u64* bar = reinterpret_cast<u64*>(smem + kOffBar);
  const int m0 = static_cast<int>(blockIdx.y) * kTileM;
  const int n0 = static_cast<int>(blockIdx.x) * kTileN;
  const int tid = static_cast<int>(threadIdx.x);
  if (tid == 0) {
    sm90::mbarrier_init(bar, 1);
    sm90::fence_mbarrier_init();
  }
  __syncthreads();
  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
  const u32 a8_base = sm90::smem_u32(a8);
  const u32 b8_base = sm90::smem_u32(b8);
  const int num_k_steps = (K + kTileK - 1) / kTileK;
  for (int k = 0; k < num_k_steps; ++k) {
    if (tid == 0) {
      const int k0 = k * kTileK;
      sm90::mbarrier_arrive_expect_tx(bar, kStageTxBytes);
      sm90::tma_load_2d(a16, &tmA, bar, k0, m0);
      sm90::tma_load_2d(a16 + kABoxBytes, &tmA, bar, k0 + 64, m0);
      sm90::tma_load_2d(b16, &tmB, bar, k0, n0);
      sm90::tma_load_2d(b16 + kBBoxBytes, &tmB, bar, k0 + 64, n0);
    }
    sm90::mbarrier_wait_parity(bar, static_cast<u32>(k & 1));
    // 64 + 128 rows of 8 chunks: 1536 chunks, 12 per thread.
    for (int c = tid; c < (kTileM + kTileN) * 8; c += 128) {
      const u32 row = static_cast<u32>(c / 8);
      const u32 chunk = static_cast<u32>(c % 8);
      if (row < kTileM) {
        ConvertChunkToE4m3(a16, kABoxBytes, a8, row, chunk);
      } else {
        ConvertChunkToE4m3(b16, kBBoxBytes, b8, row - kTileM, chunk);
      }
    }
    sm90::fence_proxy_async_shared();
    // Every thread's e4m3 chunks are written (and fenced) before the wgmmas read them, and every
    // thread has read the staged boxes of this step.
    __syncthreads();
    sm90::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kTileK / 32; ++kk) {
      WgmmaM64N128K32E4m3(acc, sm90::make_smem_desc_sw128(a8_base + kk * 32),
                          sm90::make_smem_desc_sw128(b8_base + kk * 32));
    }
    sm90::wgmma_commit_group();
    sm90::wgmma_wait_group<0>();
    sm90::wgmma_fence_operand(acc);
    // Every warp's wgmmas have read the fp8 tiles before they are rewritten.
    __syncthreads();
  }
  StoreTile(acc, C, M, N, m0, n0);
}
