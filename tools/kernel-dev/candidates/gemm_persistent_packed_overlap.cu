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
// CANDIDATE (tools/kernel-dev/candidates, not yet measured on a GPU): the persistent reference
// solution (tasks/gemm_n7168_k5120/solutions/sm90a_wgmma_tma_persistent.cu) with its 128x256
// tiles kept and each tile's epilogue written beside the next tile's first two k-steps. The
// launch plan is the reference's, byte for byte.
//
// C[M][N] = A[M][K] * B[N][K]^T, bf16 in and out, fp32 accumulation.
//
// Why, with the figures that motivate it:
// - In the reference both consumer warpgroups stop issuing wgmma for the whole epilogue of every
//   tile (two passes of: wait for the staging to be read, a named barrier, 8 stmatrix, a fence, a
//   barrier, the TMA store). 1792 tiles of 80 k-steps on the timed workload, 13.58 per SM.
// - The 128x176 candidate measured what hiding it is worth (H200, 2026-12-07,
//   docs/results/2026-12-07-h200-gemm-n176-candidates/): the overlapped build took 1,271,662
//   cycles against its serial build's 1,309,366, about 3 %. Its narrow tile cost 9 % more active
//   cycles, so it lost to the reference overall; the reference is 0.958-1.001 of cuBLASLt.
// - The overlap needed a second accumulator set, which does not fit at 128x256 (2 x 128 fp32 of
//   the consumers' 232 registers). It does not need one: the finished tile's accumulators are
//   converted to bf16 pairs first, 64 registers, the form the epilogue stores anyway. 128 fp32
//   + 64 packed + addressing fits, and the tensor cores wait only for 64 cvt per thread between
//   tiles, not for the stores.
// - The first wgmma of each tile runs with scale-d off (D = A B), which also drops the
//   reference's 128 register zeroings per tile.
//
// Builds: the default overlaps; -DOVERLAP=0 packs and writes each tile right after its main
// loop (the reference's order, with the packing and the scale-d trick), to tell the overlap's
// worth apart from the rest.
//
// Structure (what is not said here is the reference's: producer, ring, barriers, staging, raster):
// - A consumer warpgroup's tile loop: issue k-step 0 into `acc`; write pass 0 of the previous
//   tile's `packed` slab (columns 0-127) while it runs; issue k-step 1; write pass 1 (columns
//   128-255); then k-steps 2.. as the reference, one group in flight. After wait_group 0 it packs
//   `acc` into `packed`. The last tile's slab is written after the loop with no k-step beside it.
// - `packed` is never an operand of a wgmma, so ptxas has no reason to serialize the wgmma
//   pipeline around the stores (check its output for the C7514/C7515 advisories).
//
// Assumptions: as the reference (K % 8 == 0, N % 8 == 0, K >= 1; M, N arbitrary otherwise).
#include "ptxbench_hopper.cuh"

#ifndef OVERLAP
#define OVERLAP 1
#endif

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
constexpr int kAcc = 128;    // fp32 accumulators per consumer thread (64 x 256 / 128)
constexpr int kPacked = 64;  // the same as bf16 pairs

constexpr u32 kATileBytes = kBlockM * kBlockK * 2;  // 16 KiB
constexpr u32 kBTileBytes = kBlockN * kBlockK * 2;  // 32 KiB
constexpr u32 kStageBytes = kATileBytes + kBTileBytes;
constexpr u32 kTileSmemBytes = kStages * kStageBytes;  // 196608
// Epilogue staging, as the reference: per consumer warpgroup two 64x64 bf16 boxes (128B
// swizzle), its 64x256 slab written in two passes of 128 columns.
constexpr u32 kEpilogueBoxBytes = 64 * 64 * 2;
constexpr int kBoxesPerPass = 2;
constexpr int kEpiloguePasses = kBlockN / 64 / kBoxesPerPass;
static_assert(kEpiloguePasses == 2, "the main loop interleaves exactly two passes");
constexpr u32 kStagingBytesPerWarpgroup = kBoxesPerPass * kEpilogueBoxBytes;  // 16 KiB
constexpr u32 kStagingBytes = kConsumerWarpgroups * kStagingBytesPerWarpgroup;
constexpr u32 kSmemBytes = 1024 + kTileSmemBytes + kStagingBytes + 2 * kStages * 8;
static_assert(kSmemBytes == 230464, "keep the launch plan's dynamic_shared_bytes in sync");
static_assert(kSmemBytes <= 232448, "sm_90's opt-in shared memory per block");

struct Tile {
  int m0;
  int n0;
};

// Grouped raster, as the reference.
__device__ __forceinline__ Tile TileAt(int linear, int num_m_tiles, int num_n_tiles) {
  const int group = linear / (kGroupM * num_n_tiles);
  const int first_m_tile = group * kGroupM;
  const int m_tiles_in_group = min(num_m_tiles - first_m_tile, kGroupM);
  const int in_group = linear - group * kGroupM * num_n_tiles;
  return {(first_m_tile + in_group % m_tiles_in_group) * kBlockM,
          (in_group / m_tiles_in_group) * kBlockN};
}

__device__ __forceinline__ void ReleaseStage(u64* empty, int stage) {
  if (sm90::lane_index() == 0) sm90::mbarrier_arrive(&empty[stage]);
}

// What a consumer warpgroup needs besides its registers.
struct Consumer {
  unsigned char* a_tiles;
  unsigned char* b_tiles;
  u64* full;
  u64* empty;
  unsigned char* staging;  // this warpgroup's two 64x64 boxes
  const CUtensorMap* tmC;
  int consumer;  // 0 or 1: rows [64 consumer, 64 consumer + 64) of every tile
  int num_k_steps;
  u32 row;             // this lane's stmatrix row in the slab
  u32 col_in_block16;  // and its column offset within a 16-column block
  bool store_thread;
};

// Issues the k-step at ring position `step` into `acc` as one commit group; `first` turns
// scale-d off for its first wgmma (D = A B), which stands in for zeroing the accumulators.
__device__ __forceinline__ void IssueKStep(float (&acc)[kAcc], const Consumer& c, int step,
                                           bool first) {
  const int s = step % kStages;
  sm90::mbarrier_wait_parity(&c.full[s], (step / kStages) & 1);
  const u32 a_base = sm90::smem_u32(c.a_tiles + s * kATileBytes) + c.consumer * 64 * 128;
  const u32 b_base = sm90::smem_u32(c.b_tiles + s * kBTileBytes);
  sm90::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kBlockK / 16; ++kk) {
    sm90::wgmma_m64n256k16_ss_bf16(acc, sm90::make_smem_desc_sw128(a_base + kk * 32),
                                   sm90::make_smem_desc_sw128(b_base + kk * 32),
                                   (first && kk == 0) ? 0 : 1);
  }
  sm90::wgmma_commit_group();
}

// The finished tile's accumulators as bf16 pairs: packed[4 jj + q] holds acc[8 jj + 2q] (low)
// and acc[8 jj + 2q + 1] of the 16-column block jj, the order stmatrix_x4 takes them in.
__device__ __forceinline__ void Pack(const float (&acc)[kAcc], u32 (&packed)[kPacked]) {
#pragma unroll
  for (int i = 0; i < kPacked; ++i) packed[i] = sm90::pack_bf16x2(acc[2 * i], acc[2 * i + 1]);
}

// Writes columns [128 kPass, 128 kPass + 128) of the warpgroup's 64x256 slab of `tile`: stmatrix
// into the staging boxes (free once the previous TMA store has read them), then one TMA store
// per box. The reference's epilogue pass, from packed registers.
template <int kPass>
__device__ __forceinline__ void WritePass(const u32 (&packed)[kPacked], const Consumer& c,
                                          Tile tile) {
  if (c.store_thread) sm90::tma_store_wait_read<0>();
  sm90::named_barrier_sync(2 + c.consumer, 128);
#pragma unroll
  for (int j = 0; j < kBoxesPerPass * 4; ++j) {
    const int jj = kPass * kBoxesPerPass * 4 + j;  // 16-column block of the slab
    const u32 col = j * 16 + c.col_in_block16;      // column within the pass
    unsigned char* box = c.staging + (col / 64) * kEpilogueBoxBytes;
    sm90::stmatrix_x4(box + sm90::swizzle_128b_offset(c.row, (col % 64) * 2), packed[4 * jj + 0],
                      packed[4 * jj + 1], packed[4 * jj + 2], packed[4 * jj + 3]);
  }
  sm90::fence_proxy_async_shared();
  sm90::named_barrier_sync(2 + c.consumer, 128);
  if (c.store_thread) {
#pragma unroll
    for (int b = 0; b < kBoxesPerPass; ++b) {
      sm90::tma_store_2d(c.tmC, c.staging + b * kEpilogueBoxBytes,
                         tile.n0 + (kPass * kBoxesPerPass + b) * 64, tile.m0 + c.consumer * 64);
    }
    sm90::tma_store_commit();
  }
}

// One tile's main loop into `acc`, starting at ring position `step` (advanced past it), then
// `acc` packed into `packed`. With `write_prev`, `packed` (still tile `prev_tile`'s) is written
// out beside k-steps 0 and 1 first: each pass runs while at least one k-step of wgmma is in
// flight. Stage k-1 is released once k-step k is issued and k-1's group has completed.
__device__ __forceinline__ void RunTile(float (&acc)[kAcc], u32 (&packed)[kPacked],
                                        const Consumer& c, bool write_prev, Tile prev_tile,
                                        int& step) {
  const int n = c.num_k_steps;
  IssueKStep(acc, c, step, true);
  if (write_prev) WritePass<0>(packed, c, prev_tile);
  if (n > 1) IssueKStep(acc, c, step + 1, false);
  if (write_prev) WritePass<1>(packed, c, prev_tile);
  if (n > 1) {
    sm90::wgmma_wait_group<1>();
    ReleaseStage(c.empty, step % kStages);
  }
  for (int k = 2; k < n; ++k) {
    IssueKStep(acc, c, step + k, false);
    sm90::wgmma_wait_group<1>();
    ReleaseStage(c.empty, (step + k - 1) % kStages);
  }
  sm90::wgmma_wait_group<0>();
  sm90::wgmma_fence_operand(acc);
  // The tile's last slot is free now: the producer fills the ring with the next tile meanwhile.
  ReleaseStage(c.empty, (step + n - 1) % kStages);
  step += n;
  Pack(acc, packed);
}

}  // namespace

extern "C" __global__ void __launch_bounds__(128 * (1 + kConsumerWarpgroups), 1)
    gemm_kernel(const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB,
                const __grid_constant__ CUtensorMap tmC, int M, int N, int K) {
  extern __shared__ unsigned char smem_raw[];
  // 128B-swizzled tiles must start 1024-byte aligned.
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
    // Producer: one elected thread issues the TMA loads into the ring.
    sm90::setmaxnreg_dec<40>();
    if (sm90::warp_index() == 0 && sm90::elect_one()) {
      sm90::prefetch_tensormap(&tmA);
      sm90::prefetch_tensormap(&tmB);
      int step = 0;  // k-steps issued by this CTA over all its tiles: the ring position.
      for (int t = first_tile; t < num_tiles; t += tile_stride) {
        const Tile tile = TileAt(t, num_m_tiles, num_n_tiles);
        for (int k = 0; k < num_k_steps; ++k, ++step) {
          const int s = step % kStages;
          sm90::mbarrier_wait_parity(&empty[s], ((step / kStages) & 1) ^ 1);
          sm90::mbarrier_arrive_expect_tx(&full[s], kStageBytes);
          sm90::tma_load_2d(a_tiles + s * kATileBytes, &tmA, &full[s], k * kBlockK, tile.m0);
          sm90::tma_load_2d(b_tiles + s * kBTileBytes, &tmB, &full[s], k * kBlockK, tile.n0);
        }
      }
    }
    __syncwarp();
  } else {
    sm90::setmaxnreg_inc<232>();
    Consumer c;
    c.consumer = warpgroup - 1;
    c.a_tiles = a_tiles;
    c.b_tiles = b_tiles;
    c.full = full;
    c.empty = empty;
    c.staging = staging_all + c.consumer * kStagingBytesPerWarpgroup;
    c.tmC = &tmC;
    c.num_k_steps = num_k_steps;
    c.store_thread = sm90::thread_index_in_warpgroup() == 0;
    // stmatrix x4 lane roles: lanes 8i..8i+7 address the 8 rows of matrix i; matrices are
    // (rows 0-7, cols 0-7), (rows 8-15, cols 0-7), (rows 0-7, cols 8-15), (rows 8-15, cols 8-15)
    // of the warp's 16-row slab within a 16-column block.
    const int warp_in_group = sm90::thread_index_in_warpgroup() / 32;
    const int lane = sm90::lane_index();
    c.row = warp_in_group * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
    c.col_in_block16 = (lane >> 4) * 8;
    float acc[kAcc];
    u32 packed[kPacked];
    int step = 0;  // must follow the producer's ring position exactly
#if OVERLAP
    Tile prev{0, 0};
    bool have_prev = false;
    for (int t = first_tile; t < num_tiles; t += tile_stride) {
      const Tile tile = TileAt(t, num_m_tiles, num_n_tiles);
      RunTile(acc, packed, c, have_prev, prev, step);
      prev = tile;
      have_prev = true;
    }
    if (have_prev) {
      WritePass<0>(packed, c, prev);
      WritePass<1>(packed, c, prev);
    }
#else
    for (int t = first_tile; t < num_tiles; t += tile_stride) {
      const Tile tile = TileAt(t, num_m_tiles, num_n_tiles);
      RunTile(acc, packed, c, false, tile, step);
      WritePass<0>(packed, c, tile);
      WritePass<1>(packed, c, tile);
    }
#endif
    // Shared memory must outlive the stores' reads of it.
    if (c.store_thread) sm90::tma_store_wait_read<0>();
  }
}
