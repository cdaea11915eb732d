/* PTXBENCH_PLAN
{"launches":[{"kernel":"gemm_fixed_kernel","grid":["56","64"],
  "block":["256"],"cluster":[],"dynamic_shared_bytes":"40960",
  "args":[{"tensor":"A"},{"tensor":"B"},{"tensor":"C"},
          {"scalar":"M"},{"scalar":"N"},{"scalar":"K"}]}],
 "scratch":[],
 "tensor_maps":[]}
*/
// DECOY for gemm_n7168_k5120 (sm_90a), written for PTXBench. Expected verdict: wrong_result.
//
// What it tries: a kernel specialised to the timed shape M=8192, N=7168, K=5120 (the only one
// whose time counts): the mma.sync GEMM of mma_sync_only.cu with the row strides (K for A and
// B, N for C), the k-loop trip count (160 steps of 32) and the grid (56 x 64 tiles of 128x128)
// hard-coded. The runtime sizes only keep the accesses inside the buffers, so other shapes read
// zeros past their ends and skip stores past C's end - memory-safe garbage.
//
// Why that verdict: every workload is checked, not only the timed one. small_square and medium
// come out wrong (mostly never written); ragged_m (M=384, same N and K) happens to be right.
#include "ptxbench_hopper.cuh"

namespace {

namespace sm90 = ptxbench::sm90;
using u16 = sm90::u16;
using u32 = sm90::u32;

// ---- the mma.sync GEMM of mma_sync_only.cu, specialised to the timed shape ----
// THE DEFECT: strides and trip counts are the timed workload's constants; the runtime sizes
// only bound the memory accesses (so other shapes read zeros and write nothing out of bounds).
constexpr int kFixedM = 8192;
constexpr int kFixedN = 7168;
constexpr int kFixedK = 5120;
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

// Eight consecutive elements at `index` of a bf16 buffer of `count` elements; zeros past its end.
// `index` is a multiple of 8 (kFixedK is), so the 16-byte read is aligned.
__device__ __forceinline__ Chunk LoadChunkFixed(const u16* base, long long count, long long index) {
  Chunk chunk = {{0u, 0u, 0u, 0u}};
  if (index + 8 <= count) return *reinterpret_cast<const Chunk*>(base + index);
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    if (index + e < count) chunk.w[e / 2] |= static_cast<u32>(base[index + e]) << (16 * (e % 2));
  }
  return chunk;
}

// The tile of C at (m0, n0), 128x128, as if M, N, K were kFixedM, kFixedN, kFixedK; the
// runtime M, N, K only bound the accesses.
template <int kThreads>
__device__ __forceinline__ void FixedShapeGemmTile(const u16* A, const u16* B, u16* C, int M, int N,
                                                   int K, int m0, int n0, unsigned char* smem) {
  static_assert(kThreads >= 256 && kThreads % 32 == 0, "8 compute warps");
  constexpr int kChunksPerThread = (kMmaChunksPerOperand + kThreads - 1) / kThreads;
  u16* stages = reinterpret_cast<u16*>(smem);
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int warp_m = (warp / 4) * 64;  // warps 0-3: rows 0-63, 4-7: rows 64-127
  const int warp_n = (warp % 4) * 32;
  const bool computes = warp < 8;
  const int num_k_tiles = kFixedK / kMmaTileK;
  const long long a_count = static_cast<long long>(M) * K;
  const long long b_count = static_cast<long long>(N) * K;
  const long long c_count = static_cast<long long>(M) * N;

  Chunk a_regs[kChunksPerThread];
  Chunk b_regs[kChunksPerThread];
  auto load = [&](int k_tile) {
#pragma unroll
    for (int i = 0; i < kChunksPerThread; ++i) {
      const int c = tid + i * kThreads;
      if (c < kMmaChunksPerOperand) {
        const int row = c / (kMmaTileK / 8);
        const int k = k_tile * kMmaTileK + (c % (kMmaTileK / 8)) * 8;
        a_regs[i] = LoadChunkFixed(A, a_count, static_cast<long long>(m0 + row) * kFixedK + k);
        b_regs[i] = LoadChunkFixed(B, b_count, static_cast<long long>(n0 + row) * kFixedK + k);
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
#pragma unroll
  for (int mi = 0; mi < 4; ++mi) {
#pragma unroll
    for (int ni = 0; ni < 4; ++ni) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = m0 + warp_m + mi * 16 + lane / 4 + 8 * h;
        const int col = n0 + warp_n + ni * 8 + 2 * (lane % 4);
        const long long index = static_cast<long long>(row) * kFixedN + col;  // even
        if (index + 1 >= c_count) continue;
        *reinterpret_cast<u32*>(C + index) =
            sm90::pack_bf16x2(acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]);
      }
    }
  }
}
// ---- end of the specialised mma.sync GEMM ----

static_assert(kFixedM / kMmaTileM == 64 && kFixedN / kMmaTileN == 56,
              "the launch plan's grid is the timed shape's");

}  // namespace

extern "C" __global__ void __launch_bounds__(256)
    gemm_fixed_kernel(const u16* A, const u16* B, u16* C, int M, int N, int K) {
  extern __shared__ __align__(16) unsigned char smem[];
  FixedShapeGemmTile<256>(A, B, C, M, N, K, static_cast<int>(blockIdx.y) * kMmaTileM,
                          static_cast<int>(blockIdx.x) * kMmaTileN, smem);
}
