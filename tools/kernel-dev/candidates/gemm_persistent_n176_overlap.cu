/* PTXBENCH_PLAN
{"launches":[{"kernel":"gemm_kernel",
  "grid":["min(132, ceil_div(N,176)*ceil_div(M,128))"],"block":["384"],"cluster":[],
  "dynamic_shared_bytes":"218192",
  "args":[{"tensor_map":"tmA"},{"tensor_map":"tmB"},{"tensor_map":"tmC"},
          {"scalar":"M"},{"scalar":"N"},{"scalar":"K"}]}],
 "scratch":[],
 "tensor_maps":[
  {"name":"tmA","tensor":"A","box":["64","128"],"element_strides":[],"swizzle":"128B",
   "interleave":"none","l2_promotion":"256B","oob_fill":"zero","dims":[]},
  {"name":"tmB","tensor":"B","box":["64","176"],"element_strides":[],"swizzle":"128B",
   "interleave":"none","l2_promotion":"256B","oob_fill":"zero","dims":[]},
  {"name":"tmC","tensor":"C","box":["88","64"],"element_strides":[],"swizzle":"none",
   "interleave":"none","l2_promotion":"none","oob_fill":"zero","dims":[]}]}
*/
// CANDIDATE (tools/kernel-dev/candidates, not yet measured on a GPU): the persistent reference
// solution (tasks/gemm_n7168_k5120/solutions/sm90a_wgmma_tma_persistent.cu) with 128x176 output
// tiles and the epilogue of one tile overlapped with the next tile's first k-steps.
//
// C[M][N] = A[M][K] * B[N][K]^T, bf16 in and out, fp32 accumulation.
//
// Why, with the figures that motivate it (timed workload 8192 x 7168 x 5120, H100, base clocks,
// docs/results/2026-12-07-h100-gemm-tail-candidates/ncu_*_base.txt):
// - cuBLASLt's fastest kernel took 1,153,783 cycles, ours 1,216,268. Its SMs were active for
//   1,127,354 of them, ours for 1,146,194: the active cycles differ by 1.7 %, the idle ones by
//   44k cycles (3.6 % of ours). Idle SM time in a persistent kernel is the last wave (with
//   128x256 tiles 1792 tiles = 13.58 per SM, so 56 SMs sit out the last tile) and the tile
//   boundaries.
// - 128x176 tiles: 64 x 41 = 2624 tiles = 19.88 per SM (the last N tile holds 128 of 176
//   columns: 7168 / 7216 useful), busy fraction 19.88 / 20 x 0.993 = 0.987 against 13.58 / 14 =
//   0.970. cuBLASLt's kernel uses this tile width (its 168x128 / 176x128 configurations).
// - 88 fp32 accumulators per consumer thread leave room for two sets (176 registers of the
//   232): while the tensor cores run tile t+1's first k-steps into one set, the warpgroup writes
//   tile t's other set out, so the epilogue leaves the tensor cores idle no more. In the
//   128x256 reference both warpgroups stop issuing wgmma for the whole epilogue.
// - The cost: a narrower tile moves more bytes per multiply from L2 (16 + 22 KiB per 128x176x64
//   step, 0.216 bytes per unit against 0.1875) and reads a little more shared memory per wgmma.
//   The earlier 128x176 attempt (0.878 on the H200, NOTES.md) also stored bf16x2 directly from
//   registers; this one stages through shared memory and stores with TMA.
//
// Builds: the default overlaps; -DOVERLAP=0 writes each tile out after its main loop, as the
// reference does, to tell the two changes apart.
//
// Structure (what is not said here is the reference's):
// - Shared memory: 1024 alignment slack + 5 stages x (16 KiB A + 22 KiB B) + 2 x 11 KiB staging
//   (one unswizzled 64x88 box per consumer warpgroup) + 10 barriers = 218192 bytes.
// - A consumer warpgroup alternates between two accumulator sets, tile by tile (the sets must be
//   named at compile time, so the tile loop is unrolled by two). Its main loop issues k-step 0
//   of tile t, then writes pass 0 of tile t-1's 64x176 slab (columns 0-87) while that runs,
//   issues k-step 1, writes pass 1 (columns 88-175), and goes on with k-steps 2.. as the
//   reference does. The first wgmma of a tile has scale-d off, so the set need not be zeroed.
//   After the last tile, its slab is written out with no k-step beside it.
// - The register sets read by the epilogue are never operands of a wgmma in flight, so ptxas
//   has no reason to serialize (checked: no C7514/C7515 advisory in its output).
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
constexpr int kBlockN = 176;
constexpr int kBlockK = 64;  // 64 bf16 = 128 bytes: the widest inner box for the 128B swizzle.
constexpr int kStages = 5;
constexpr int kGroupM = 16;  // M tiles per raster group.
constexpr int kConsumerWarpgroups = 2;
constexpr int kConsumerWarps = 4 * kConsumerWarpgroups;
constexpr int kAcc = kBlockN / 2;  // fp32 accumulators per consumer thread (64 x 176 / 128)

constexpr u32 kATileBytes = kBlockM * kBlockK * 2;  // 16 KiB
constexpr u32 kBTileBytes = kBlockN * kBlockK * 2;  // 22 KiB
static_assert(kATileBytes % 1024 == 0 && kBTileBytes % 1024 == 0,
              "128B-swizzled tiles start 1024-byte aligned");
constexpr u32 kStageBytes = kATileBytes + kBTileBytes;
constexpr u32 kTileSmemBytes = kStages * kStageBytes;  // 194560
// Epilogue: per consumer warpgroup one unswizzled 64-row x 88-column box (176-byte rows: the 8
// rows of one stmatrix matrix start at banks 0, 12, 24, 4, 16, 28, 8, 20, no conflicts), two
// passes per tile.
constexpr int kPassCols = 88;  // the plan's tmC box columns
constexpr int kEpiloguePasses = kBlockN / kPassCols;
static_assert(kEpiloguePasses == 2, "the main loop interleaves exactly two passes");
constexpr u32 kRowPitch = kPassCols * 2;
constexpr u32 kStagingBytesPerWarpgroup = 64 * kRowPitch;  // 11264
static_assert(kStagingBytesPerWarpgroup % 128 == 0, "TMA store sources are 128-byte aligned");
constexpr u32 kStagingBytes = kConsumerWarpgroups * kStagingBytesPerWarpgroup;
constexpr u32 kSmemBytes = 1024 + kTileSmemBytes + kStagingBytes + 2 * kStages * 8;
static_assert(kSmemBytes == 218192, "keep the launch plan's dynamic_shared_bytes in sync");
static_assert(kSmemBytes <= 232448, "sm_90's opt-in shared memory per block");

struct Tile {
  int m0;
  int n0;
};

// Grouped raster, as the reference: kGroupM M tiles per group, down the group before moving on
// to the next N tile.
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


// What a consumer warpgroup needs besides its accumulators.
struct Consumer {
  unsigned char* a_tiles;
  unsigned char* b_tiles;
  u64* full;
  u64* empty;
  unsigned char* staging;   // this warpgroup's 64x88 box
  unsigned char* row_base;  // this thread's stmatrix row address in it
  const CUtensorMap* tmC;
  int consumer;  // 0 or 1: rows [64 consumer, 64 consumer + 64) of every tile
  int num_k_steps;
  bool store_thread;
};

// Issues the k-step at ring position `step` into `acc` as one commit group; `first` turns
// scale-d off for its first wgmma (D = A B), which stands in for zeroing the set.
__device__ __forceinline__ void IssueKStep(float (&acc)[kAcc], const Consumer& c, int step,
                                           bool first) {
  const int s = step % kStages;
  sm90::mbarrier_wait_parity(&c.full[s], (step / kStages) & 1);
  const u32 a_base = sm90::smem_u32(c.a_tiles + s * kATileBytes) + c.consumer * 64 * 128;
  const u32 b_base = sm90::smem_u32(c.b_tiles + s * kBTileBytes);
  sm90::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kBlockK / 16; ++kk) {
    WgmmaM64N176K16(acc, sm90::make_smem_desc_sw128(a_base + kk * 32),
                    sm90::make_smem_desc_sw128(b_base + kk * 32), (first && kk == 0) ? 0 : 1);
  }
  sm90::wgmma_commit_group();
}

// Writes columns [88 kPass, 88 kPass + 88) of the warpgroup's 64x176 slab of `tile`: stmatrix
// into the staging box (free once the previous TMA store has read it), then one TMA store.
template <int kPass>
__device__ __forceinline__ void WritePass(const float (&acc)[kAcc], const Consumer& c,
                                          Tile tile) {
  if (c.store_thread) sm90::tma_store_wait_read<0>();
  sm90::named_barrier_sync(2 + c.consumer, 128);
  constexpr int kBlocks8 = kPassCols / 8;  // 11 eight-column blocks per pass
#pragma unroll
  for (int b = 0; b + 1 < kBlocks8; b += 2) {
    const int j = kPass * kBlocks8 + b;  // 8-column block of the slab: acc[4j..4j+7]
    sm90::stmatrix_x4(c.row_base + b * 16, sm90::pack_bf16x2(acc[4 * j + 0], acc[4 * j + 1]),
                      sm90::pack_bf16x2(acc[4 * j + 2], acc[4 * j + 3]),
                      sm90::pack_bf16x2(acc[4 * j + 4], acc[4 * j + 5]),
                      sm90::pack_bf16x2(acc[4 * j + 6], acc[4 * j + 7]));
  }
  if constexpr (kBlocks8 % 2 == 1) {
    // The pass's last 8 columns; lanes 0-15 have col_in_block16 == 0.
    constexpr int b = kBlocks8 - 1;
    constexpr int j = kPass * kBlocks8 + b;
    StmatrixX2(c.row_base + b * 16, sm90::pack_bf16x2(acc[4 * j + 0], acc[4 * j + 1]),
               sm90::pack_bf16x2(acc[4 * j + 2], acc[4 * j + 3]));
  }
  sm90::fence_proxy_async_shared();
  sm90::named_barrier_sync(2 + c.consumer, 128);
  if (c.store_thread) {
    sm90::tma_store_2d(c.tmC, c.staging, tile.n0 + kPass * kPassCols, tile.m0 + c.consumer * 64);
    sm90::tma_store_commit();
  }
}

// One tile's main loop into `acc`, starting at ring position `step` (advanced past it). With
// kWritePrev, `prev` (the other set, tile `prev_tile`) is written out beside k-steps 0 and 1:
// each pass runs while at least one k-step of wgmma is in flight. Stage k-1 is released once
// k-step k's group is issued and k-1's has completed (one group in flight, as the reference).
template <bool kWritePrev>
__device__ __forceinline__ void RunTile(float (&acc)[kAcc], const float (&prev)[kAcc],
                                        const Consumer& c, Tile prev_tile, int& step) {
  const int n = c.num_k_steps;
  IssueKStep(acc, c, step, true);
  if constexpr (kWritePrev) WritePass<0>(prev, c, prev_tile);
  if (n > 1) IssueKStep(acc, c, step + 1, false);
  if constexpr (kWritePrev) WritePass<1>(prev, c, prev_tile);
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
  ReleaseStage(c.empty, (step + n - 1) % kStages);
  step += n;
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
    // stmatrix lane roles: lanes 8i..8i+7 address the 8 rows of matrix i; matrices are
    // (rows 0-7 | rows 8-15) x (columns 0-7 | columns 8-15) of the warp's 16-row slab within a
    // 16-column block (x2: the first two).
    const int warp_in_group = sm90::thread_index_in_warpgroup() / 32;
    const int lane = sm90::lane_index();
    const u32 row = warp_in_group * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
    const u32 col_in_block16 = (lane >> 4) * 8;
    c.row_base = c.staging + row * kRowPitch + col_in_block16 * 2;
    int step = 0;  // must follow the producer's ring position exactly
#if OVERLAP
    float acc0[kAcc];
    float acc1[kAcc];
    int t = first_tile;
    if (t < num_tiles) {
      Tile prev = TileAt(t, num_m_tiles, num_n_tiles);
      RunTile<false>(acc0, acc1, c, prev, step);
      t += tile_stride;
      // Unrolled by two so that each set is named at compile time.
      while (true) {
        if (t >= num_tiles) {
          WritePass<0>(acc0, c, prev);
          WritePass<1>(acc0, c, prev);
          break;
        }
        Tile tile = TileAt(t, num_m_tiles, num_n_tiles);
        RunTile<true>(acc1, acc0, c, prev, step);
        prev = tile;
        t += tile_stride;
        if (t >= num_tiles) {
          WritePass<0>(acc1, c, prev);
          WritePass<1>(acc1, c, prev);
          break;
        }
        tile = TileAt(t, num_m_tiles, num_n_tiles);
        RunTile<true>(acc0, acc1, c, prev, step);
        prev = tile;
        t += tile_stride;
      }
    }
#else
    float acc[kAcc];
    for (int t = first_tile; t < num_tiles; t += tile_stride) {
      const Tile tile = TileAt(t, num_m_tiles, num_n_tiles);
      RunTile<false>(acc, acc, c, tile, step);
      WritePass<0>(acc, c, tile);
      WritePass<1>(acc, c, tile);
    }
#endif
    if (c.store_thread) sm90::tma_store_wait_read<0>();
  }
}
