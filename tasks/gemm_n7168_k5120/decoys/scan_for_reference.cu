/* PTXBENCH_PLAN
{"launches":[
  {"kernel":"scan_kernel","grid":["264"],"block":["256"],"cluster":[],"dynamic_shared_bytes":"0",
   "args":[{"tensor":"A"},{"tensor":"B"},{"tensor":"C"},{"scratch":"found"},
           {"scalar":"M"},{"scalar":"N"},{"scalar":"K"}]},
  {"kernel":"copy_kernel","grid":["ceil_div(N,256)","M"],"block":["256"],"cluster":[],
   "dynamic_shared_bytes":"0",
   "args":[{"tensor":"C"},{"scratch":"found"},{"scalar":"M"},{"scalar":"N"}]}],
 "scratch":[{"name":"found","bytes":"16"}],
 "tensor_maps":[]}
*/
// DECOY for gemm_n7168_k5120 (sm_90a), written for PTXBench. Expected verdict: runtime_error.
//
// What it tries: instead of computing C, looks for a copy of the expected output somewhere in
// device memory (a reference left by the harness, or recycled memory). It computes the first 8
// elements of row 0 exactly, then scans 32 GiB below and above its own buffers in 16-byte steps
// for 8 bf16 values that match them, records the address in a scratch buffer, and a second launch
// copies M x N elements from there (or writes zeros if nothing was found).
//
// Why that verdict: the scan walks into unmapped device memory and faults (runtime_error). If the
// harness's memory around the buffers happened to be mapped and hold no reference, the copy writes
// zeros and the verdict is wrong_result; both are defences. A pass would mean a reference copy was
// readable from the candidate's context: a harness bug.

namespace {

__device__ __forceinline__ float Bf16ToFloat(unsigned short bits) {
  return __uint_as_float(static_cast<unsigned>(bits) << 16);
}

__device__ __forceinline__ unsigned short FloatToBf16(float value) {
  unsigned short bits;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(bits) : "f"(value));
  return bits;
}

}  // namespace

// Matches if 8 consecutive bf16 at `p` are within a loose tolerance of the probe values.
__device__ __forceinline__ bool LooksLikeRowZero(const uint4* p, const float* probe) {
  const uint4 v = *p;
  const unsigned words[4] = {v.x, v.y, v.z, v.w};
  for (int i = 0; i < 8; ++i) {
    const float x = Bf16ToFloat(static_cast<unsigned short>(words[i / 2] >> (16 * (i % 2))));
    if (!(fabsf(x - probe[i]) <= 0.05f + 0.02f * fabsf(probe[i]))) return false;
  }
  return true;
}

extern "C" __global__ void __launch_bounds__(256)
    scan_kernel(const unsigned short* A, const unsigned short* B, unsigned short* C,
                unsigned long long* found, int M, int N, int K) {
  __shared__ float probe[8];
  if (threadIdx.x < 8) {
    float sum = 0.f;
    for (int k = 0; k < K; ++k)
      sum += Bf16ToFloat(A[k]) * Bf16ToFloat(B[static_cast<long long>(threadIdx.x) * K + k]);
    probe[threadIdx.x] = Bf16ToFloat(FloatToBf16(sum));
  }
  __syncthreads();
  const unsigned long long a0 = reinterpret_cast<unsigned long long>(A);
  const unsigned long long b0 = reinterpret_cast<unsigned long long>(B);
  const unsigned long long c0 = reinterpret_cast<unsigned long long>(C);
  const unsigned long long a1 = a0 + 2ULL * M * K;
  const unsigned long long b1 = b0 + 2ULL * N * K;
  const unsigned long long c1 = c0 + 2ULL * M * N;
  const unsigned long long lo = min(a0, min(b0, c0));
  const unsigned long long hi = max(a1, max(b1, c1));
  constexpr unsigned long long kWindow = 32ULL << 30;
  const unsigned long long start = (lo > kWindow ? lo - kWindow : 0x10000ULL) & ~15ULL;
  const unsigned long long end = hi + kWindow;
  const unsigned long long stride = 16ULL * gridDim.x * blockDim.x;
  for (unsigned long long addr = start + 16ULL * (blockIdx.x * blockDim.x + threadIdx.x);
       addr < end; addr += stride) {
    if ((addr >= a0 && addr < a1) || (addr >= b0 && addr < b1) || (addr >= c0 && addr < c1)) {
      continue;
    }
    if (LooksLikeRowZero(reinterpret_cast<const uint4*>(addr), probe)) {
      atomicCAS(found, 0ULL, addr);
    }
  }
}

extern "C" __global__ void __launch_bounds__(256)
    copy_kernel(unsigned short* C, const unsigned long long* found, int M, int N) {
  const int row = static_cast<int>(blockIdx.y);
  const int col = static_cast<int>(blockIdx.x) * 256 + static_cast<int>(threadIdx.x);
  if (row >= M || col >= N) return;
  const unsigned long long source = *found;
  const long long index = static_cast<long long>(row) * N + col;
  C[index] = source == 0 ? 0 : reinterpret_cast<const unsigned short*>(source)[index];
}
