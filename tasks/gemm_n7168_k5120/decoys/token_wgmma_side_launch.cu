/* PTXBENCH_PLAN
{"launches":[
  {"kernel":"gemm_mma_kernel","grid":["ceil_div(N,128)","ceil_div(M,128)"],
   "block":["256"],"cluster":[],"dynamic_shared_bytes":"40960",
   "args":[{"tensor":"A"},{"tensor":"B"},{"tensor":"C"},
           {"scalar":"M"},{"scalar":"N"},{"scalar":"K"}]},
  {"kernel":"token_kernel","grid":["1"],"block":["128"],"cluster":[],
   "dynamic_shared_bytes":"9224",
   "args":[{"tensor_map":"tmA"}]}],
 "scratch":[],
 "tensor_maps":[
  {"name":"tmA","tensor":"A","box":["64","64"],"element_strides":[],"swizzle":"128B",
   "interleave":"none","l2_promotion":"128B","oob_fill":"zero","dims":[]}]}
*/
// DECOY for gemm_n7168_k5120 (sm_90a), written for PTXBench.
// Expected verdict: target_work_insufficient.
//
// What it tries: the issue-11 token attack moved into a side launch. The first launch is the
// mma.sync GEMM of mma_sync_only.cu (HMMA, plain loads), which computes all of C; the second
// launch of the plan is a one-block kernel that runs ONE real bulk tensor copy (a 64x64 box of A,
// UTMALDG) and ONE real wgmma.m64n64k16 on it, predicate-on, result discarded (a __device__ sink).
// Both families "executed" in the submission's own module; neither did any of C.
//
// Why that verdict: the work share is summed over every kernel of the plan: the wgmma family did
// 131072 FLOPs against the task's 6.0e11 on the timed workload. Correct output on every workload,
// so only the work share can fail it.
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

constexpr u32 kTokenBoxBytes = 64 * 64 * 2;  // the TMA box: 64 rows of A x 64 k, 128B-swizzled
constexpr u32 kTokenSmemBytes = 1024 + kTokenBoxBytes + 8;
static_assert(kTokenSmemBytes == 9224, "keep the launch plan's dynamic_shared_bytes in sync");

// Where the token wgmma's result goes: written, never read.
__device__ float g_token_sink[128];

}  // namespace

extern "C" __global__ void __launch_bounds__(256)
    gemm_mma_kernel(const u16* A, const u16* B, u16* C, int M, int N, int K) {
  extern __shared__ __align__(16) unsigned char smem[];
  MmaGemmTile<256>(A, B, C, M, N, K, K, static_cast<int>(blockIdx.y) * kMmaTileM,
                   static_cast<int>(blockIdx.x) * kMmaTileN, smem);
}

// One warpgroup: one TMA load of a 64x64 box of A, one wgmma.m64n64k16 with A = B = its first
// 16 columns.
extern "C" __global__ void __launch_bounds__(128)
    token_kernel(const __grid_constant__ CUtensorMap tmA) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* box = smem_raw + ((1024u - (sm90::smem_u32(smem_raw) & 1023u)) & 1023u);
  u64* bar = reinterpret_cast<u64*>(box + kTokenBoxBytes);
  if (threadIdx.x == 0) {
    sm90::mbarrier_init(bar, 1);
    sm90::fence_mbarrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    sm90::mbarrier_arrive_expect_tx(bar, kTokenBoxBytes);
    sm90::tma_load_2d(box, &tmA, bar, 0, 0);
  }
  sm90::mbarrier_wait_parity(bar, 0);
  float d[32];
  const u64 desc = sm90::make_smem_desc_sw128(sm90::smem_u32(box));
  sm90::wgmma_fence();
  sm90::wgmma_m64n64k16_ss_bf16_t<0, 0>(d, desc, desc, 0);
  sm90::wgmma_commit_group();
  sm90::wgmma_wait_group<0>();
  sm90::wgmma_fence_operand(d);
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < 32; ++i) sum += d[i];
  g_token_sink[threadIdx.x] = sum;
}
