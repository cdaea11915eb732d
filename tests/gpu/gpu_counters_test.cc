// GPU tests of the hardware counters behind the work share (worker/engine/gpu/cupti_counters.h,
// work_share.h), label "gpu": kernels of known work (tests/gpu/probe/counter_kernels.cu) must
// read exactly their work, a kernel must not be able to tell a counted launch by its own speed,
// and the engine's whole counter set must group into single-pass configurations.
// Figures (configuration count, costs, cycles) go to $PTXBENCH_COUNTER_FIGURES as JSON for the
// gpu-test report.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/engine/gpu/baseline.h"
#include "worker/engine/gpu/cupti_counters.h"
#include "worker/engine/gpu/runtime.h"
#include "worker/engine/gpu/work_share.h"

namespace ptxbench::gpu {
namespace {

using nlohmann::json;

constexpr int kBlocks = 132;
constexpr int kIters = 1000;

json& Figures() {
  static json figures = json::object();
  return figures;
}

void SaveFigures() {
  const char* path = std::getenv("PTXBENCH_COUNTER_FIGURES");
  if (path == nullptr) return;
  std::ofstream(path) << Figures().dump(1);
}

std::string CubinPath() {
  if (const char* p = std::getenv("PTXBENCH_COUNTER_CUBIN")) return p;
  return PTXBENCH_COUNTER_CUBIN_DEFAULT;
}

struct Fixture {
  DeviceInfo device;
  Module module;
  DeviceBuffer sink;
  DeviceBuffer tensor;  // [4096][64] bf16 for the TMA kernel.
  std::unique_ptr<HardwareCounters> counters;
  std::unique_ptr<WorkCounterSet> set;
  Fixture() {
    auto d = InitDevice(0);
    INFO(d.status().message());
    REQUIRE(d.ok());
    device = *d;
    std::ifstream in(CubinPath(), std::ios::binary);
    REQUIRE(in.good());
    static const std::string image((std::istreambuf_iterator<char>(in)),
                                   std::istreambuf_iterator<char>());
    auto m = Module::Load(image.data());
    INFO(m.status().message());
    REQUIRE(m.ok());
    module = std::move(*m);
    auto s = DeviceBuffer::Allocate(1 << 20);
    REQUIRE(s.ok());
    sink = std::move(*s);
    auto t = DeviceBuffer::Allocate(4096 * 64 * 2);
    REQUIRE(t.ok());
    tensor = std::move(*t);
    REQUIRE(cudaMemset(tensor.get(), 0x3c, tensor.bytes()) == cudaSuccess);
    auto w = WorkCountersFor("sm_90a", DType::kBF16);
    REQUIRE(w.ok());
    set = std::make_unique<WorkCounterSet>(*w);
    auto c = HardwareCounters::Create(0, set->AllMetrics());
    INFO(c.status().message());
    REQUIRE(c.ok());
    counters = std::move(*c);
  }
};

Fixture& F() {
  static Fixture f;
  return f;
}

void Launch(const std::string& kernel, int grid, int block, int shared, std::vector<void*> args) {
  auto api = Driver();
  REQUIRE(api.ok());
  auto fn = F().module.Function(kernel);
  REQUIRE(fn.ok());
  if (shared > 0) {
    REQUIRE((*api)->FuncSetAttribute(*fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                     shared) == CUDA_SUCCESS);
  }
  REQUIRE((*api)->LaunchKernel(*fn, grid, 1, 1, block, 1, 1, shared, nullptr, args.data(),
                               nullptr) == CUDA_SUCCESS);
}

// Collects every configuration of the engine's counter set once around `launch`.
std::vector<CounterValues> CountAll(const std::function<void()>& launch) {
  std::vector<CounterValues> samples;
  for (size_t c = 0; c < F().counters->config_count(); ++c) {
    REQUIRE(F().counters->Begin(c).ok());
    launch();
    auto values = F().counters->End();
    INFO(values.status().message());
    REQUIRE(values.ok());
    samples.push_back(*values);
  }
  return samples;
}

double Value(const std::vector<CounterValues>& samples, const std::string& metric) {
  for (const CounterValues& s : samples) {
    if (auto it = s.find(metric); it != s.end()) return it->second;
  }
  FAIL("metric not collected: " << metric);
  return 0;
}

TEST_CASE("counters: the engine's counter set groups into single-pass configurations",
          "[gpu][counters]") {
  Fixture& f = F();
  CHECK(f.counters->chip() == "GH100");
  json configs = json::array();
  size_t metrics = 0;
  for (size_t c = 0; c < f.counters->config_count(); ++c) {
    configs.push_back(f.counters->config_metrics(c));
    metrics += f.counters->config_metrics(c).size();
  }
  CHECK(metrics == f.set->AllMetrics().size());
  Figures()["configurations"] = configs;
  SaveFigures();
}

TEST_CASE("counters: wgmma FLOPs and instructions are exact", "[gpu][counters]") {
  Fixture& f = F();
  int iters = kIters;
  void* sink = f.sink.get();
  auto samples = CountAll([&] { Launch("count_wgmma", kBlocks, 128, 48 * 1024, {&iters, &sink}); });
  const double expected = double{kBlocks} * kIters * 4 * 2.0 * 64 * 256 * 16;
  CHECK(Value(samples, f.set->target_matrix_flops) == Approx(expected).epsilon(1e-9));
  CHECK(Value(samples, "sm__ops_path_tensor_src_bf16_dst_fp32.sum") ==
        Approx(expected).epsilon(1e-9));
  CHECK(Value(samples, f.set->target_matrix_warp_insts) == Approx(4.0 * kBlocks * kIters * 4));
  auto share = ComputeWorkShare(*f.set, samples, expected, 1);
  REQUIRE(share.ok());
  CHECK(share->matrix.share_of_task == Approx(1.0));
  CHECK(share->matrix.share_of_executed > 0.99);
}

TEST_CASE("counters: mma.sync is counted as tensor work that is not the target's",
          "[gpu][counters]") {
  Fixture& f = F();
  int iters = kIters;
  void* sink = f.sink.get();
  auto samples = CountAll([&] { Launch("count_mma_sync", kBlocks, 256, 0, {&iters, &sink}); });
  const double expected = double{kBlocks} * 8 * kIters * 2.0 * 16 * 8 * 16;
  CHECK(Value(samples, f.set->target_matrix_flops) == 0);
  CHECK(Value(samples, "sm__ops_path_tensor_src_bf16_dst_fp32.sum") ==
        Approx(expected).epsilon(1e-9));
  auto share = ComputeWorkShare(*f.set, samples, expected, 1);
  REQUIRE(share.ok());
  CHECK(share->matrix.share_of_executed == 0);
}

TEST_CASE("counters: FFMA thread instructions are counted", "[gpu][counters]") {
  Fixture& f = F();
  int iters = kIters;
  void* sink = f.sink.get();
  auto samples = CountAll([&] { Launch("count_ffma", kBlocks, 256, 0, {&iters, &sink}); });
  const double ffma = double{kBlocks} * 256 * kIters * 2;
  const double counted = Value(samples, "sm__thread_inst_executed_pipe_fma_pred_on.sum");
  CHECK(counted >= ffma);
  CHECK(counted <= 1.05 * ffma);
}

TEST_CASE("counters: bulk tensor loads and their bytes are exact", "[gpu][counters]") {
  Fixture& f = F();
  auto api = Driver();
  REQUIRE(api.ok());
  CUtensorMap map;
  cuuint64_t dims[2] = {64, 4096};
  cuuint64_t strides[1] = {64 * 2};
  cuuint32_t box[2] = {64, 64};
  cuuint32_t element_strides[2] = {1, 1};
  REQUIRE((*api)->TensorMapEncodeTiled(
              &map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, f.tensor.get(), dims, strides, box,
              element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
              CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS);
  int iters = kIters;
  int rows = 4096;
  void* sink = f.sink.get();
  auto samples = CountAll([&] {
    Launch("count_tma", kBlocks, 128, 16 * 1024, {&map, &iters, &rows, &sink});
  });
  CHECK(Value(samples, f.set->bulk_copy_insts) == Approx(double{kBlocks} * kIters));
  CHECK(Value(samples, f.set->bulk_copy_load_bytes) == Approx(double{kBlocks} * kIters * 8192));
  CHECK(Value(samples, f.set->l2_read_bytes) >= Value(samples, f.set->bulk_copy_load_bytes));
}

TEST_CASE("counters: cuBLASLt's task GEMM does 2MNK FLOPs on HGMMA", "[gpu][counters]") {
  Fixture& f = F();
  const std::map<std::string, int64_t> axes = {{"M", 8192}, {"N", 7168}, {"K", 5120}};
  auto gemm = CreateCublasLtGemm("gemm_a_bt_bf16", axes);
  REQUIRE(gemm.ok());
  auto a = DeviceBuffer::Allocate(8192ull * 5120 * 2);
  auto b = DeviceBuffer::Allocate(7168ull * 5120 * 2);
  auto c = DeviceBuffer::Allocate(8192ull * 7168 * 2);
  REQUIRE((a.ok() && b.ok() && c.ok()));
  REQUIRE(cudaMemset(a->get(), 0x3c, a->bytes()) == cudaSuccess);
  REQUIRE(cudaMemset(b->get(), 0x3c, b->bytes()) == cudaSuccess);
  auto samples = CountAll([&] { REQUIRE((*gemm)->Run({a->get(), b->get()}, {c->get()}, 0).ok()); });
  const double flops = 2.0 * 8192 * 7168 * 5120;
  CHECK(Value(samples, f.set->target_matrix_flops) == Approx(flops).epsilon(1e-9));
  auto share = ComputeWorkShare(*f.set, samples, flops, 2.0 * (8192.0 + 7168) * 5120);
  REQUIRE(share.ok());
  CHECK(share->matrix.share_of_task == Approx(1.0));
  CHECK(share->matrix.share_of_executed > 0.99);
  Figures()["cublaslt_task_gemm"] = ToJson(*share);
  SaveFigures();
}

TEST_CASE("counters: a kernel cannot tell a counted launch by its own clock", "[gpu][counters]") {
  Fixture& f = F();
  auto cycles = DeviceBuffer::Allocate(64);
  REQUIRE(cycles.ok());
  void* out = cycles->get();
  int n = 100000;
  auto read = [&] {
    long long host[1] = {0};
    REQUIRE(cudaMemcpy(host, out, sizeof host, cudaMemcpyDeviceToHost) == cudaSuccess);
    return host[0];
  };
  std::vector<long long> plain, counted;
  for (int r = 0; r < 5; ++r) {
    Launch("clock_probe", 1, 1, 0, {&out, &n});
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    plain.push_back(read());
    REQUIRE(f.counters->Begin(static_cast<size_t>(r) % f.counters->config_count()).ok());
    Launch("clock_probe", 1, 1, 0, {&out, &n});
    REQUIRE(f.counters->End().ok());
    counted.push_back(read());
  }
  std::sort(plain.begin(), plain.end());
  std::sort(counted.begin(), counted.end());
  CHECK(static_cast<double>(counted[2]) == Approx(static_cast<double>(plain[2])).epsilon(0.01));
  Figures()["clock_probe_cycles"] = {{"plain", plain}, {"counted", counted}};
  SaveFigures();
}

}  // namespace
}  // namespace ptxbench::gpu
