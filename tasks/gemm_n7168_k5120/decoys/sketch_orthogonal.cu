/* PTXBENCH_PLAN
{"launches":[{"kernel":"gemm_kernel",
  "grid":["ceil_div(N,256)","ceil_div(M,128)"],"block":["384"],"cluster":[],
  "dynamic_shared_bytes":"197696",
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
// Reference solution for gemm_n7168_k5120 on sm_90a (H100/H200), written for PTXBench.
// DECOY for gemm_n7168_k5120 (sm_90a), written for PTXBench. Expected verdict: wrong_result.
//
// What it tries: an error that a projection with FIXED weights cannot see. A sketch of the
// outputs, sum_i w_i * C_i, is only as good as its weights: with weights the kernel can know (all
// ones, one weight per row, per column, per 32-bit word or per 16-byte vector, or any
// w(r, c) = u(r) + v(c)), a kernel can err in a pattern the projection cancels. This one adds
// +32 to every element of C whose (row + column) is even and -32 to the others (a checkerboard:
// every aligned pair of neighbours in a row or a column sums to 0, so every such projection of
// the error is exactly 0 in fp32 before the bf16 rounding, which then errs like an honest
// kernel's). 32 is ~0.45 standard deviations of C on this task's N(0,1) inputs (K = 5120) and
// ~45x the all-close tolerance (atol 0.01 + rtol 0.01 x |C|, ~0.73 RMS): every element is wrong.
// It does so only on the samples that the 2026-12-02 loop never checks element by element
// (samples 8..392, found as late_samples_skip.cu finds them, with the same pseudo-random 0-40 %
// delays that keep the loop from converging so that it runs to its 400-pair cap); everything else,
// and the values under the checkerboard, is the task's reference wgmma + TMA kernel
// (solutions/sm90a_wgmma_tma.cu). Against today's engine: pass at ~0.8x (the delays cost ~20 %).
//
// Why that verdict: the sketch's weights come from Philox keyed by a secret drawn per evaluation
// and passed only to the engine's own kernel, one independent weight per element; the error's
// projection is then 32 * sum_i +-w_i, of size 32 * sqrt(n) = ~245,000 for n = 58,720,256 and
// +-1 (or N(0,1)) weights, against an honest bound of z * sqrt(sum tol_i^2) = z * ~5,600: one
// perturbed sample escapes only when |N(0,1)| < z * 0.023 (~5.5 % at z = 3), and ~320 of them are
// perturbed. If the engine's sketch used fixed or structured weights, or the deterministic bound
// sum |tol_i| (~3.4e7, which no per-element error below ~0.6 could exceed), this decoy would
// pass: that is what it is here to show.
#include "ptxbench_hopper.cuh"

namespace {

namespace sm90 = ptxbench::sm90;
using u32 = sm90::u32;
using u64 = sm90::u64;

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

constexpr unsigned long long kWarmupNs = 300000000ull;  // TimingConfig::warmup_seconds
// Sample 8, not 72: the loop of 2026-12-02 (run 4 on the H200) ended at its time cap after
// 33-35 samples of this kernel, so a window from 72 never opened and the decoy passed honestly.
constexpr long long kFirstCheatSample = 8;
constexpr long long kLastCheatSample = 392;
constexpr float kCheckerDelta = 32.0f;  // exact in bf16 next to |C| ~ 70
constexpr unsigned long long kNoSample = ~0ull;

__device__ unsigned long long g_first_sample_launch = kNoSample;

// The delay of launch `launch` in 1/1024 units of its duration: 0..409 (0-40 %), from a
// SplitMix64-style hash so that neighbouring launches differ.
__device__ __forceinline__ unsigned long long DelayPer1024(long long launch) {
  unsigned long long z = static_cast<unsigned long long>(launch) + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (z >> 40) % 410;
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kWgmmaThreads, 1)
    gemm_kernel(const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB,
                const __grid_constant__ CUtensorMap tmC, int M, int N, int K) {
  extern __shared__ unsigned char smem_raw[];
  __shared__ int cheat;  // perturb this launch
  __shared__ unsigned long long launch_start_ns;
  __shared__ unsigned long long block_start_ns;
  __shared__ unsigned long long delay;
  if (threadIdx.x == 0) {
    block_start_ns = GlobalTimerNs();
    const long long launch = ThisLaunchIndex();
    launch_start_ns = LaunchStartNs(launch);
    const unsigned long long first_ns = LaunchStartNs(0);
    long long sample = -1;
    if (launch_start_ns >= first_ns + kWarmupNs) {
      unsigned long long first_sample =
          atomicCAS(&g_first_sample_launch, kNoSample, static_cast<unsigned long long>(launch));
      if (first_sample == kNoSample) first_sample = static_cast<unsigned long long>(launch);
      sample = launch - static_cast<long long>(first_sample);
    }
    cheat = sample >= kFirstCheatSample && sample <= kLastCheatSample ? 1 : 0;
    delay = DelayPer1024(launch);
  }
  __syncthreads();
  (void)M;
  (void)N;  // TMA clips the tiles at the edges
  WgmmaGemmTile(&tmA, &tmB, &tmC, K, cheat ? kCheckerDelta : 0.0f, smem_raw);
  if (threadIdx.x == 128) {
    // Thread 0 of the first consumer warpgroup returns after its tile's store. This block took
    // `elapsed`; every block of the launch stretches by the same share.
    const unsigned long long elapsed = GlobalTimerNs() - block_start_ns;
    SpinUntilNs(block_start_ns + elapsed + elapsed * delay / 1024);
  }
}
