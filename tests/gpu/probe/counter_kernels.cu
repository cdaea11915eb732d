// Kernels of known work for tests/gpu/gpu_counters_test.cc: each does a counted amount of one
// kind of arithmetic or copy, so the hardware counters can be checked against exact figures.
// Built by nvcc into a cubin (tests/gpu/CMakeLists.txt) and loaded with the engine's runtime.
#include "tasks/_shared/templates/ptxbench_hopper.cuh"

using namespace ptxbench::sm90;  // NOLINT(build/namespaces): test kernels only.

// Per block: one warpgroup issues `iters` x 4 wgmma m64n256k16 (bf16, fp32 accumulate) on
// shared-memory operands: 2*64*256*16 FLOPs each.
extern "C" __global__ void count_wgmma(int iters, float* sink) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* smem = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<unsigned long long>(smem_raw) + 1023) & ~1023ull);
  for (int i = threadIdx.x; i < (8192 + 32768) / 4; i += blockDim.x) {
    reinterpret_cast<float*>(smem)[i] = 0.001f * static_cast<float>(i % 17);
  }
  __syncthreads();
  float acc[128];
  for (int i = 0; i < 128; ++i) acc[i] = 0.f;
  const u64 desc_a = make_smem_desc_sw128(smem_u32(smem));
  const u64 desc_b = make_smem_desc_sw128(smem_u32(smem + 8192));
  for (int it = 0; it < iters; ++it) {
    wgmma_fence();
    for (int k = 0; k < 4; ++k) wgmma_m64n256k16_ss_bf16(acc, desc_a + 2 * k, desc_b + 2 * k, 1);
    wgmma_commit_group();
    wgmma_wait_group<0>();
    wgmma_fence_operand(acc);
  }
  float s = 0;
  for (int i = 0; i < 128; ++i) s += acc[i];
  if (s == 1234.5f) sink[threadIdx.x] = s;
}

// Per warp: `iters` mma.sync m16n8k16 bf16 (2*16*8*16 FLOPs each): the legacy tensor path.
extern "C" __global__ void count_mma_sync(int iters, float* sink) {
  unsigned a0 = threadIdx.x, a1 = 3, a2 = 5, a3 = 7, b0 = 11, b1 = 13;
  float c0 = 0, c1 = 0, c2 = 0, c3 = 0;
  for (int it = 0; it < iters; ++it) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
  if (c0 + c1 + c2 + c3 == 1234.5f) sink[threadIdx.x] = c0;
}

// Per thread: 2 x `iters` dependent FFMA.
extern "C" __global__ void count_ffma(int iters, float* sink) {
  float x = static_cast<float>(threadIdx.x) * 1e-3f, y = 1.0001f, z = 0.5f;
  for (int it = 0; it < iters; ++it) {
    x = fmaf(x, y, z);
    z = fmaf(z, y, x);
  }
  if (x + z == 1234.5f) sink[threadIdx.x] = x;
}

// Per block: `iters` TMA loads of one 64x64 bf16 box (8192 bytes) of a [rows][64] tensor.
extern "C" __global__ void count_tma(const __grid_constant__ CUtensorMap map, int iters,
                                     int rows, float* sink) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* smem = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<unsigned long long>(smem_raw) + 1023) & ~1023ull);
  __shared__ u64 bar;
  if (threadIdx.x == 0) {
    mbarrier_init(&bar, 1);
    fence_mbarrier_init();
  }
  __syncthreads();
  for (int it = 0; it < iters; ++it) {
    if (threadIdx.x == 0) {
      mbarrier_arrive_expect_tx(&bar, 64 * 64 * 2);
      tma_load_2d(smem, &map, &bar, 0, ((blockIdx.x * iters + it) * 64) % rows);
    }
    mbarrier_wait_parity(&bar, it & 1);
  }
  if (threadIdx.x == 0 && smem[5] == 77) sink[0] = 1;
}

// One thread: the clock64() cycles of `n` dependent FFMA, the measurement a kernel would use to
// tell whether it is watched.
extern "C" __global__ void clock_probe(long long* cycles, int n) {
  float x = 1.f;
  const long long t0 = clock64();
  for (int i = 0; i < n; ++i) x = fmaf(x, 1.0000001f, 1e-7f);
  const long long t1 = clock64();
  cycles[0] = t1 - t0;
  if (x == 1234.5f) cycles[1] = 1;
}

// The gap a submission can measure before each of its launches (the attack of
// tasks/gemm_n7168_k5120/decoys/counted_launch_detect.cu): one thread of one block stores
// %globaltimer at its start and end at slot = the launch's ordinal (a module-global counter),
// so the host reads gap[k] = start[k] - end[k-1] of every launch. `spin` nanoseconds of work
// between the two stamps stand for the kernel.
__device__ unsigned long long gap_probe_launches = 0;

// Restarts the ordinals, so that every timing loop of one process reads its own launches from
// slot 0 (without it the second loop's stamps fell past the capacity and read as 0: run 6).
extern "C" __global__ void gap_probe_reset() { gap_probe_launches = 0; }

extern "C" __global__ void gap_probe(unsigned long long* stamps, int capacity, long long spin) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  unsigned long long start;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  const unsigned long long slot = gap_probe_launches++;
  unsigned long long now = start;
  while (static_cast<long long>(now - start) < spin) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  }
  if (slot < static_cast<unsigned long long>(capacity)) {
    stamps[2 * slot] = start;
    stamps[2 * slot + 1] = now;
  }
}

// ---- The L2 flush against cache-policy hints (tests/gpu/gpu_counters_test.cc, "flush: ...").
// The catalogue's device form of a persisting-L2 window (cheating-catalogue.md in
// ../shared/reference): a submission that loads its inputs under an L2 evict_last policy,
// hoping the lines outlive the harness's flush between samples and make its next sample's reads
// warm.

// The flush as it was before 2026-12-07, for the record of what it left: plain stores of `value`
// into every uint4 of a buffer twice the L2 (the figures of gpu_counters_test "flush: ...").
extern "C" __global__ void l2_plain_flush(uint4* p, unsigned long long n, unsigned value) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    p[i] = make_uint4(value, value, value, value);
  }
}

// Reads `n` uint4 of `p`: mode 0 plain loads; mode 1 loads under a createpolicy evict_last policy
// (fraction 1.0, `ld.global.L2::cache_hint`); mode 2 `prefetch.global.L2::evict_last`. The
// values go into a sink only when their XOR is a sentinel, so nothing is optimized away.
extern "C" __global__ void l2_touch(const uint4* p, unsigned long long n, int mode,
                                    unsigned* sink) {
  unsigned long long policy;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  unsigned acc = 0;
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    if (mode == 2) {
      asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(p + i));
    } else if (mode == 1) {
      unsigned x, y, z, w;
      asm volatile("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                   : "=r"(x), "=r"(y), "=r"(z), "=r"(w)
                   : "l"(p + i), "l"(policy));
      acc ^= x ^ y ^ z ^ w;
    } else {
      const uint4 v = p[i];
      acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
  }
  if (acc == 0x9e3779b9u) sink[0] = acc;
}

// One thread follows `steps` links of `next` (each a word index into the same buffer, one link
// per 128-byte line, in a random order set by the host) with L1-bypassing loads, and stores the
// cycles it took: ~L2 latency per step when the lines are in L2, ~DRAM latency when not.
extern "C" __global__ void l2_chase(const unsigned* next, int steps, unsigned long long* out) {
  unsigned idx = 0;
  const long long t0 = clock64();
  for (int s = 0; s < steps; ++s) idx = __ldcg(next + idx);
  const long long t1 = clock64();
  out[0] = static_cast<unsigned long long>(t1 - t0);
  out[1] = idx;
}
