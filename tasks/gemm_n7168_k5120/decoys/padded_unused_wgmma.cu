/* PTXBENCH_PLAN
{"launches":[
  {"kernel":"gemm_mma_kernel","grid":["ceil_div(N,128)","ceil_div(M,128)"],
   "block":["256"],"cluster":[],"dynamic_shared_bytes":"40960",
   "args":[{"tensor":"A"},{"tensor":"B"},{"tensor":"C"},
           {"scalar":"M"},{"scalar":"N"},{"scalar":"K"}]},
  {"kernel":"busy_wgmma_kernel","grid":["132"],"block":["128"],"cluster":[],
   "dynamic_shared_bytes":"41992",
   "args":[{"tensor_map":"tmA"},{"tensor_map":"tmB"},{"scratch":"sink"},
           {"scalar":"M"},{"scalar":"N"},{"scalar":"K"}]}],
 "scratch":[{"name":"sink","bytes":"67584"}],
 "tensor_maps":[
  {"name":"tmA","tensor":"A","box":["64","64"],"element_strides":[],"swizzle":"128B",
   "interleave":"none","l2_promotion":"128B","oob_fill":"zero","dims":[]},
  {"name":"tmB","tensor":"B","box":["64","256"],"element_strides":[],"swizzle":"128B",
   "interleave":"none","l2_promotion":"128B","oob_fill":"zero","dims":[]}]}
*/
// DECOY for gemm_n7168_k5120 (sm_90a), written for PTXBench.
// Expected verdict: target_work_insufficient.
//
// What it tries: to defeat the work-share rule by padding, where unused_full_wgmma.cu fails it.
// C comes from the mma.sync GEMM of mma_sync_only.cu (HMMA); the second launch is that decoy's
// busy wgmma kernel run for kPadding = 10 times the task's MACs, into accumulators that go to a
// scratch buffer, never to C. The wgmma family then executes 10x the task's FLOPs: share of the
// task 10, share of the executed multiply-add work 10 / 11 = 0.909 - above both 0.9
// thresholds, which unused_full_wgmma's one-fold padding (0.49) is not.
//
// Why that verdict: what ran elsewhere is judged against the task too (work_share.h,
// other_work_over_task <= (1 - 0.9) / 0.9 = 0.111): the legacy tensor path still executed 1.0x
// the task's FLOPs, whatever the padding beside it. Correct output on every workload; about
// 6 ms of extra wgmma time per launch on the H200.
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

constexpr u32 kBusyABytes = 64 * 64 * 2;   // A box: 64 rows x 64 k
constexpr u32 kBusyBBytes = 256 * 64 * 2;  // B box: 256 rows x 64 k
constexpr int kBusyBatch = 4;              // wgmmas per commit group
constexpr long long kBusyMacsPerWgmma = 64LL * 256 * 16;
constexpr long long kPadding = 10;  // times the task's MACs
constexpr u32 kBusySmemBytes = 1024 + kBusyABytes + kBusyBBytes + 8;
static_assert(kBusySmemBytes == 41992, "keep the launch plan's dynamic_shared_bytes in sync");

}  // namespace

extern "C" __global__ void __launch_bounds__(256)
    gemm_mma_kernel(const u16* A, const u16* B, u16* C, int M, int N, int K) {
  extern __shared__ __align__(16) unsigned char smem[];
  MmaGemmTile<256>(A, B, C, M, N, K, K, static_cast<int>(blockIdx.y) * kMmaTileM,
                   static_cast<int>(blockIdx.x) * kMmaTileN, smem);
}

// Each block: one TMA load of A's and B's first tiles, then its share (rounded up to a batch)
// of ceil(M*N*K / (64*256*16)) wgmma.m64n256k16 accumulating into one set of registers, whose
// sum goes to sink[block][thread] (the plan's scratch: 132 x 128 floats).
extern "C" __global__ void __launch_bounds__(128, 1)
    busy_wgmma_kernel(const __grid_constant__ CUtensorMap tmA,
                      const __grid_constant__ CUtensorMap tmB, float* sink, int M, int N, int K) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024u - (sm90::smem_u32(smem_raw) & 1023u)) & 1023u);
  unsigned char* a_tile = smem;
  unsigned char* b_tile = smem + kBusyABytes;
  u64* bar = reinterpret_cast<u64*>(b_tile + kBusyBBytes);
  const long long total =
      kPadding * ((static_cast<long long>(M) * N * K + kBusyMacsPerWgmma - 1) / kBusyMacsPerWgmma);
  const long long per_block = (total + gridDim.x - 1) / gridDim.x;
  const long long batches = (per_block + kBusyBatch - 1) / kBusyBatch;
  if (threadIdx.x == 0) {
    sm90::mbarrier_init(bar, 1);
    sm90::fence_mbarrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    sm90::mbarrier_arrive_expect_tx(bar, kBusyABytes + kBusyBBytes);
    sm90::tma_load_2d(a_tile, &tmA, bar, 0, 0);
    sm90::tma_load_2d(b_tile, &tmB, bar, 0, 0);
  }
  sm90::mbarrier_wait_parity(bar, 0);
  float acc[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
  const u32 a_base = sm90::smem_u32(a_tile);
  const u32 b_base = sm90::smem_u32(b_tile);
  for (long long batch = 0; batch < batches; ++batch) {
    sm90::wgmma_fence();
#pragma unroll
    for (int i = 0; i < kBusyBatch; ++i) {
      // k-steps 0..3 of the 64-wide box, so consecutive instructions read different columns.
      sm90::wgmma_m64n256k16_ss_bf16(acc, sm90::make_smem_desc_sw128(a_base + 32 * i),
                                     sm90::make_smem_desc_sw128(b_base + 32 * i), 1);
    }
    sm90::wgmma_commit_group();
    sm90::wgmma_wait_group<0>();
  }
  sm90::wgmma_fence_operand(acc);
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < 128; ++i) sum += acc[i];
  sink[blockIdx.x * 128 + threadIdx.x] = sum;
}
