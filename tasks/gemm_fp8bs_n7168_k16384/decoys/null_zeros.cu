/* PTXBENCH_PLAN
{"launches":[{"kernel":"null_zeros","grid":["ceil_div(M*N,1024)"],"block":["256"],"cluster":[],
  "dynamic_shared_bytes":"0","args":[{"tensor":"C"},{"scalar":"M"},{"scalar":"N"}]}],
 "scratch":[],"tensor_maps":[]}
*/
// DECOY for gemm_fp8bs_n7168_k16384 (sm_90a), written for PTXBench. Expected verdict:
// wrong_result.
//
// What it tries: the null kernel, C = 0, against the task's tolerance. C is small here (about
// 0.03 root-mean-square on the correctness workloads, ~0.2 on the timed one, since the scale
// products are ~1e-3), so this is the decoy that shows the all-close atol (1e-4) is small
// against |C|: with the bf16 GEMM's atol of 1e-2 most elements of the small workloads would
// pass as zeros. Relative norm of zeros = 1.
extern "C" __global__ void __launch_bounds__(256) null_zeros(unsigned short* C, int M, int N) {
  const long long total = static_cast<long long>(M) * N;
  const long long first = (static_cast<long long>(blockIdx.x) * 256 + threadIdx.x) * 4;
  for (long long i = first; i < first + 4 && i < total; ++i) C[i] = 0;
}
