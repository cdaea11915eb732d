/* PTXBENCH_PLAN
{"launches":[{"kernel":"gemm_fp8bs_kernel",
  "grid":["ceil_div(N,128)","ceil_div(M,128)"],"block":["384"],"cluster":[],
  "dynamic_shared_bytes":"200800",
  "args":[{"tensor_map":"tmA"},{"tensor_map":"tmB"},{"tensor_map":"tmSA"},{"tensor_map":"tmC"},
          {"tensor":"SB"},{"scalar":"M"},{"scalar":"N"},{"scalar":"K"}]}],
 "scratch":[],
 "tensor_maps":[
  {"name":"tmA","tensor":"A","box":["128","128"],"element_strides":[],"swizzle":"128B",
   "interleave":"none","l2_promotion":"256B","oob_fill":"zero","dims":[]},
  {"name":"tmB","tensor":"B","box":["128","128"],"element_strides":[],"swizzle":"128B",
   "interleave":"none","l2_promotion":"256B","oob_fill":"zero","dims":[]},
  {"name":"tmSA","tensor":"SA","box":["128","1"],"element_strides":[],"swizzle":"none",
   "interleave":"none","l2_promotion":"none","oob_fill":"zero","dims":[]},
  {"name":"tmC","tensor":"C","box":["64","64"],"element_strides":[],"swizzle":"128B",
   "interleave":"none","l2_promotion":"none","oob_fill":"zero","dims":[]}]}
*/
// DECOY for gemm_fp8bs_n7168_k16384 (sm_90a), written for PTXBench. Expected verdict:
// wrong_result.
//
// What it tries: the wrong fp8 format: the reference solution (solutions/sm90a_qgmma_tma.cu)
// with its wgmma's operand types .e4m3.e4m3 replaced by .e5m2.e5m2, so the tensor core reads
// the e4m3 bytes as e5m2 (1 sign, 5 exponent bits with bias 15, 2 mantissa bits). Same
// instruction count, same QGMMA family and throughput; only the format code differs.
//
// Why that verdict: one bit moves from mantissa to exponent: an e4m3 byte S.EEEE.MMM =
// 2^(E-7) (1 + M/8) reads as 2^(E'-15) (1 + M'/4) with E' = 2E + (M >> 2), M' = M & 3, so each
// value is scaled by a code-dependent factor between about 2^-8 and 2^8 (none of N(0, 1)'s e4m3
// codes reaches E' = 31, e5m2's inf/NaN): the products have nothing to do with the task's, and
// nearly every element fails.
#include "ptxbench_hopper.cuh"

namespace {

namespace sm90 = ptxbench::sm90;
using u32 = sm90::u32;
using u64 = sm90::u64;

constexpr int kBlockM = 128;
constexpr int kBlockN = 128;
constexpr int kBlockK = 128;  // One scale block; 128 e4m3 = 128 bytes, the 128B swizzle span.
constexpr int kStages = 6;
constexpr int kGroupM = 16;  // M tiles per raster group.
constexpr int kConsumerWarpgroups = 2;
constexpr int kConsumerWarps = 4 * kConsumerWarpgroups;

constexpr u32 kATileBytes = kBlockM * kBlockK;  // 16 KiB
constexpr u32 kBTileBytes = kBlockN * kBlockK;  // 16 KiB
constexpr u32 kSATileBytes = kBlockM * 4;       // 512
constexpr u32 kStageTxBytes = kATileBytes + kBTileBytes + kSATileBytes;
constexpr u32 kTileSmemBytes = kStages * (kATileBytes + kBTileBytes);  // 196608
constexpr u32 kSASmemBytes = kStages * kSATileBytes;                   // 3072
// Dynamic shared memory = 1024 (alignment slack) + tiles + SA tiles + 2 * kStages barriers.
constexpr u32 kSmemBytes = 1024 + kTileSmemBytes + kSASmemBytes + 2 * kStages * 8;
static_assert(kSmemBytes == 200800, "keep the launch plan's dynamic_shared_bytes in sync");
constexpr u32 kEpilogueBoxBytes = 64 * 64 * 2;
constexpr u32 kEpilogueBytesPerWarpgroup = (kBlockN / 64) * kEpilogueBoxBytes;
static_assert(kConsumerWarpgroups * kEpilogueBytesPerWarpgroup <= kTileSmemBytes,
              "epilogue staging reuses the pipeline buffers");

// DECOY: the e4m3 bytes multiplied as e5m2 (wgmma .e5m2.e5m2), the same bits read in the other
// fp8 format.
__device__ __forceinline__ void WgmmaM64N128K32E5m2(float (&d)[64], u64 desc_a, u64 desc_b,
                                                    int scale_d) {
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "setp.ne.b32 p, %66, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e5m2.e5m2 "
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
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

__device__ __forceinline__ void ReleaseStage(u64* empty, int stage) {
  if (sm90::lane_index() == 0) sm90::mbarrier_arrive(&empty[stage]);
}

}  // namespace

extern "C" __global__ void __launch_bounds__(128 * (1 + kConsumerWarpgroups), 1)
    gemm_fp8bs_kernel(const __grid_constant__ CUtensorMap tmA,
                      const __grid_constant__ CUtensorMap tmB,
                      const __grid_constant__ CUtensorMap tmSA,
                      const __grid_constant__ CUtensorMap tmC, const float* __restrict__ SB, int M,
                      int N, int K) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024u - (sm90::smem_u32(smem_raw) & 1023u)) & 1023u);
  unsigned char* a_tiles = smem;
  unsigned char* b_tiles = smem + kStages * kATileBytes;
  float* sa_tiles = reinterpret_cast<float*>(smem + kTileSmemBytes);
  u64* full = reinterpret_cast<u64*>(smem + kTileSmemBytes + kSASmemBytes);
  u64* empty = full + kStages;

  const int warpgroup = sm90::warpgroup_index();
  const int num_k_blocks = (K + kBlockK - 1) / kBlockK;
  // SB's row stride: the K blocks rounded up to a multiple of 4 floats (the task's layout).
  const int sb_stride = 4 * ((num_k_blocks + 3) / 4);

  const int num_n_tiles = static_cast<int>(gridDim.x);
  const int num_m_tiles = static_cast<int>(gridDim.y);
  const int linear = static_cast<int>(blockIdx.y) * num_n_tiles + static_cast<int>(blockIdx.x);
  const int group = linear / (kGroupM * num_n_tiles);
  const int first_m_tile = group * kGroupM;
  const int m_tiles_in_group = min(num_m_tiles - first_m_tile, kGroupM);
  const int in_group = linear - group * kGroupM * num_n_tiles;
  const int m_tile = first_m_tile + in_group % m_tiles_in_group;
  const int n_tile = in_group / m_tiles_in_group;
  const int m0 = m_tile * kBlockM;
  const int n0 = n_tile * kBlockN;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      sm90::mbarrier_init(&full[s], 1);
      sm90::mbarrier_init(&empty[s], kConsumerWarps);
    }
    sm90::fence_mbarrier_init();
  }
  __syncthreads();

  if (warpgroup == 0) {
    sm90::setmaxnreg_dec<40>();
    if (sm90::warp_index() == 0 && sm90::elect_one()) {
      sm90::prefetch_tensormap(&tmA);
      sm90::prefetch_tensormap(&tmB);
      sm90::prefetch_tensormap(&tmSA);
      for (int kb = 0; kb < num_k_blocks; ++kb) {
        const int s = kb % kStages;
        sm90::mbarrier_wait_parity(&empty[s], ((kb / kStages) & 1) ^ 1);
        sm90::mbarrier_arrive_expect_tx(&full[s], kStageTxBytes);
        sm90::tma_load_2d(a_tiles + s * kATileBytes, &tmA, &full[s], kb * kBlockK, m0);
        sm90::tma_load_2d(b_tiles + s * kBTileBytes, &tmB, &full[s], kb * kBlockK, n0);
        // SA is [ceil(K/128), M] with M innermost: the box (128 rows of A, block kb).
        sm90::tma_load_2d(sa_tiles + s * kBlockM, &tmSA, &full[s], m0, kb);
      }
    }
    __syncwarp();
  } else {
    sm90::setmaxnreg_inc<232>();
    const int consumer = warpgroup - 1;
    const int warp_in_group = sm90::thread_index_in_warpgroup() / 32;
    const int lane = sm90::lane_index();
    // This thread's two rows of the wgmma accumulator layout, within the CTA tile.
    const int row0 = consumer * 64 + 16 * warp_in_group + lane / 4;
    const int row1 = row0 + 8;
    const float* sb_row = SB + static_cast<long long>(n0 / 128) * sb_stride;
    float acc[64];
    float partial[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.0f;

    for (int kb = 0; kb < num_k_blocks; ++kb) {
      const int s = kb % kStages;
      const float sb = __ldg(sb_row + kb);
      sm90::mbarrier_wait_parity(&full[s], (kb / kStages) & 1);
      const u32 a_base = sm90::smem_u32(a_tiles + s * kATileBytes) + consumer * 64 * 128;
      const u32 b_base = sm90::smem_u32(b_tiles + s * kBTileBytes);
      sm90::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBlockK / 32; ++kk) {
        WgmmaM64N128K32E5m2(partial, sm90::make_smem_desc_sw128(a_base + kk * 32),
                            sm90::make_smem_desc_sw128(b_base + kk * 32), kk > 0);
      }
      sm90::wgmma_commit_group();
      sm90::wgmma_wait_group<0>();
      sm90::wgmma_fence_operand(partial);
      const float scale0 = sa_tiles[s * kBlockM + row0] * sb;
      const float scale1 = sa_tiles[s * kBlockM + row1] * sb;
      // The slot's A, B and SA have all been read (the wgmmas completed, SA is in registers).
      __syncwarp();
      ReleaseStage(empty, s);
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        acc[4 * j + 0] = fmaf(partial[4 * j + 0], scale0, acc[4 * j + 0]);
        acc[4 * j + 1] = fmaf(partial[4 * j + 1], scale0, acc[4 * j + 1]);
        acc[4 * j + 2] = fmaf(partial[4 * j + 2], scale1, acc[4 * j + 2]);
        acc[4 * j + 3] = fmaf(partial[4 * j + 3], scale1, acc[4 * j + 3]);
      }
    }

    // Every full barrier was waited (every TMA write has landed) and both warpgroups' wgmmas are
    // complete after this barrier: the ring is free for staging the output.
    sm90::named_barrier_sync(1, 128 * kConsumerWarpgroups);
    unsigned char* staging = smem + consumer * kEpilogueBytesPerWarpgroup;
    const u32 row = warp_in_group * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
    const u32 col_in_block16 = (lane >> 4) * 8;
#pragma unroll
    for (int j = 0; j < kBlockN / 16; ++j) {
      const u32 col = j * 16 + col_in_block16;
      unsigned char* box = staging + (col / 64) * kEpilogueBoxBytes;
      sm90::stmatrix_x4(box + sm90::swizzle_128b_offset(row, (col % 64) * 2),
                        sm90::pack_bf16x2(acc[8 * j + 0], acc[8 * j + 1]),
                        sm90::pack_bf16x2(acc[8 * j + 2], acc[8 * j + 3]),
                        sm90::pack_bf16x2(acc[8 * j + 4], acc[8 * j + 5]),
                        sm90::pack_bf16x2(acc[8 * j + 6], acc[8 * j + 7]));
    }
    sm90::fence_proxy_async_shared();
    sm90::named_barrier_sync(2 + consumer, 128);
    if (sm90::thread_index_in_warpgroup() == 0) {
#pragma unroll
      for (int b = 0; b < kBlockN / 64; ++b) {
        sm90::tma_store_2d(&tmC, staging + b * kEpilogueBoxBytes, n0 + b * 64, m0 + consumer * 64);
      }
      sm90::tma_store_commit();
      sm90::tma_store_wait_read<0>();
    }
  }
  (void)M;
  (void)N;
}
