/* PTXBENCH_PLAN
{"launches":[{"kernel":"slow","grid":["1"],"block":["32"],"args":[{"tensor":"A"},{"tensor":"C"}]}]}
*/
// Compiles slowly on purpose: 2^13 inlined volatile instructions give ptxas seconds of work,
// so a test can kill the worker while this job is still running.
template <int kDepth>
struct Repeat {
  __device__ __forceinline__ static void Run(float& x, float& y) {
    Repeat<kDepth - 1>::Run(x, y);
    Repeat<kDepth - 1>::Run(x, y);
  }
};
template <>
struct Repeat<0> {
  __device__ __forceinline__ static void Run(float& x, float& y) {
    asm volatile("fma.rn.f32 %0, %0, %1, %0;" : "+f"(x) : "f"(y));
    y = y * x + 1.0f;
  }
};
extern "C" __global__ void slow(const unsigned short* a, unsigned short* c) {
  float x = a[threadIdx.x], y = a[threadIdx.x + 32];
  Repeat<13>::Run(x, y);
  c[threadIdx.x] = (unsigned short)(x + y);
}
