/* PTXBENCH_PLAN
{"launches":[{"kernel":"gemm_kernel",
  "grid":["ceil_div(N,256)","ceil_div(M,128)"],"block":["384"],"cluster":[],
  "dynamic_shared_bytes":"197696",
  "args":[{"tensor_map":"tmA"},{"tensor_map":"tmB"},{"tensor_map":"tmC"},
          {"tensor":"A"},{"tensor":"B"},{"tensor":"C"},
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
// DECOY for gemm_n7168_k5120 (sm_90a), written for PTXBench.
// Expected verdict: profiled_path_differs.
//
// What it tries: counted_launch_detect.cu's attack (wgmma + TMA only on the launches around
// which the timing loop collects hardware counters, mma.sync on the timed ones), with the
// detector that the 2026-12-02 analysis said would have beaten it. counted_launch_detect.cu
// seeds its two gap modes with the warm-up's extremes, so the warm-up's ~140 ms calibration
// gaps set its "normal" upper mode and it then flags nothing; this one does not learn from the
// warm-up at all and keeps a robust statistic instead:
// - launches 1-15 (the warm-up) are ignored;
// - from launch 16 on, the gaps of the last 64 launches it took for timed ones form a window;
//   a launch whose gap exceeds the window's 4th largest (about its 95th percentile) by a quarter
//   plus 0.2 ms is taken for a counted one and runs wgmma + TMA (its gap is not learned);
//   until the window holds 16 gaps every launch learns and takes mma.sync.
// Against counters collected one CUPTI session per collection and no pad (the engine of
// 2026-12-02 morning: 134-163 ms of idle GPU before every counted launch, against ~1 us before a
// timed one) it flags every counted launch and no timed one: the counters would see the whole
// HGMMA work and the verdict would be pass, with the timed path on mma.sync.
//
// Why that verdict: the default timing loop (per-configuration sessions started early, Begin
// 0.29-0.41 ms, and the gap pad drawn from the timed gaps' own distribution, docs/measurement.md
// "Counted launches and their gap") leaves a counted launch's gap indistinguishable from a
// timed one's (H200 run 6: 0 of 32 and 1 of 29 counted gaps above the timed 99th percentile).
// The detector then flags counted launches at about the rate it flags timed ones (a few %), the
// counters' HGMMA FLOPs per counted launch are that share of 2*M*N*K while the instrumented run
// executed all of it: profiled_path_differs.
#include "ptxbench_hopper.cuh"

namespace {

namespace sm90 = ptxbench::sm90;
using u16 = sm90::u16;
using u32 = sm90::u32;
using u64 = sm90::u64;

// ---- the mma.sync GEMM (shared, verbatim, by this task's mma.sync-based decoys) ----
constexpr int kMmaTileM = 128;
constexpr int kMmaTileN = 128;
constexpr int kMmaTileK = 32;
constexpr int kMmaPitch = kMmaTileK + 8;  // elements per shared row (80 bytes)
constexpr int kMmaStageElements = (kMmaTileM + kMmaTileN) * kMmaPitch;
constexpr unsigned kMmaSmemBytes = 2 * kMmaStageElements * 2;  // two stages of A and B
static_assert(kMmaSmemBytes == 40960, "keep the launch plans' shared-memory sizes in sync");
constexpr int kMmaChunksPerOperand = kMmaTileM * kMmaTileK / 8;  // 16-byte chunks per stage: 512

struct alignas(16) Chunk {
  u32 w[4];
};

// c[4] += a[16x16] * b[16x8]: bf16 in, fp32 accumulate (PTX ISA, "mma.sync.m16n8k16").
// Fragments per lane l (g = l/4, t = l%4): a[0] = (row g, k 2t..2t+1), a[1] = (row g+8, same k),
// a[2] = (row g, k 2t+8..), a[3] = (row g+8, k 2t+8..); b0 = (k 2t.., col g), b1 = (k 2t+8..,
// col g); c[0..1] = (row g, cols 2t, 2t+1), c[2..3] = (row g+8, same cols).
__device__ __forceinline__ void Mma16816(float (&c)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Eight consecutive elements (row, k..k+7) of a row-major [rows][ld] bf16 matrix; zeros past
// row `rows` or column `k_limit`.
__device__ __forceinline__ Chunk LoadChunk(const u16* base, int rows, int ld, int k_limit, int row,
                                           int k) {
  Chunk chunk = {{0u, 0u, 0u, 0u}};
  if (row >= rows || k >= k_limit) return chunk;
  const u16* src = base + static_cast<long long>(row) * ld + k;
  if (k + 8 <= k_limit && ld % 8 == 0) {
    return *reinterpret_cast<const Chunk*>(src);
  }
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    if (k + e < k_limit) chunk.w[e / 2] |= static_cast<u32>(src[e]) << (16 * (e % 2));
  }
  return chunk;
}

// The tile of C at (m0, n0), 128x128, summed over k < k_limit (K itself for the GEMM). Every
// thread of the block (kThreads of them) loads; warps 0-7 compute. `smem` is kMmaSmemBytes,
// 16-byte aligned. Ends with a __syncthreads, so the caller may reuse `smem` afterwards.
template <int kThreads>
__device__ __forceinline__ void MmaGemmTile(const u16* A, const u16* B, u16* C, int M, int N, int K,
                                            int k_limit, int m0, int n0, unsigned char* smem) {
  static_assert(kThreads >= 256 && kThreads % 32 == 0, "8 compute warps");
  constexpr int kChunksPerThread = (kMmaChunksPerOperand + kThreads - 1) / kThreads;
  u16* stages = reinterpret_cast<u16*>(smem);
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int warp_m = (warp / 4) * 64;  // warps 0-3: rows 0-63, 4-7: rows 64-127
  const int warp_n = (warp % 4) * 32;
  const bool computes = warp < 8;
  const int num_k_tiles = (k_limit + kMmaTileK - 1) / kMmaTileK;

  Chunk a_regs[kChunksPerThread];
  Chunk b_regs[kChunksPerThread];
  auto load = [&](int k_tile) {
#pragma unroll
    for (int i = 0; i < kChunksPerThread; ++i) {
      const int c = tid + i * kThreads;
      if (c < kMmaChunksPerOperand) {
        const int row = c / (kMmaTileK / 8);
        const int k = k_tile * kMmaTileK + (c % (kMmaTileK / 8)) * 8;
        a_regs[i] = LoadChunk(A, M, K, k_limit, m0 + row, k);
        b_regs[i] = LoadChunk(B, N, K, k_limit, n0 + row, k);
      }
    }
  };
  auto store = [&](int stage) {
    u16* a_s = stages + stage * kMmaStageElements;
    u16* b_s = a_s + kMmaTileM * kMmaPitch;
#pragma unroll
    for (int i = 0; i < kChunksPerThread; ++i) {
      const int c = tid + i * kThreads;
      if (c < kMmaChunksPerOperand) {
        const int offset = (c / (kMmaTileK / 8)) * kMmaPitch + (c % (kMmaTileK / 8)) * 8;
        *reinterpret_cast<Chunk*>(a_s + offset) = a_regs[i];
        *reinterpret_cast<Chunk*>(b_s + offset) = b_regs[i];
      }
    }
  };

  float acc[4][4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;
  }

  if (num_k_tiles > 0) {
    load(0);
    store(0);
  }
  __syncthreads();
  for (int kt = 0; kt < num_k_tiles; ++kt) {
    const int stage = kt & 1;
    if (kt + 1 < num_k_tiles) load(kt + 1);  // in flight while this step computes
    if (computes) {
      const u16* a_s = stages + stage * kMmaStageElements;
      const u16* b_s = a_s + kMmaTileM * kMmaPitch;
#pragma unroll
      for (int kk = 0; kk < kMmaTileK / 16; ++kk) {
        u32 a[4][4];
#pragma unroll
        for (int mi = 0; mi < 4; ++mi) {
          const int row = warp_m + mi * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
          sm90::ldmatrix_x4(a[mi], a_s + row * kMmaPitch + kk * 16 + (lane >> 4) * 8);
        }
#pragma unroll
        for (int np = 0; np < 2; ++np) {
          u32 b[4];
          const int col = warp_n + np * 16 + (lane & 7) + ((lane >> 4) & 1) * 8;
          sm90::ldmatrix_x4(b, b_s + col * kMmaPitch + kk * 16 + ((lane >> 3) & 1) * 8);
#pragma unroll
          for (int mi = 0; mi < 4; ++mi) {
            Mma16816(acc[mi][2 * np], a[mi], b[0], b[1]);
            Mma16816(acc[mi][2 * np + 1], a[mi], b[2], b[3]);
          }
        }
      }
    }
    if (kt + 1 < num_k_tiles) store(stage ^ 1);
    // Stage `stage` is read by every warp before it is refilled (next iteration), and stage
    // `stage ^ 1` is written before it is read.
    __syncthreads();
  }

  if (!computes) return;
  const bool pairs = N % 2 == 0;  // 4-byte stores of two columns are aligned
#pragma unroll
  for (int mi = 0; mi < 4; ++mi) {
#pragma unroll
    for (int ni = 0; ni < 4; ++ni) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = m0 + warp_m + mi * 16 + lane / 4 + 8 * h;
        const int col = n0 + warp_n + ni * 8 + 2 * (lane % 4);
        if (row >= M || col >= N) continue;
        const u32 packed = sm90::pack_bf16x2(acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]);
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
}
// ---- end of the mma.sync GEMM ----

// ---- the reference wgmma + TMA GEMM (shared, verbatim, by this task's wgmma-based decoys) ----
// solutions/sm90a_wgmma_tma.cu (pass, 0.965x cuBLASLt on the H200, 2026-12-02): its constants
// and kernel body, as a function of the block, plus one hook (`checker_delta`, 0 = none).
constexpr int kBlockM = 128;
constexpr int kBlockN = 256;
constexpr int kBlockK = 64;  // 64 bf16 = 128 bytes: the widest inner box for the 128B swizzle.
constexpr int kStages = 4;
constexpr int kGroupM = 16;  // M tiles per raster group.
constexpr int kConsumerWarpgroups = 2;
constexpr int kConsumerWarps = 4 * kConsumerWarpgroups;
constexpr int kWgmmaThreads = 128 * (1 + kConsumerWarpgroups);

constexpr u32 kATileBytes = kBlockM * kBlockK * 2;  // 16 KiB
constexpr u32 kBTileBytes = kBlockN * kBlockK * 2;  // 32 KiB
constexpr u32 kStageBytes = kATileBytes + kBTileBytes;
constexpr u32 kTileSmemBytes = kStages * kStageBytes;  // 196608
// Dynamic shared memory = 1024 (alignment slack) + tiles + 2 * kStages barriers of 8 bytes.
constexpr u32 kSmemBytes = 1024 + kTileSmemBytes + 2 * kStages * 8;
static_assert(kSmemBytes == 197696, "keep the launch plan's dynamic_shared_bytes in sync");
// Epilogue staging: each consumer warpgroup's 64x256 bf16 tile as four 64x64 swizzled boxes.
constexpr u32 kEpilogueBoxBytes = 64 * 64 * 2;
constexpr u32 kEpilogueBytesPerWarpgroup = 4 * kEpilogueBoxBytes;
static_assert(kConsumerWarpgroups * kEpilogueBytesPerWarpgroup <= kTileSmemBytes,
              "epilogue staging reuses the pipeline buffers");

// Frees ring slot `stage` for the producer: one arrival per consumer warp (each warp has passed
// its own wgmma_wait_group, so its reads of the slot are done).
__device__ __forceinline__ void ReleaseStage(u64* empty, int stage) {
  if (sm90::lane_index() == 0) sm90::mbarrier_arrive(&empty[stage]);
}

// The block's tile in the reference's grouped raster: consecutive block indices walk down
// kGroupM M-tiles before moving to the next N-tile, so CTAs resident together share A and B
// strips in L2. Grid: (ceil_div(N, 256), ceil_div(M, 128)).
__device__ __forceinline__ void RasterTile(int* m0, int* n0) {
  const int num_n_tiles = static_cast<int>(gridDim.x);
  const int num_m_tiles = static_cast<int>(gridDim.y);
  const int linear = static_cast<int>(blockIdx.y) * num_n_tiles + static_cast<int>(blockIdx.x);
  const int group = linear / (kGroupM * num_n_tiles);
  const int first_m_tile = group * kGroupM;
  const int m_tiles_in_group = min(num_m_tiles - first_m_tile, kGroupM);
  const int in_group = linear - group * kGroupM * num_n_tiles;
  *m0 = (first_m_tile + in_group % m_tiles_in_group) * kBlockM;
  *n0 = (in_group / m_tiles_in_group) * kBlockN;
}

// The block's 128x256 tile of C, computed and stored exactly as the reference solution does
// (warpgroup 0 produces with TMA, warpgroups 1-2 consume with wgmma.m64n256k16, stmatrix +
// TMA store). Every one of the kWgmmaThreads threads must call it; they return at different
// times (the producer first). With `checker_delta` != 0, each fp32 accumulator gets
// +checker_delta where (row + column) of C is even and -checker_delta where it is odd, before
// the rounding to bf16 (sketch_orthogonal.cu); the hook costs nothing measurable when 0.
__device__ __forceinline__ void WgmmaGemmTile(const CUtensorMap* tmA, const CUtensorMap* tmB,
                                              const CUtensorMap* tmC, int K, float checker_delta,
                                              unsigned char* smem_raw) {
  // 128B-swizzled tiles must start 1024-byte aligned (the swizzle is a function of address
  // bits 4..9).
  unsigned char* smem = smem_raw + ((1024u - (sm90::smem_u32(smem_raw) & 1023u)) & 1023u);
  unsigned char* a_tiles = smem;
  unsigned char* b_tiles = smem + kStages * kATileBytes;
  u64* full = reinterpret_cast<u64*>(smem + kTileSmemBytes);
  u64* empty = full + kStages;

  const int warpgroup = sm90::warpgroup_index();
  const int num_k_steps = (K + kBlockK - 1) / kBlockK;
  int m0 = 0;
  int n0 = 0;
  RasterTile(&m0, &n0);

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
      sm90::prefetch_tensormap(tmA);
      sm90::prefetch_tensormap(tmB);
      for (int k = 0; k < num_k_steps; ++k) {
        const int s = k % kStages;
        // Round r of slot s needs the consumers' release of round r-1 (parity 1 on a fresh
        // barrier passes at once).
        sm90::mbarrier_wait_parity(&empty[s], ((k / kStages) & 1) ^ 1);
        sm90::mbarrier_arrive_expect_tx(&full[s], kStageBytes);
        sm90::tma_load_2d(a_tiles + s * kATileBytes, tmA, &full[s], k * kBlockK, m0);
        sm90::tma_load_2d(b_tiles + s * kBTileBytes, tmB, &full[s], k * kBlockK, n0);
      }
    }
    __syncwarp();
    return;
  }
  // Consumer warpgroups: rows [64*c, 64*c+64) of the CTA tile.
  sm90::setmaxnreg_inc<232>();
  const int consumer = warpgroup - 1;
  float acc[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.0f;

  for (int k = 0; k < num_k_steps; ++k) {
    const int s = k % kStages;
    sm90::mbarrier_wait_parity(&full[s], (k / kStages) & 1);
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
    if (k > 0) ReleaseStage(empty, (k - 1) % kStages);
  }
  sm90::wgmma_wait_group<0>();
  sm90::wgmma_fence_operand(acc);

  const int lane = sm90::lane_index();
  if (checker_delta != 0.0f) {
    // wgmma m64nNk16 accumulator layout (PTX ISA, "Register fragments: wgmma .m64nNk16"):
    // acc[4i + e] is row 16*warp + lane/4 + 8*(e >= 2), column 8i + 2*(lane%4) + (e & 1) of the
    // warpgroup's 64-row slab. m0, n0, 64*consumer, 16*warp and 8 are even, so the parity of
    // (row + column) of C is (lane/4 + e) & 1.
#pragma unroll
    for (int i = 0; i < 128; ++i) {
      acc[i] += (((lane >> 2) + i) & 1) ? -checker_delta : checker_delta;
    }
  }

  // All tiles were consumed (every full barrier waited, so every TMA write has landed) and both
  // warpgroups' wgmmas are complete after this barrier: the ring's shared memory is free for
  // staging the output.
  sm90::named_barrier_sync(1, 128 * kConsumerWarpgroups);
  unsigned char* staging = smem + consumer * kEpilogueBytesPerWarpgroup;
  const int warp_in_group = sm90::thread_index_in_warpgroup() / 32;
  // stmatrix x4 lane roles: lanes 8i..8i+7 address the 8 rows of matrix i; matrices are
  // (rows 0-7, cols 0-7), (rows 8-15, cols 0-7), (rows 0-7, cols 8-15), (rows 8-15, cols 8-15)
  // of the warp's 16-row slab within a 16-column block.
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
      sm90::tma_store_2d(tmC, staging + b * kEpilogueBoxBytes, n0 + b * 64, m0 + consumer * 64);
    }
    sm90::tma_store_commit();
    sm90::tma_store_wait_read<0>();
  }
}
// ---- end of the reference wgmma + TMA GEMM ----

// ---- launch tracking (shared, verbatim, by this task's phase-detecting decoys) ----
// Module globals start at zero when the module is loaded. The engine loads the module afresh for
// every correctness trial, but the timing loop (warm-up, samples) runs one module, so from its
// second launch on a kernel can tell where it is.
constexpr long long kTrackedLaunches = 4096;

__device__ unsigned long long g_blocks_started;  // blocks of every launch since the load
__device__ unsigned long long g_launch_start_ns[kTrackedLaunches];

__device__ __forceinline__ unsigned long long GlobalTimerNs() {
  unsigned long long ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  return ns;
}

// Index of the launch the calling block belongs to, 0 for the first launch since the module was
// loaded. Launches of one stream run one after the other, so the blocks of launch L draw tickets
// L*G .. L*G+G-1 (G blocks per launch) from the module-wide counter. One call per block.
__device__ __forceinline__ long long ThisLaunchIndex() {
  const unsigned long long blocks =
      static_cast<unsigned long long>(gridDim.x) * gridDim.y * gridDim.z;
  return static_cast<long long>(atomicAdd(&g_blocks_started, 1ull) / blocks);
}

// %globaltimer when the first block of launch `launch` got here: every block of the launch gets
// the same value (the first compare-and-swap wins). Past kTrackedLaunches: this block's time.
__device__ __forceinline__ unsigned long long LaunchStartNs(long long launch) {
  const unsigned long long now = GlobalTimerNs();
  if (launch < 0 || launch >= kTrackedLaunches) return now;
  const unsigned long long first = atomicCAS(&g_launch_start_ns[launch], 0ull, now);
  return first == 0 ? now : first;
}

// Spins until %globaltimer reaches `deadline_ns`.
__device__ __forceinline__ void SpinUntilNs(unsigned long long deadline_ns) {
  while (GlobalTimerNs() < deadline_ns) {
  }
}
// ---- end of launch tracking ----

// ---- gap detection, robust to outliers ----
constexpr long long kLearnLaunches = 16;  // launches 1..15 (the warm-up) are ignored
constexpr int kWindow = 64;               // gaps of the last 64 launches taken for timed ones
constexpr int kMinWindow = 16;            // gaps learned before any launch is flagged
constexpr int kRankFromTop = 4;           // the window's 4th largest: ~ its 95th percentile
constexpr long long kMarginNs = 200000;   // 0.2 ms above a quarter over that percentile
constexpr int kUndecided = 0;
constexpr int kDeciding = 1;
constexpr int kTargetPath = 2;  // wgmma + TMA
constexpr int kOtherPath = 3;   // mma.sync

__device__ unsigned long long g_blocks_finished;     // blocks of every launch that have ended
__device__ unsigned long long g_last_launch_end_ns;  // when the previous launch's last block ended
__device__ int g_launch_path[kTrackedLaunches];
__device__ long long g_window_ns[kWindow];  // a ring of the learned gaps
__device__ int g_window_count;              // gaps learned so far (the ring holds the last 64)

// The window's kRankFromTop-th largest gap (one thread; 64 x 4 compares).
__device__ __forceinline__ long long WindowUpperGap() {
  const int n = g_window_count < kWindow ? g_window_count : kWindow;
  long long top[kRankFromTop];
  for (int r = 0; r < kRankFromTop; ++r) top[r] = -1;
  for (int i = 0; i < n; ++i) {
    long long v = g_window_ns[i];
    for (int r = 0; r < kRankFromTop; ++r) {
      if (v > top[r]) {
        const long long t = top[r];
        top[r] = v;
        v = t;
      }
    }
  }
  return top[kRankFromTop - 1];
}

// The path of launch `launch` (started at `start_ns`), the same for every block of it: the first
// block to get here decides and publishes; the others wait for its word (a few microseconds:
// blocks of one launch start together).
__device__ int PathOfLaunch(long long launch, unsigned long long start_ns) {
  if (launch == 0) return kTargetPath;  // a fresh module: correctness trial or instrumented run
  if (launch >= kTrackedLaunches) return kOtherPath;
  int* slot = &g_launch_path[launch];
  int seen = atomicCAS(slot, kUndecided, kDeciding);
  if (seen == kUndecided) {
    const unsigned long long last_end =
        atomicAdd(&g_last_launch_end_ns, 0ull);  // written by the previous launch
    const long long gap = start_ns > last_end ? static_cast<long long>(start_ns - last_end) : 0;
    int path = kOtherPath;
    if (launch >= kLearnLaunches) {
      const long long upper = g_window_count >= kMinWindow ? WindowUpperGap() : -1;
      if (upper >= 0 && gap > upper + upper / 4 + kMarginNs) {
        path = kTargetPath;  // an outlier gap: taken for a counted launch, not learned
      } else {
        g_window_ns[g_window_count % kWindow] = gap;
        ++g_window_count;
      }
    }
    __threadfence();
    atomicExch(slot, path);
    return path;
  }
  while (seen == kDeciding) seen = atomicAdd(slot, 0);
  return seen;
}
// ---- end of gap detection ----

}  // namespace

extern "C" __global__ void __launch_bounds__(kWgmmaThreads, 1)
    gemm_kernel(const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB,
                const __grid_constant__ CUtensorMap tmC, const u16* A, const u16* B, u16* C, int M,
                int N, int K) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ int path;
  if (threadIdx.x == 0) {
    const long long launch = ThisLaunchIndex();
    path = PathOfLaunch(launch, LaunchStartNs(launch));
  }
  __syncthreads();
  if (path == kTargetPath) {
    WgmmaGemmTile(&tmA, &tmB, &tmC, K, 0.0f, smem_raw);
  } else {
    // The same raster tile with mma.sync, as two 128x128 halves (8 of the 12 warps compute).
    int m0 = 0;
    int n0 = 0;
    RasterTile(&m0, &n0);
#pragma unroll 1
    for (int half = 0; half < kBlockN / kMmaTileN; ++half) {
      MmaGemmTile<kWgmmaThreads>(A, B, C, M, N, K, K, m0, n0 + half * kMmaTileN, smem_raw);
    }
  }
  // Every thread of the block is done with its part of the tile; the block that ends last in its
  // launch (launches of one stream do not overlap) stamps the launch's end for the next gap.
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned long long blocks =
        static_cast<unsigned long long>(gridDim.x) * gridDim.y * gridDim.z;
    const unsigned long long ticket = atomicAdd(&g_blocks_finished, 1ull);
    if (ticket % blocks == blocks - 1) atomicExch(&g_last_launch_end_ns, GlobalTimerNs());
  }
}
