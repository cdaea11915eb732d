/* PTXBENCH_PLAN
{"launches":[{"kernel":"gemm_kernel",
  "grid":["min(132, ceil_div(N,256)*ceil_div(M,128))"],"block":["384"],"cluster":[],
  "dynamic_shared_bytes":"230480",
  "args":[{"tensor_map":"tmA"},{"tensor_map":"tmB"},{"tensor_map":"tmC"},
          {"scalar":"M"},{"scalar":"N"},{"scalar":"K"},{"scratch":"workspace"}]}],
 "scratch":[{"name":"workspace","bytes":"86511616"}],
 "tensor_maps":[
  {"name":"tmA","tensor":"A","box":["64","128"],"element_strides":[],"swizzle":"128B",
   "interleave":"none","l2_promotion":"256B","oob_fill":"zero","dims":[]},
  {"name":"tmB","tensor":"B","box":["64","256"],"element_strides":[],"swizzle":"128B",
   "interleave":"none","l2_promotion":"256B","oob_fill":"zero","dims":[]},
  {"name":"tmC","tensor":"C","box":["64","64"],"element_strides":[],"swizzle":"128B",
   "interleave":"none","l2_promotion":"none","oob_fill":"zero","dims":[]}]}
*/
// Candidates for gemm_n7168_k5120 on sm_90a: the persistent reference
// (solutions/sm90a_wgmma_tma_persistent.cu) with its last, partial wave filled, so that no SM
// idles there. Two schemes, by macro (each build is one whole submission; the measured figures
// are in tools/kernel-dev/candidates/README.md: correct, and no faster than the reference):
//   default          a stream-K tail, its range before the data-parallel tiles
//   -DSTREAMK_FIRST=0  the same, its range after them
//   -DTAIL_SPLIT=1   a split-K tail of k-aligned parts (below)
//   -DTAIL_OFF=1     the tail left data-parallel: the same code with no cut tile
//
// Why: the timed workload has 64 x 28 = 1792 tiles of 128x256 on 132 SMs, 13.58 waves. The
// persistent reference runs 13 full waves and then a 14th in which only 76 of 132 SMs work: it
// takes 14 tile-times for 13.58 tiles' worth of work (a 3 % loss). cuBLASLt's fastest
// algorithm here avoids most of that with a 176-wide tile (19.88 waves); our 128x176 tile lost
// more in the narrower tile than it gained (tools/kernel-dev/NOTES.md).
//
// Stream-K hybrid (the scheme of CUTLASS's stream-K scheduler and of Osama et al., "Stream-K",
// PPoPP 2023, in our own code):
// - tiles [0, T - R) (R = T mod grid) go data-parallel: tile t to CTA t mod grid, whole;
// - the last R tiles' k-steps, R * nk of them, are cut into grid contiguous ranges of (almost)
//   equal length, one per CTA, in (tile, k) order. A range covers the end of one tile and the
//   start of the next at most (its length is below nk, because R < grid).
// - Each CTA does its stream-K range first, then its data-parallel tiles, so every CTA does
//   13 tiles + 46 k-steps on the timed workload: 13.58 tile-times.
// - A tile cut between CTAs is finished by whichever contributor arrives last: each
//   contributor's consumer warpgroup writes its fp32 partial accumulators to the workspace
//   (64 KiB, coalesced), fences, and bumps the tile half's arrival counter; the one that finds
//   itself last reads the others' partials, adds them, stores the tile and resets the counter.
//   Nobody waits for another CTA, so there is no deadlock and no spin.
// - The workspace: 4 KiB of counters (2 per tail tile, R < 132) then the partial slots: for
//   stream-K 2 x 2 of 64 KiB per CTA (its range's first and second tile, per consumer
//   warpgroup), for the split-K tail one per unit; the plan asks for the larger, 86511616 bytes.
//   The harness zero-fills scratch before every run; the counters are reset by their last user
//   as well, so the kernel needs no zeroed memory after its first run.
//
// Split-K tail (TAIL_SPLIT): the stream-K tail filled the last wave but ran 8 % SLOWER on the
// H100 (0.918-0.928 ms against 0.837-0.851 ms): its ranges start at staggered k (CTA g at step
// 46 g mod 80), so the 76 tail tiles' whole K depth is live at once, and ncu showed DRAM
// traffic up by ~250 MB (28 % -> 36 % of peak) and L2 throughput from 67 % to 82 %.
// Here the R = T mod grid tail tiles are cut into P parts of equal k-range (P in 2..5 chosen to
// minimise ceil(P R / grid) / P: P = 5, 16 k-steps, for the timed workload: 380 units, at most
// 3 per CTA, so the tail costs 0.6 tile-times instead of 1), numbered part-major (unit u = part
// u / R of tail tile u mod R) and dealt round-robin (CTA g: units g, g + grid, ...). All CTAs
// start a round together on units of (nearly) the same k-range, which keeps the reference's
// lock-step L2 reuse. Each unit writes its fp32 partial (slot u); the one that finds itself
// the tile's last to arrive adds the others' and stores the tile (arrival counter per tile
// half, reset by its last user). Workspace: 4 KiB of counters + 5 x 132 x 128 KiB slots = 86511616
// bytes.
//
// Shared memory: the reference's 230464 bytes plus 16 bytes for the two warpgroups' "I am last"
// flags.
//
// Everything else (warp specialization, setmaxnreg, wgmma m64n256k16 with one group in flight,
// the ring carried across work units, the staged TMA-store epilogue) is the reference's.
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
#ifndef STREAMK_FIRST
#define STREAMK_FIRST 1
#endif
#ifndef TAIL_OFF
#define TAIL_OFF 0
#endif
#ifndef TAIL_SPLIT
#define TAIL_SPLIT 0
#endif
constexpr bool kStreamKFirst = STREAMK_FIRST != 0;

constexpr u32 kATileBytes = kBlockM * kBlockK * 2;  // 16 KiB
constexpr u32 kBTileBytes = kBlockN * kBlockK * 2;  // 32 KiB
constexpr u32 kStageBytes = kATileBytes + kBTileBytes;
constexpr u32 kTileSmemBytes = kStages * kStageBytes;  // 196608
constexpr u32 kEpilogueBoxBytes = 64 * 64 * 2;
constexpr int kBoxesPerPass = 2;
constexpr int kEpiloguePasses = kBlockN / 64 / kBoxesPerPass;
constexpr u32 kStagingBytesPerWarpgroup = kBoxesPerPass * kEpilogueBoxBytes;  // 16 KiB
constexpr u32 kStagingBytes = kConsumerWarpgroups * kStagingBytesPerWarpgroup;
constexpr u32 kFlagBytes = 16;
// Dynamic shared memory = 1024 (alignment slack) + ring + staging + 2 * kStages barriers + flags.
constexpr u32 kSmemBytes = 1024 + kTileSmemBytes + kStagingBytes + 2 * kStages * 8 + kFlagBytes;
static_assert(kSmemBytes == 230480, "keep the launch plan's dynamic_shared_bytes in sync");
static_assert(kSmemBytes <= 232448, "sm_90's opt-in shared memory per block");

// Workspace layout (the plan's scratch "workspace").
constexpr int kMaxGrid = 132;
constexpr int kMaxParts = 5;         // Split-K tail: at most this many parts per tile.
constexpr u32 kCounterBytes = 4096;  // 2 ints per tail tile; R < kMaxGrid.
static_assert(2 * kMaxGrid * 4 <= kCounterBytes, "counters");
constexpr u32 kPartialFloat4s = 64 * kBlockN / 4;  // One warpgroup's 64x256 fp32 half tile.
// Slots: stream-K 2 per CTA, split-K one per unit (at most kMaxParts per CTA).
static_assert(kCounterBytes +
                      kMaxParts * kMaxGrid * 1ull * kConsumerWarpgroups * kPartialFloat4s * 16 ==
                  86511616ull,
              "keep the launch plan's scratch bytes in sync");

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

#if TAIL_SPLIT
// The split of the work: tiles [0, dp_tiles) whole (CTA g: g, g + grid, ...); the tail tiles
// dp_tiles + r, r < tail_tiles, in `parts` k-ranges; unit u = part u / tail_tiles of tail tile
// u % tail_tiles, CTA g taking units g, g + grid, ... below units.
struct Schedule {
  int num_m_tiles;
  int num_n_tiles;
  int num_k_steps;
  int dp_tiles;
  int tail_tiles;
  int parts;
  int units;
  int grid;

  __device__ __forceinline__ int PartBegin(int part) const { return part * num_k_steps / parts; }
};

__device__ __forceinline__ Schedule MakeSchedule(int M, int N, int K) {
  Schedule s;
  s.num_m_tiles = (M + kBlockM - 1) / kBlockM;
  s.num_n_tiles = (N + kBlockN - 1) / kBlockN;
  s.num_k_steps = (K + kBlockK - 1) / kBlockK;
  s.grid = static_cast<int>(gridDim.x);
  const int num_tiles = s.num_m_tiles * s.num_n_tiles;
  const int tail = num_tiles % s.grid;  // 0 when the tiles fill whole waves (or grid = tiles)
  // The part count that finishes the tail soonest: ceil(P tail / grid) units of 1/P tile each.
  // Every part needs at least one k-step.
  int best_parts = 1;
  int best_rounds = 1;  // ceil(1 * tail / grid) with tail < grid
  for (int p = 2; p <= kMaxParts && p <= s.num_k_steps; ++p) {
    const int rounds = (p * tail + s.grid - 1) / s.grid;
    if (rounds * best_parts < best_rounds * p) {
      best_parts = p;
      best_rounds = rounds;
    }
  }
  if (tail == 0 || best_parts == 1 || TAIL_OFF) {
    s.dp_tiles = num_tiles;
    s.tail_tiles = 0;
    s.parts = 1;
    s.units = 0;
  } else {
    s.dp_tiles = num_tiles - tail;
    s.tail_tiles = tail;
    s.parts = best_parts;
    s.units = tail * best_parts;
  }
  return s;
}
#else
// The split of the work: tiles [0, dp_tiles) whole, then the stream-K tiles' k-steps
// [0, sk_steps) in (tile, k) order, CTA g taking [Begin(g), Begin(g + 1)).
struct Schedule {
  int num_m_tiles;
  int num_n_tiles;
  int num_k_steps;
  int dp_tiles;
  long long sk_steps;
  int grid;

  __device__ __forceinline__ long long Begin(int g) const {
    return static_cast<long long>(g) * sk_steps / grid;
  }
  // The CTA whose range holds stream-K step x: the largest g with Begin(g) <= x, i.e.
  // g * sk_steps < (x + 1) * grid.
  __device__ __forceinline__ int Owner(long long x) const {
    return static_cast<int>(((x + 1) * grid - 1) / sk_steps);
  }
};

__device__ __forceinline__ Schedule MakeSchedule(int M, int N, int K) {
  Schedule s;
  s.num_m_tiles = (M + kBlockM - 1) / kBlockM;
  s.num_n_tiles = (N + kBlockN - 1) / kBlockN;
  s.num_k_steps = (K + kBlockK - 1) / kBlockK;
  s.grid = static_cast<int>(gridDim.x);
  const int num_tiles = s.num_m_tiles * s.num_n_tiles;
  const int sk_tiles = num_tiles % s.grid;  // 0 when the tiles fill whole waves (or grid = tiles)
  s.dp_tiles = num_tiles - sk_tiles;
  s.sk_steps = static_cast<long long>(sk_tiles) * s.num_k_steps;
  // Every CTA's range must be non-empty (Begin(g + 1) > Begin(g) for all g needs sk_steps >=
  // grid): a tile's contributors are then exactly the CTAs Owner(first step)..Owner(last step).
  // With fewer steps than CTAs the tail stays data-parallel.
  if (s.sk_steps < s.grid || TAIL_OFF) {
    s.dp_tiles = num_tiles;
    s.sk_steps = 0;
  }
  return s;
}
#endif  // TAIL_SPLIT

// Frees ring slot `stage` for the producer: one arrival per consumer warp (each warp has passed
// its own wgmma_wait_group, so its reads of the slot are done).
__device__ __forceinline__ void ReleaseStage(u64* empty, int stage) {
  if (sm90::lane_index() == 0) sm90::mbarrier_arrive(&empty[stage]);
}

struct Ring {
  unsigned char* a_tiles;
  unsigned char* b_tiles;
  u64* full;
  u64* empty;
};

// Producer: k-steps [kb, ke) of one tile into the ring.
__device__ __forceinline__ void LoadSteps(const Ring& ring, const CUtensorMap* tmA,
                                          const CUtensorMap* tmB, Tile tile, int kb, int ke,
                                          int& step) {
  for (int k = kb; k < ke; ++k, ++step) {
    const int s = step % kStages;
    // Round r of slot s needs the consumers' release of round r-1 (parity 1 on a fresh barrier
    // passes at once).
    sm90::mbarrier_wait_parity(&ring.empty[s], ((step / kStages) & 1) ^ 1);
    sm90::mbarrier_arrive_expect_tx(&ring.full[s], kStageBytes);
    sm90::tma_load_2d(ring.a_tiles + s * kATileBytes, tmA, &ring.full[s], k * kBlockK, tile.m0);
    sm90::tma_load_2d(ring.b_tiles + s * kBTileBytes, tmB, &ring.full[s], k * kBlockK, tile.n0);
  }
}

// Consumer: acc = this warpgroup's 64 rows of the k-steps [kb, ke) (kb < ke).
__device__ __forceinline__ void MultiplySteps(const Ring& ring, float (&acc)[128], int consumer,
                                              int kb, int ke, int& step) {
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
  for (int k = kb; k < ke; ++k, ++step) {
    const int s = step % kStages;
    sm90::mbarrier_wait_parity(&ring.full[s], (step / kStages) & 1);
    const u32 a_base = sm90::smem_u32(ring.a_tiles + s * kATileBytes) + consumer * 64 * 128;
    const u32 b_base = sm90::smem_u32(ring.b_tiles + s * kBTileBytes);
    sm90::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBlockK / 16; ++kk) {
      sm90::wgmma_m64n256k16_ss_bf16(acc, sm90::make_smem_desc_sw128(a_base + kk * 32),
                                     sm90::make_smem_desc_sw128(b_base + kk * 32), 1);
    }
    sm90::wgmma_commit_group();
    // Keep this k-step in flight; the previous one is now complete and its slot free.
    sm90::wgmma_wait_group<1>();
    if (k > kb) ReleaseStage(ring.empty, (step - 1) % kStages);
  }
  sm90::wgmma_wait_group<0>();
  sm90::wgmma_fence_operand(acc);
  // The last slot is free now: the producer is already filling the ring with the next unit
  // while this warpgroup finishes.
  ReleaseStage(ring.empty, (step - 1) % kStages);
}

// Epilogue, in passes of kBoxesPerPass * 64 columns through this warpgroup's staging.
__device__ __forceinline__ void StoreTile(const CUtensorMap* tmC, float (&acc)[128],
                                          unsigned char* staging, int consumer, Tile tile) {
  const bool store_thread = sm90::thread_index_in_warpgroup() == 0;
  const int warp_in_group = sm90::thread_index_in_warpgroup() / 32;
  const int lane = sm90::lane_index();
  // stmatrix x4 lane roles: lanes 8i..8i+7 address the 8 rows of matrix i; matrices are
  // (rows 0-7, cols 0-7), (rows 8-15, cols 0-7), (rows 0-7, cols 8-15), (rows 8-15, cols 8-15)
  // of the warp's 16-row slab within a 16-column block.
  const u32 row = warp_in_group * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
  const u32 col_in_block16 = (lane >> 4) * 8;
#pragma unroll
  for (int pass = 0; pass < kEpiloguePasses; ++pass) {
    // The staging boxes are free once the previous TMA store has read them.
    if (store_thread) sm90::tma_store_wait_read<0>();
    sm90::named_barrier_sync(2 + consumer, 128);
#pragma unroll
    for (int j = 0; j < kBoxesPerPass * 4; ++j) {
      const int jj = pass * kBoxesPerPass * 4 + j;  // 16-column block of the slab
      const u32 col = j * 16 + col_in_block16;      // column within the pass
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
        sm90::tma_store_2d(tmC, staging + b * kEpilogueBoxBytes,
                           tile.n0 + (pass * kBoxesPerPass + b) * 64, tile.m0 + consumer * 64);
      }
      sm90::tma_store_commit();
    }
  }
}

#if TAIL_SPLIT
// One warpgroup's partial-tile slot: unit u, warpgroup `consumer`.
__device__ __forceinline__ float4* PartialSlot(unsigned char* workspace, int unit, int consumer) {
  float4* partials = reinterpret_cast<float4*>(workspace + kCounterBytes);
  return partials + (static_cast<size_t>(unit) * kConsumerWarpgroups + consumer) * kPartialFloat4s;
}
#else
// One warpgroup's partial-tile slot: CTA g's range's tile `seg` (0 or 1), warpgroup `consumer`.
__device__ __forceinline__ float4* PartialSlot(unsigned char* workspace, int g, int seg,
                                               int consumer) {
  float4* partials = reinterpret_cast<float4*>(workspace + kCounterBytes);
  return partials + (static_cast<size_t>(g) * 2 + seg) * kConsumerWarpgroups * kPartialFloat4s +
         static_cast<size_t>(consumer) * kPartialFloat4s;
}
#endif  // TAIL_SPLIT

// Writes this warpgroup's accumulators to its partial slot (coalesced: float4 i of every thread
// side by side), then counts its arrival on the tile half's counter. True when it is the last
// of `contributors` to arrive: its caller then adds the others' partials and stores the tile.
__device__ __forceinline__ bool PublishPartial(float (&acc)[128], float4* mine, int* counter,
                                               int contributors, int consumer,
                                               volatile int* last_flags) {
  const int thread_in_group = sm90::thread_index_in_warpgroup();
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    __stcg(&mine[i * 128 + thread_in_group],
           make_float4(acc[4 * i], acc[4 * i + 1], acc[4 * i + 2], acc[4 * i + 3]));
  }
  __threadfence();
  sm90::named_barrier_sync(2 + consumer, 128);
  if (thread_in_group == 0) {
    const int arrived = atomicAdd(counter, 1);
    const bool last = arrived == contributors - 1;
    if (last) *counter = 0;  // Ready for the next launch.
    __threadfence();
    last_flags[consumer] = last ? 1 : 0;
  }
  sm90::named_barrier_sync(2 + consumer, 128);
  const bool last = last_flags[consumer] != 0;
  if (last) __threadfence();
  return last;
}

// acc += another contributor's partial of the same tile half.
__device__ __forceinline__ void AddPartial(float (&acc)[128], const float4* theirs) {
  const int thread_in_group = sm90::thread_index_in_warpgroup();
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    const float4 p = __ldcg(&theirs[i * 128 + thread_in_group]);
    acc[4 * i] += p.x;
    acc[4 * i + 1] += p.y;
    acc[4 * i + 2] += p.z;
    acc[4 * i + 3] += p.w;
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(128 * (1 + kConsumerWarpgroups), 1)
    gemm_kernel(const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB,
                const __grid_constant__ CUtensorMap tmC, int M, int N, int K,
                unsigned char* workspace) {
  extern __shared__ unsigned char smem_raw[];
  // 128B-swizzled tiles must start 1024-byte aligned (the swizzle is a function of address
  // bits 4..9).
  unsigned char* smem = smem_raw + ((1024u - (sm90::smem_u32(smem_raw) & 1023u)) & 1023u);
  Ring ring;
  ring.a_tiles = smem;
  ring.b_tiles = smem + kStages * kATileBytes;
  unsigned char* staging_all = smem + kTileSmemBytes;
  ring.full = reinterpret_cast<u64*>(staging_all + kStagingBytes);
  ring.empty = ring.full + kStages;
  volatile int* last_flags = reinterpret_cast<volatile int*>(ring.empty + kStages);

  const int warpgroup = sm90::warpgroup_index();
  const Schedule sched = MakeSchedule(M, N, K);
  const int g = static_cast<int>(blockIdx.x);
#if !TAIL_SPLIT
  const long long sk_begin = sched.Begin(g);
  const long long sk_end = sched.Begin(g + 1);
#endif
  const int nk = sched.num_k_steps;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      sm90::mbarrier_init(&ring.full[s], 1);
      sm90::mbarrier_init(&ring.empty[s], kConsumerWarps);
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
      int step = 0;  // k-steps issued by this CTA over all its work: the ring position.
      for (int phase = 0; phase < 2; ++phase) {
        if (phase == (kStreamKFirst ? 0 : 1)) {
#if TAIL_SPLIT
          for (int u = g; u < sched.units; u += sched.grid) {
            const int r = u % sched.tail_tiles;
            const int part = u / sched.tail_tiles;
            LoadSteps(ring, &tmA, &tmB,
                      TileAt(sched.dp_tiles + r, sched.num_m_tiles, sched.num_n_tiles),
                      sched.PartBegin(part), sched.PartBegin(part + 1), step);
          }
#else
          for (long long x = sk_begin; x < sk_end;) {
            const int r = static_cast<int>(x / nk);
            const int kb = static_cast<int>(x - static_cast<long long>(r) * nk);
            const int ke = static_cast<int>(
                min(static_cast<long long>(nk), sk_end - static_cast<long long>(r) * nk));
            LoadSteps(ring, &tmA, &tmB,
                      TileAt(sched.dp_tiles + r, sched.num_m_tiles, sched.num_n_tiles), kb, ke,
                      step);
            x = static_cast<long long>(r) * nk + ke;
          }
#endif
        } else {
          for (int t = g; t < sched.dp_tiles; t += sched.grid) {
            LoadSteps(ring, &tmA, &tmB, TileAt(t, sched.num_m_tiles, sched.num_n_tiles), 0, nk,
                      step);
          }
        }
      }
    }
    __syncwarp();
  } else {
    // Consumer warpgroups: rows [64*c, 64*c+64) of each tile.
    sm90::setmaxnreg_inc<232>();
    const int consumer = warpgroup - 1;
    unsigned char* staging = staging_all + consumer * kStagingBytesPerWarpgroup;
    int* counters = reinterpret_cast<int*>(workspace);
    float acc[128];
    int step = 0;  // must follow the producer's ring position exactly

    // The stream-K range and the data-parallel tiles, in the order kStreamKFirst says.
    for (int phase = 0; phase < 2; ++phase) {
      if (phase == (kStreamKFirst ? 0 : 1)) {
#if TAIL_SPLIT
        for (int u = g; u < sched.units; u += sched.grid) {
          const int r = u % sched.tail_tiles;
          const int part = u / sched.tail_tiles;
          MultiplySteps(ring, acc, consumer, sched.PartBegin(part), sched.PartBegin(part + 1),
                        step);
          // Publish this part, and finish the tile only when last to arrive.
          if (!PublishPartial(acc, PartialSlot(workspace, u, consumer), &counters[2 * r + consumer],
                              sched.parts, consumer, last_flags)) {
            continue;
          }
          for (int other = 0; other < sched.parts; ++other) {
            if (other != part) {
              AddPartial(acc, PartialSlot(workspace, other * sched.tail_tiles + r, consumer));
            }
          }
          StoreTile(&tmC, acc, staging, consumer,
                    TileAt(sched.dp_tiles + r, sched.num_m_tiles, sched.num_n_tiles));
        }
#else
        const int first_r = static_cast<int>(sk_begin / nk);
        for (long long x = sk_begin; x < sk_end;) {
          const int r = static_cast<int>(x / nk);
          const long long tile_begin = static_cast<long long>(r) * nk;
          const int kb = static_cast<int>(x - tile_begin);
          const int ke = static_cast<int>(min(static_cast<long long>(nk), sk_end - tile_begin));
          x = tile_begin + ke;
          MultiplySteps(ring, acc, consumer, kb, ke, step);
          const int first_owner = sched.Owner(tile_begin);
          const int last_owner = sched.Owner(tile_begin + nk - 1);
          if (first_owner != last_owner) {
            // Shared tile: publish this part, and finish the tile only when last to arrive.
            if (!PublishPartial(acc, PartialSlot(workspace, g, r - first_r, consumer),
                                &counters[2 * r + consumer], last_owner - first_owner + 1, consumer,
                                last_flags)) {
              continue;
            }
            for (int other = first_owner; other <= last_owner; ++other) {
              if (other == g) continue;
              const int other_first_r = static_cast<int>(sched.Begin(other) / nk);
              AddPartial(acc, PartialSlot(workspace, other, r - other_first_r, consumer));
            }
          }
          StoreTile(&tmC, acc, staging, consumer,
                    TileAt(sched.dp_tiles + r, sched.num_m_tiles, sched.num_n_tiles));
        }
#endif  // TAIL_SPLIT
      } else {
        for (int t = g; t < sched.dp_tiles; t += sched.grid) {
          MultiplySteps(ring, acc, consumer, 0, nk, step);
          StoreTile(&tmC, acc, staging, consumer, TileAt(t, sched.num_m_tiles, sched.num_n_tiles));
        }
      }
    }
    // Shared memory must outlive the stores' reads of it.
    if (sm90::thread_index_in_warpgroup() == 0) sm90::tma_store_wait_read<0>();
  }
}
