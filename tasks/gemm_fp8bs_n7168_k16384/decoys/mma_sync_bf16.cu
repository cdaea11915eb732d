/* PTXBENCH_PLAN
{"launches":[{"kernel":"gemm_fp8bs_mma_sync","grid":["ceil_div(N,64)","ceil_div(M,64)"],
  "block":["128"],"cluster":[],"dynamic_shared_bytes":"0",
  "args":[{"tensor":"A"},{"tensor":"SA"},{"tensor":"B"},{"tensor":"SB"},{"tensor":"C"},
          {"scalar":"M"},{"scalar":"N"},{"scalar":"K"}]}],
 "scratch":[],"tensor_maps":[]}
*/
// DECOY for gemm_fp8bs_n7168_k16384 (sm_90a), written for PTXBench. Expected verdict:
// target_not_executed.
//
// What it tries: the right answer on the legacy tensor cores: e4m3 widened to bf16 (exact:
// e4m3's 3 mantissa bits and 2^-9 .. 448 range fit bf16) and multiplied with
// mma.sync.m16n8k16 bf16 (HMMA), fp32 accumulation, with the same per-128-K promotion as the
// reference solution. No wgmma, no TMA: plain loads into shared memory.
//
// Why that verdict: correctness passes (the same function, promoted per block), but neither
// credited family of sm_90a (wgmma, tma) executes. wrong_result would mean a bug in this
// kernel, not a defence.
//
// Kernel: a 64 x 64 tile of C per 128-thread block, warp w owns rows 16w .. 16w+15 and all 64
// columns (8 n8 tiles); per 128-K block the A and B tiles are loaded 16 bytes at a time,
// widened to bf16 into padded shared memory (272-byte rows: the fragment loads hit 32 distinct
// banks), eight k16 steps of mma.sync into a partial accumulator, then
// acc += partial * SA[kb][row] * SB[n0/128][kb]. Assumes K % 16 == 0 (every workload has
// K % 128 == 0); M and N arbitrary (rows past the edges load as zeros and are not stored).
namespace {

using u16 = unsigned short;
using u32 = unsigned int;

enum : int {
  kTile = 64,
  kBlockK = 128,
  kRowBytes = kBlockK * 2 + 16,  // bf16 row plus 16 bytes of padding.
};

// Two e4m3 bytes (low byte = lower k) to two bf16 in one register, low half = lower k. The
// conversion is exact: e4m3 -> f16 (cvt.rn.f16x2.e4m3x2, PTX ISA 7.8) -> f32 -> bf16.
__device__ __forceinline__ u32 E4m3x2ToBf16x2(u16 pair) {
  u32 out;
  asm("{\n\t.reg .b32 h2;\n\t.reg .b16 lo, hi;\n\t.reg .f32 flo, fhi;\n\t"
      "cvt.rn.f16x2.e4m3x2 h2, %1;\n\t"
      "mov.b32 {lo, hi}, h2;\n\t"
      "cvt.f32.f16 flo, lo;\n\t"
      "cvt.f32.f16 fhi, hi;\n\t"
      "cvt.rn.bf16x2.f32 %0, fhi, flo;\n\t}"
      : "=r"(out)
      : "h"(pair));
  return out;
}

__device__ __forceinline__ u32 PackBf16x2(float lo, float hi) {
  u32 packed;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
  return packed;
}

// One row segment of 16 e4m3 (a 16-byte chunk along K) into 16 bf16 in shared memory; zeros
// past the matrix edge.
__device__ __forceinline__ void LoadChunk(const unsigned char* src_row, bool row_ok, int k, int K,
                                          unsigned char* dst) {
  uint4 raw = make_uint4(0, 0, 0, 0);
  if (row_ok && k < K) raw = *reinterpret_cast<const uint4*>(src_row + k);
  const u32 w[4] = {raw.x, raw.y, raw.z, raw.w};
  u32 out[8];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = E4m3x2ToBf16x2(static_cast<u16>(w[i] & 0xFFFFu));
    out[2 * i + 1] = E4m3x2ToBf16x2(static_cast<u16>(w[i] >> 16));
  }
  reinterpret_cast<uint4*>(dst)[0] = make_uint4(out[0], out[1], out[2], out[3]);
  reinterpret_cast<uint4*>(dst)[1] = make_uint4(out[4], out[5], out[6], out[7]);
}

__device__ __forceinline__ void MmaBf16(float (&c)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

}  // namespace

extern "C" __global__ void __launch_bounds__(128)
    gemm_fp8bs_mma_sync(const unsigned char* __restrict__ A, const float* __restrict__ SA,
                        const unsigned char* __restrict__ B, const float* __restrict__ SB, u16* C,
                        int M, int N, int K) {
  __shared__ alignas(16) unsigned char a_tile[kTile * kRowBytes];
  __shared__ alignas(16) unsigned char b_tile[kTile * kRowBytes];
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int g = lane / 4;
  const int t = lane % 4;
  const int m0 = static_cast<int>(blockIdx.y) * kTile;
  const int n0 = static_cast<int>(blockIdx.x) * kTile;
  const int num_k_blocks = (K + kBlockK - 1) / kBlockK;
  const int sb_stride = 4 * ((num_k_blocks + 3) / 4);
  const float* sb_row = SB + static_cast<long long>(n0 / 128) * sb_stride;
  const int row0 = m0 + 16 * warp + g;
  const int row1 = row0 + 8;

  float acc[8][4];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = 0.0f;
  }

  for (int kb = 0; kb < num_k_blocks; ++kb) {
    const int k0 = kb * kBlockK;
    // 64 rows x 8 chunks of 16 bytes per tile: 4 chunks of A and 4 of B per thread.
    for (int c = tid; c < kTile * 8; c += 128) {
      const int r = c / 8;
      const int chunk = c % 8;
      LoadChunk(A + static_cast<long long>(m0 + r) * K, m0 + r < M, k0 + 16 * chunk, K,
                a_tile + r * kRowBytes + chunk * 32);
      LoadChunk(B + static_cast<long long>(n0 + r) * K, n0 + r < N, k0 + 16 * chunk, K,
                b_tile + r * kRowBytes + chunk * 32);
    }
    __syncthreads();
    float partial[8][4];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) partial[j][e] = 0.0f;
    }
#pragma unroll
    for (int ks = 0; ks < kBlockK / 16; ++ks) {
      const int kbyte = (ks * 16 + 2 * t) * 2;
      const unsigned char* a_rows = a_tile + (16 * warp + g) * kRowBytes + kbyte;
      u32 a[4];
      a[0] = *reinterpret_cast<const u32*>(a_rows);
      a[1] = *reinterpret_cast<const u32*>(a_rows + 8 * kRowBytes);
      a[2] = *reinterpret_cast<const u32*>(a_rows + 16);
      a[3] = *reinterpret_cast<const u32*>(a_rows + 8 * kRowBytes + 16);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const unsigned char* b_row = b_tile + (8 * j + g) * kRowBytes + kbyte;
        MmaBf16(partial[j], a, *reinterpret_cast<const u32*>(b_row),
                *reinterpret_cast<const u32*>(b_row + 16));
      }
    }
    const float sb = sb_row[kb];
    const float scale0 = (row0 < M ? SA[static_cast<long long>(kb) * M + row0] : 0.0f) * sb;
    const float scale1 = (row1 < M ? SA[static_cast<long long>(kb) * M + row1] : 0.0f) * sb;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      acc[j][0] = fmaf(partial[j][0], scale0, acc[j][0]);
      acc[j][1] = fmaf(partial[j][1], scale0, acc[j][1]);
      acc[j][2] = fmaf(partial[j][2], scale1, acc[j][2]);
      acc[j][3] = fmaf(partial[j][3], scale1, acc[j][3]);
    }
    // Every warp has read the tiles before they are overwritten.
    __syncthreads();
  }

#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int col = n0 + 8 * j + 2 * t;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = h == 0 ? row0 : row1;
      if (row >= M || col >= N) continue;
      const u32 packed = PackBf16x2(acc[j][2 * h], acc[j][2 * h + 1]);
      u16* dst = C + static_cast<long long>(row) * N + col;
      if (col + 1 < N && N % 2 == 0) {
        *reinterpret_cast<u32*>(dst) = packed;
      } else {
        dst[0] = static_cast<u16>(packed & 0xFFFFu);
        if (col + 1 < N) dst[1] = static_cast<u16>(packed >> 16);
      }
    }
  }
}
