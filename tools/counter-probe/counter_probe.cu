// Research probe (2026-12-01): CUPTI range-profiler hardware counters on the H200, before the
// engine used them. Build: nvcc -std=c++17 -O2 -gencode arch=compute_90a,code=sm_90a -I. \
//   tools/counter-probe/counter_probe.cu -o counter_probe -lcupti -lcublasLt -lcuda
// Run: ./counter_probe [metric ...]; ./counter_probe idle keeps a second context alive.
// Output of the runs: docs/results/2026-12-01-h200-counter-probe.txt.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cupti.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>
#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <functional>
#include "tasks/_shared/templates/ptxbench_hopper.cuh"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
using namespace ptxbench::sm90;

#define CK(x) do { auto e_ = (x); if (e_ != 0) { printf("FAIL %s = %d at %d\n", #x, (int)e_, __LINE__); exit(1);} } while (0)
#define CKP(x) do { CUptiResult r_ = (x); if (r_ != CUPTI_SUCCESS) { const char* s_; cuptiGetResultString(r_, &s_); printf("CUPTI FAIL %s: %s at %d\n", #x, s_, __LINE__); return false;} } while (0)

__global__ void wgmma_kernel(int iters, float* out) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* smem = reinterpret_cast<unsigned char*>((reinterpret_cast<size_t>(smem_raw) + 1023) & ~size_t(1023));
  for (int i = threadIdx.x; i < (8192 + 32768) / 4; i += blockDim.x) reinterpret_cast<float*>(smem)[i] = 0.001f * (i % 17);
  __syncthreads();
  float acc[128];
  for (int i = 0; i < 128; ++i) acc[i] = 0.f;
  u64 da = make_smem_desc_sw128(smem_u32(smem));
  u64 db = make_smem_desc_sw128(smem_u32(smem + 8192));
  for (int it = 0; it < iters; ++it) {
    wgmma_fence();
    for (int k = 0; k < 4; ++k) wgmma_m64n256k16_ss_bf16(acc, da + 2 * k, db + 2 * k, 1);
    wgmma_commit_group();
    wgmma_wait_group<0>();
    wgmma_fence_operand(acc);
  }
  float s = 0; for (int i = 0; i < 128; ++i) s += acc[i];
  if (s == 1234.5f) out[threadIdx.x] = s;
}

__global__ void mma_sync_kernel(int iters, float* out) {
  unsigned a0 = threadIdx.x, a1 = 3, a2 = 5, a3 = 7, b0 = 11, b1 = 13;
  float c0 = 0, c1 = 0, c2 = 0, c3 = 0;
  for (int it = 0; it < iters; ++it) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
  if (c0 + c1 + c2 + c3 == 1234.5f) out[threadIdx.x] = c0;
}

__global__ void ffma_kernel(int iters, float* out) {
  float x = threadIdx.x * 1e-3f, y = 1.0001f, z = 0.5f;
  for (int it = 0; it < iters; ++it) { x = fmaf(x, y, z); z = fmaf(z, y, x); }
  if (x + z == 1234.5f) out[threadIdx.x] = x;
}

__global__ void tma_kernel(const __grid_constant__ CUtensorMap map, int iters, float* out) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* smem = reinterpret_cast<unsigned char*>((reinterpret_cast<size_t>(smem_raw) + 1023) & ~size_t(1023));
  __shared__ u64 bar;
  if (threadIdx.x == 0) { mbarrier_init(&bar, 1); fence_mbarrier_init(); }
  __syncthreads();
  for (int it = 0; it < iters; ++it) {
    if (threadIdx.x == 0) {
      mbarrier_arrive_expect_tx(&bar, 64 * 64 * 2);
      tma_load_2d(smem, &map, &bar, 0, (blockIdx.x * iters + it) % 64 * 64);
    }
    mbarrier_wait_parity(&bar, it & 1);
  }
  if (threadIdx.x == 0 && smem[5] == 77) out[0] = 1;
}

__global__ void clock_probe_kernel(long long* cycles, int n) {
  float x = 1.f;
  long long t0 = clock64();
  for (int i = 0; i < n; ++i) x = fmaf(x, 1.0000001f, 1e-7f);
  long long t1 = clock64();
  unsigned long long g0; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g0));
  cycles[0] = t1 - t0; cycles[1] = (long long)g0;
  if (x == 1234.5f) cycles[2] = 1;
}

// ---------------- counters
struct Counters {
  std::vector<const char*> names;
  CUpti_Profiler_Host_Object* host = nullptr;
  CUpti_RangeProfiler_Object* rp = nullptr;
  std::vector<uint8_t> config, data;
  bool Init(CUcontext ctx) {
    CUpti_Profiler_Initialize_Params ip = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
    CKP(cuptiProfilerInitialize(&ip));
    CUpti_Device_GetChipName_Params cn = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};
    cn.deviceIndex = 0; CKP(cuptiDeviceGetChipName(&cn));
    printf("chip %s\n", cn.pChipName);
    CUpti_Profiler_GetCounterAvailability_Params ca = {CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE};
    ca.ctx = ctx; CKP(cuptiProfilerGetCounterAvailability(&ca));
    std::vector<uint8_t> avail(ca.counterAvailabilityImageSize); ca.pCounterAvailabilityImage = avail.data();
    CKP(cuptiProfilerGetCounterAvailability(&ca));
    CUpti_Profiler_Host_Initialize_Params hi = {CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
    hi.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER; hi.pChipName = cn.pChipName; hi.pCounterAvailabilityImage = avail.data();
    CKP(cuptiProfilerHostInitialize(&hi)); host = hi.pHostObject;
    CUpti_Profiler_Host_ConfigAddMetrics_Params am = {CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
    am.pHostObject = host; am.ppMetricNames = names.data(); am.numMetrics = names.size();
    CKP(cuptiProfilerHostConfigAddMetrics(&am));
    CUpti_Profiler_Host_GetConfigImageSize_Params gs = {CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
    gs.pHostObject = host; CKP(cuptiProfilerHostGetConfigImageSize(&gs));
    config.resize(gs.configImageSize);
    CUpti_Profiler_Host_GetConfigImage_Params gi = {CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
    gi.pHostObject = host; gi.configImageSize = config.size(); gi.pConfigImage = config.data();
    CKP(cuptiProfilerHostGetConfigImage(&gi));
    CUpti_Profiler_Host_GetNumOfPasses_Params np = {CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE};
    np.configImageSize = config.size(); np.pConfigImage = config.data();
    CKP(cuptiProfilerHostGetNumOfPasses(&np));
    printf("passes %zu (config %zu bytes)\n", np.numOfPasses, config.size());
    CUpti_RangeProfiler_Enable_Params en = {CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE};
    en.ctx = ctx; CKP(cuptiRangeProfilerEnable(&en)); rp = en.pRangeProfilerObject;
    return Configure();
  }
  bool Configure() {
    CUpti_RangeProfiler_GetCounterDataSize_Params ds = {CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE};
    ds.pRangeProfilerObject = rp; ds.pMetricNames = names.data(); ds.numMetrics = names.size();
    ds.maxNumOfRanges = 1; ds.maxNumRangeTreeNodes = 1;
    CKP(cuptiRangeProfilerGetCounterDataSize(&ds));
    data.assign(ds.counterDataSize, 0);
    CUpti_RangeProfiler_CounterDataImage_Initialize_Params di = {CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE};
    di.pRangeProfilerObject = rp; di.counterDataSize = data.size(); di.pCounterData = data.data();
    CKP(cuptiRangeProfilerCounterDataImageInitialize(&di));
    CUpti_RangeProfiler_SetConfig_Params sc = {CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE};
    sc.pRangeProfilerObject = rp; sc.configSize = config.size(); sc.pConfig = config.data();
    sc.counterDataImageSize = data.size(); sc.pCounterDataImage = data.data();
    sc.range = CUPTI_UserRange; sc.replayMode = CUPTI_UserReplay; sc.maxRangesPerPass = 1;
    sc.numNestingLevels = 1; sc.minNestingLevel = 1; sc.passIndex = 0; sc.targetNestingLevel = 1;
    CKP(cuptiRangeProfilerSetConfig(&sc));
    return true;
  }
  bool Begin() {
    CUpti_RangeProfiler_Start_Params st = {CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
    st.pRangeProfilerObject = rp; CKP(cuptiRangeProfilerStart(&st));
    CUpti_RangeProfiler_PushRange_Params pr = {CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE};
    pr.pRangeProfilerObject = rp; pr.pRangeName = "sample"; CKP(cuptiRangeProfilerPushRange(&pr));
    return true;
  }
  bool End(std::vector<double>* values) {
    CUpti_RangeProfiler_PopRange_Params pp = {CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE};
    pp.pRangeProfilerObject = rp; CKP(cuptiRangeProfilerPopRange(&pp));
    CUpti_RangeProfiler_Stop_Params sp = {CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
    sp.pRangeProfilerObject = rp; CKP(cuptiRangeProfilerStop(&sp));
    if (!sp.isAllPassSubmitted) printf("not all passes submitted\n");
    CUpti_RangeProfiler_DecodeData_Params dd = {CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE};
    dd.pRangeProfilerObject = rp; CKP(cuptiRangeProfilerDecodeData(&dd));
    if (dd.numOfRangeDropped) printf("dropped %zu\n", dd.numOfRangeDropped);
    CUpti_RangeProfiler_GetCounterDataInfo_Params ci = {CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE};
    ci.pCounterDataImage = data.data(); ci.counterDataImageSize = data.size();
    CKP(cuptiRangeProfilerGetCounterDataInfo(&ci));
    values->assign(names.size(), -1);
    if (ci.numTotalRanges < 1) { printf("no ranges\n"); return false; }
    CUpti_Profiler_Host_EvaluateToGpuValues_Params ev = {CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
    ev.pHostObject = host; ev.pCounterDataImage = data.data(); ev.counterDataImageSize = data.size();
    ev.rangeIndex = 0; ev.ppMetricNames = names.data(); ev.numMetrics = names.size(); ev.pMetricValues = values->data();
    CKP(cuptiProfilerHostEvaluateToGpuValues(&ev));
    return Configure();  // ready for the next collection
  }
};

template <class F> float TimeMs(F f) {
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  cudaEventRecord(a); f(); cudaEventRecord(b); cudaEventSynchronize(b);
  float ms; cudaEventElapsedTime(&ms, a, b); cudaEventDestroy(a); cudaEventDestroy(b); return ms;
}
float Median(std::vector<float> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

int main(int argc, char** argv) {
  printf("uid %d\n", getuid());
  CK(cudaSetDevice(0)); CK(cudaFree(0));
  if (argc > 1 && std::string(argv[1]) == "idle") { void* p; cudaMalloc(&p, 1 << 30); printf("idle context up\n"); fflush(stdout); sleep(40); return 0; }
  CUcontext ctx; CK(cuCtxGetCurrent(&ctx));
  float* out; CK(cudaMalloc(&out, 1 << 20));
  long long* cyc; CK(cudaMalloc(&cyc, 64));
  // GEMM operands for cuBLASLt (task shape).
  const int M = 8192, N = 7168, K = 5120;
  __nv_bfloat16 *A, *B, *C; void* ws;
  CK(cudaMalloc(&A, size_t(M) * K * 2)); CK(cudaMalloc(&B, size_t(N) * K * 2)); CK(cudaMalloc(&C, size_t(M) * N * 2));
  CK(cudaMalloc(&ws, 32 << 20));
  CK(cudaMemset(A, 0x3c, size_t(M) * K * 2)); CK(cudaMemset(B, 0x3c, size_t(N) * K * 2));
  cublasLtHandle_t lt; CK(cublasLtCreate(&lt));
  cublasLtMatmulDesc_t op; CK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t tr = CUBLAS_OP_T, nt = CUBLAS_OP_N;
  CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &tr, sizeof tr));
  CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &nt, sizeof nt));
  // Column-major view: C^T (N x M) = B (N x K as K x N col-major, transposed) * A^T
  cublasLtMatrixLayout_t la, lb, lc;
  CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, K, N, K));
  CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, K, M, K));
  CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, N, M, N));
  cublasLtMatmulPreference_t pref; CK(cublasLtMatmulPreferenceCreate(&pref));
  size_t wsb = 32 << 20; CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
  cublasLtMatmulHeuristicResult_t heur; int nres = 0;
  CK(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 1, &heur, &nres));
  float alpha = 1, beta = 0;
  auto gemm = [&] { CK(cublasLtMatmul(lt, op, &alpha, B, la, A, lb, &beta, C, lc, C, lc, &heur.algo, ws, wsb, 0)); };
  // TMA tensor map: bf16 [4096 rows][64 cols] box 64x64, 128B swizzle.
  CUtensorMap map; cuuint64_t dims[2] = {64, 4096}; cuuint64_t strides[1] = {64 * 2};
  cuuint32_t box[2] = {64, 64}; cuuint32_t es[2] = {1, 1};
  CK(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, A, dims, strides, box, es,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  CK(cudaFuncSetAttribute(wgmma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 48 * 1024));
  CK(cudaFuncSetAttribute(tma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 16 * 1024));
  const int kBlocks = 132, kIters = 1000;
  struct Job { const char* name; std::function<void()> run; double expect_flops; double expect_tma_bytes; };
  std::vector<Job> jobs = {
    {"wgmma_m64n256k16 x4 x1000 x132 blocks", [&] { wgmma_kernel<<<kBlocks, 128, 48 * 1024>>>(kIters, out); }, 132.0 * kIters * 4 * 2 * 64 * 256 * 16, 0},
    {"mma.sync m16n8k16 x1000, 132x256 thr", [&] { mma_sync_kernel<<<kBlocks, 256>>>(kIters, out); }, 132.0 * 8 * kIters * 2 * 16 * 8 * 16, 0},
    {"ffma x2000, 132x256 thr", [&] { ffma_kernel<<<kBlocks, 256>>>(kIters, out); }, 132.0 * 256 * kIters * 2 * 2, 0},
    {"tma 64x64 bf16 x1000 x132", [&] { tma_kernel<<<kBlocks, 128, 16 * 1024>>>(map, kIters, out); }, 0, 132.0 * kIters * 8192},
    {"cublasLt 8192x7168x5120", gemm, 2.0 * M * N * K, 0},
  };
  // Warm-up and uninstrumented timing before any CUPTI init.
  std::vector<float> before[8];
  for (int r = 0; r < 10; ++r) for (size_t j = 0; j < jobs.size(); ++j) before[j].push_back(TimeMs(jobs[j].run));
  CK(cudaDeviceSynchronize());
  std::vector<long long> clock_plain;
  for (int r = 0; r < 5; ++r) { clock_probe_kernel<<<1, 1>>>(cyc, 100000); long long h[2]; CK(cudaMemcpy(h, cyc, 16, cudaMemcpyDeviceToHost)); clock_plain.push_back(h[0]); }

  Counters c;
  c.names = {"sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32.sum", "sm__ops_path_tensor_op_hmma_src_bf16_dst_fp32.sum",
             "sm__ops_path_tensor_src_bf16_dst_fp32.sum", "sm__ops_path_tensor_src_fp16.sum", "sm__ops_path_tensor_src_fp8.sum",
             "sm__ops_path_tensor_src_tf32_dst_fp32.sum", "sm__ops_path_tensor_src_int8.sum",
             "sm__inst_executed_pipe_tensor_op_gmma.sum", "sm__inst_executed_pipe_tensor_op_hmma.sum",
             "sm__inst_executed_pipe_tma.sum", "l1tex__m_xbar2l1tex_read_bytes_mem_global_op_tma_ld.sum",
             "sm__thread_inst_executed_pipe_fma_pred_on.sum", "sm__thread_inst_executed_pipe_fp64_pred_on.sum",
             "sm__inst_executed_pipe_fmaheavy.sum", "smsp__inst_executed.sum"};
  if (argc > 1) { c.names.clear(); for (int i = 1; i < argc; ++i) c.names.push_back(argv[i]); }
  if (!c.Init(ctx)) { printf("counters unavailable\n"); return 3; }
  // Enabled but outside a range.
  std::vector<float> enabled[8];
  for (int r = 0; r < 10; ++r) for (size_t j = 0; j < jobs.size(); ++j) enabled[j].push_back(TimeMs(jobs[j].run));
  std::vector<float> counted[8];
  for (size_t j = 0; j < jobs.size(); ++j) {
    for (int r = 0; r < 3; ++r) {
      std::vector<double> v;
      if (!c.Begin()) return 4;
      float ms = TimeMs(jobs[j].run);
      CK(cudaDeviceSynchronize());
      if (!c.End(&v)) return 5;
      counted[j].push_back(ms);
      printf("COUNT %-40s rep %d  %.3f ms", jobs[j].name, r, ms);
      if (r == 0) { printf("\n"); for (size_t m = 0; m < v.size(); ++m) printf("    %-60s %.6g\n", c.names[m], v[m]); }
      else printf("  [hgmma %.6g hmma %.6g tma_bytes %.6g fma %.6g]\n", v[0], v[1], v.size() > 10 ? v[10] : 0, v.size() > 11 ? v[11] : 0);
      if (r == 0 && jobs[j].expect_flops > 0) printf("    expected flops %.6g; hgmma/flops %.4f hmma/flops %.4f tensor_bf16/flops %.4f\n", jobs[j].expect_flops, v[0] / jobs[j].expect_flops, v[1] / jobs[j].expect_flops, v[2] / jobs[j].expect_flops);
      if (r == 0 && jobs[j].expect_tma_bytes > 0 && v.size() > 10) printf("    expected tma bytes %.6g; measured/expected %.4f\n", jobs[j].expect_tma_bytes, v[10] / jobs[j].expect_tma_bytes);
    }
  }
  std::vector<long long> clock_counted;
  for (int r = 0; r < 5; ++r) {
    std::vector<double> v; c.Begin(); clock_probe_kernel<<<1, 1>>>(cyc, 100000); CK(cudaDeviceSynchronize()); c.End(&v);
    long long h[2]; CK(cudaMemcpy(h, cyc, 16, cudaMemcpyDeviceToHost)); clock_counted.push_back(h[0]);
  }
  for (size_t j = 0; j < jobs.size(); ++j)
    printf("TIME %-40s before %.4f  enabled %.4f  counted %.4f ms (medians)\n", jobs[j].name, Median(before[j]), Median(enabled[j]), Median(counted[j]));
  printf("CLOCK cycles for 100000 dependent FFMA: plain");
  for (auto x : clock_plain) printf(" %lld", x);
  printf(" | counted"); for (auto x : clock_counted) printf(" %lld", x); printf("\n");
  // Collection cost on the host (Begin..End without kernel work inside).
  { double t0 = clock(); for (int r = 0; r < 20; ++r) { std::vector<double> v; c.Begin(); ffma_kernel<<<1, 32>>>(1, out); cudaDeviceSynchronize(); c.End(&v);} printf("HOSTCOST per collection %.3f ms (cpu clock)\n", (clock() - t0) / CLOCKS_PER_SEC * 1000 / 20); }
  printf("OK\n");
  return 0;
}
