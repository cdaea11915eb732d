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
// DECOY for gemm_n7168_k5120 (sm_90a), written for PTXBench. Expected verdict: wrong_result.
//
// What it tries: lower precision inside the tolerance? The reference wgmma + TMA kernel with its
// accumulator kept in bf16: after every k-step of 64 the fp32 accumulators are rounded to bf16
// (what a bf16-accumulating kernel would store between steps; wgmma itself only accumulates in
// fp32 or fp16). To round them the consumer waits for each k-step's wgmmas (wait_group 0)
// instead of keeping one in flight.
//
// Why that verdict: 80 roundings (relative 2^-9) of partial sums that grow to |C| ~ 72 add an
// error of about 0.5 per element, more than the 0.01 + 0.01 * |C| that all-close allows for the
// elements of small |C|: simulated on 20,000 timed-size dot products (N(0, 1) bf16 inputs), 44 %
// of the elements fail (relative norm 0.011; cuBLASLt's own error is one final bf16 rounding,
// none fails). A sound checker and today's rule agree.
//
// Everything else is solutions/sm90a_wgmma_tma.cu verbatim; its description:
//
// Reference solution for gemm_n7168_k5120 on sm_90a (H100/H200), written for PTXBench.
//
// C[M][N] = A[M][K] * B[N][K]^T, bf16 in and out, fp32 accumulation.
//
// Design (a warp-specialized TMA + wgmma pipeline):
// - One CTA computes a 128x256 tile of C; BK = 64, so one k-step stages a 128x64 A tile (16 KiB)
//   and a 256x64 B tile (32 KiB), each a 128-byte-swizzled TMA box, in a 4-deep ring (192 KiB;
//   a 5th stage would exceed the 227 KiB opt-in limit).
// - Warpgroup 0 is the producer: one elected thread waits for a free slot (empty mbarrier),
//   posts the expected byte count on the slot's full mbarrier and issues the TMA loads. It gives
//   registers away with setmaxnreg.dec (40).
// - Warpgroups 1 and 2 are consumers, 64 rows of the tile each: per k-step four
//   wgmma.m64n256k16 (A and B from shared memory), 128 fp32 accumulators per thread, one wgmma
//   group kept in flight (wait_group 1) so the tensor core never drains between k-steps; they
//   take registers with setmaxnreg.inc (232).
// - Epilogue: the consumers convert to bf16, write the tile into the (now idle) pipeline
//   shared memory with stmatrix in the 128B-swizzled layout, and one thread per warpgroup stores
//   it with TMA (bounds are clipped by TMA).
// - Tile order: CTAs are walked in groups of 16 M-tiles, so that the ~132 co-resident CTAs touch
//   16 A strips and ~8 B strips (~40 MB) instead of all of B (73 MB, more than the 60 MB L2).
// - No cluster: the 2-CTA multicast variant (sm90a_wgmma_tma_multicast.cu) measured 1.37 ms
//   against 0.90 ms for this one on the timed workload (H200, 2026-11-30, tools/kernel-dev).
//
// Measured (tools/kernel-dev/gemm_dev, H200, cuBLASLt 13 interleaved, L2 flushed per sample,
// median of 40): see tools/kernel-dev/NOTES.md.
//
// Assumptions (all task workloads satisfy them): K % 8 == 0 and N % 8 == 0 (TMA global strides
// must be multiples of 16 bytes), K >= 1, M and N arbitrary otherwise: loads past the edges are
// zero-filled by TMA (zeros contribute nothing to the dot products) and stores past the edges
// are clipped.
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
  u64* full = reinterpret_cast<u64*>(smem + kTileSmemBytes);
  u64* empty = full + kStages;

  const int warpgroup = sm90::warpgroup_index();
  const int num_k_steps = (K + kBlockK - 1) / kBlockK;

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
      // THE DEFECT: the accumulator is kept in bf16. This k-step's wgmmas complete, then every
      // accumulator is rounded to bf16 (the next k-step's wgmma_fence orders the rewrite before
      // its wgmmas read them).
      sm90::wgmma_wait_group<0>();
      sm90::wgmma_fence_operand(acc);
#pragma unroll
      for (int i = 0; i < 128; ++i)
        acc[i] = __uint_as_float(sm90::pack_bf16x2(0.0f, acc[i]) & 0xFFFF0000u);
      ReleaseStage(empty, k % kStages);
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
