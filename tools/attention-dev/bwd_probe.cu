// bwd_probe: checks, on exact small-integer data, the wgmma operand forms the attention backward
// solution relies on, each with the descriptor encoding the solution uses (LBO = stride between
// 64-element MN boxes, SBO = 1024) and with the two offsets swapped, so that a failure of the
// solution can be pinned to one form in the same device call.
//   rs_tb:   D[64x128] = A (registers) * B, B MN-major (k rows of 128 B, two 64-column boxes)
//   ss_tatb: D[64x128] = A * B, A MN-major (k rows of 64 m values) and B MN-major
//   ss_kk64: D[64x64] = A * B^T, both K-major (the GEMM form, N = 64)
// Tiles are written with swizzle_128b_offset (the layout TMA writes with the 128B swizzle).
// Build: nvcc -gencode=arch=compute_90a,code=sm_90a -Itasks/_shared/templates bwd_probe.cu
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>

#include "ptxbench_hopper.cuh"

namespace sm90 = ptxbench::sm90;

__host__ __device__ inline float AVal(int m, int k) { return static_cast<float>((m * 5 + k * 3) % 7 - 3); }
__host__ __device__ inline float BVal(int k, int n) { return static_cast<float>((k * 7 + n * 3) % 11 - 5); }

__device__ unsigned short ToBf16(float f) { return static_cast<unsigned short>(__float_as_uint(f) >> 16); }

__device__ sm90::u64 Desc(sm90::u32 addr, sm90::u32 lbo, sm90::u32 sbo) {
  sm90::u64 d = 0;
  d |= static_cast<sm90::u64>((addr & 0x3FFFFu) >> 4);
  d |= static_cast<sm90::u64>((lbo & 0x3FFFFu) >> 4) << 16;
  d |= static_cast<sm90::u64>((sbo & 0x3FFFFu) >> 4) << 32;
  d |= static_cast<sm90::u64>(1) << 62;
  return d;
}

// mode 0: rs_tb, 1: ss_tatb, 2: ss_kk64. swap: exchange LBO and SBO of the MN-major operands.
__global__ void Probe(int mode, int swap, float* out) {
  __shared__ __align__(1024) unsigned char a_tile[16384];
  __shared__ __align__(1024) unsigned char b_tile[16384];
  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  // B: mode 0/1: [k 64][n 128] MN-major (box h = n/64 at h*8192). mode 2: [n 64][k 64] K-major.
  for (int i = tid; i < 64 * 128; i += 128) {
    const int k = i / 128, n = i % 128;
    if (mode != 2) {
      *reinterpret_cast<unsigned short*>(b_tile + (n / 64) * 8192 +
                                         sm90::swizzle_128b_offset(k, (n % 64) * 2)) = ToBf16(BVal(k, n));
    } else if (n < 64) {
      *reinterpret_cast<unsigned short*>(b_tile + sm90::swizzle_128b_offset(n, k * 2)) = ToBf16(BVal(k, n));
    }
  }
  // A: mode 1: [k 64][m 64] MN-major. mode 2: [m 64][k 64] K-major.
  for (int i = tid; i < 64 * 64; i += 128) {
    const int k = i / 64, m = i % 64;
    if (mode == 1) {
      *reinterpret_cast<unsigned short*>(a_tile + sm90::swizzle_128b_offset(k, m * 2)) = ToBf16(AVal(m, k));
    } else if (mode == 2) {
      *reinterpret_cast<unsigned short*>(a_tile + sm90::swizzle_128b_offset(m, k * 2)) = ToBf16(AVal(m, k));
    }
  }
  sm90::fence_proxy_async_shared();
  __syncthreads();
  const sm90::u32 a_base = sm90::smem_u32(a_tile), b_base = sm90::smem_u32(b_tile);
  const sm90::u32 lbo = swap ? 1024 : 8192, sbo = swap ? 8192 : 1024;
  const int row = 16 * warp + lane / 4, colp = 2 * (lane % 4);
  if (mode == 2) {
    float d[32];
    sm90::wgmma_fence();
    for (int t = 0; t < 4; ++t) {
      sm90::wgmma_m64n64k16_ss_bf16_t<0, 0>(d, sm90::make_smem_desc_sw128(a_base + t * 32),
                                            sm90::make_smem_desc_sw128(b_base + t * 32), t > 0);
    }
    sm90::wgmma_commit_group();
    sm90::wgmma_wait_group<0>();
    sm90::wgmma_fence_operand(d);
    for (int j = 0; j < 8; ++j)
      for (int e = 0; e < 4; ++e) out[(row + 8 * (e / 2)) * 128 + 8 * j + colp + e % 2] = d[4 * j + e];
    return;
  }
  float d[64];
  sm90::wgmma_fence();
  for (int t = 0; t < 4; ++t) {
    if (mode == 0) {
      sm90::u32 a[4];
      const int k0 = 16 * t + colp;
      a[0] = sm90::pack_bf16x2(AVal(row, k0), AVal(row, k0 + 1));
      a[1] = sm90::pack_bf16x2(AVal(row + 8, k0), AVal(row + 8, k0 + 1));
      a[2] = sm90::pack_bf16x2(AVal(row, k0 + 8), AVal(row, k0 + 9));
      a[3] = sm90::pack_bf16x2(AVal(row + 8, k0 + 8), AVal(row + 8, k0 + 9));
      sm90::wgmma_fence();
      sm90::wgmma_m64n128k16_rs_bf16_t<1>(d, a, Desc(b_base + t * 2048, lbo, sbo), t > 0);
    } else {
      sm90::wgmma_m64n128k16_ss_bf16_t<1, 1>(d, Desc(a_base + t * 2048, lbo, sbo),
                                             Desc(b_base + t * 2048, lbo, sbo), t > 0);
    }
  }
  sm90::wgmma_commit_group();
  sm90::wgmma_wait_group<0>();
  sm90::wgmma_fence_operand(d);
  for (int j = 0; j < 16; ++j)
    for (int e = 0; e < 4; ++e) out[(row + 8 * (e / 2)) * 128 + 8 * j + colp + e % 2] = d[4 * j + e];
}

int main() {
  float* d_out;
  cudaMalloc(&d_out, 64 * 128 * 4);
  static float h[64 * 128];
  const char* names[3] = {"rs_tb", "ss_tatb", "ss_kk64"};
  int failures = 0;
  for (int mode = 0; mode < 3; ++mode) {
    for (int swap = 0; swap < (mode == 2 ? 1 : 2); ++swap) {
      cudaMemset(d_out, 0, 64 * 128 * 4);
      Probe<<<1, 128>>>(mode, swap, d_out);
      const cudaError_t e = cudaDeviceSynchronize();
      if (e != cudaSuccess) {
        std::printf("probe %s swap=%d: CUDA error %s\n", names[mode], swap, cudaGetErrorString(e));
        return 3;
      }
      cudaMemcpy(h, d_out, sizeof(h), cudaMemcpyDeviceToHost);
      int bad = 0;
      const int ncols = mode == 2 ? 64 : 128;
      for (int m = 0; m < 64; ++m) {
        for (int n = 0; n < ncols; ++n) {
          float ref = 0;
          for (int k = 0; k < 64; ++k) ref += AVal(m, k) * BVal(k, n);
          if (h[m * 128 + n] != ref) ++bad;
        }
      }
      std::printf("probe %-8s %s: %d of %d wrong%s\n", names[mode],
                  mode == 2 ? "K-major      " : (swap ? "LBO/SBO swapped" : "as the solution"), bad,
                  64 * ncols, bad == 0 ? " (exact)" : "");
      if (swap == 0 && bad != 0) ++failures;
    }
  }
  return failures == 0 ? 0 : 1;
}
