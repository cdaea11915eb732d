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
// What it tries: the issue-11 profiling-detection attack. Thread 0 of every block first times a
// chain of kProbeIterations dependent FFMAs with clock64(). CUPTI's SASS-metrics patching makes
// such code about 68x slower (docs/measurement.md: an FMA loop 0.55 -> 37.7 ms), so a slow probe
// means "instrumented": the block then runs the task's reference wgmma + TMA kernel
// (solutions/sm90a_wgmma_tma.cu, its body verbatim below). Otherwise - in the correctness trials
// and the timing loop, counted samples included, which run at full speed - it computes its
// 128x256 tile with the mma.sync GEMM of mma_sync_only.cu (two 128x128 halves; 8 of its 12 warps
// compute). Both paths compute the same tile of the same grouped raster, so each block may decide
// on its own: every output check passes on either path and on any mix, and the SASS-metrics run
// sees HGMMA and UTMALDG executed. Against the engine of 2026-12-02 (paper TIC only) it passes.
//
// Calibration: 100,000 dependent FFMAs took 444,019 cycles uninstrumented on the H200, also on
// counted (range-profiler) samples (counters-findings.md, 2026-12-01): 4.4 cycles each. The
// threshold, 20 cycles per iteration, is 4.5x that (room for issue contention from the other
// warps of the SM) and about 15x below the patched cost (68 x 4.4 = 300).
//
// Why that verdict: the hardware counters of the timed path (counted samples) show no HGMMA
// FLOPs (all bf16 tensor FLOPs on the legacy path) while the instrumented run executed HGMMAs
// worth ~2*M*N*K: the profiled path is not the timed path. The judge (branch judge, its
// JudgeTargetWork as of 2026-12-02 00:30 UTC) checks path agreement before the work-share
// thresholds, so profiled_path_differs comes first; where the path cannot be compared (no SASS
// map) the work share (~0 % of the task's FLOPs on wgmma) gives target_work_insufficient, also a
// sound defence. Pass never.
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

// ---- the reference solution's constants (solutions/sm90a_wgmma_tma.cu, verbatim) ----
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
// ---- end of the reference solution's constants ----

constexpr int kProbeIterations = 2000;
constexpr long long kProbeThresholdCycles = 20LL * kProbeIterations;

__device__ float g_probe_sink;

// True when a chain of kProbeIterations dependent FFMAs takes longer than the threshold. The
// chain starts from a value that depends on the first clock read and the second read depends on
// the chain's result, so neither the compiler nor ptxas can move the chain out of the window.
__device__ __noinline__ bool LooksProfiled() {
  const long long start = clock64();
  float x = 1.0f + static_cast<float>(start & 1) * 1e-30f + static_cast<float>(threadIdx.x) * 1e-7f;
  for (int i = 0; i < kProbeIterations; ++i) x = fmaf(x, 0.9999999f, 1e-7f);
  long long end;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(end) : "f"(x));
  if (x == 42.0f) g_probe_sink = x;  // never true (x stays near 1): keeps the chain alive
  return end - start > kProbeThresholdCycles;
}

}  // namespace

extern "C" __global__ void __launch_bounds__(128 * (1 + kConsumerWarpgroups), 1)
    gemm_kernel(const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB,
                const __grid_constant__ CUtensorMap tmC, const u16* A, const u16* B, u16* C, int M,
                int N, int K) {
  extern __shared__ unsigned char smem_raw[];
  // Both paths compute the tile of the reference's grouped raster. The probe is decided per
  // block, and the H200 run of 2026-12-02 found 13 whole 128x256 tiles of C unwritten after the
  // instrumented launch (425,984 of 58,720,256 elements): some blocks read "not profiled" there,
  // and while the mma.sync path took the plain (blockIdx.y, blockIdx.x) tile, such a block left
  // its raster tile unwritten and wrote another one twice. With one mapping any mix of per-block
  // decisions writes every tile exactly once.
  // Grouped raster: consecutive block indices walk down kGroupM M-tiles before moving to the
  // next N-tile, so CTAs resident together share A and B strips in L2.
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
  __shared__ int profiled;
  if (threadIdx.x == 0) profiled = LooksProfiled() ? 1 : 0;
  __syncthreads();
  if (!profiled) {
    // Not watched: the mma.sync GEMM on this block's 128x256 tile.
#pragma unroll 1
    for (int half = 0; half < kBlockN / kMmaTileN; ++half) {
      MmaGemmTile<128 * (1 + kConsumerWarpgroups)>(A, B, C, M, N, K, K, m0, n0 + half * kMmaTileN,
                                                   smem_raw);
    }
    return;
  }
  // Watched: the reference solution's kernel body, verbatim.
  // 128B-swizzled tiles must start 1024-byte aligned (the swizzle is a function of address
  // bits 4..9).
  unsigned char* smem = smem_raw + ((1024u - (sm90::smem_u32(smem_raw) & 1023u)) & 1023u);
  unsigned char* a_tiles = smem;
  unsigned char* b_tiles = smem + kStages * kATileBytes;
  u64* full = reinterpret_cast<u64*>(smem + kTileSmemBytes);
  u64* empty = full + kStages;

  const int warpgroup = sm90::warpgroup_index();
  const int num_k_steps = (K + kBlockK - 1) / kBlockK;

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
      for (int k = 0; k < num_k_steps; ++k) {
        const int s = k % kStages;
        // Round r of slot s needs the consumers' release of round r-1 (parity 1 on a fresh
        // barrier passes at once).
        sm90::mbarrier_wait_parity(&empty[s], ((k / kStages) & 1) ^ 1);
        sm90::mbarrier_arrive_expect_tx(&full[s], kStageBytes);
        sm90::tma_load_2d(a_tiles + s * kATileBytes, &tmA, &full[s], k * kBlockK, m0);
        sm90::tma_load_2d(b_tiles + s * kBTileBytes, &tmB, &full[s], k * kBlockK, n0);
      }
    }
    __syncwarp();
  } else {
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

    // All tiles were consumed (every full barrier waited, so every TMA write has landed) and both
    // warpgroups' wgmmas are complete after this barrier: the ring's shared memory is free for
    // staging the output.
    sm90::named_barrier_sync(1, 128 * kConsumerWarpgroups);
    unsigned char* staging = smem + consumer * kEpilogueBytesPerWarpgroup;
    const int warp_in_group = sm90::thread_index_in_warpgroup() / 32;
    const int lane = sm90::lane_index();
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
        sm90::tma_store_2d(&tmC, staging + b * kEpilogueBoxBytes, n0 + b * 64, m0 + consumer * 64);
      }
      sm90::tma_store_commit();
      sm90::tma_store_wait_read<0>();
    }
  }
}
