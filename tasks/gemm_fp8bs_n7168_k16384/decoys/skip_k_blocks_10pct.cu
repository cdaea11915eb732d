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
// What it tries: reduced work inside the tolerance? The reference solution
// (solutions/sm90a_qgmma_tma.cu) skips the last ~10 % of its 128-wide K blocks, rounded to
// whole blocks ((all_k_blocks + 5) / 10): 13 of the 128 (10.2 %) on the timed workload and on
// `deep_k`, none on `small`, `ragged_mk` and `ragged_n` (K = 128-384). Fewer blocks, the same
// instructions: QGMMA, TMA and the per-block promotion execute as in the reference; the producer
// and the consumers stop at the same block, and SB's row stride stays the task's.
//
// Why that verdict (PREDICTED, not yet run on the GPU): the workloads with K <= 384 (1-3 blocks)
// lose nothing and pass; on `deep_k` and the timed workload 13 blocks' products are missing.
// Simulated (fp64, the task's e4m3 and block_scale draws): relative norm 0.23-0.35 (46-70x the
// 0.005 bound), matched ratio 0.04-0.05 (0.9995 needed).
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
  const int all_k_blocks = (K + kBlockK - 1) / kBlockK;
  // SB's row stride: the K blocks rounded up to a multiple of 4 floats (the task's layout).
  const int sb_stride = 4 * ((all_k_blocks + 3) / 4);
  // DECOY: the last ~10 % of the K blocks (whole blocks) are never loaded or summed.
  const int num_k_blocks = all_k_blocks - (all_k_blocks + 5) / 10;

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
        sm90::wgmma_m64n128k32_ss_e4m3(partial, sm90::make_smem_desc_sw128(a_base + kk * 32),
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
