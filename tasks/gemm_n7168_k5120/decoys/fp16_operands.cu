/* PTXBENCH_PLAN
{"launches":[{"kernel":"gemm_fp16_kernel","grid":["ceil_div(N,128)","ceil_div(M,64)"],
  "block":["128"],"cluster":[],"dynamic_shared_bytes":"25608",
  "args":[{"tensor_map":"tmA"},{"tensor_map":"tmB"},{"tensor":"C"},
          {"scalar":"M"},{"scalar":"N"},{"scalar":"K"}]}],
 "scratch":[],
 "tensor_maps":[
  {"name":"tmA","tensor":"A","box":["64","64"],"element_strides":[],"swizzle":"128B",
   "interleave":"none","l2_promotion":"128B","oob_fill":"zero","dims":[]},
  {"name":"tmB","tensor":"B","box":["64","128"],"element_strides":[],"swizzle":"128B",
   "interleave":"none","l2_promotion":"128B","oob_fill":"zero","dims":[]}]}
*/
// DECOY for gemm_n7168_k5120 (sm_90a), written for PTXBench.
// Expected verdict: target_work_insufficient.
//
// What it tries: fp16 operands where bf16 is asked. TMA loads bf16 tiles of A and B, the
// warpgroup converts them in place to fp16 and multiplies them with wgmma m64n128k16 .f16
// (HGMMA.F16), fp32 accumulation. All of the work runs on the target families.
//
// Why that verdict: this is NOT lower precision on this task's inputs. bf16 -> fp16 is exact for
// every |x| in [2^-17, 65504] (fp16 has 3 more mantissa bits; its subnormals reach 2^-24), and an
// N(0, 1) draw falls below 2^-17 about 6 times in a million, changing by less than 2^-25: the
// product is the same function (simulated: 0 of 20,000 timed-size dot products differ from the
// bf16 kernel's after the final bf16 rounding), so correctness rightly passes. It differs only
// for inputs the harness never draws (|x| > 65504 overflows, tiny values lose bits). What fails
// is the work share: its credited target work is bf16 HGMMA FLOPs
// (sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32), and here those are 0; the fp16 HGMMA FLOPs
// count as other tensor work. Should fp16 HGMMA ever be credited for a bf16 task, this decoy
// would expect pass.
//
// Kernel: one warpgroup per 64x128 tile of C, k-steps of 64 with one TMA stage (simple, not
// fast): wait for the tile, convert, fence the generic writes for the async proxy, 4 wgmmas,
// wait, repeat. M, N arbitrary (TMA zero-fills past the edges, stores are clipped); K % 8 == 0
// (TMA's 16-byte global strides), as in every workload.
#include "ptxbench_hopper.cuh"

namespace {

namespace sm90 = ptxbench::sm90;
using u16 = sm90::u16;
using u32 = sm90::u32;
using u64 = sm90::u64;

constexpr int kTileM = 64;
constexpr int kTileN = 128;
constexpr int kTileK = 64;
constexpr u32 kATileBytes = kTileM * kTileK * 2;  // 8 KiB
constexpr u32 kBTileBytes = kTileN * kTileK * 2;  // 16 KiB
constexpr u32 kSmemBytes = 1024 + kATileBytes + kBTileBytes + 8;
static_assert(kSmemBytes == 25608, "keep the launch plan's dynamic_shared_bytes in sync");

// D[64x128] += A[64x16] * B[16x128], fp16 operands in shared memory (K-major, 128B swizzle, the
// descriptors of ptxbench_hopper.cuh), fp32 accumulators in the layout of the bf16 forms.
__device__ __forceinline__ void WgmmaM64N128K16F16(float (&d)[64], u64 desc_a, u64 desc_b) {
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "setp.ne.b32 p, 1, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1, 0, 0;\n\t}"
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

// Eight bf16 (one 16-byte chunk) to eight fp16 in place; the position of each element is kept,
// so a 128B-swizzled bf16 tile becomes the same swizzled fp16 tile.
__device__ __forceinline__ void Bf16ChunkToFp16(uint4* chunk) {
  u32 w[4] = {chunk->x, chunk->y, chunk->z, chunk->w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float lo = __uint_as_float(w[i] << 16);
    const float hi = __uint_as_float(w[i] & 0xFFFF0000u);
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(w[i]) : "f"(hi), "f"(lo));
  }
  *chunk = make_uint4(w[0], w[1], w[2], w[3]);
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
    gemm_fp16_kernel(const __grid_constant__ CUtensorMap tmA,
                     const __grid_constant__ CUtensorMap tmB, u16* C, int M, int N, int K) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024u - (sm90::smem_u32(smem_raw) & 1023u)) & 1023u);
  unsigned char* a_tile = smem;
  unsigned char* b_tile = smem + kATileBytes;
  u64* bar = reinterpret_cast<u64*>(b_tile + kBTileBytes);
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
  const u32 a_base = sm90::smem_u32(a_tile);
  const u32 b_base = sm90::smem_u32(b_tile);
  const int num_k_steps = (K + kTileK - 1) / kTileK;
  for (int k = 0; k < num_k_steps; ++k) {
    if (tid == 0) {
      sm90::mbarrier_arrive_expect_tx(bar, kATileBytes + kBTileBytes);
      sm90::tma_load_2d(a_tile, &tmA, bar, k * kTileK, m0);
      sm90::tma_load_2d(b_tile, &tmB, bar, k * kTileK, n0);
    }
    sm90::mbarrier_wait_parity(bar, static_cast<u32>(k & 1));
    // Both tiles are contiguous: 1536 chunks of 16 bytes, 12 per thread.
    uint4* chunks = reinterpret_cast<uint4*>(a_tile);
    for (int c = tid; c < static_cast<int>((kATileBytes + kBTileBytes) / 16); c += 128) {
      Bf16ChunkToFp16(&chunks[c]);
    }
    // The wgmmas (async proxy) read what this thread wrote (generic proxy); the next TMA load
    // (async proxy) overwrites it.
    sm90::fence_proxy_async_shared();
    __syncthreads();
    sm90::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kTileK / 16; ++kk) {
      WgmmaM64N128K16F16(acc, sm90::make_smem_desc_sw128(a_base + kk * 32),
                         sm90::make_smem_desc_sw128(b_base + kk * 32));
    }
    sm90::wgmma_commit_group();
    sm90::wgmma_wait_group<0>();
    sm90::wgmma_fence_operand(acc);
    // Every warp's wgmmas have read the tiles before thread 0 refills them.
    __syncthreads();
  }
  StoreTile(acc, C, M, N, m0, n0);
}
