/* PTXBENCH_PLAN
{"launches":[{"kernel":"gemm_kernel",
  "grid":["2*min(66, ceil_div(M,256)*ceil_div(N,176))"],"block":["384"],"cluster":["2","1","1"],
  "dynamic_shared_bytes":"218192",
  "args":[{"tensor_map":"tmA"},{"tensor_map":"tmB"},{"tensor_map":"tmC"},
          {"scalar":"M"},{"scalar":"N"},{"scalar":"K"}]}],
 "scratch":[],
 "tensor_maps":[
  {"name":"tmA","tensor":"A","box":["64","128"],"element_strides":[],"swizzle":"128B",
   "interleave":"none","l2_promotion":"256B","oob_fill":"zero","dims":[]},
  {"name":"tmB","tensor":"B","box":["64","88"],"element_strides":[],"swizzle":"128B",
   "interleave":"none","l2_promotion":"256B","oob_fill":"zero","dims":[]},
  {"name":"tmC","tensor":"C","box":["88","64"],"element_strides":[],"swizzle":"none",
   "interleave":"none","l2_promotion":"none","oob_fill":"zero","dims":[]}]}
*/
// CANDIDATE (tools/kernel-dev/candidates, not yet measured on a GPU): gemm_persistent_cluster2.cu
// with cuBLASLt's tile shape: 128x176 output tiles (M x N) in 2-CTA clusters along M that share
// the B tile by TMA multicast, five ring stages.
//
// C[M][N] = A[M][K] * B[N][K]^T, bf16 in and out, fp32 accumulation.
//
// Why, with numbers (timed workload 8192 x 7168 x 5120, 132 SMs, one CTA per SM):
// - Wave quantization. 128x256 tiles: 64 x 28 = 1792 tiles = 13.58 waves of 132, so the last
//   wave runs 58 % full and the busy fraction is 13.58 / 14 = 0.970. 128x176 tiles: 64 x 41 =
//   2624 tiles (the last N tile holds 128 of 176 columns: 7168 / 7216 = 0.993 useful) = 19.88
//   waves, 19.88 / 20 = 0.994; together 0.987, i.e. 1.8 % more useful work per unit of time if
//   the per-tile rate were the same. This is cuBLASLt's fastest configuration on this shape
//   (tile 176x128 in its column-major terms, 1x2x1 clusters; tools/kernel-dev/NOTES.md).
// - L2 traffic. A 128x176 tile needs 16 KiB of A + 22 KiB of B per k-step of 64: 0.216 bytes
//   per output column-row-k unit against 0.1875 for 128x256, which is what sank the
//   non-cluster 128x176 attempt (0.851 ms, NOTES.md) together with its direct stores. With B
//   multicast across the pair each CTA pulls 16 + 11 = 27 KiB per k-step from L2: 0.153, below
//   the landed 128x256 kernel's 0.1875.
// - Epilogue through TMA stores (the earlier 128x176 attempt's direct bf16x2 stores were named
//   as its other cost): each consumer warpgroup writes its 64x176 slab in two passes of 88
//   columns, stmatrix into an unswizzled 64x88 box (176-byte rows: the 8 rows of one stmatrix
//   matrix start at banks 0, 12, 24, 4, 16, 28, 8, 20, so no bank conflicts), then one TMA store
//   per pass. tmC's box is 88 x 64 with swizzle "none" (no 128-byte inner limit without swizzle).
// - Five stages instead of four: 1024 + 5 x 38 KiB + 2 x 11 KiB staging + 10 barriers = 218192
//   bytes.
// - 88 fp32 accumulators per consumer thread instead of 128.
//
// Cluster protocol (the same as gemm_persistent_cluster2.cu; see there for the argument): both
// CTAs of a cluster walk the same tile pairs (grid 2 * min(66, pairs)); rank r loads B rows
// [88 r, 88 r + 88) of the pair's N tile and multicasts them to both CTAs; each full barrier
// expects 16384 + 2 x 11264 bytes; each empty barrier counts 16 arrivals (8 consumer warps of
// each CTA, mapa + remote arrive); barrier.cluster after barrier initialization and before exit.
// A rank-1 tile wholly below M (odd number of M tiles) computes zeros and skips its epilogue.
//
// Assumptions (all task workloads satisfy them): K % 8 == 0 and N % 8 == 0 (TMA global strides),
// K >= 1; M and N arbitrary otherwise (TMA zero-fills loads and clips stores at the edges).
#include "ptxbench_hopper.cuh"

namespace {

namespace sm90 = ptxbench::sm90;
using u32 = sm90::u32;
using u64 = sm90::u64;

constexpr int kBlockM = 128;
constexpr int kBlockN = 176;
constexpr int kBlockK = 64;  // 64 bf16 = 128 bytes: the widest inner box for the 128B swizzle.
constexpr int kStages = 5;
constexpr int kClusterSize = 2;  // CTAs per cluster, adjacent along M; plan cluster {2,1,1}.
constexpr int kGroupPairs = 8;   // M-tile pairs per raster group (16 M tiles).
constexpr int kConsumerWarpgroups = 2;
constexpr int kConsumerWarps = 4 * kConsumerWarpgroups;
constexpr int kAcc = kBlockN / 2;  // fp32 accumulators per consumer thread (64 x 176 / 128)

constexpr u32 kATileBytes = kBlockM * kBlockK * 2;  // 16 KiB
constexpr u32 kBTileBytes = kBlockN * kBlockK * 2;  // 22 KiB
constexpr int kBSliceRows = kBlockN / kClusterSize;  // 88: the plan's tmB box rows
constexpr u32 kBSliceBytes = kBTileBytes / kClusterSize;
static_assert(kBSliceRows % 8 == 0 && kBSliceBytes % 1024 == 0,
              "B halves must be whole 8-row swizzle atoms, 1024-byte aligned");
static_assert(kBTileBytes % 1024 == 0 && kATileBytes % 1024 == 0, "1024-byte aligned tiles");
constexpr u32 kStageBytes = kATileBytes + kBTileBytes;  // bytes each CTA's full barrier expects
constexpr u32 kTileSmemBytes = kStages * kStageBytes;   // 194560
// Epilogue: per consumer warpgroup one unswizzled 64-row x 88-column box (176-byte rows), two
// passes per tile.
constexpr int kPassCols = 88;  // the plan's tmC box columns
constexpr int kEpiloguePasses = kBlockN / kPassCols;
constexpr u32 kRowPitch = kPassCols * 2;
constexpr u32 kStagingBytesPerWarpgroup = 64 * kRowPitch;  // 11264 (TMA wants 128-byte alignment)
static_assert(kStagingBytesPerWarpgroup % 128 == 0, "TMA store sources are 128-byte aligned");
constexpr u32 kStagingBytes = kConsumerWarpgroups * kStagingBytesPerWarpgroup;
constexpr u32 kSmemBytes = 1024 + kTileSmemBytes + kStagingBytes + 2 * kStages * 8;
static_assert(kSmemBytes == 218192, "keep the launch plan's dynamic_shared_bytes in sync");
static_assert(kSmemBytes <= 232448, "sm_90's opt-in shared memory per block");

struct Tile {
  int m0;
  int n0;
};

// Grouped raster over tile pairs (a pair = M tiles 2q and 2q+1 of one N tile): consecutive pair
// indices walk down kGroupPairs pairs before moving to the next N tile. `rank` picks the pair's
// member.
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

// stmatrix with two 8x8 b16 matrices (the header has the x4 form only): lanes 0-7 address the
// rows of matrix 0, lanes 8-15 those of matrix 1; the addresses of lanes 16-31 are not used.
__device__ __forceinline__ void StmatrixX2(void* row_ptr, u32 r0, u32 r1) {
  asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1, %2};" ::"r"(
                   sm90::smem_u32(row_ptr)),
               "r"(r0), "r"(r1)
               : "memory");
}

// D[64x176] (fp32, registers) = A[64x16] * B[16x176] + (scale_d ? D : 0), A and B bf16 in shared
// memory, both K-major, 128B-swizzled (make_smem_desc_sw128): the template header has no N=176
// form. Accumulator layout as for the header's wgmma_m64n256k16_ss_bf16 with j < 22: acc[4j+0],
// acc[4j+1] -> row 16w + l/4, columns 8j + 2(l%4) + {0, 1}; acc[4j+2], acc[4j+3] -> row + 8.
__device__ __forceinline__ void WgmmaM64N176K16(float (&d)[88], u64 desc_a, u64 desc_b, int scale_d) {
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "setp.ne.b32 p, %90, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n176k16.f32.bf16.bf16 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87}, "
      "%88, %89, p, 1, 1, 0, 0;\n\t}"
      :
        "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
        "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
        "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
        "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
        "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
        "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]),
        "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
        "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]),
        "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]),
        "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
        "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}
}  // namespace

extern "C" __global__ void __launch_bounds__(128 * (1 + kConsumerWarpgroups), 1)
    gemm_kernel(const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB,
                const __grid_constant__ CUtensorMap tmC, int M, int N, int K) {
  extern __shared__ unsigned char smem_raw[];
  // 128B-swizzled tiles must start 1024-byte aligned; the pad is the same in both CTAs of a
  // cluster, so multicast destination offsets agree.
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
  // The peer multicasts into this CTA's slots and arrives on its empty barriers.
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
    // stmatrix lane roles: lanes 8i..8i+7 address the 8 rows of matrix i; matrices are
    // (rows 0-7, cols 0-7), (rows 8-15, cols 0-7), (rows 0-7, cols 8-15), (rows 8-15, cols 8-15)
    // of the warp's 16-row slab within a 16-column block (x2: the first two).
    const u32 row = warp_in_group * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
    const u32 col_in_block16 = (lane >> 4) * 8;
    unsigned char* row_base = staging + row * kRowPitch + col_in_block16 * 2;
    float acc[kAcc];
    int step = 0;  // must follow the producer's ring position exactly

    for (int p = first_pair; p < num_pairs; p += pair_stride) {
      const Tile tile = PairTileAt(p, num_m_pairs, num_n_tiles, rank);
#pragma unroll
      for (int i = 0; i < kAcc; ++i) acc[i] = 0.0f;

      for (int k = 0; k < num_k_steps; ++k, ++step) {
        const int s = step % kStages;
        sm90::mbarrier_wait_parity(&full[s], (step / kStages) & 1);
        const u32 a_base = sm90::smem_u32(a_tiles + s * kATileBytes) + consumer * 64 * 128;
        const u32 b_base = sm90::smem_u32(b_tiles + s * kBTileBytes);
        sm90::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kBlockK / 16; ++kk) {
          WgmmaM64N176K16(acc, sm90::make_smem_desc_sw128(a_base + kk * 32),
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
      if (tile.m0 >= M) continue;
#pragma unroll
      for (int pass = 0; pass < kEpiloguePasses; ++pass) {
        // The staging box is free once the previous TMA store has read it.
        if (store_thread) sm90::tma_store_wait_read<0>();
        sm90::named_barrier_sync(2 + consumer, 128);
        constexpr int kBlocks8 = kPassCols / 8;  // 11 eight-column blocks per pass
#pragma unroll
        for (int b = 0; b + 1 < kBlocks8; b += 2) {
          const int j = pass * kBlocks8 + b;  // 8-column block of the slab: acc[4j..4j+7]
          sm90::stmatrix_x4(row_base + b * 16, sm90::pack_bf16x2(acc[4 * j + 0], acc[4 * j + 1]),
                            sm90::pack_bf16x2(acc[4 * j + 2], acc[4 * j + 3]),
                            sm90::pack_bf16x2(acc[4 * j + 4], acc[4 * j + 5]),
                            sm90::pack_bf16x2(acc[4 * j + 6], acc[4 * j + 7]));
        }
        if constexpr (kBlocks8 % 2 == 1) {
          // The pass's last 8 columns; lanes 0-15 have col_in_block16 == 0.
          const int b = kBlocks8 - 1;
          const int j = pass * kBlocks8 + b;
          StmatrixX2(row_base + b * 16, sm90::pack_bf16x2(acc[4 * j + 0], acc[4 * j + 1]),
                     sm90::pack_bf16x2(acc[4 * j + 2], acc[4 * j + 3]));
        }
        sm90::fence_proxy_async_shared();
        sm90::named_barrier_sync(2 + consumer, 128);
        if (store_thread) {
          sm90::tma_store_2d(&tmC, staging, tile.n0 + pass * kPassCols, tile.m0 + consumer * 64);
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
