// GPU tests of the fp8 attention forward task (tasks/mha_fp8_with_lse_d128, issue 17 item 2):
// its input kinds on the device, cuDNN's fp8 SDPA baseline against the fp64 definition (the
// evidence the task's tolerance is set from), and the baseline's time. Part of gpu_runtime_test
// (label "gpu"); tag [fp8_attention]. Every figure the tolerance needs is printed as a WARN line
// starting "fp8 attention".
#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "common/task.h"
#include "tests/gpu/gpu_fixture.h"
#include "tests/support/host_reference.h"
#include "worker/engine/gpu/baseline.h"
#include "worker/engine/gpu/host_generate.h"
#include "worker/engine/gpu/philox.h"
#include "worker/engine/gpu/plan_runner.h"
#include "worker/engine/gpu/runtime.h"

// The harness's kernels (builtin_kernels.cu), for timing the baseline's O conversion alone.
extern "C" const unsigned char ptxbench_builtin_fatbin[];

namespace ptxbench::gpu {
namespace {

using ::ptxbench::testing::AllCloseFailures;
using ::ptxbench::testing::AttentionShape;
using ::ptxbench::testing::RelativeNorm;

absl::StatusOr<Task> LoadFp8AttentionTask() {
  const char* source = std::getenv("PTXBENCH_SOURCE_DIR");
  return LoadTask(std::string(source != nullptr ? source : PTXBENCH_SOURCE_DIR_DEFAULT) +
                  "/tasks/mha_fp8_with_lse_d128");
}

TEST_CASE("fp8_normal and tensor_descale on the device equal the host mirror bit for bit",
          "[gpu][fp8_attention]") {
  GpuFixture& f = SharedGpu();
  constexpr size_t kCount = 1 << 20;
  auto bytes = DeviceBuffer::Allocate(kCount);
  auto scales = DeviceBuffer::Allocate(kCount * 4);
  REQUIRE(bytes.ok());
  REQUIRE(scales.ok());
  REQUIRE(f.builtins
              ->Generate(bytes->get(), kCount, BuiltinDType::kFP8E4M3, kDistFp8Normal, 17, 1,
                         f.stream.get())
              .ok());
  REQUIRE(f.builtins
              ->Generate(scales->get(), kCount, BuiltinDType::kFP32, kDistTensorDescale, 17, 3,
                         f.stream.get())
              .ok());
  REQUIRE(SynchronizeDevice().ok());
  std::vector<uint8_t> device_bytes(kCount), host_bytes(kCount);
  std::vector<float> device_scales(kCount), host_scales(kCount);
  REQUIRE(cudaMemcpy(device_bytes.data(), bytes->get(), kCount, cudaMemcpyDeviceToHost) ==
          cudaSuccess);
  REQUIRE(cudaMemcpy(device_scales.data(), scales->get(), kCount * 4, cudaMemcpyDeviceToHost) ==
          cudaSuccess);
  HostGenerate(host_bytes.data(), kCount, static_cast<int>(BuiltinDType::kFP8E4M3), kDistFp8Normal,
               17, 1);
  HostGenerate(host_scales.data(), kCount, static_cast<int>(BuiltinDType::kFP32),
               kDistTensorDescale, 17, 3);
  CHECK(std::memcmp(device_bytes.data(), host_bytes.data(), kCount) == 0);
  CHECK(std::memcmp(device_scales.data(), host_scales.data(), kCount * 4) == 0);
  CHECK(*std::min_element(device_scales.begin(), device_scales.end()) == 0.75f / 64);
  CHECK(*std::max_element(device_scales.begin(), device_scales.end()) == 1.375f / 64);
}

// The errors of one output against fp64, at the task's all-close rule.
struct Fp8AttentionFigures {
  double relative_norm = 0, max_abs = 0, max_ref = 0, matched_ratio = 0;
};

Fp8AttentionFigures Figures(const std::vector<float>& got, const std::vector<double>& ref,
                            const Tolerance& tolerance) {
  Fp8AttentionFigures figures;
  for (size_t i = 0; i < got.size(); ++i) {
    const double error = std::abs(double{got[i]} - ref[i]);
    figures.max_abs = std::max(figures.max_abs, std::isnan(error) ? INFINITY : error);
    figures.max_ref = std::max(figures.max_ref, std::abs(ref[i]));
  }
  figures.relative_norm = RelativeNorm(got, ref);
  figures.matched_ratio =
      1.0 - static_cast<double>(AllCloseFailures(got, ref, tolerance.atol, tolerance.rtol)) /
                static_cast<double>(got.size());
  return figures;
}

std::string Line(const Fp8AttentionFigures& figures) {
  std::ostringstream out;
  out << "relative norm " << figures.relative_norm << ", max abs error " << figures.max_abs
      << " (max |ref| " << figures.max_ref << "), matched ratio " << figures.matched_ratio;
  return out.str();
}

// One draw of a workload the way the engine makes it (TensorSet, the task's distributions and
// tensor order), the baseline run on it, and the inputs and outputs on the host.
struct Fp8AttentionRun {
  AttentionShape shape;
  std::vector<uint8_t> q, k, v;
  float descale_q = 0, descale_k = 0, descale_v = 0;
  std::vector<float> o, lse;
  std::string describe;
};

Fp8AttentionRun RunBaseline(const Task& task, const Workload& w, uint64_t seed) {
  GpuFixture& f = SharedGpu();
  cudaStream_t s = f.stream.get();
  Fp8AttentionRun run;
  run.shape.b = static_cast<int>(w.axes.at("B"));
  run.shape.h = static_cast<int>(w.axes.at("H"));
  run.shape.s = static_cast<int>(w.axes.at("S"));
  run.shape.d = static_cast<int>(w.axes.at("D"));
  auto resolved = ResolveTensors(task, w);
  REQUIRE(resolved.ok());
  auto tensors = TensorSet::Allocate(std::move(*resolved));
  REQUIRE(tensors.ok());
  REQUIRE(tensors->GenerateInputs(*f.builtins, seed, s).ok());
  REQUIRE(tensors->PoisonOutputs(*f.builtins, s).ok());
  auto baseline = CreateBaseline(task.baseline_library, task.baseline_operation, w.axes);
  INFO(baseline.status().message());
  REQUIRE(baseline.ok());
  const absl::Status ran = (*baseline)->Run(tensors->InputPointers(), tensors->OutputPointers(), s);
  INFO(ran.message());
  REQUIRE(ran.ok());
  REQUIRE(SynchronizeDevice().ok());
  run.describe = (*baseline)->Describe().dump();
  const std::vector<const void*> in = tensors->InputPointers();
  REQUIRE(in.size() == 6);
  const size_t n = run.shape.Elements();
  for (auto [host, index] : {std::pair{&run.q, 0}, {&run.k, 1}, {&run.v, 2}}) {
    host->resize(n);
    REQUIRE(cudaMemcpy(host->data(), in[index], n, cudaMemcpyDeviceToHost) == cudaSuccess);
  }
  for (auto [host, index] :
       {std::pair{&run.descale_q, 3}, {&run.descale_k, 4}, {&run.descale_v, 5}}) {
    REQUIRE(cudaMemcpy(host, in[index], 4, cudaMemcpyDeviceToHost) == cudaSuccess);
  }
  auto o_bytes = tensors->DownloadOutput(0, s);
  auto lse_bytes = tensors->DownloadOutput(1, s);
  REQUIRE(o_bytes.ok());
  REQUIRE(lse_bytes.ok());
  REQUIRE(o_bytes->size() == n * 2);
  REQUIRE(lse_bytes->size() == run.shape.Rows() * 4);
  run.o.resize(n);
  for (size_t i = 0; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, o_bytes->data() + 2 * i, 2);
    run.o[i] = Bf16ToFloat(bits);
  }
  run.lse.resize(run.shape.Rows());
  std::memcpy(run.lse.data(), lse_bytes->data(), lse_bytes->size());
  return run;
}

// Issue 17 item 2: cuDNN's fp8 SDPA forward on the task's correctness workloads, drawn as the
// engine draws them, against the fp64 definition (P not quantized). The WARN lines are the
// "library vs fp64" figures the task's tolerance is set from (docs/task-authoring.md, "The fp8
// attention forward task"), next to the host model of a library that rounds P (x256) and, when
// the baseline writes e4m3 O, O to e4m3: cuDNN should land near the model.
TEST_CASE("cuDNN's fp8 SDPA forward matches the fp64 reference on the fp8 attention workloads",
          "[gpu][cudnn][fp8_attention]") {
  auto task = LoadFp8AttentionTask();
  INFO(task.status().message());
  REQUIRE(task.ok());
  REQUIRE(task->baseline_operation == kSdpaFp8DequantForwardOperation);
  uint64_t seed = 70;
  for (const Workload& w : task->workloads) {
    if (w.timed) continue;
    for (int trial = 0; trial < 2; ++trial) {
      const Fp8AttentionRun run = RunBaseline(*task, w, ++seed);
      const double scale = 1.0 / std::sqrt(static_cast<double>(run.shape.d));
      std::vector<double> o, lse;
      ::ptxbench::testing::AttentionFp8Forward(run.shape, scale, run.q, run.k, run.v, run.descale_q,
                                               run.descale_k, run.descale_v, o, lse);
      const bool o_e4m3 = run.describe.find("\"o_extra_rounding\"") != std::string::npos;
      std::vector<double> model_o, model_lse;
      ::ptxbench::testing::AttentionFp8ForwardQuantized(run.shape, scale, run.q, run.k, run.v,
                                                        run.descale_q, run.descale_k, run.descale_v,
                                                        256.0, o_e4m3, model_o, model_lse);
      const std::vector<float> model_o_f(model_o.begin(), model_o.end());
      const Fp8AttentionFigures o_figures = Figures(run.o, o, task->tolerance);
      const Fp8AttentionFigures lse_figures = Figures(run.lse, lse, task->tolerance);
      const Fp8AttentionFigures model_figures = Figures(model_o_f, o, task->tolerance);
      WARN("fp8 attention cudnn vs fp64, workload "
           << w.name << " trial " << trial << " (descales q " << run.descale_q * 64 << "/64, k "
           << run.descale_k * 64 << "/64, v " << run.descale_v * 64 << "/64): O " << Line(o_figures)
           << "; LSE " << Line(lse_figures) << "; host model (P e4m3 x256"
           << (o_e4m3 ? ", O e4m3" : "") << ") O " << Line(model_figures) << "; baseline "
           << run.describe.substr(0, 600));
      // The checker compares a kernel with the library: an exact kernel shows the library's own
      // error, which the tolerance must accept.
      CHECK(o_figures.relative_norm < task->tolerance.max_relative_norm);
      CHECK(lse_figures.relative_norm < task->tolerance.max_relative_norm);
      CHECK(o_figures.matched_ratio >= task->tolerance.matched_ratio);
      CHECK(lse_figures.matched_ratio >= task->tolerance.matched_ratio);
      // cuDNN computes the task: within 3x of the host model's error (a wrong descale, a
      // missing scale or a wrong layout lands at relative norm ~1).
      CHECK(o_figures.relative_norm < 3 * model_figures.relative_norm + 1e-3);
      // 1.29e-5 at most on the H100 (2026-12-06, S = 128): LSE stays fp32-accurate.
      CHECK(lse_figures.relative_norm < 5e-5);
    }
  }
}

// The timed shape (B=4, H=48, S=4096, D=128): which configurations finalize (the fair
// baseline's candidates), each one's median time, two heads against fp64, the bf16 forward on
// the same shape for comparison, and the O conversion's own time when cuDNN writes e4m3 O.
TEST_CASE("cuDNN's fp8 SDPA forward on the timed workload: candidates, time, two heads vs fp64",
          "[gpu][cudnn][fp8_attention]") {
  GpuFixture& f = SharedGpu();
  cudaStream_t s = f.stream.get();
  auto task = LoadFp8AttentionTask();
  REQUIRE(task.ok());
  const Workload& w = task->TimedWorkload();
  auto resolved = ResolveTensors(*task, w);
  REQUIRE(resolved.ok());
  auto tensors = TensorSet::Allocate(std::move(*resolved));
  REQUIRE(tensors.ok());
  REQUIRE(tensors->GenerateInputs(*f.builtins, 5, s).ok());
  auto candidates = CreateBaselineCandidates("cudnn", kSdpaFp8ForwardOperation, w.axes, 8);
  INFO(candidates.status().message());
  REQUIRE(candidates.ok());
  REQUIRE(!candidates->empty());
  WARN("fp8 attention cudnn candidates finalized on the timed shape: " << candidates->size());
  const double flops = 4.0 * 4 * 48 * 4096.0 * 4096.0 * 128;
  auto median_ms = [&](const std::function<absl::Status()>& run) {
    for (int i = 0; i < 3; ++i) REQUIRE(run().ok());
    std::vector<double> ms;
    for (int i = 0; i < 15; ++i) {
      REQUIRE(f.builtins->FlushL2(s).ok());
      auto start = Event::Create();
      auto end = Event::Create();
      REQUIRE(cudaEventRecord(start->get(), s) == cudaSuccess);
      REQUIRE(run().ok());
      REQUIRE(cudaEventRecord(end->get(), s) == cudaSuccess);
      auto elapsed = ElapsedMs(*start, *end);
      REQUIRE(elapsed.ok());
      ms.push_back(*elapsed);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  };
  for (size_t c = 0; c < candidates->size(); ++c) {
    Baseline& baseline = *(*candidates)[c];
    const double ms = median_ms(
        [&] { return baseline.Run(tensors->InputPointers(), tensors->OutputPointers(), s); });
    WARN("fp8 attention cudnn sdpa_fwd_fp8 candidate "
         << c << " B=4 H=48 S=4096 D=128: median " << ms << " ms, " << flops / (ms * 1e-3) / 1e12
         << " TFLOP/s; " << baseline.Describe().dump());
    CHECK(ms > 0);
  }

  // Two heads of candidate 0's output against fp64 (the first and the last: every (b, h) slice
  // is its own attention problem).
  Baseline& first = *(*candidates)[0];
  REQUIRE(first.Run(tensors->InputPointers(), tensors->OutputPointers(), s).ok());
  REQUIRE(SynchronizeDevice().ok());
  const std::vector<const void*> in = tensors->InputPointers();
  const size_t head = 4096 * 128;
  float descale[3];
  for (int i = 0; i < 3; ++i) {
    REQUIRE(cudaMemcpy(&descale[i], in[3 + i], 4, cudaMemcpyDeviceToHost) == cudaSuccess);
  }
  auto o_bytes = tensors->DownloadOutput(0, s);
  auto lse_bytes = tensors->DownloadOutput(1, s);
  REQUIRE(o_bytes.ok());
  REQUIRE(lse_bytes.ok());
  for (size_t slice : {size_t{0}, size_t{4 * 48 - 1}}) {
    AttentionShape one{1, 1, 4096, 128, false};
    std::vector<uint8_t> q(head), k(head), v(head);
    for (auto [host, index] : {std::pair{&q, 0}, {&k, 1}, {&v, 2}}) {
      REQUIRE(cudaMemcpy(host->data(), static_cast<const uint8_t*>(in[index]) + slice * head, head,
                         cudaMemcpyDeviceToHost) == cudaSuccess);
    }
    std::vector<double> o, lse;
    ::ptxbench::testing::AttentionFp8Forward(one, 1.0 / std::sqrt(128.0), q, k, v, descale[0],
                                             descale[1], descale[2], o, lse);
    std::vector<float> got_o(head), got_lse(4096);
    for (size_t i = 0; i < head; ++i) {
      uint16_t bits;
      std::memcpy(&bits, o_bytes->data() + 2 * (slice * head + i), 2);
      got_o[i] = Bf16ToFloat(bits);
    }
    std::memcpy(got_lse.data(), lse_bytes->data() + 4 * slice * 4096, 4 * 4096);
    const Fp8AttentionFigures o_figures = Figures(got_o, o, task->tolerance);
    const Fp8AttentionFigures lse_figures = Figures(got_lse, lse, task->tolerance);
    WARN("fp8 attention cudnn vs fp64, timed workload, head slice "
         << slice << ": O " << Line(o_figures) << "; LSE " << Line(lse_figures));
    CHECK(o_figures.relative_norm < task->tolerance.max_relative_norm);
    CHECK(o_figures.matched_ratio >= task->tolerance.matched_ratio);
    CHECK(lse_figures.relative_norm < 5e-5);
  }

  // The bf16 forward on the same shape (inputs N(0,1)), for the fp8/bf16 comparison.
  {
    const size_t n = size_t{4} * 48 * 4096 * 128;
    auto q = DeviceBuffer::Allocate(n * 2), k = DeviceBuffer::Allocate(n * 2),
         v = DeviceBuffer::Allocate(n * 2), o = DeviceBuffer::Allocate(n * 2),
         lse = DeviceBuffer::Allocate(size_t{4} * 48 * 4096 * 4);
    for (auto [buffer, index] : {std::pair{&q, 0}, {&k, 1}, {&v, 2}}) {
      REQUIRE(
          f.builtins->Generate((*buffer)->get(), n, BuiltinDType::kBF16, kDistNormal, 3, index, s)
              .ok());
    }
    auto bf16 = CreateBaseline("cudnn", "sdpa_fwd_bf16", w.axes);
    REQUIRE(bf16.ok());
    const double ms = median_ms([&] {
      return (*bf16)->Run({q->get(), k->get(), v->get()}, {o->get(), lse->get()}, s);
    });
    WARN("fp8 attention: for comparison, cudnn sdpa_fwd_bf16 on the same shape: median "
         << ms << " ms, " << flops / (ms * 1e-3) / 1e12 << " TFLOP/s");
  }

  // The O conversion alone (what the baseline adds when cuDNN writes e4m3 O): 100.7 M elements,
  // 302 MB moved.
  {
    const uint64_t n = uint64_t{4} * 48 * 4096 * 128;
    auto module = Module::Load(ptxbench_builtin_fatbin);
    REQUIRE(module.ok());
    auto convert = module->Function("ptxbench_e4m3_to_bf16_scaled");
    REQUIRE(convert.ok());
    auto in8 = DeviceBuffer::Allocate(n), out16 = DeviceBuffer::Allocate(n * 2);
    REQUIRE(
        f.builtins->Generate(in8->get(), n, BuiltinDType::kFP8E4M3, kDistFp8Normal, 9, 0, s).ok());
    const void* source = in8->get();
    const void* factor = in[5];
    void* target = out16->get();
    uint64_t count = n;
    void* args[] = {&source, &factor, &target, &count};
    auto driver = Driver();
    REQUIRE(driver.ok());
    const unsigned grid = static_cast<unsigned>((n / 16 + 255) / 256);
    const double ms = median_ms([&]() -> absl::Status {
      if ((*driver)->LaunchKernel(*convert, grid, 1, 1, 256, 1, 1, 0, reinterpret_cast<CUstream>(s),
                                  args, nullptr) != CUDA_SUCCESS) {
        return absl::InternalError("launch failed");
      }
      return absl::OkStatus();
    });
    WARN("fp8 attention: the e4m3 -> bf16 O conversion alone on the timed shape: median "
         << ms << " ms (" << 3.0 * n / (ms * 1e-3) / 1e12 << " TB/s)");
    // Exact: every e4m3 value times a (1 + m/8)·2^-6 descale is a bf16 value.
    std::vector<uint8_t> bytes(4096);
    std::vector<uint16_t> converted(4096);
    REQUIRE(cudaMemcpy(bytes.data(), in8->get(), 4096, cudaMemcpyDeviceToHost) == cudaSuccess);
    REQUIRE(cudaMemcpy(converted.data(), out16->get(), 8192, cudaMemcpyDeviceToHost) ==
            cudaSuccess);
    size_t inexact = 0;
    for (size_t i = 0; i < bytes.size(); ++i) {
      const double expected = double{::ptxbench::testing::DecodeE4M3(bytes[i])} * descale[2];
      if (double{Bf16ToFloat(converted[i])} != expected) ++inexact;
    }
    CHECK(inexact == 0);
  }
}

// Q, K, V (inputs 0..2, e4m3) times their descales (inputs 3..5), decoded on the host and written
// as bf16 into `targets`: exact (an e4m3 value times a tensor_descale fits bf16's 8 significant
// bits), so cuDNN's bf16 forward on them computes the fp8 task's definition with P in bf16.
void DequantizeOnHost(const std::vector<const void*>& in, size_t n,
                      const std::array<DeviceBuffer*, 3>& targets) {
  REQUIRE(SynchronizeDevice().ok());  // The copies run on the legacy stream.
  std::vector<uint8_t> codes(n);
  std::vector<uint16_t> bits(n);
  for (int index = 0; index < 3; ++index) {
    float descale = 0;
    REQUIRE(cudaMemcpy(&descale, in[3 + index], 4, cudaMemcpyDeviceToHost) == cudaSuccess);
    REQUIRE(cudaMemcpy(codes.data(), in[index], n, cudaMemcpyDeviceToHost) == cudaSuccess);
    for (size_t i = 0; i < n; ++i) {
      const float value = ::ptxbench::testing::DecodeE4M3(codes[i]) * descale;
      uint32_t word;
      std::memcpy(&word, &value, 4);
      bits[i] = static_cast<uint16_t>(word >> 16);
    }
    REQUIRE(cudaMemcpy(targets[index]->get(), bits.data(), n * 2, cudaMemcpyHostToDevice) ==
            cudaSuccess);
  }
}

// The bf16 forward's buffers at the timed shape: Q, K, V (`n` elements each, filled by
// DequantizeOnHost), O and LSE.
struct TimedBf16Buffers {
  DeviceBuffer q, k, v, o, lse;
};
TimedBf16Buffers AllocateTimedBf16(size_t n) {
  TimedBf16Buffers b;
  for (auto [buffer, bytes] : {std::pair{&b.q, n * 2},
                               {&b.k, n * 2},
                               {&b.v, n * 2},
                               {&b.o, n * 2},
                               {&b.lse, size_t{4} * 48 * 4096 * 4}}) {
    auto allocated = DeviceBuffer::Allocate(bytes);
    REQUIRE(allocated.ok());
    *buffer = std::move(*allocated);
  }
  return b;
}

// Every 128-row block of cuDNN's fp8 output on the timed workload, against cuDNN's bf16 forward
// on the same inputs dequantized (e4m3 x (1 + m/8) 2^-6 is exact in bf16): the engine's first
// run on an H100 (2026-12-06) saw whole blocks of the fp8 reference far off (relative norm ~1,
// a few of 24,576 blocks, different ones in different trials) while the two head slices above
// agreed with fp64. Three seeds; each runs the fp8 forward twice on the same inputs, so a
// difference between the runs says the baseline is not deterministic. On the H100 (2026-12-06)
// every block of three seeds was within 0.2 of the bf16 forward: cuDNN alone is clean, and the
// engine's far blocks (values that are e4m3 codes of N(0, 64^2) times descale_v, i.e. stale fp8
// data converted as O) come from elsewhere; docs/task-authoring.md, the fp8 task's status.
// `ordinal`: which finalizable cuDNN configuration; `contended`: the bf16 forward runs again and
// again on a second stream meanwhile, as a candidate's kernels run beside the reference process
// in the correctness stage.
// `required`: far blocks fail the test; otherwise they are reported only (configuration 1: on
// the H100, 2026-12-06, 273-499 of 6,144 blocks far off and 1,644-1,926 blocks differing
// between two runs of the same inputs; the fair baseline's eligibility rule, which compares
// every candidate's output with configuration 0's, keeps such a candidate out of the timing).
void CheckFp8Blocks(int ordinal, bool contended, bool required = true) {
  GpuFixture& f = SharedGpu();
  cudaStream_t s = f.stream.get();
  auto task = LoadFp8AttentionTask();
  REQUIRE(task.ok());
  const Workload& w = task->TimedWorkload();
  auto resolved = ResolveTensors(*task, w);
  REQUIRE(resolved.ok());
  auto tensors = TensorSet::Allocate(std::move(*resolved));
  REQUIRE(tensors.ok());
  auto candidates = CreateBaselineCandidates("cudnn", kSdpaFp8ForwardOperation, w.axes, 8);
  REQUIRE(candidates.ok());
  REQUIRE(static_cast<int>(candidates->size()) > ordinal);
  Baseline& fp8 = *(*candidates)[static_cast<size_t>(ordinal)];
  auto bf16 = CreateBaseline("cudnn", "sdpa_fwd_bf16", w.axes);
  REQUIRE(bf16.ok());
  const size_t n = size_t{4} * 48 * 4096 * 128;
  const size_t block = 128 * 128;
  auto q16 = DeviceBuffer::Allocate(n * 2), k16 = DeviceBuffer::Allocate(n * 2),
       v16 = DeviceBuffer::Allocate(n * 2), o16 = DeviceBuffer::Allocate(n * 2),
       lse16 = DeviceBuffer::Allocate(size_t{4} * 48 * 4096 * 4),
       noise_o = DeviceBuffer::Allocate(n * 2),
       noise_lse = DeviceBuffer::Allocate(size_t{4} * 48 * 4096 * 4);
  REQUIRE(q16.ok());
  REQUIRE(k16.ok());
  REQUIRE(v16.ok());
  REQUIRE(o16.ok());
  REQUIRE(lse16.ok());
  REQUIRE(noise_o.ok());
  REQUIRE(noise_lse.ok());
  auto noise_stream = Stream::Create();
  REQUIRE(noise_stream.ok());
  auto download_bf16 = [&](const void* device) {
    std::vector<uint16_t> bits(n);
    REQUIRE(cudaMemcpy(bits.data(), device, n * 2, cudaMemcpyDeviceToHost) == cudaSuccess);
    std::vector<float> values(n);
    for (size_t i = 0; i < n; ++i) values[i] = Bf16ToFloat(bits[i]);
    return values;
  };
  for (uint64_t seed : {21, 22, 23}) {
    REQUIRE(tensors->GenerateInputs(*f.builtins, seed, s).ok());
    // The copies below run on the legacy stream, which does not wait for a non-blocking one.
    REQUIRE(SynchronizeDevice().ok());
    const std::vector<const void*> in = tensors->InputPointers();
    // The dequantized inputs, exact in bf16 (also the contention's inputs).
    DequantizeOnHost(in, n, {&*q16, &*k16, &*v16});
    REQUIRE(SynchronizeDevice().ok());
    if (contended) {
      for (int i = 0; i < 3; ++i) {
        REQUIRE((*bf16)
                    ->Run({q16->get(), k16->get(), v16->get()}, {noise_o->get(), noise_lse->get()},
                          noise_stream->get())
                    .ok());
      }
    }
    REQUIRE(fp8.Run(in, tensors->OutputPointers(), s).ok());
    REQUIRE(SynchronizeDevice().ok());
    const std::vector<float> first = download_bf16(tensors->OutputPointers()[0]);
    REQUIRE(fp8.Run(in, tensors->OutputPointers(), s).ok());
    REQUIRE(SynchronizeDevice().ok());
    const std::vector<float> second = download_bf16(tensors->OutputPointers()[0]);
    size_t runs_differ = 0;
    for (size_t b = 0; b < n / block; ++b) {
      if (std::memcmp(&first[b * block], &second[b * block], block * sizeof(float)) != 0) {
        ++runs_differ;
      }
    }
    REQUIRE((*bf16)->Run({q16->get(), k16->get(), v16->get()}, {o16->get(), lse16->get()}, s).ok());
    REQUIRE(SynchronizeDevice().ok());
    const std::vector<float> reference = download_bf16(o16->get());
    size_t far_blocks = 0;
    double worst = 0;
    size_t worst_block = 0;
    std::ostringstream far_list;
    for (size_t b = 0; b < n / block; ++b) {
      double err = 0, norm = 0;
      for (size_t i = b * block; i < (b + 1) * block; ++i) {
        err += (double{first[i]} - reference[i]) * (double{first[i]} - reference[i]);
        norm += double{reference[i]} * reference[i];
      }
      const double rn = std::sqrt(err / std::max(norm, 1e-30));
      if (rn > worst) {
        worst = rn;
        worst_block = b;
      }
      if (rn > 0.2) {
        if (far_blocks < 8) far_list << " " << b << " (" << rn << ")";
        ++far_blocks;
      }
    }
    WARN("fp8 attention timed blocks, configuration "
         << ordinal << (contended ? ", contended" : ", alone") << ", seed " << seed
         << ": fp8 vs bf16-on-dequantized worst block " << worst_block << " relative norm " << worst
         << "; " << far_blocks << " of " << n / block << " blocks over 0.2:" << far_list.str()
         << "; blocks differing between two fp8 runs: " << runs_differ);
    if (required) CHECK(far_blocks == 0);
  }
}

TEST_CASE("cuDNN's fp8 SDPA forward on the timed workload: every block against the bf16 forward",
          "[gpu][cudnn][fp8_attention][fp8_blocks]") {
  CheckFp8Blocks(0, false);
}

TEST_CASE("cuDNN's fp8 SDPA forward on the timed workload beside other kernels, per configuration",
          "[gpu][cudnn][fp8_attention][fp8_blocks]") {
  CheckFp8Blocks(0, true);
  CheckFp8Blocks(1, true, /*required=*/false);
}

// The reference process's order, in one process: every workload's baseline (configuration 0,
// outputs poisoned first, as reference_mode.cc does), the correctness workloads first, then
// the timed one under three seeds, each checked block by block against the bf16 forward on the
// dequantized inputs. The engine's reference showed far-off blocks of cuDNN's fp8 forward on
// the timed workload (docs/task-authoring.md) where the alone/contended cases above did not,
// which is why the task's baseline is the dequantizing path (kSdpaFp8DequantForwardOperation).
// This case reproduced them on the H200 (2026-12-07, run 19: seed 43, 2 of 6144 blocks at
// relative norms 4.2 and 2.8), so it asserts what the product relies on: the dequantizing
// baseline, run on the same inputs in the same order, has no far block. cuDNN's own fp8
// forward is measured and reported (WARN), not required.
TEST_CASE("cuDNN's fp8 SDPA forward in the reference process's order of workloads",
          "[gpu][cudnn][fp8_attention][fp8_blocks]") {
  GpuFixture& f = SharedGpu();
  cudaStream_t s = f.stream.get();
  auto task = LoadFp8AttentionTask();
  REQUIRE(task.ok());
  for (const Workload& w : task->workloads) {
    if (w.timed) continue;
    auto resolved = ResolveTensors(*task, w);
    REQUIRE(resolved.ok());
    auto set = TensorSet::Allocate(std::move(*resolved));
    REQUIRE(set.ok());
    auto baseline = CreateBaseline("cudnn", kSdpaFp8ForwardOperation, w.axes);
    REQUIRE(baseline.ok());
    for (uint64_t seed : {31, 32}) {
      REQUIRE(set->GenerateInputs(*f.builtins, seed, s).ok());
      REQUIRE(set->PoisonOutputs(*f.builtins, s).ok());
      REQUIRE((*baseline)->Run(set->InputPointers(), set->OutputPointers(), s).ok());
    }
    REQUIRE(SynchronizeDevice().ok());
  }
  const Workload& w = task->TimedWorkload();
  auto resolved = ResolveTensors(*task, w);
  REQUIRE(resolved.ok());
  auto set = TensorSet::Allocate(std::move(*resolved));
  REQUIRE(set.ok());
  auto fp8 = CreateBaseline("cudnn", kSdpaFp8ForwardOperation, w.axes);
  REQUIRE(fp8.ok());
  auto bf16 = CreateBaseline("cudnn", "sdpa_fwd_bf16", w.axes);
  REQUIRE(bf16.ok());
  auto dequant = CreateBaseline("cudnn", kSdpaFp8DequantForwardOperation, w.axes);
  INFO(dequant.status().message());
  REQUIRE(dequant.ok());
  const size_t n = size_t{4} * 48 * 4096 * 128;
  const size_t block = 128 * 128;
  auto [q16, k16, v16, o16, lse16] = AllocateTimedBf16(n);
  // Relative norm of each 128x128 block of `got` against `want`; returns the blocks over 0.2.
  auto far_blocks_of = [&](const std::vector<uint16_t>& got, const std::vector<uint16_t>& want,
                           double* worst, std::ostringstream* far_list) {
    size_t far_blocks = 0;
    for (size_t b = 0; b < n / block; ++b) {
      double err = 0, norm = 0;
      for (size_t i = b * block; i < (b + 1) * block; ++i) {
        const double g = Bf16ToFloat(got[i]), r = Bf16ToFloat(want[i]);
        err += (g - r) * (g - r);
        norm += r * r;
      }
      const double rn = std::sqrt(err / std::max(norm, 1e-30));
      *worst = std::max(*worst, rn);
      if (rn > 0.2) {
        if (far_blocks < 8) *far_list << " " << b << " (" << rn << ")";
        ++far_blocks;
      }
    }
    return far_blocks;
  };
  auto download_o = [&] {
    std::vector<uint16_t> bits(n);
    REQUIRE(cudaMemcpy(bits.data(), set->OutputPointers()[0], n * 2, cudaMemcpyDeviceToHost) ==
            cudaSuccess);
    return bits;
  };
  size_t fp8_far_total = 0;
  for (uint64_t seed : {41, 42, 43}) {
    REQUIRE(set->GenerateInputs(*f.builtins, seed, s).ok());
    REQUIRE(set->PoisonOutputs(*f.builtins, s).ok());
    REQUIRE((*fp8)->Run(set->InputPointers(), set->OutputPointers(), s).ok());
    REQUIRE(SynchronizeDevice().ok());
    const std::vector<uint16_t> got_fp8 = download_o();
    REQUIRE(set->PoisonOutputs(*f.builtins, s).ok());
    REQUIRE((*dequant)->Run(set->InputPointers(), set->OutputPointers(), s).ok());
    REQUIRE(SynchronizeDevice().ok());
    const std::vector<uint16_t> got_dequant = download_o();
    DequantizeOnHost(set->InputPointers(), n, {&q16, &k16, &v16});
    REQUIRE((*bf16)->Run({q16.get(), k16.get(), v16.get()}, {o16.get(), lse16.get()}, s).ok());
    REQUIRE(SynchronizeDevice().ok());
    std::vector<uint16_t> want(n);
    REQUIRE(cudaMemcpy(want.data(), o16.get(), n * 2, cudaMemcpyDeviceToHost) == cudaSuccess);
    double worst_fp8 = 0, worst_dequant = 0;
    std::ostringstream fp8_list, dequant_list;
    const size_t fp8_far = far_blocks_of(got_fp8, want, &worst_fp8, &fp8_list);
    const size_t dequant_far = far_blocks_of(got_dequant, want, &worst_dequant, &dequant_list);
    fp8_far_total += fp8_far;
    WARN("fp8 attention timed blocks in the reference process's order, seed "
         << seed << ": cuDNN fp8 forward worst block relative norm " << worst_fp8 << "; " << fp8_far
         << " blocks over 0.2:" << fp8_list.str() << " | dequantizing baseline worst block "
         << worst_dequant << "; " << dequant_far << " blocks over 0.2:" << dequant_list.str());
    CHECK(dequant_far == 0);
  }
  WARN("cuDNN's fp8 forward (not the baseline): " << fp8_far_total
                                                  << " far blocks over seeds 41-43");
}

// The task's baseline (kSdpaFp8DequantForwardOperation: Q, K, V dequantized on the device, then
// cuDNN's bf16 forward) on the timed workload: two runs on the same inputs, outputs and scratch
// poisoned before each, are equal bit for bit, and equal to cuDNN's bf16 forward on the inputs
// dequantized on the host. It replaced cuDNN's fp8 forward because that one did not reproduce
// its own output in the evaluator (docs/task-authoring.md).
TEST_CASE(
    "the fp8 attention task's baseline reproduces itself and is the bf16 forward of the "
    "dequantized inputs",
    "[gpu][cudnn][fp8_attention][fp8_blocks]") {
  GpuFixture& f = SharedGpu();
  cudaStream_t s = f.stream.get();
  auto task = LoadFp8AttentionTask();
  REQUIRE(task.ok());
  REQUIRE(task->baseline_operation == kSdpaFp8DequantForwardOperation);
  const Workload& w = task->TimedWorkload();
  auto resolved = ResolveTensors(*task, w);
  REQUIRE(resolved.ok());
  auto set = TensorSet::Allocate(std::move(*resolved));
  REQUIRE(set.ok());
  auto baseline = CreateBaseline("cudnn", task->baseline_operation, w.axes);
  INFO(baseline.status().message());
  REQUIRE(baseline.ok());
  auto bf16 = CreateBaseline("cudnn", "sdpa_fwd_bf16", w.axes);
  REQUIRE(bf16.ok());
  const size_t n = size_t{4} * 48 * 4096 * 128;
  auto [q16, k16, v16, o16, lse16] = AllocateTimedBf16(n);
  auto run = [&] {
    REQUIRE((*baseline)->PoisonScratch(s).ok());
    REQUIRE(set->PoisonOutputs(*f.builtins, s).ok());
    REQUIRE((*baseline)->Run(set->InputPointers(), set->OutputPointers(), s).ok());
    REQUIRE(SynchronizeDevice().ok());
    auto o = set->DownloadOutput(0, s);
    auto lse = set->DownloadOutput(1, s);
    REQUIRE(o.ok());
    REQUIRE(lse.ok());
    return std::make_pair(*o, *lse);
  };
  for (uint64_t seed : {51, 52}) {
    REQUIRE(set->GenerateInputs(*f.builtins, seed, s).ok());
    REQUIRE(SynchronizeDevice().ok());
    const auto first = run();
    const auto second = run();
    CHECK(first.first == second.first);
    CHECK(first.second == second.second);
    DequantizeOnHost(set->InputPointers(), n, {&q16, &k16, &v16});
    REQUIRE((*bf16)->Run({q16.get(), k16.get(), v16.get()}, {o16.get(), lse16.get()}, s).ok());
    REQUIRE(SynchronizeDevice().ok());
    std::string o(n * 2, '\0'), lse(size_t{4} * 48 * 4096 * 4, '\0');
    REQUIRE(cudaMemcpy(o.data(), o16.get(), o.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
    REQUIRE(cudaMemcpy(lse.data(), lse16.get(), lse.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
    WARN("fp8 attention baseline (dequantize, bf16 forward), seed "
         << seed << ": two runs equal " << (first.first == second.first) << ", equal to the bf16 "
         << "forward of the host-dequantized inputs " << (first.first == o && first.second == lse)
         << "; " << (*baseline)->Describe().dump().substr(0, 400));
    CHECK(first.first == o);
    CHECK(first.second == lse);
  }
}

}  // namespace
}  // namespace ptxbench::gpu
