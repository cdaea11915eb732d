/* PTXBENCH_PLAN
{"launches":[{"kernel":"gemm_kernel",
  "grid":["2*min(66, ceil_div(M,256)*ceil_div(N,256))"],"block":["384"],"cluster":["2","1","1"],
  "dynamic_shared_bytes":"230464",
  "args":[{"tensor_map":"tmA"},{"tensor_map":"tmB"},{"tensor_map":"tmC"},
          {"scalar":"M"},{"scalar":"N"},{"scalar":"K"}]}],
 "scratch":[],
 "tensor_maps":[
  {"name":"tmA","tensor":"A","box":["64","128"],"element_strides":[],"swizzle":"128B",
   "interleave":"none","l2_promotion":"256B","oob_fill":"zero","dims":[]},
  {"name":"tmB","tensor":"B","box":["64","128"],"element_strides":[],"swizzle":"128B",
   "interleave":"none","l2_promotion":"256B","oob_fill":"zero","dims":[]},
  {"name":"tmC","tensor":"C","box":["64","64"],"element_strides":[],"swizzle":"128B",
   "interleave":"none","l2_promotion":"none","oob_fill":"zero","dims":[]}]}
*/
// CANDIDATE (tools/kernel-dev/candidates, not yet measured on a GPU): the persistent reference
// solution (tasks/gemm_n7168_k5120/solutions/sm90a_wgmma_tma_persistent.cu, 0.770 ms on the H200,
// 0.970x cuBLASLt) in 2-CTA clusters that share the B tile through TMA multicast.
//
// C[M][N] = A[M][K] * B[N][K]^T, bf16 in and out, fp32 accumulation.
//
// Why: cuBLASLt's fastest algorithm on the timed shape runs in 1x2x1 clusters
// (tools/kernel-dev/NOTES.md, last section). Per k-step a CTA of the persistent kernel moves
// 16 KiB of A and 32 KiB of B from L2 (48 KiB per 128x256x64 MMA block, ~9 TB/s for all 132 SMs
// at the measured 781 TFLOP/s). Here the two CTAs of a cluster compute the vertically adjacent
// tiles (m_tile 2p and 2p+1, same n_tile), so they need the same B tile: each CTA loads one
// 128-row half of it and multicasts it to both, and L2 sends 32 KiB per CTA per k-step, a third
// less.
//
// What differs from the persistent solution:
// - Grid 2 * min(66, tile pairs), cluster {2,1,1}: cluster c = blockIdx.x / 2 walks the tile
//   pairs p = c, c + gridDim.x/2, ... in a grouped raster over pairs (8 pairs = 16 M-tiles per
//   group, as before); rank r of the cluster takes m_tile 2 * m_pair + r. Both CTAs of a cluster
//   therefore run exactly the same number of tiles and k-steps, which the shared ring requires.
//   An odd number of M tiles leaves rank 1's last-row tile wholly below M (384 x 7168: M tiles
//   0..2, the pair (2, 3)); that CTA still loads (TMA zero-fills the box and counts its full
//   bytes, as the multicast solution relies on for the same case) and computes, but skips its
//   epilogue: its stores would all be clipped anyway.
// - Ring slot s of both CTAs is filled by both producers (A by its own CTA, B half r by rank r
//   into the same offset of both CTAs). The full barrier of each CTA expects 48 KiB: 16 KiB of A
//   plus two 16 KiB B halves, one of them delivered by the peer's multicast. The peer's bytes may
//   land before this CTA's producer posted arrive.expect_tx; the phase stays open because that
//   arrival is still pending (tx-count may go transiently negative; PTX ISA, mbarrier).
// - A slot may be overwritten only when the consumers of BOTH CTAs have finished reading it,
//   because either producer writes into both CTAs' copies. Each consumer warp therefore arrives
//   on the empty barrier of both CTAs (mapa + mbarrier.arrive.release.cluster), and each empty
//   barrier counts 2 x 8 = 16 arrivals per phase. Round r of a peer's multicast into this CTA's
//   slot s needs the peer's empty[s] round r-1, which needs this CTA's consumers' release of
//   round r-1, which needs this CTA's full[s] phase r-1 to have completed: the peer's bytes can
//   only land in phase r of full[s], never in the phase the consumers are still waiting on.
// - Start: mbarrier.init + fence.mbarrier_init.release.cluster, then barrier.cluster
//   arrive/wait, so no peer multicasts into or arrives on an uninitialized barrier.
// - Exit: barrier.cluster arrive/wait after all work. A CTA's consumers arrive on the peer's
//   empty barriers until their last k-step, and the peer's producer multicasts into this CTA
//   until the last k-step; neither CTA leaves before the other has finished both.
// Everything else (warp specialization, setmaxnreg 40/232, wgmma m64n256k16 with one group in
// flight, 16 KiB of epilogue staging per consumer warpgroup written in two TMA-store passes, the
// ring's stage and phase carried across tiles) is the persistent solution's.
//
// Shared memory: as the persistent solution, 1024 + 4 x 48 KiB + 2 x 16 KiB + 8 barriers =
// 230464 bytes. One CTA per SM; 66 clusters of 2 need 132 SMs in pairs of one GPC: NOTES.md
// records 66 active clusters (all 132 SMs) for the multicast solution on the H200.
//
// Assumptions (all task workloads satisfy them): K % 8 == 0 and N % 8 == 0 (TMA global strides),
// K >= 1; M and N arbitrary otherwise (TMA zero-fills loads and clips stores at the edges).
#include "ptxbench_hopper.cuh"

namespace {

namespace sm90 = ptxbench::sm90;
using u32 = sm90::u32;
using u64 = sm90::u64;

constexpr int kBlockM = 128;
constexpr int kBlockN = 256;
constexpr int kBlockK = 64;  // 64 bf16 = 128 bytes: the widest inner box for the 128B swizzle.
constexpr int kStages = 4;
constexpr int kClusterSize = 2;  // CTAs per cluster, adjacent along M; plan cluster {2,1,1}.
constexpr int kGroupPairs = 8;   // M-tile pairs per raster group (16 M tiles).
constexpr int kConsumerWarpgroups = 2;
constexpr int kConsumerWarps = 4 * kConsumerWarpgroups;

constexpr u32 kATileBytes = kBlockM * kBlockK * 2;  // 16 KiB
constexpr u32 kBTileBytes = kBlockN * kBlockK * 2;  // 32 KiB
constexpr int kBSliceRows = kBlockN / kClusterSize;  // 128: the plan's tmB box rows
constexpr u32 kBSliceBytes = kBTileBytes / kClusterSize;
static_assert(kBSliceBytes % 1024 == 0, "B halves must stay 1024-byte aligned (128B swizzle)");
constexpr u32 kStageBytes = kATileBytes + kBTileBytes;  // bytes each CTA's full barrier expects
constexpr u32 kTileSmemBytes = kStages * kStageBytes;   // 196608
constexpr u32 kEpilogueBoxBytes = 64 * 64 * 2;
constexpr int kBoxesPerPass = 2;
constexpr int kEpiloguePasses = kBlockN / 64 / kBoxesPerPass;
constexpr u32 kStagingBytesPerWarpgroup = kBoxesPerPass * kEpilogueBoxBytes;  // 16 KiB
constexpr u32 kStagingBytes = kConsumerWarpgroups * kStagingBytesPerWarpgroup;
constexpr u32 kSmemBytes = 1024 + kTileSmemBytes + kStagingBytes + 2 * kStages * 8;
static_assert(kSmemBytes == 230464, "keep the launch plan's dynamic_shared_bytes in sync");
static_assert(kSmemBytes <= 232448, "sm_90's opt-in shared memory per block");

struct Tile {
  int m0;
  int n0;
};

// Grouped raster over tile pairs (a pair = M tiles 2q and 2q+1 of one N tile): consecutive pair
// indices walk down kGroupPairs pairs before moving to the next N tile, so the 66 pairs in
// flight share ~16 A strips and ~8 B strips in L2. `rank` picks the pair's member.
__device__ __forceinline__ Tile PairTileAt(int linear, int num_m_pairs, int num_n_tiles,
                                           int rank) {
  const int group = linear / (kGroupPairs * num_n_tiles);
  const int first_pair = group * kGroupPairs;
  const int pairs_in_group = min(num_m_pairs - first_pair, kGroupPairs);
  const int in_group = linear - group * kGroupPairs * num_n_tiles;
  const int m_pair = first_pair + in_group % pairs_in_group;
  return {(m_pair * kClusterSize + rank) * kBlockM, (in_group / pairs_in_group) * kBlockN};
}

// Frees ring slot `stage` in both CTAs of the cluster: one arrival per consumer warp on the
// empty barrier at the same offset in each CTA (both producers write into this CTA's slot).
__device__ __forceinline__ void ReleaseStage(u64* empty, int stage) {
  if (sm90::lane_index() == 0) {
#pragma unroll
    for (u32 cta = 0; cta < kClusterSize; ++cta) sm90::mbarrier_arrive_cluster(&empty[stage], cta);
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(128 * (1 + kConsumerWarpgroups), 1)
    gemm_kernel(const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB,
                const __grid_constant__ CUtensorMap tmC, int M, int N, int K) {
  extern __shared__ unsigned char smem_raw[];
  // 128B-swizzled tiles must start 1024-byte aligned. The dynamic shared window starts at the
  // same offset in every CTA of the kernel, so the pad, and with it every multicast destination
  // offset, is the same in both CTAs of a cluster.
  unsigned char* smem = smem_raw + ((1024u - (sm90::smem_u32(smem_raw) & 1023u)) & 1023u);
  unsigned char* a_tiles = smem;
  unsigned char* b_tiles = smem + kStages * kATileBytes;
  unsigned char* staging_all = smem + kTileSmemBytes;
  u64* full = reinterpret_cast<u64*>(staging_all + kStagingBytes);
  u64* empty = full + kStages;

  const int warpgroup = sm90::warpgroup_index();
  const int num_k_steps = (K + kBlockK - 1) / kBlockK;
  const int num_m_tiles = (M + kBlockM - 1) / kBlockM;
  const int num_m_pairs = (num_m_tiles + kClusterSize - 1) / kClusterSize;
  const int num_n_tiles = (N + kBlockN - 1) / kBlockN;
  const int num_pairs = num_m_pairs * num_n_tiles;
  const int rank = static_cast<int>(sm90::cluster_ctarank());
  // Cluster {2,1,1} on a 1-D grid: CTAs 2c and 2c+1 form cluster c.
  const int first_pair = static_cast<int>(blockIdx.x) / kClusterSize;
  const int pair_stride = static_cast<int>(gridDim.x) / kClusterSize;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      sm90::mbarrier_init(&full[s], 1);
      sm90::mbarrier_init(&empty[s], kConsumerWarps * kClusterSize);
    }
    sm90::fence_mbarrier_init();
  }
  // The peer multicasts into this CTA's slots and arrives on its empty barriers: both CTAs'
  // barriers must be initialized (and visible cluster-wide) before either producer starts.
  sm90::cluster_sync();

  if (warpgroup == 0) {
    // Producer warpgroup. Only one thread issues copies; the other warps just hold no registers.
    sm90::setmaxnreg_dec<40>();
    if (sm90::warp_index() == 0 && sm90::elect_one()) {
      sm90::prefetch_tensormap(&tmA);
      sm90::prefetch_tensormap(&tmB);
      const sm90::u16 cluster_mask = (1u << kClusterSize) - 1;
      int step = 0;  // k-steps issued over all tiles: the ring position (same in both CTAs).
      for (int p = first_pair; p < num_pairs; p += pair_stride) {
        const Tile tile = PairTileAt(p, num_m_pairs, num_n_tiles, rank);
        for (int k = 0; k < num_k_steps; ++k, ++step) {
          const int s = step % kStages;
          // Round r of slot s needs both CTAs' consumers to have released round r-1 (parity 1
          // on a fresh barrier passes at once).
          sm90::mbarrier_wait_parity(&empty[s], ((step / kStages) & 1) ^ 1);
          sm90::mbarrier_arrive_expect_tx(&full[s], kStageBytes);
          sm90::tma_load_2d(a_tiles + s * kATileBytes, &tmA, &full[s], k * kBlockK, tile.m0);
          sm90::tma_load_2d_multicast(b_tiles + s * kBTileBytes + rank * kBSliceBytes, &tmB,
                                      &full[s], k * kBlockK, tile.n0 + rank * kBSliceRows,
                                      cluster_mask);
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

    for (int p = first_pair; p < num_pairs; p += pair_stride) {
      const Tile tile = PairTileAt(p, num_m_pairs, num_n_tiles, rank);
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
      ReleaseStage(empty, (step - 1) % kStages);

      // Rank 1's tile lies wholly below M when the number of M tiles is odd: nothing to store.
      // Warpgroup-uniform, and the epilogue touches no ring barrier.
      if (tile.m0 >= M) continue;
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
  // No CTA may exit while its peer can still multicast into its shared memory or arrive on its
  // empty barriers.
  sm90::cluster_sync();
}
