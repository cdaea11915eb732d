/* PTXBENCH_PLAN
{"launches":[{"kernel":"gemm_kernel",
  "grid":["min(132, ceil_div(N,256)*ceil_div(M,128))"],"block":["384"],"cluster":[],
  "dynamic_shared_bytes":"230464",
  "args":[{"tensor_map":"tmA"},{"tensor_map":"tmB"},{"tensor_map":"tmC"},
          {"scalar":"M"},{"scalar":"N"},{"scalar":"K"}]}],
 "scratch":[],
 "tensor_maps":[
  {"name":"tmA","tensor":"A","box":["64","128"],"element_strides":[],"swizzle":"128B",
   "interleave":"none","l2_promotion":"256B","oob_fill":"zero","dims":[]},
  {"name":"tmB","tensor":"B","box":["64","256"],"element_strides":[],"swizzle":"128B",
   "interleave":"none","l2_promotion":"256B","oob_fill":"zero","dims":[]},
  {"name":"tmC","tensor":"C","box":["64","64"],"element_strides":[],"swizzle":"128B",
   "interleave":"none","l2_promotion":"none","oob_fill":"zero","dims":[]}]}
*/
// Reference solution for gemm_n7168_k5120 on sm_90a (H100/H200), written for PTXBench: the
// persistent form of sm90a_wgmma_tma.cu (its difference is tools/task-sync/derived/
// gemm_n7168_k5120/sm90a_wgmma_tma_persistent.diff). H200, 2026-12-06
// (docs/results/2026-12-06-h200-reference-candidates.json.xz, one evaluation each, same process):
// 0.770 ms against cuBLASLt's fastest candidate at 0.747 ms, speedup 0.970, where
// sm90a_wgmma_tma.cu measured 0.788 ms (0.947); 168 registers, no spills.
//
// C[M][N] = A[M][K] * B[N][K]^T, bf16 in and out, fp32 accumulation.
//
// What differs from sm90a_wgmma_tma.cu, and why:
// - Persistent: one CTA per SM (grid = min(132, tiles); 132 SMs on the H100 SXM and the H200)
//   walks the 128x256 output tiles t = blockIdx.x, blockIdx.x + gridDim.x, ... in the same
//   grouped raster order. The ring's stage and phase run on across tiles, so the producer loads
//   the next tile's first k-steps while the consumers are still in this tile's epilogue: no
//   pipeline fill, no CTA launch and no barrier initialization per tile.
// - The epilogue has its own staging buffer (16 KiB per consumer warpgroup: two 64x64 boxes),
//   so it never waits for the ring to drain. Each consumer warpgroup writes its 64x256 slab in
//   two halves: stmatrix into the staging boxes, then one thread stores them with TMA and goes
//   on; the store's wait (cp.async.bulk.wait_group.read) comes only when the staging is next
//   reused.
// - Shared memory: 1024 (alignment slack) + 4 stages x 48 KiB + 2 x 16 KiB staging + 8
//   barriers = 230464 bytes, under the 232448-byte opt-in limit of sm_90.
// Everything else (warp specialization, setmaxnreg, wgmma m64n256k16 with one group in flight,
// the 128B-swizzled stmatrix layout) is as in sm90a_wgmma_tma.cu; see its comments.
//
// Assumptions (all task workloads satisfy them): K % 8 == 0 and N % 8 == 0 (TMA global strides
// must be multiples of 16 bytes), K >= 1; M and N arbitrary otherwise (TMA zero-fills loads and
// clips stores at the edges). On a GPU with fewer than 132 SMs the result is still right; the
// grid then takes more than one wave.
#include "ptxbench_hopper.cuh"

namespace {

namespace sm90 = ptxbench::sm90;
using u32 = sm90::u32;
using u64 = sm90::u64;

constexpr int kBlockM = 128;
constexpr int kBlockN = 256;
constexpr int kBlockK = 64;  // 64 bf16 = 128 bytes: the widest inner box for the 128B swizzle.
constexpr int kStages = 4;
constexpr int kGroupM = 16;  // M tiles per raster group.
constexpr int kConsumerWarpgroups = 2;
constexpr int kConsumerWarps = 4 * kConsumerWarpgroups;

constexpr u32 kATileBytes = kBlockM * kBlockK * 2;  // 16 KiB
constexpr u32 kBTileBytes = kBlockN * kBlockK * 2;  // 32 KiB
constexpr u32 kStageBytes = kATileBytes + kBTileBytes;
constexpr u32 kTileSmemBytes = kStages * kStageBytes;  // 196608
// Epilogue staging: per consumer warpgroup, two 64x64 bf16 boxes, i.e. its 64x256 slab is
// written in two passes of 128 columns.
constexpr u32 kEpilogueBoxBytes = 64 * 64 * 2;
constexpr int kBoxesPerPass = 2;
constexpr int kEpiloguePasses = kBlockN / 64 / kBoxesPerPass;
constexpr u32 kStagingBytesPerWarpgroup = kBoxesPerPass * kEpilogueBoxBytes;  // 16 KiB
constexpr u32 kStagingBytes = kConsumerWarpgroups * kStagingBytesPerWarpgroup;
// Dynamic shared memory = 1024 (alignment slack) + ring + staging + 2 * kStages barriers.
constexpr u32 kSmemBytes = 1024 + kTileSmemBytes + kStagingBytes + 2 * kStages * 8;
static_assert(kSmemBytes == 230464, "keep the launch plan's dynamic_shared_bytes in sync");
static_assert(kSmemBytes <= 232448, "sm_90's opt-in shared memory per block");

struct Tile {
  int m0;
  int n0;
};

// Grouped raster: consecutive tile indices walk down kGroupM M-tiles before moving to the next
// N-tile, so the ~132 tiles in flight at once share A and B strips in L2.
__device__ __forceinline__ Tile TileAt(int linear, int num_m_tiles, int num_n_tiles) {
  const int group = linear / (kGroupM * num_n_tiles);
  const int first_m_tile = group * kGroupM;
  const int m_tiles_in_group = min(num_m_tiles - first_m_tile, kGroupM);
  const int in_group = linear - group * kGroupM * num_n_tiles;
  return {(first_m_tile + in_group % m_tiles_in_group) * kBlockM,
          (in_group / m_tiles_in_group) * kBlockN};
}

// Frees ring slot `stage` for the producer: one arrival per consumer warp (each warp has passed
// its own wgmma_wait_group, so its reads of the slot are done).
__device__ __forceinline__ void ReleaseStage(u64* empty, int stage) {
  if (sm90::lane_index() == 0) sm90::mbarrier_arrive(&empty[stage]);
}

}  // namespace

extern "C" __global__ void __launch_bounds__(128 * (1 + kConsumerWarpgroups), 1)
    gemm_kernel(const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB,
                const __grid_constant__ CUtensorMap tmC, int M, int N, int K) {
  extern __shared__ unsigned char smem_raw[];
  // 128B-swizzled tiles must start 1024-byte aligned (the swizzle is a function of address
  // bits 4..9).
  unsigned char* smem = smem_raw + ((1024u - (sm90::smem_u32(smem_raw) & 1023u)) & 1023u);
  unsigned char* a_tiles = smem;
  unsigned char* b_tiles = smem + kStages * kATileBytes;
  unsigned char* staging_all = smem + kTileSmemBytes;
  u64* full = reinterpret_cast<u64*>(staging_all + kStagingBytes);
  u64* empty = full + kStages;

  const int warpgroup = sm90::warpgroup_index();
  const int num_k_steps = (K + kBlockK - 1) / kBlockK;
  const int num_m_tiles = (M + kBlockM - 1) / kBlockM;
  const int num_n_tiles = (N + kBlockN - 1) / kBlockN;
  const int num_tiles = num_m_tiles * num_n_tiles;
  const int first_tile = static_cast<int>(blockIdx.x);
  const int tile_stride = static_cast<int>(gridDim.x);

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      sm90::mbarrier_init(&full[s], 1);
      sm90::mbarrier_init(&empty[s], kConsumerWarps);
    }
    sm90::fence_mbarrier_init();
  }
  __syncthreads();

  if (warpgroup == 0) {
    // Producer warpgroup. Only one thread issues copies; the other warps just hold no registers.
    sm90::setmaxnreg_dec<40>();
    if (sm90::warp_index() == 0 && sm90::elect_one()) {
      sm90::prefetch_tensormap(&tmA);
      sm90::prefetch_tensormap(&tmB);
      int step = 0;  // k-steps issued by this CTA over all its tiles: the ring position.
      for (int t = first_tile; t < num_tiles; t += tile_stride) {
        const Tile tile = TileAt(t, num_m_tiles, num_n_tiles);
        for (int k = 0; k < num_k_steps; ++k, ++step) {
          const int s = step % kStages;
          // Round r of slot s needs the consumers' release of round r-1 (parity 1 on a fresh
          // barrier passes at once).
          sm90::mbarrier_wait_parity(&empty[s], ((step / kStages) & 1) ^ 1);
          sm90::mbarrier_arrive_expect_tx(&full[s], kStageBytes);
          sm90::tma_load_2d(a_tiles + s * kATileBytes, &tmA, &full[s], k * kBlockK, tile.m0);
          sm90::tma_load_2d(b_tiles + s * kBTileBytes, &tmB, &full[s], k * kBlockK, tile.n0);
        }
      }
    }
    __syncwarp();
  } else {
    // Consumer warpgroups: rows [64*c, 64*c+64) of each tile.
    sm90::setmaxnreg_inc<232>();
    const int consumer = warpgroup - 1;
    const bool store_thread = sm90::thread_index_in_warpgroup() == 0;
    unsigned char* staging = staging_all + consumer * kStagingBytesPerWarpgroup;
    const int warp_in_group = sm90::thread_index_in_warpgroup() / 32;
    const int lane = sm90::lane_index();
    // stmatrix x4 lane roles: lanes 8i..8i+7 address the 8 rows of matrix i; matrices are
    // (rows 0-7, cols 0-7), (rows 8-15, cols 0-7), (rows 0-7, cols 8-15), (rows 8-15, cols 8-15)
    // of the warp's 16-row slab within a 16-column block.
    const u32 row = warp_in_group * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
    const u32 col_in_block16 = (lane >> 4) * 8;
    float acc[128];
    int step = 0;  // must follow the producer's ring position exactly

    for (int t = first_tile; t < num_tiles; t += tile_stride) {
      const Tile tile = TileAt(t, num_m_tiles, num_n_tiles);
#pragma unroll
      for (int i = 0; i < 128; ++i) acc[i] = 0.0f;

      for (int k = 0; k < num_k_steps; ++k, ++step) {
        const int s = step % kStages;
        sm90::mbarrier_wait_parity(&full[s], (step / kStages) & 1);
        const u32 a_base = sm90::smem_u32(a_tiles + s * kATileBytes) + consumer * 64 * 128;
        const u32 b_base = sm90::smem_u32(b_tiles + s * kBTileBytes);
        sm90::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kBlockK / 16; ++kk) {
          sm90::wgmma_m64n256k16_ss_bf16(acc, sm90::make_smem_desc_sw128(a_base + kk * 32),
                                         sm90::make_smem_desc_sw128(b_base + kk * 32), 1);
        }
        sm90::wgmma_commit_group();
        // Keep this k-step in flight; the previous one is now complete and its slot free.
        sm90::wgmma_wait_group<1>();
        if (k > 0) ReleaseStage(empty, (step - 1) % kStages);
      }
      sm90::wgmma_wait_group<0>();
      sm90::wgmma_fence_operand(acc);
      // The tile's last slot is free now: the producer is already filling the ring with the
      // next tile while this warpgroup writes its output.
      ReleaseStage(empty, (step - 1) % kStages);

      // Epilogue, in passes of kBoxesPerPass * 64 columns through this warpgroup's staging.
#pragma unroll
      for (int pass = 0; pass < kEpiloguePasses; ++pass) {
        // The staging boxes are free once the previous TMA store has read them.
        if (store_thread) sm90::tma_store_wait_read<0>();
        sm90::named_barrier_sync(2 + consumer, 128);
#pragma unroll
        for (int j = 0; j < kBoxesPerPass * 4; ++j) {
          const int jj = pass * kBoxesPerPass * 4 + j;  // 16-column block of the slab
          const u32 col = j * 16 + col_in_block16;       // column within the pass
          unsigned char* box = staging + (col / 64) * kEpilogueBoxBytes;
          sm90::stmatrix_x4(box + sm90::swizzle_128b_offset(row, (col % 64) * 2),
                            sm90::pack_bf16x2(acc[8 * jj + 0], acc[8 * jj + 1]),
                            sm90::pack_bf16x2(acc[8 * jj + 2], acc[8 * jj + 3]),
                            sm90::pack_bf16x2(acc[8 * jj + 4], acc[8 * jj + 5]),
                            sm90::pack_bf16x2(acc[8 * jj + 6], acc[8 * jj + 7]));
        }
        sm90::fence_proxy_async_shared();
        sm90::named_barrier_sync(2 + consumer, 128);
        if (store_thread) {
#pragma unroll
          for (int b = 0; b < kBoxesPerPass; ++b) {
            sm90::tma_store_2d(&tmC, staging + b * kEpilogueBoxBytes,
                               tile.n0 + (pass * kBoxesPerPass + b) * 64, tile.m0 + consumer * 64);
          }
          sm90::tma_store_commit();
        }
      }
    }
    // Shared memory must outlive the stores' reads of it.
    if (store_thread) sm90::tma_store_wait_read<0>();
  }
}
