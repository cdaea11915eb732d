// GPU tests of the evaluator's runtime layer (label "gpu": scripts/gpu-test runs them on the
// GPU machine; CPU CI excludes them). Each case checks one property the evaluation relies on.
#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/task.h"
#include "tests/gpu/gpu_fixture.h"
#include "tests/support/host_reference.h"
#include "worker/engine/gpu/baseline.h"
#include "worker/engine/gpu/host_generate.h"
#include "worker/engine/gpu/philox.h"
#include "worker/engine/gpu/plan_runner.h"
#include "worker/engine/gpu/runtime.h"
#include "worker/engine/gpu/sketch.h"
#include "worker/engine/gpu/timing.h"

namespace ptxbench::gpu {
namespace {

using ::ptxbench::testing::AllCloseFailures;
using ::ptxbench::testing::RelativeNorm;

TEST_CASE("the device initializes with the evaluator's limits", "[gpu]") {
  GpuFixture& f = SharedGpu();
  CHECK(f.device.cc_major >= 9);
  CHECK(f.device.sm_count > 0);
  CHECK(f.device.l2_bytes > 0);
  CHECK(f.builtins->flush_bytes() >= 2 * static_cast<size_t>(f.device.l2_bytes));
  size_t printf_fifo = 0, heap = 0, persisting = 1;
  REQUIRE(cudaDeviceGetLimit(&printf_fifo, cudaLimitPrintfFifoSize) == cudaSuccess);
  REQUIRE(cudaDeviceGetLimit(&heap, cudaLimitMallocHeapSize) == cudaSuccess);
  // Asked 64 KiB and 1 MiB; the H200's driver rounds up to floors of 512 KiB and 4 MiB
  // (seen 2026-11-30), still half its defaults of 1 MiB and 8 MiB.
  CHECK(printf_fifo <= (512u << 10));
  CHECK(heap <= (4u << 20));
  if (f.device.persisting_l2_max_bytes > 0) {
    REQUIRE(cudaDeviceGetLimit(&persisting, cudaLimitPersistingL2CacheSize) == cudaSuccess);
    CHECK(persisting == 0);
  }
  CHECK(f.builtins->HealthCheck().ok());
}

TEST_CASE("generated inputs depend only on (seed, tensor, index)", "[gpu]") {
  GpuFixture& f = SharedGpu();
  constexpr size_t kCount = 1 << 24;
  auto a = DeviceBuffer::Allocate(kCount * 2);
  auto b = DeviceBuffer::Allocate(kCount * 2);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  cudaStream_t s = f.stream.get();
  REQUIRE(f.builtins->Generate(a->get(), kCount, BuiltinDType::kBF16, kDistNormal, 7, 0, s).ok());
  REQUIRE(f.builtins->Generate(b->get(), kCount, BuiltinDType::kBF16, kDistNormal, 7, 0, s).ok());
  auto ha = f.builtins->Hash(a->get(), kCount * 2, 99, s);
  auto hb = f.builtins->Hash(b->get(), kCount * 2, 99, s);
  REQUIRE(ha.ok());
  CHECK(*ha == *hb);
  REQUIRE(f.builtins->Generate(b->get(), kCount, BuiltinDType::kBF16, kDistNormal, 8, 0, s).ok());
  CHECK(*f.builtins->Hash(b->get(), kCount * 2, 99, s) != *ha);
  REQUIRE(f.builtins->Generate(b->get(), kCount, BuiltinDType::kBF16, kDistNormal, 7, 1, s).ok());
  CHECK(*f.builtins->Hash(b->get(), kCount * 2, 99, s) != *ha);
  // Another key, another hash of the same bytes.
  CHECK(*f.builtins->Hash(a->get(), kCount * 2, 100, s) != *ha);
  // Normal(0,1): moments over 16M samples.
  std::vector<uint16_t> host = DownloadBf16(*a, kCount);
  double sum = 0, sq = 0;
  for (uint16_t v : host) {
    double x = Bf16ToFloat(v);
    sum += x;
    sq += x * x;
  }
  double mean = sum / kCount, var = sq / kCount - mean * mean;
  CHECK(std::abs(mean) < 0.002);
  CHECK(std::abs(var - 1.0) < 0.01);  // bf16 rounding adds ~1e-5 relative variance.
}

// The fp8 tasks' scales: the device stream is the host mirror's bit for bit (the values are
// built from bits, philox.h), so a reference computed from HostGenerate sees the GPU's scales.
TEST_CASE("block_scale scales on the device equal the host mirror bit for bit", "[gpu]") {
  GpuFixture& f = SharedGpu();
  constexpr size_t kCount = 1 << 20;
  auto a = DeviceBuffer::Allocate(kCount * 4);
  REQUIRE(a.ok());
  REQUIRE(
      f.builtins
          ->Generate(a->get(), kCount, BuiltinDType::kFP32, kDistBlockScale, 11, 2, f.stream.get())
          .ok());
  std::vector<float> device(kCount), host(kCount);
  REQUIRE(cudaMemcpy(device.data(), a->get(), kCount * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
  HostGenerate(host.data(), kCount, static_cast<int>(BuiltinDType::kFP32), kDistBlockScale, 11, 2);
  size_t differing = 0;
  for (size_t i = 0; i < kCount; ++i) {
    if (std::bit_cast<uint32_t>(device[i]) != std::bit_cast<uint32_t>(host[i])) ++differing;
  }
  CHECK(differing == 0);
  CHECK(*std::min_element(device.begin(), device.end()) == std::ldexp(1.0f, -10));
  CHECK(*std::max_element(device.begin(), device.end()) == 1.875f * std::ldexp(1.0f, -4));
}

TEST_CASE("the spiky distribution has spikes at the documented rate", "[gpu]") {
  GpuFixture& f = SharedGpu();
  constexpr size_t kCount = 1 << 24;
  auto a = DeviceBuffer::Allocate(kCount * 4);
  REQUIRE(a.ok());
  REQUIRE(
      f.builtins->Generate(a->get(), kCount, BuiltinDType::kFP32, kDistSpiky, 3, 0, f.stream.get())
          .ok());
  std::vector<float> host(kCount);
  REQUIRE(cudaMemcpy(host.data(), a->get(), kCount * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
  size_t beyond_6 = 0;
  float largest = 0;
  for (float x : host) {
    if (std::abs(x) > 6) ++beyond_6;
    largest = std::max(largest, std::abs(x));
  }
  // P(|N(0,1) + 10 N(0,1)| > 6) ~ 0.55 for a spike; spikes come with probability 0.001.
  double fraction = static_cast<double>(beyond_6) / kCount;
  CHECK(fraction > 0.0004);
  CHECK(fraction < 0.0008);
  CHECK(largest > 30);
}

TEST_CASE("poison is NaN everywhere and the hash sees a one-byte change", "[gpu]") {
  GpuFixture& f = SharedGpu();
  constexpr size_t kCount = 1000003;  // Odd: exercises the tail paths.
  auto a = DeviceBuffer::Allocate(kCount * 2);
  REQUIRE(a.ok());
  cudaStream_t s = f.stream.get();
  REQUIRE(f.builtins->Fill32(a->get(), kCount * 2, PoisonPattern(BuiltinDType::kBF16), s).ok());
  REQUIRE(f.stream.Synchronize().ok());
  std::vector<uint16_t> host = DownloadBf16(*a, kCount);
  for (size_t i = 0; i < kCount; i += 9973) {
    CHECK(std::isnan(Bf16ToFloat(host[i])));
    CHECK(host[i] == 0xFFAA);
  }
  CHECK(host[kCount - 1] == 0xFFAA);
  auto before = f.builtins->Hash(a->get(), kCount * 2, 5, s);
  REQUIRE(cudaMemset(static_cast<char*>(a->get()) + 777777, 0x12, 1) == cudaSuccess);
  auto after = f.builtins->Hash(a->get(), kCount * 2, 5, s);
  CHECK(*before != *after);
}

// The reference's layout: C = A·Bᵀ with A (M×K), B (N×K), C (M×N), all row-major.
TEST_CASE("the cuBLASLt baseline computes A times B-transposed", "[gpu]") {
  GpuFixture& f = SharedGpu();
  const int M = 96, N = 160, K = 224;
  auto baseline = CreateBaseline("cublaslt", "gemm_a_bt_bf16", {{"M", M}, {"N", N}, {"K", K}});
  INFO(baseline.status().message());
  REQUIRE(baseline.ok());
  auto A = DeviceBuffer::Allocate(M * K * 2), B = DeviceBuffer::Allocate(N * K * 2),
       C = DeviceBuffer::Allocate(M * N * 2);
  cudaStream_t s = f.stream.get();
  REQUIRE(f.builtins->Generate(A->get(), M * K, BuiltinDType::kBF16, kDistNormal, 1, 0, s).ok());
  REQUIRE(f.builtins->Generate(B->get(), N * K, BuiltinDType::kBF16, kDistNormal, 1, 1, s).ok());
  REQUIRE((*baseline)->Run({A->get(), B->get()}, {C->get()}, s).ok());
  REQUIRE(SynchronizeDevice().ok());
  auto a = DownloadBf16(*A, M * K), b = DownloadBf16(*B, N * K), c = DownloadBf16(*C, M * N);
  double worst = 0;
  for (int m = 0; m < M; ++m) {
    for (int n = 0; n < N; ++n) {
      double ref = 0;
      for (int k = 0; k < K; ++k) ref += Bf16ToFloat(a[m * K + k]) * Bf16ToFloat(b[n * K + k]);
      double got = Bf16ToFloat(c[m * N + n]);
      worst = std::max(worst, std::abs(got - ref) / std::max(1.0, std::abs(ref)));
    }
  }
  CHECK(worst < 0.01);  // bf16 output rounding: < 2^-8 relative.
  CHECK((*baseline)->Describe()["library"] == "cublaslt");
}

// The GEMM task's tolerance beside the library's own error (issue 11, "measured tolerance
// margins"): cuBLASLt at the task's K = 5120 on the task's normal inputs, against an fp64 host
// dot product. Its error is the bf16 rounding of C (at |C| ~ sqrt(K) ~ 72, half an ulp is 0.25)
// plus the fp32 accumulation's; the report's line is the "library" row of the margin table.
TEST_CASE("cuBLASLt's own error against fp64 at the GEMM task's K", "[gpu]") {
  GpuFixture& f = SharedGpu();
  const int M = 128, N = 256, K = 5120;
  auto baseline = CreateBaseline("cublaslt", "gemm_a_bt_bf16", {{"M", M}, {"N", N}, {"K", K}});
  INFO(baseline.status().message());
  REQUIRE(baseline.ok());
  auto A = DeviceBuffer::Allocate(size_t{M} * K * 2), B = DeviceBuffer::Allocate(size_t{N} * K * 2),
       C = DeviceBuffer::Allocate(size_t{M} * N * 2);
  cudaStream_t s = f.stream.get();
  REQUIRE(f.builtins->Generate(A->get(), size_t{M} * K, BuiltinDType::kBF16, kDistNormal, 5, 0, s)
              .ok());
  REQUIRE(f.builtins->Generate(B->get(), size_t{N} * K, BuiltinDType::kBF16, kDistNormal, 5, 1, s)
              .ok());
  REQUIRE((*baseline)->Run({A->get(), B->get()}, {C->get()}, s).ok());
  REQUIRE(SynchronizeDevice().ok());
  auto a = DownloadBf16(*A, size_t{M} * K), b = DownloadBf16(*B, size_t{N} * K),
       c = DownloadBf16(*C, size_t{M} * N);
  double max_abs = 0, error_squares = 0, reference_squares = 0;
  int outside_allclose = 0;
  for (size_t m = 0; m < size_t{M}; ++m) {
    for (size_t n = 0; n < size_t{N}; ++n) {
      double ref = 0;
      for (size_t k = 0; k < size_t{K}; ++k) {
        ref += double{Bf16ToFloat(a[m * K + k])} * Bf16ToFloat(b[n * K + k]);
      }
      const double error = double{Bf16ToFloat(c[m * N + n])} - ref;
      max_abs = std::max(max_abs, std::abs(error));
      error_squares += error * error;
      reference_squares += ref * ref;
      // The task's rule as the engine applies it (compare.h): outside only when beyond both
      // atol 1e-2 and rtol 1e-2 of |ref|.
      if (std::abs(error) > 1e-2 && std::abs(error) > 1e-2 * std::abs(ref)) ++outside_allclose;
    }
  }
  const double relative_norm = std::sqrt(error_squares / reference_squares);
  WARN("cublaslt gemm against fp64, M=" << M << " N=" << N << " K=" << K << ": max abs err "
                                        << max_abs << ", relative norm " << relative_norm
                                        << ", allclose(1e-2, 1e-2) failures " << outside_allclose
                                        << " of " << M * N);
  CHECK(outside_allclose == 0);
  CHECK(relative_norm < 0.01);
}

// The fair baseline's candidates (issue 16): cuBLASLt's ranked heuristic results for the timed
// GEMM compute the same C within the task's rule, and their medians are printed, which is the
// difference the choice makes; cuDNN's finalizable configurations of the forward graph too.
TEST_CASE("the libraries' baseline candidates compute the task and their times differ", "[gpu]") {
  GpuFixture& f = SharedGpu();
  cudaStream_t s = f.stream.get();
  const int64_t M = 8192, N = 7168, K = 5120;
  auto candidates =
      CreateBaselineCandidates("cublaslt", "gemm_a_bt_bf16", {{"M", M}, {"N", N}, {"K", K}}, 8);
  INFO(candidates.status().message());
  REQUIRE(candidates.ok());
  REQUIRE_FALSE(candidates->empty());
  CHECK((*candidates)[0]->Describe()["algorithm"] == "heuristic #0");
  auto A = DeviceBuffer::Allocate(size_t(M * K * 2)), B = DeviceBuffer::Allocate(size_t(N * K * 2)),
       C0 = DeviceBuffer::Allocate(size_t(M * N * 2)),
       C = DeviceBuffer::Allocate(size_t(M * N * 2));
  REQUIRE(f.builtins->Generate(A->get(), M * K, BuiltinDType::kBF16, kDistNormal, 3, 0, s).ok());
  REQUIRE(f.builtins->Generate(B->get(), N * K, BuiltinDType::kBF16, kDistNormal, 3, 1, s).ok());
  REQUIRE((*candidates)[0]->Run({A->get(), B->get()}, {C0->get()}, s).ok());
  ToleranceRule rule;
  rule.atol = 1e-2;
  rule.rtol = 1e-2;
  auto start = Event::Create(), end = Event::Create();
  REQUIRE(start.ok());
  REQUIRE(end.ok());
  std::string figures;
  double first_ms = 0, best_ms = 0;
  for (size_t k = 0; k < candidates->size(); ++k) {
    Baseline& b = *(*candidates)[k];
    REQUIRE(b.Run({A->get(), B->get()}, {C->get()}, s).ok());
    auto report = f.builtins->Compare(C->get(), C0->get(), uint64_t(M * N), ElementType::kBF16,
                                      {M, N}, rule, PoisonPattern(BuiltinDType::kBF16), s);
    REQUIRE(report.ok());
    std::vector<double> ms;
    for (int r = 0; r < 13; ++r) {
      REQUIRE(f.builtins->FlushL2(s).ok());
      REQUIRE(cudaEventRecord(start->get(), s) == cudaSuccess);
      REQUIRE(b.Run({A->get(), B->get()}, {C->get()}, s).ok());
      REQUIRE(cudaEventRecord(end->get(), s) == cudaSuccess);
      auto elapsed = ElapsedMs(*start, *end);
      REQUIRE(elapsed.ok());
      if (r >= 3) ms.push_back(*elapsed);
    }
    std::sort(ms.begin(), ms.end());
    const double median = ms[ms.size() / 2];
    if (k == 0) first_ms = median;
    if (report->pass && (best_ms == 0 || median < best_ms)) best_ms = median;
    figures += "\n  #" + std::to_string(k) + " " + b.Describe()["algorithm_config"].dump() + " " +
               std::to_string(median) + " ms" + (report->pass ? "" : " (outputs differ)");
  }
  WARN("cublaslt candidates for 8192x7168x5120: "
       << candidates->size() << "; fastest eligible / first = " << best_ms / first_ms << figures);
  CHECK(best_ms <= first_ms);
  auto sdpa = CreateBaselineCandidates("cudnn", "sdpa_fwd_bf16",
                                       {{"B", 1}, {"H", 2}, {"S", 384}, {"D", 128}}, 8);
  INFO(sdpa.status().message());
  REQUIRE(sdpa.ok());
  REQUIRE_FALSE(sdpa->empty());
  std::string ranks;
  for (const auto& b : *sdpa) ranks += " " + b->Describe()["heuristic_rank"].dump();
  WARN("cudnn sdpa forward finalizable configurations: " << sdpa->size() << " (heuristic ranks"
                                                         << ranks << ")");
  // The backward's candidates: each finalized once (cudnn_sdpa_baseline.cc FinalizableConfigs),
  // in the heuristic's order, each a configuration of its own.
  const auto t0 = std::chrono::steady_clock::now();
  auto backward = CreateBaselineCandidates("cudnn", "sdpa_bwd_bf16",
                                           {{"B", 1}, {"H", 2}, {"S", 512}, {"D", 128}}, 8);
  const double backward_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(backward.status().message());
  REQUIRE(backward.ok());
  REQUIRE(backward->size() >= 2);
  std::string backward_ranks;
  int64_t last_rank = -1;
  for (const auto& b : *backward) {
    const int64_t rank = b->Describe()["heuristic_rank"].get<int64_t>();
    CHECK(rank > last_rank);
    last_rank = rank;
    backward_ranks += " " + std::to_string(rank);
  }
  WARN("cudnn sdpa backward finalizable configurations: " << backward->size() << " (heuristic ranks"
                                                          << backward_ranks << "), made in "
                                                          << backward_seconds << " s");
}

TEST_CASE("interleaved timing of the baseline against itself gives a ratio near 1", "[gpu]") {
  GpuFixture& f = SharedGpu();
  const int n = 4096;
  auto b1 = CreateBaseline("cublaslt", "gemm_a_bt_bf16", {{"M", n}, {"N", n}, {"K", n}});
  auto b2 = CreateBaseline("cublaslt", "gemm_a_bt_bf16", {{"M", n}, {"N", n}, {"K", n}});
  REQUIRE(b1.ok());
  REQUIRE(b2.ok());
  std::vector<DeviceBuffer> bufs;
  for (int i = 0; i < 6; ++i) bufs.push_back(*DeviceBuffer::Allocate(size_t{n} * n * 2));
  cudaStream_t s = f.stream.get();
  auto side = [&](Baseline* b, int base) {
    return TimedSide{
        [&, base](uint64_t seed) -> absl::Status {
          RETURN_IF_ERROR(f.builtins->Generate(bufs[base].get(), size_t{n} * n, BuiltinDType::kBF16,
                                               0, seed, 0, s));
          return f.builtins->Generate(bufs[base + 1].get(), size_t{n} * n, BuiltinDType::kBF16, 0,
                                      seed, 1, s);
        },
        [&, b, base]() {
          return b->Run({bufs[base].get(), bufs[base + 1].get()}, {bufs[base + 2].get()}, s);
        }};
  };
  TimingConfig config;
  config.rule.min_samples = 20;
  config.rule.max_seconds = 1.5;
  config.warmup_seconds = 0.2;
  config.candidate_seed_base = 11;
  config.baseline_seed_base = 22;
  config.check_position_seed = 33;
  size_t checks = 0;
  size_t sketched = 0;
  SampleHooks hooks;
  hooks.on_check = [&](size_t, uint64_t) {
    ++checks;
    return absl::OkStatus();
  };
  hooks.on_candidate = [&](size_t, uint64_t, bool) {
    ++sketched;
    return absl::OkStatus();
  };
  auto result = TimeInterleaved(side(b1->get(), 0), side(b2->get(), 3), *f.builtins, s, nullptr,
                                config, hooks);
  INFO(result.status().message());
  REQUIRE(result.ok());
  INFO("candidate " << result->candidate.median << " ms, baseline " << result->baseline.median
                    << " ms, n " << result->candidate.count << ", stop " << result->stop_reason);
  CHECK(result->speedup > 0.98);
  CHECK(result->speedup < 1.02);
  CHECK(checks >= 1);
  CHECK(sketched == result->candidate.count);  // Every timed candidate launch was handed on.
  CHECK(!result->stop_reason.empty());
  CHECK(result->candidate.count >= 20);
  // The same loop with the launch jitter (a GPU-side delay before every launch): the medians
  // must not move (the delay is outside the timed region and the launch is queued behind it).
  config.jitter_us_max = 200;
  config.counter_seed = 44;
  auto jittered = TimeInterleaved(side(b1->get(), 0), side(b2->get(), 3), *f.builtins, s, nullptr,
                                  config, hooks);
  REQUIRE(jittered.ok());
  WARN("A/A GEMM 4096^3 medians without jitter: candidate "
       << result->candidate.median << " ms, baseline " << result->baseline.median
       << " ms; with 0-200 us jitter: " << jittered->candidate.median << " ms, "
       << jittered->baseline.median << " ms (mean delay "
       << jittered->jitter_us_total / double(jittered->launches) << " us)");
  CHECK(jittered->candidate.median == Approx(result->candidate.median).epsilon(0.03));
  CHECK(jittered->speedup > 0.98);
  CHECK(jittered->speedup < 1.02);
  CHECK(jittered->jitter_us_total / double(jittered->launches) == Approx(100).epsilon(0.25));
}

TEST_CASE("the sketch kernel is the host's fp64 +-1 projection", "[gpu][sketch]") {
  GpuFixture& f = SharedGpu();
  cudaStream_t s = f.stream.get();
  // bf16: values from the generator, decoded on the host.
  const size_t n = 100003;  // Not a multiple of 8 or of the grid.
  auto buffer = DeviceBuffer::Allocate(n * 2);
  REQUIRE(buffer.ok());
  REQUIRE(f.builtins->Generate(buffer->get(), n, BuiltinDType::kBF16, 0, 77, 0, s).ok());
  std::vector<uint16_t> bits = DownloadBf16(*buffer, n);
  std::vector<double> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = Bf16ToFloat(bits[i]);
  const uint64_t key = SketchKey(123, 456);
  for (size_t k : {size_t{1}, size_t{4}, size_t{16}}) {
    auto gpu = f.builtins->Sketch(buffer->get(), n, BuiltinDType::kBF16, key, 2, k, 0.01, 0.01, s);
    INFO(gpu.status().message());
    REQUIRE(gpu.ok());
    TensorSketch cpu = SketchOnHost(host, key, 2, k, 0.01, 0.01);
    REQUIRE(gpu->projections.size() == k);
    for (size_t j = 0; j < k; ++j) {
      // Summation order differs: relative to sum|x| the difference is rounding only.
      CHECK(std::abs(gpu->projections[j] - cpu.projections[j]) <= 1e-12 * cpu.abs_sum);
    }
    CHECK(gpu->abs_sum == Approx(cpu.abs_sum).epsilon(1e-12));
    CHECK(gpu->square_sum == Approx(cpu.square_sum).epsilon(1e-12));
    CHECK(gpu->tolerance_sum == Approx(cpu.tolerance_sum).epsilon(1e-12));
    CHECK(gpu->tolerance_square_sum == Approx(cpu.tolerance_square_sum).epsilon(1e-12));
    CHECK(gpu->nonfinite == 0);
  }
  CHECK_FALSE(f.builtins->Sketch(buffer->get(), n, BuiltinDType::kBF16, key, 0, 17, 0, 0, s).ok());
  // fp32 with the NaN poison on a few elements: counted, never summed.
  std::vector<float> values(4099);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 13) - 6.5f;
  values[5] = std::nanf("");
  values[4000] = INFINITY;
  DeviceBuffer fp32 = Upload(values.data(), values.size() * 4);
  auto poisoned =
      f.builtins->Sketch(fp32.get(), values.size(), BuiltinDType::kFP32, key, 0, 4, 0, 0, s);
  REQUIRE(poisoned.ok());
  CHECK(poisoned->nonfinite == 2);
  std::vector<double> as_double(values.begin(), values.end());
  TensorSketch cpu = SketchOnHost(as_double, key, 0, 4, 0, 0);
  for (size_t j = 0; j < 4; ++j) CHECK(poisoned->projections[j] == cpu.projections[j]);
  // Cost on the GEMM task's output size (16384 x 7168 bf16, 235 MB), one sample.
  const size_t big = 16384ull * 7168;
  auto output = DeviceBuffer::Allocate(big * 2);
  REQUIRE(output.ok());
  REQUIRE(f.builtins->Generate(output->get(), big, BuiltinDType::kBF16, 0, 5, 0, s).ok());
  REQUIRE(f.builtins->Sketch(output->get(), big, BuiltinDType::kBF16, key, 0, 4, 0, 0, s).ok());
  auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < 10; ++r) {
    REQUIRE(f.builtins->Sketch(output->get(), big, BuiltinDType::kBF16, key, 0, 4, 0, 0, s).ok());
  }
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / 10;
  WARN("sketch of a 16384x7168 bf16 output (k = 4, host sum included): " << ms << " ms");
  // Outside the timed region, once per launch: 1.69 ms on the H200 (2026-12-02, including the
  // host's reduction of the per-block partial sums), i.e. ~0.17 s per 100-sample GEMM loop. A
  // bound well above that catches a regression to a per-element host path (~45 ms).
  CHECK(ms < 5.0);
}

// ---------------------------------------------------------------------------------------------
// cuDNN SDPA baselines (cudnn_sdpa_baseline.cc) against an fp64-accumulated host reference of
// the attention tasks' definitions, and derived inputs.

struct Attention {
  int b = 1, h = 2, s = 128, d = 128;
  bool causal = false;
  size_t Elements() const { return size_t(b) * h * s * d; }
  size_t Rows() const { return size_t(b) * h * s; }
  std::map<std::string, int64_t> Axes() const { return {{"B", b}, {"H", h}, {"S", s}, {"D", d}}; }
  float Scale() const { return static_cast<float>(1.0 / std::sqrt(double(d))); }
};

std::vector<float> DownloadAsFloat(const DeviceBuffer& buffer, size_t count, bool bf16) {
  std::vector<float> out(count);
  if (bf16) {
    std::vector<uint16_t> host = DownloadBf16(buffer, count);
    for (size_t i = 0; i < count; ++i) out[i] = Bf16ToFloat(host[i]);
  } else {
    REQUIRE(cudaMemcpy(out.data(), buffer.get(), count * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
  }
  return out;
}

// dQ, dK, dV of the task definition from Q, K, V, O, dO and LSE (as given to the kernel).
void HostBackward(const Attention& a, const std::vector<float>& q, const std::vector<float>& k,
                  const std::vector<float>& v, const std::vector<float>& o,
                  const std::vector<float>& d_o, const std::vector<float>& lse,
                  std::vector<double>& dq, std::vector<double>& dk, std::vector<double>& dv) {
  dq.assign(a.Elements(), 0);
  dk.assign(a.Elements(), 0);
  dv.assign(a.Elements(), 0);
  for (size_t bh = 0; bh < size_t(a.b) * a.h; ++bh) {
    const size_t base = bh * a.s * a.d;
    for (int i = 0; i < a.s; ++i) {
      double delta = 0;
      for (int x = 0; x < a.d; ++x)
        delta += double(d_o[base + i * a.d + x]) * o[base + i * a.d + x];
      const int keys = a.causal ? i + 1 : a.s;
      for (int j = 0; j < keys; ++j) {
        double dot = 0, dp = 0;
        for (int x = 0; x < a.d; ++x) {
          dot += double(q[base + i * a.d + x]) * k[base + j * a.d + x];
          dp += double(d_o[base + i * a.d + x]) * v[base + j * a.d + x];
        }
        const double p = std::exp(dot * a.Scale() - lse[bh * a.s + i]);
        const double ds = p * (dp - delta) * a.Scale();
        for (int x = 0; x < a.d; ++x) {
          dv[base + j * a.d + x] += p * d_o[base + i * a.d + x];
          dq[base + i * a.d + x] += ds * k[base + j * a.d + x];
          dk[base + j * a.d + x] += ds * q[base + i * a.d + x];
        }
      }
    }
  }
}

struct AttentionBuffers {
  DeviceBuffer q, k, v, o, lse, d_o, dq, dk, dv;
  explicit AttentionBuffers(const Attention& a) {
    for (DeviceBuffer* b : {&q, &k, &v, &o, &d_o, &dq, &dk, &dv}) {
      *b = std::move(*DeviceBuffer::Allocate(a.Elements() * 2));
    }
    lse = std::move(*DeviceBuffer::Allocate(a.Rows() * 4));
  }
};

struct AttentionErrors {
  size_t o_failures = 0;
  double o_rel_norm = 0;
  double lse_max_abs = 0;
  double dq = 0, dk = 0, dv = 0;  // Relative norms.
};

// Forward then (unless `forward_only`) backward through cuDNN on one draw, both compared with the
// host reference.
AttentionErrors CheckAttention(const Attention& a, int distribution, uint64_t seed,
                               bool forward_only = false) {
  GpuFixture& f = SharedGpu();
  cudaStream_t s = f.stream.get();
  AttentionBuffers x(a);
  REQUIRE(
      f.builtins->Generate(x.q.get(), a.Elements(), BuiltinDType::kBF16, distribution, seed, 0, s)
          .ok());
  REQUIRE(
      f.builtins->Generate(x.k.get(), a.Elements(), BuiltinDType::kBF16, distribution, seed, 1, s)
          .ok());
  REQUIRE(
      f.builtins->Generate(x.v.get(), a.Elements(), BuiltinDType::kBF16, distribution, seed, 2, s)
          .ok());
  REQUIRE(
      f.builtins->Generate(x.d_o.get(), a.Elements(), BuiltinDType::kBF16, distribution, seed, 4, s)
          .ok());
  const std::string suffix = a.causal ? "_causal" : "";
  auto fwd = CreateBaseline("cudnn", "sdpa_fwd_bf16" + suffix, a.Axes());
  INFO(fwd.status().message());
  REQUIRE(fwd.ok());
  absl::Status run = (*fwd)->Run({x.q.get(), x.k.get(), x.v.get()}, {x.o.get(), x.lse.get()}, s);
  INFO(run.message());
  REQUIRE(run.ok());
  REQUIRE(SynchronizeDevice().ok());
  auto q = DownloadAsFloat(x.q, a.Elements(), true), k = DownloadAsFloat(x.k, a.Elements(), true),
       v = DownloadAsFloat(x.v, a.Elements(), true), o = DownloadAsFloat(x.o, a.Elements(), true),
       d_o = DownloadAsFloat(x.d_o, a.Elements(), true),
       lse = DownloadAsFloat(x.lse, a.Rows(), false);
  std::vector<double> ref_o, ref_lse, dq, dk, dv;
  ::ptxbench::testing::AttentionForward({a.b, a.h, a.s, a.d, a.causal}, a.Scale(), q, k, v, ref_o,
                                        ref_lse);
  AttentionErrors e;
  e.o_failures = AllCloseFailures(o, ref_o, 0.01, 0.01);
  e.o_rel_norm = RelativeNorm(o, ref_o);
  for (size_t i = 0; i < lse.size(); ++i) {
    e.lse_max_abs = std::max(e.lse_max_abs, std::abs(lse[i] - ref_lse[i]));
  }
  WARN("cudnn sdpa forward D=" << a.d << " S=" << a.s << (a.causal ? " causal" : "")
                               << " dist=" << distribution << " seed=" << seed
                               << ": O allclose failures " << e.o_failures << ", O rel-norm "
                               << RelativeNorm(o, ref_o) << ", LSE max abs err " << e.lse_max_abs
                               << "; " << (*fwd)->Describe().dump());
  if (forward_only) return e;

  auto bwd = CreateBaseline("cudnn", "sdpa_bwd_bf16" + suffix, a.Axes());
  INFO(bwd.status().message());
  REQUIRE(bwd.ok());
  run = (*bwd)->Run({x.q.get(), x.k.get(), x.v.get(), x.o.get(), x.d_o.get(), x.lse.get()},
                    {x.dq.get(), x.dk.get(), x.dv.get()}, s);
  INFO(run.message());
  REQUIRE(run.ok());
  REQUIRE(SynchronizeDevice().ok());
  HostBackward(a, q, k, v, o, d_o, lse, dq, dk, dv);
  e.dq = RelativeNorm(DownloadAsFloat(x.dq, a.Elements(), true), dq);
  e.dk = RelativeNorm(DownloadAsFloat(x.dk, a.Elements(), true), dk);
  e.dv = RelativeNorm(DownloadAsFloat(x.dv, a.Elements(), true), dv);
  WARN("cudnn sdpa backward S=" << a.s << (a.causal ? " causal" : "") << " dist=" << distribution
                                << " seed=" << seed << ": rel-norm dQ " << e.dq << " dK " << e.dk
                                << " dV " << e.dv << "; " << (*bwd)->Describe().dump());
  return e;
}

TEST_CASE("cuDNN SDPA forward and backward match the task definitions", "[gpu][cudnn]") {
  for (int s : {128, 384}) {
    for (bool causal : {false, true}) {
      Attention a;
      a.s = s;
      a.h = s == 384 ? 3 : 2;
      a.causal = causal;
      AttentionErrors e = CheckAttention(a, kDistNormal, 7);
      CHECK(e.o_failures == 0);     // The forward tasks' tolerance, allclose 1e-2.
      CHECK(e.lse_max_abs < 1e-3);  // fp32 statistics of a 128..384-term sum.
      CHECK(e.dq < 0.01);
      CHECK(e.dk < 0.01);
      CHECK(e.dv < 0.01);
    }
  }
}

// The head-dim-64 and -256 forward tasks (mha_with_lse_d64*, mha_with_lse_d256*) keep the d128
// tasks' allclose 1e-2 on the argument that the logits' spread does not depend on D (scale =
// 1/sqrt(D)); this measures cuDNN's own error there, over several draws.
TEST_CASE("cuDNN SDPA forward at head dims 64 and 256 meets the forward tasks' tolerance",
          "[gpu][cudnn]") {
  for (int d : {64, 256}) {
    double worst_norm = 0, worst_lse = 0;
    size_t failures = 0;
    for (int s : {128, 384}) {
      for (bool causal : {false, true}) {
        for (uint64_t seed : {21, 22}) {
          Attention a;
          a.d = d;
          a.s = s;
          a.h = 3;
          a.causal = causal;
          AttentionErrors e = CheckAttention(a, kDistNormal, seed, /*forward_only=*/true);
          failures += e.o_failures;
          worst_lse = std::max(worst_lse, e.lse_max_abs);
          worst_norm = std::max(worst_norm, e.o_rel_norm);
        }
      }
    }
    WARN("cudnn sdpa forward D=" << d << ": O allclose failures " << failures
                                 << ", worst O relative norm " << worst_norm
                                 << ", worst LSE abs error " << worst_lse);
    CHECK(failures == 0);
    CHECK(worst_lse < 1e-3);
    CHECK(worst_norm < 0.005);  // d128: 0.0017-0.0022 (docs/task-authoring.md).
  }
}

TEST_CASE("cuDNN SDPA backward error on spiky inputs (the backward tasks' tolerance)",
          "[gpu][cudnn]") {
  double worst = 0;
  for (int s : {128, 384}) {
    for (bool causal : {false, true}) {
      for (uint64_t seed : {11, 12, 13}) {
        Attention a;
        a.s = s;
        a.h = 3;
        a.causal = causal;
        AttentionErrors e = CheckAttention(a, kDistSpiky, seed);
        worst = std::max({worst, e.dq, e.dk, e.dv});
      }
    }
  }
  WARN("cudnn sdpa backward, spiky inputs: worst relative norm over dQ/dK/dV " << worst);
  // task.json's max_relative_norm must leave room for a correct kernel of similar accuracy: the
  // candidate is compared with cuDNN, whose own error adds up to this much.
  CHECK(worst < 0.005);
}

TEST_CASE("derived inputs are the library's forward pass, identical in every draw",
          "[gpu][cudnn]") {
  GpuFixture& f = SharedGpu();
  const char* source = std::getenv("PTXBENCH_SOURCE_DIR");
  auto task = LoadTask(std::string(source != nullptr ? source : PTXBENCH_SOURCE_DIR_DEFAULT) +
                       "/tasks/mha_bwd_d128_causal");
  INFO(task.status().message());
  REQUIRE(task.ok());
  const Workload* odd = nullptr;
  for (const Workload& w : task->workloads) {
    if (w.name == "odd_blocks") odd = &w;
  }
  REQUIRE(odd != nullptr);
  auto tensors = ResolveTensors(*task, *odd);
  REQUIRE(tensors.ok());
  auto first = TensorSet::Allocate(*tensors);
  auto second = TensorSet::Allocate(*tensors);
  INFO(first.status().message());
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  cudaStream_t s = f.stream.get();
  REQUIRE(first->GenerateInputs(*f.builtins, 21, s).ok());
  REQUIRE(second->GenerateInputs(*f.builtins, 21, s).ok());
  auto h1 = first->HashInputs(*f.builtins, 5, s);
  auto h2 = second->HashInputs(*f.builtins, 5, s);
  REQUIRE(h1.ok());
  CHECK(*h1 == *h2);
  REQUIRE(second->GenerateInputs(*f.builtins, 22, s).ok());
  CHECK(*second->HashInputs(*f.builtins, 5, s) != *h1);

  // O (tensor 3) and LSE (tensor 5) are the causal forward pass of Q, K, V (tensors 0..2).
  Attention a;
  a.h = 3;
  a.s = 384;
  a.causal = true;
  auto read = [&](int index, bool bf16, size_t count) {
    std::vector<float> out(count);
    if (bf16) {
      std::vector<uint16_t> host(count);
      REQUIRE(cudaMemcpy(host.data(), first->pointer(index), count * 2, cudaMemcpyDeviceToHost) ==
              cudaSuccess);
      for (size_t i = 0; i < count; ++i) out[i] = Bf16ToFloat(host[i]);
    } else {
      REQUIRE(cudaMemcpy(out.data(), first->pointer(index), count * 4, cudaMemcpyDeviceToHost) ==
              cudaSuccess);
    }
    return out;
  };
  REQUIRE(SynchronizeDevice().ok());
  std::vector<double> ref_o, ref_lse;
  ::ptxbench::testing::AttentionForward({a.b, a.h, a.s, a.d, a.causal}, a.Scale(),
                                        read(0, true, a.Elements()), read(1, true, a.Elements()),
                                        read(2, true, a.Elements()), ref_o, ref_lse);
  CHECK(AllCloseFailures(read(3, true, a.Elements()), ref_o, 0.01, 0.01) == 0);
  std::vector<float> lse = read(5, false, a.Rows());
  double worst = 0;
  for (size_t i = 0; i < lse.size(); ++i) worst = std::max(worst, std::abs(lse[i] - ref_lse[i]));
  CHECK(worst < 1e-3);
}

TEST_CASE("cuDNN SDPA times on the attention tasks' timed workload", "[gpu][cudnn]") {
  GpuFixture& f = SharedGpu();
  cudaStream_t s = f.stream.get();
  Attention a;
  a.b = 4;
  a.h = 48;
  a.s = 4096;
  AttentionBuffers x(a);
  for (auto [buffer, index] : {std::pair{&x.q, 0}, {&x.k, 1}, {&x.v, 2}, {&x.d_o, 4}}) {
    REQUIRE(
        f.builtins
            ->Generate(buffer->get(), a.Elements(), BuiltinDType::kBF16, kDistNormal, 3, index, s)
            .ok());
  }
  for (bool backward : {false, true}) {
    for (bool causal : {false, true}) {
      const std::string op =
          std::string(backward ? "sdpa_bwd_bf16" : "sdpa_fwd_bf16") + (causal ? "_causal" : "");
      auto baseline = CreateBaseline("cudnn", op, a.Axes());
      INFO(op << ": " << baseline.status().message());
      REQUIRE(baseline.ok());
      // The backward reads O and LSE of the forward with the same mask.
      if (backward) {
        auto fwd =
            CreateBaseline("cudnn", causal ? "sdpa_fwd_bf16_causal" : "sdpa_fwd_bf16", a.Axes());
        REQUIRE(fwd.ok());
        REQUIRE((*fwd)->Run({x.q.get(), x.k.get(), x.v.get()}, {x.o.get(), x.lse.get()}, s).ok());
      }
      auto run = [&]() {
        if (!backward) {
          return (*baseline)->Run({x.q.get(), x.k.get(), x.v.get()}, {x.o.get(), x.lse.get()}, s);
        }
        return (*baseline)->Run(
            {x.q.get(), x.k.get(), x.v.get(), x.o.get(), x.d_o.get(), x.lse.get()},
            {x.dq.get(), x.dk.get(), x.dv.get()}, s);
      };
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
      const double median = ms[ms.size() / 2];
      const double flops =
          (causal ? 2.0 : 4.0) * a.b * a.h * double(a.s) * a.s * a.d * (backward ? 2.5 : 1.0);
      WARN("cudnn " << op << " B=4 H=48 S=4096 D=128: median " << median << " ms (min "
                    << ms.front() << ", max " << ms.back() << ", n " << ms.size() << "), "
                    << flops / (median * 1e-3) / 1e12 << " TFLOP/s; "
                    << (*baseline)->Describe().dump());
      CHECK(median > 0);
    }
  }
}

// ---- The block-scaled fp8 GEMM task (tasks/gemm_fp8bs_n7168_k16384) and its cuBLASLt baseline.

// Where the logical scales sa[m][kb] (1 x 128 blocks of A's rows) and sb[nb][kb] (128 x 128
// blocks of B) sit in the buffers handed to cuBLASLt. The task states kKbRowsMContiguous and
// kPaddedRows; the others are what cuBLASLt might read instead, tried so that a mismatch says
// which layout the library wants (the cuBLAS guide does not spell it out for these modes).
enum class ScaleLayoutA { kKbRowsMContiguous, kMRowsKbContiguous };
enum class ScaleLayoutB { kPaddedRows, kUnpaddedRows, kKbRowsNbContiguous };

const char* Name(ScaleLayoutA layout) {
  return layout == ScaleLayoutA::kKbRowsMContiguous ? "SA[kb][m] (task)" : "SA[m][kb]";
}
const char* Name(ScaleLayoutB layout) {
  switch (layout) {
    case ScaleLayoutB::kPaddedRows:
      return "SB[nb][kb], rows padded to 4 (task)";
    case ScaleLayoutB::kUnpaddedRows:
      return "SB[nb][kb], rows unpadded";
    case ScaleLayoutB::kKbRowsNbContiguous:
      return "SB[kb][nb]";
  }
  return "?";
}

// The buffer cuBLASLt gets; slots no logical scale maps to hold NaN, so reading one shows.
std::vector<float> ArrangeScalesA(const std::vector<float>& sa, int m, int kb,
                                  ScaleLayoutA layout) {
  std::vector<float> out(static_cast<size_t>(m) * kb);
  for (int r = 0; r < m; ++r) {
    for (int b = 0; b < kb; ++b) {
      const size_t at =
          layout == ScaleLayoutA::kKbRowsMContiguous ? size_t(b) * m + r : size_t(r) * kb + b;
      out[at] = sa[size_t(r) * kb + b];
    }
  }
  return out;
}
std::vector<float> ArrangeScalesB(const std::vector<float>& sb, int nb, int kb,
                                  ScaleLayoutB layout) {
  const int padded = 4 * ((kb + 3) / 4);
  std::vector<float> out(static_cast<size_t>(nb) * padded, std::nanf(""));
  for (int r = 0; r < nb; ++r) {
    for (int b = 0; b < kb; ++b) {
      size_t at = 0;
      switch (layout) {
        case ScaleLayoutB::kPaddedRows:
          at = size_t(r) * padded + b;
          break;
        case ScaleLayoutB::kUnpaddedRows:
          at = size_t(r) * kb + b;
          break;
        case ScaleLayoutB::kKbRowsNbContiguous:
          at = size_t(b) * nb + r;
          break;
      }
      out[at] = sb[size_t(r) * kb + b];
    }
  }
  return out;
}

struct Fp8Figures {
  double max_abs = 0, max_rel = 0, relative_norm = 0;
  size_t outside_allclose = 0;
};

// cuBLASLt's C against the fp64 reference: the largest absolute error, the largest relative one
// over elements with |ref| >= 1e-3 (the scale of C is ~0.03-0.2 here), the relative norm, and
// the elements outside the task's all-close rule.
Fp8Figures Fp8Compare(const std::vector<float>& got, const std::vector<double>& ref,
                      const Tolerance& tolerance) {
  Fp8Figures f;
  for (size_t i = 0; i < got.size(); ++i) {
    const double error = std::abs(double{got[i]} - ref[i]);
    f.max_abs = std::max(f.max_abs, std::isnan(error) ? INFINITY : error);
    if (std::abs(ref[i]) >= 1e-3) f.max_rel = std::max(f.max_rel, error / std::abs(ref[i]));
  }
  f.relative_norm = RelativeNorm(got, ref);
  f.outside_allclose = AllCloseFailures(got, ref, tolerance.atol, tolerance.rtol);
  return f;
}

std::string Fp8Line(const Fp8Figures& f) {
  return "max abs " + std::to_string(f.max_abs) + ", max rel (|ref| >= 1e-3) " +
         std::to_string(f.max_rel) + ", relative norm " + std::to_string(f.relative_norm) +
         ", outside all-close " + std::to_string(f.outside_allclose);
}

absl::StatusOr<Task> LoadFp8GemmTask() {
  const char* source = std::getenv("PTXBENCH_SOURCE_DIR");
  return LoadTask(std::string(source != nullptr ? source : PTXBENCH_SOURCE_DIR_DEFAULT) +
                  "/tasks/gemm_fp8bs_n7168_k16384");
}

// Issue 17 item 1: cuBLASLt 13's block-scaled fp8 matmul on the task's correctness workloads
// (and the task's K on a few rows), against BlockScaledGemm in fp64. For each workload every
// scale layout hypothesis is tried and its figures printed; the task's layout must match
// within the task's tolerance. The WARN lines are the "library vs fp64" row of the margin table.
TEST_CASE("cuBLASLt's block-scaled fp8 GEMM matches the fp64 reference in the task's scale layout",
          "[gpu][fp8]") {
  GpuFixture& f = SharedGpu();
  cudaStream_t s = f.stream.get();
  auto task = LoadFp8GemmTask();
  INFO(task.status().message());
  REQUIRE(task.ok());
  REQUIRE(task->baseline_operation == kGemmFp8BlockScaledOperation);
  std::vector<Workload> workloads;
  for (const Workload& w : task->workloads) {
    if (!w.timed) workloads.push_back(w);
  }
  REQUIRE(workloads.size() >= 3);
  uint64_t seed = 40;
  for (const Workload& w : workloads) {
    const int M = static_cast<int>(w.axes.at("M")), N = static_cast<int>(w.axes.at("N")),
              K = static_cast<int>(w.axes.at("K"));
    ::ptxbench::testing::BlockScaledGemmShape shape;
    shape.m = M;
    shape.n = N;
    shape.k = K;
    const int kb = shape.KBlocks(), nb = shape.NBlocks();
    // The task's declared extents are the layouts below.
    auto resolved = ResolveTensors(*task, w);
    REQUIRE(resolved.ok());
    REQUIRE(resolved->size() == 5);
    CHECK((*resolved)[1].elements == uint64_t(kb) * M);
    CHECK((*resolved)[3].elements == uint64_t(nb) * 4 * ((kb + 3) / 4));
    auto baseline = CreateBaseline("cublaslt", kGemmFp8BlockScaledOperation, w.axes);
    INFO("workload " << w.name << ": " << baseline.status().message());
    REQUIRE(baseline.ok());
    ++seed;
    auto A = DeviceBuffer::Allocate(size_t(M) * K), B = DeviceBuffer::Allocate(size_t(N) * K),
         C = DeviceBuffer::Allocate(size_t(M) * N * 2);
    REQUIRE(f.builtins
                ->Generate(A->get(), size_t(M) * K, BuiltinDType::kFP8E4M3, kDistNormal, seed, 0, s)
                .ok());
    REQUIRE(f.builtins
                ->Generate(B->get(), size_t(N) * K, BuiltinDType::kFP8E4M3, kDistNormal, seed, 2, s)
                .ok());
    REQUIRE(SynchronizeDevice().ok());
    std::vector<uint8_t> a8(size_t(M) * K), b8(size_t(N) * K);
    REQUIRE(cudaMemcpy(a8.data(), A->get(), a8.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
    REQUIRE(cudaMemcpy(b8.data(), B->get(), b8.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
    std::vector<float> a(a8.size()), b(b8.size());
    for (size_t i = 0; i < a8.size(); ++i) a[i] = ::ptxbench::testing::DecodeE4M3(a8[i]);
    for (size_t i = 0; i < b8.size(); ++i) b[i] = ::ptxbench::testing::DecodeE4M3(b8[i]);
    // Logical scales from the host mirror of the block_scale stream (bit-identical to the
    // device's, tested above).
    std::vector<float> sa(size_t(M) * kb), sb(size_t(nb) * kb);
    HostGenerate(sa.data(), sa.size(), static_cast<int>(BuiltinDType::kFP32), kDistBlockScale, seed,
                 1);
    HostGenerate(sb.data(), sb.size(), static_cast<int>(BuiltinDType::kFP32), kDistBlockScale, seed,
                 3);
    std::vector<double> ref;
    ::ptxbench::testing::BlockScaledGemm(shape, a, sa, b, sb, ref);
    std::string lines;
    bool task_layout_matches = false;
    Fp8Figures task_figures;
    int matching_layouts = 0;
    for (ScaleLayoutA la : {ScaleLayoutA::kKbRowsMContiguous, ScaleLayoutA::kMRowsKbContiguous}) {
      for (ScaleLayoutB lb : {ScaleLayoutB::kPaddedRows, ScaleLayoutB::kUnpaddedRows,
                              ScaleLayoutB::kKbRowsNbContiguous}) {
        const std::vector<float> sa_buf = ArrangeScalesA(sa, M, kb, la);
        const std::vector<float> sb_buf = ArrangeScalesB(sb, nb, kb, lb);
        DeviceBuffer SA = Upload(sa_buf.data(), sa_buf.size() * 4);
        DeviceBuffer SB = Upload(sb_buf.data(), sb_buf.size() * 4);
        REQUIRE(
            f.builtins->Fill32(C->get(), size_t(M) * N * 2, PoisonPattern(BuiltinDType::kBF16), s)
                .ok());
        auto run = (*baseline)->Run({A->get(), SA.get(), B->get(), SB.get()}, {C->get()}, s);
        INFO(run.message());
        REQUIRE(run.ok());
        REQUIRE(SynchronizeDevice().ok());
        const std::vector<uint16_t> c16 = DownloadBf16(*C, size_t(M) * N);
        std::vector<float> c(c16.size());
        for (size_t i = 0; i < c16.size(); ++i) c[i] = Bf16ToFloat(c16[i]);
        const Fp8Figures figures = Fp8Compare(c, ref, task->tolerance);
        // A layout matches when the library lands at its own precision (relative norm 0.0017
        // on the H200, 2026-12-02); a wrong layout scales blocks by unrelated factors (~1).
        // Not all-close: at K = 16384 the library itself has a few elements outside the
        // all-close rule against fp64 (5 of 98,304 on the H200).
        const bool matches = figures.relative_norm < 0.01;
        if (matches) ++matching_layouts;
        if (la == ScaleLayoutA::kKbRowsMContiguous && lb == ScaleLayoutB::kPaddedRows) {
          task_layout_matches = matches;
          task_figures = figures;
        }
        lines += std::string("\n  ") + Name(la) + " + " + Name(lb) + ": " +
                 (matches ? "MATCHES" : "differs") + "; " + Fp8Line(figures);
      }
    }
    WARN("cublaslt block-scaled fp8 gemm against fp64, workload "
         << w.name << " M=" << M << " N=" << N << " K=" << K << ", per scale layout:" << lines);
    WARN("cublaslt fp8 library error (task layout), " << w.name << ": " << Fp8Line(task_figures)
                                                      << "; algorithm "
                                                      << (*baseline)->Describe().dump());
    CHECK(matching_layouts >= 1);
    CHECK(task_layout_matches);
    // The task's tolerance must accept an exact (fp64) result against the library: the
    // checker compares with the library, so its own error is what an exact kernel shows.
    CHECK(task_figures.relative_norm < task->tolerance.max_relative_norm);
    const double n_elements = static_cast<double>(M) * static_cast<double>(N);
    CHECK(static_cast<double>(task_figures.outside_allclose) <=
          (1.0 - task->tolerance.matched_ratio) * n_elements);
  }
}

// The timed shape: the heuristic has algorithms for it (the fair baseline's candidates), the
// first computes the task (sampled elements against fp64, the task's scale layout drawn as the
// harness draws it) and its time is printed (0.96 TFLOP per call).
TEST_CASE("cuBLASLt's block-scaled fp8 GEMM has algorithms for the timed shape and computes it",
          "[gpu][fp8]") {
  GpuFixture& f = SharedGpu();
  cudaStream_t s = f.stream.get();
  auto task = LoadFp8GemmTask();
  INFO(task.status().message());
  REQUIRE(task.ok());
  const Workload* timed = nullptr;
  for (const Workload& w : task->workloads) {
    if (w.timed) timed = &w;
  }
  REQUIRE(timed != nullptr);
  auto candidates =
      CreateBaselineCandidates("cublaslt", kGemmFp8BlockScaledOperation, timed->axes, 8);
  INFO(candidates.status().message());
  REQUIRE(candidates.ok());
  REQUIRE_FALSE(candidates->empty());
  auto tensors = ResolveTensors(*task, *timed);
  REQUIRE(tensors.ok());
  auto set = TensorSet::Allocate(*tensors);
  INFO(set.status().message());
  REQUIRE(set.ok());
  REQUIRE(set->GenerateInputs(*f.builtins, 77, s).ok());
  const int64_t M = timed->axes.at("M"), N = timed->axes.at("N"), K = timed->axes.at("K");
  const std::vector<const void*> inputs = set->InputPointers();
  const std::vector<void*> outputs = set->OutputPointers();
  REQUIRE(inputs.size() == 4);
  REQUIRE(outputs.size() == 1);
  auto start = Event::Create(), end = Event::Create();
  REQUIRE(start.ok());
  REQUIRE(end.ok());
  std::string figures;
  for (size_t c = 0; c < candidates->size(); ++c) {
    Baseline& b = *(*candidates)[c];
    REQUIRE(b.Run(inputs, outputs, s).ok());
    std::vector<double> ms;
    for (int r = 0; r < 8; ++r) {
      REQUIRE(f.builtins->FlushL2(s).ok());
      REQUIRE(cudaEventRecord(start->get(), s) == cudaSuccess);
      REQUIRE(b.Run(inputs, outputs, s).ok());
      REQUIRE(cudaEventRecord(end->get(), s) == cudaSuccess);
      auto elapsed = ElapsedMs(*start, *end);
      REQUIRE(elapsed.ok());
      if (r >= 2) ms.push_back(*elapsed);
    }
    std::sort(ms.begin(), ms.end());
    const double median = ms[ms.size() / 2];
    figures += "\n  #" + std::to_string(c) + " " + b.Describe()["algorithm_config"].dump() + " " +
               std::to_string(median) + " ms, " +
               std::to_string(2.0 * double(M) * double(N) * double(K) / median / 1e9) + " TFLOP/s";
  }
  // The first candidate's C on 512 sampled elements against fp64.
  REQUIRE((*candidates)[0]->Run(inputs, outputs, s).ok());
  REQUIRE(SynchronizeDevice().ok());
  std::vector<uint8_t> a8(size_t(M * K)), b8(size_t(N * K));
  const int kb = static_cast<int>((K + 127) / 128), padded = 4 * ((kb + 3) / 4);
  std::vector<float> sa(size_t(kb * M)), sb(size_t((N + 127) / 128 * padded));
  REQUIRE(cudaMemcpy(a8.data(), inputs[0], a8.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
  REQUIRE(cudaMemcpy(sa.data(), inputs[1], sa.size() * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
  REQUIRE(cudaMemcpy(b8.data(), inputs[2], b8.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
  REQUIRE(cudaMemcpy(sb.data(), inputs[3], sb.size() * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
  std::vector<uint16_t> c16(size_t(M * N));
  REQUIRE(cudaMemcpy(c16.data(), outputs[0], c16.size() * 2, cudaMemcpyDeviceToHost) ==
          cudaSuccess);
  std::vector<float> decode(256);
  for (int i = 0; i < 256; ++i) decode[size_t(i)] = ::ptxbench::testing::DecodeE4M3(uint8_t(i));
  std::vector<float> got;
  std::vector<double> ref;
  uint64_t state = 12345;
  for (int sample = 0; sample < 512; ++sample) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const int64_t m = int64_t((state >> 33) % uint64_t(M));
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const int64_t n = int64_t((state >> 33) % uint64_t(N));
    double c = 0;
    for (int b = 0; b < kb; ++b) {
      double partial = 0;
      for (int64_t k = int64_t{128} * b; k < std::min<int64_t>(K, int64_t{128} * (b + 1)); ++k) {
        partial += double{decode[a8[size_t(m * K + k)]]} * decode[b8[size_t(n * K + k)]];
      }
      c += partial * sa[size_t(b * M + m)] * sb[size_t((n / 128) * padded + b)];
    }
    ref.push_back(c);
    got.push_back(Bf16ToFloat(c16[size_t(m * N + n)]));
  }
  const Fp8Figures sampled = Fp8Compare(got, ref, task->tolerance);
  WARN("cublaslt block-scaled fp8 candidates for "
       << M << "x" << N << "x" << K << ": " << candidates->size() << figures
       << "\n  #0 on 512 sampled elements against fp64: " << Fp8Line(sampled));
  CHECK(sampled.outside_allclose == 0);
  CHECK(sampled.relative_norm < task->tolerance.max_relative_norm);
}

// ---------------------------------------------------------------------------------------------
// cuDNN's paged GQA decode (kSdpaPagedDecodeOperation, the gqa_paged_decode task's baseline)
// against an fp64 host reference of the task's definition: one query token per sequence, K/V
// gathered through a shuffled page table, per-sequence context lengths with partial last pages,
// query head h reading key/value head h / (HQ / HK).

struct PagedDecode {
  int b = 2, hq = 8, hk = 1, d = 128, ps = 64, pps = 2, np = 8;
  std::map<std::string, int64_t> Axes() const {
    return {{"B", b}, {"HQ", hq}, {"HK", hk}, {"D", d}, {"PS", ps}, {"PPS", pps}, {"NP", np}};
  }
  size_t CacheElements() const { return size_t(np) * hk * ps * d; }
  float Scale() const { return static_cast<float>(1.0 / std::sqrt(double(d))); }
};

// The task's page table and context lengths, as the harness draws them (page_permutation over
// NP pages, length_ladder with max PPS·PS and jitter PS; tensors 3 and 4 of the task), from the
// host mirror, which is the device generator's bit for bit ("the paged task's integer inputs
// on the device equal the host mirror").
void PagedLayout(const PagedDecode& x, uint64_t seed, std::vector<int32_t>& table,
                 std::vector<int32_t>& lengths) {
  table.assign(size_t(x.b) * x.pps, -1);
  lengths.assign(size_t(x.b), -1);
  IndexDistributionArgs pages, ladder;
  pages.pages = x.np;
  ladder.max_length = int64_t(x.pps) * x.ps;
  ladder.jitter = x.ps;
  HostGenerate(table.data(), table.size(), static_cast<int>(BuiltinDType::kInt32),
               kDistPagePermutation, seed, 3, 0, pages);
  HostGenerate(lengths.data(), lengths.size(), static_cast<int>(BuiltinDType::kInt32),
               kDistLengthLadder, seed, 4, 0, ladder);
}

absl::StatusOr<Task> LoadPagedDecodeTask() {
  const char* source = std::getenv("PTXBENCH_SOURCE_DIR");
  return LoadTask(std::string(source != nullptr ? source : PTXBENCH_SOURCE_DIR_DEFAULT) +
                  "/tasks/gqa_paged_decode_hq64_hk8_d128");
}

// The engine's path (ResolveTensors, TensorSet::GenerateInputs with a secret-style sample seed)
// against the host mirror, for every workload of the task: bit for bit, the pages distinct and
// inside the pool, the lengths inside 1 .. PPS·PS. And the host-upload path (the instrumented
// run's fallback) gives the same integers.
TEST_CASE("the paged task's integer inputs on the device equal the host mirror", "[gpu][paged]") {
  GpuFixture& f = SharedGpu();
  cudaStream_t s = f.stream.get();
  auto task = LoadPagedDecodeTask();
  INFO(task.status().message());
  REQUIRE(task.ok());
  for (const Workload& w : task->workloads) {
    auto tensors = ResolveTensors(*task, w);
    REQUIRE(tensors.ok());
    auto set = TensorSet::Allocate(*tensors);
    REQUIRE(set.ok());
    const uint64_t seed = SampleSeed(0x5EC2E7ull, 3);
    REQUIRE(set->GenerateInputs(*f.builtins, seed, s).ok());
    REQUIRE(SynchronizeDevice().ok());
    const int64_t pages = w.axes.at("NP"), longest = w.axes.at("PPS") * w.axes.at("PS");
    for (int index : {3, 4}) {
      const WorkloadTensor& t = (*tensors)[size_t(index)];
      INFO(w.name << " " << t.name);
      std::vector<int32_t> device(t.elements), host(t.elements);
      REQUIRE(cudaMemcpy(device.data(), set->pointer(index), t.bytes, cudaMemcpyDeviceToHost) ==
              cudaSuccess);
      HostGenerate(host.data(), t.elements, static_cast<int>(t.dtype), t.distribution, seed,
                   static_cast<uint32_t>(index), 0, t.index_args);
      CHECK(device == host);
      if (index == 3) {
        CHECK(t.distribution == kDistPagePermutation);
        CHECK(t.index_args.pages == pages);
        std::vector<int32_t> sorted = device;
        std::sort(sorted.begin(), sorted.end());
        CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());
        CHECK(sorted.front() >= 0);
        CHECK(sorted.back() < pages);
      } else {
        CHECK(t.distribution == kDistLengthLadder);
        CHECK(*std::min_element(device.begin(), device.end()) >= 1);
        CHECK(*std::max_element(device.begin(), device.end()) <= longest);
        CHECK(*std::max_element(device.begin(), device.end()) > longest - w.axes.at("PS"));
      }
    }
    if (w.timed) continue;  // The host path of 1 GB of bf16 cache is slow and adds nothing.
    auto uploaded = TensorSet::Allocate(*tensors);
    REQUIRE(uploaded.ok());
    REQUIRE(uploaded->UploadInputsFromHost(seed, s).ok());
    for (int index : {3, 4}) {
      const WorkloadTensor& t = (*tensors)[size_t(index)];
      std::vector<int32_t> a(t.elements), b(t.elements);
      REQUIRE(cudaMemcpy(a.data(), set->pointer(index), t.bytes, cudaMemcpyDeviceToHost) ==
              cudaSuccess);
      REQUIRE(cudaMemcpy(b.data(), uploaded->pointer(index), t.bytes, cudaMemcpyDeviceToHost) ==
              cudaSuccess);
      CHECK(a == b);
    }
  }
}

// O [B, HQ, D] and LSE [B, HQ] in fp64; `head_of` maps a query head to its key/value head.
template <typename HeadOf>
void HostPagedDecode(const PagedDecode& x, const std::vector<float>& q, const std::vector<float>& k,
                     const std::vector<float>& v, const std::vector<int32_t>& table,
                     const std::vector<int32_t>& lengths, HeadOf head_of, std::vector<double>& o,
                     std::vector<double>& lse) {
  o.assign(size_t(x.b) * x.hq * x.d, 0);
  lse.assign(size_t(x.b) * x.hq, 0);
  for (int b = 0; b < x.b; ++b) {
    for (int h = 0; h < x.hq; ++h) {
      const int kv = head_of(h);
      const float* qrow = &q[(size_t(b) * x.hq + h) * x.d];
      std::vector<double> logits(static_cast<size_t>(lengths[size_t(b)]));
      double m = -std::numeric_limits<double>::infinity();
      auto row = [&](int t) {
        const int64_t page = table[size_t(b) * x.pps + t / x.ps];
        return ((size_t(page) * x.hk + kv) * x.ps + t % x.ps) * x.d;
      };
      for (int t = 0; t < lengths[size_t(b)]; ++t) {
        double dot = 0;
        for (int i = 0; i < x.d; ++i) dot += double(qrow[i]) * k[row(t) + i];
        logits[size_t(t)] = dot * x.Scale();
        m = std::max(m, logits[size_t(t)]);
      }
      double z = 0;
      for (double& l : logits) z += (l = std::exp(l - m));
      double* out = &o[(size_t(b) * x.hq + h) * x.d];
      for (int t = 0; t < lengths[size_t(b)]; ++t) {
        for (int i = 0; i < x.d; ++i) out[i] += logits[size_t(t)] / z * v[row(t) + i];
      }
      lse[size_t(b) * x.hq + h] = m + std::log(z);
    }
  }
}

TEST_CASE("cuDNN's paged GQA decode matches the fp64 reference of the task",
          "[gpu][cudnn][paged]") {
  GpuFixture& f = SharedGpu();
  cudaStream_t s = f.stream.get();
  // The task's correctness workloads (tasks/gqa_paged_decode_hq64_hk8_d128).
  std::vector<PagedDecode> shapes(3);
  shapes[1] = {5, 16, 2, 128, 64, 9, 64};
  shapes[2] = {3, 64, 8, 128, 64, 33, 128};
  for (const PagedDecode& x : shapes) {
    for (uint64_t seed : {31, 32}) {
      std::vector<int32_t> table, lengths;
      PagedLayout(x, seed, table, lengths);
      const size_t q_elements = size_t(x.b) * x.hq * x.d;
      auto q = DeviceBuffer::Allocate(q_elements * 2), o = DeviceBuffer::Allocate(q_elements * 2),
           k = DeviceBuffer::Allocate(x.CacheElements() * 2),
           v = DeviceBuffer::Allocate(x.CacheElements() * 2),
           lse = DeviceBuffer::Allocate(size_t(x.b) * x.hq * 4);
      REQUIRE((q.ok() && o.ok() && k.ok() && v.ok() && lse.ok()));
      REQUIRE(
          f.builtins->Generate(q->get(), q_elements, BuiltinDType::kBF16, kDistNormal, seed, 0, s)
              .ok());
      REQUIRE(
          f.builtins
              ->Generate(k->get(), x.CacheElements(), BuiltinDType::kBF16, kDistNormal, seed, 1, s)
              .ok());
      REQUIRE(
          f.builtins
              ->Generate(v->get(), x.CacheElements(), BuiltinDType::kBF16, kDistNormal, seed, 2, s)
              .ok());
      DeviceBuffer table_d = Upload(table.data(), table.size() * 4);
      DeviceBuffer lengths_d = Upload(lengths.data(), lengths.size() * 4);
      auto baseline = CreateBaseline("cudnn", kSdpaPagedDecodeOperation, x.Axes());
      INFO(baseline.status().message());
      REQUIRE(baseline.ok());
      absl::Status run =
          (*baseline)->Run({q->get(), k->get(), v->get(), table_d.get(), lengths_d.get()},
                           {o->get(), lse->get()}, s);
      INFO(run.message());
      REQUIRE(run.ok());
      REQUIRE(SynchronizeDevice().ok());
      auto qh = DownloadAsFloat(*q, q_elements, true),
           kh = DownloadAsFloat(*k, x.CacheElements(), true),
           vh = DownloadAsFloat(*v, x.CacheElements(), true),
           oh = DownloadAsFloat(*o, q_elements, true),
           lseh = DownloadAsFloat(*lse, size_t(x.b) * x.hq, false);
      const int group = x.hq / x.hk;
      std::vector<double> ref_o, ref_lse;
      HostPagedDecode(
          x, qh, kh, vh, table, lengths, [&](int h) { return h / group; }, ref_o, ref_lse);
      double lse_err = 0;
      for (size_t i = 0; i < lseh.size(); ++i)
        lse_err = std::max(lse_err, std::abs(lseh[i] - ref_lse[i]));
      const size_t failures = AllCloseFailures(oh, ref_o, 0.01, 0.01);
      const double norm = RelativeNorm(oh, ref_o);
      // What the family's decoys compute, to show the workloads tell them apart: pages read
      // contiguously, the key/value head h % HK (interleaved instead of grouped), every
      // sequence at its full PPS·PS tokens.
      std::vector<int32_t> contiguous(table.size());
      std::iota(contiguous.begin(), contiguous.end(), 0);
      std::vector<int32_t> full(lengths.size(), x.pps * x.ps);
      std::vector<double> o_contiguous, o_interleaved, o_full, unused;
      HostPagedDecode(
          x, qh, kh, vh, contiguous, lengths, [&](int h) { return h / group; }, o_contiguous,
          unused);
      HostPagedDecode(
          x, qh, kh, vh, table, lengths, [&](int h) { return h % x.hk; }, o_interleaved, unused);
      HostPagedDecode(
          x, qh, kh, vh, table, full, [&](int h) { return h / group; }, o_full, unused);
      auto as_float = [](const std::vector<double>& d) {
        return std::vector<float>(d.begin(), d.end());
      };
      WARN("cudnn paged decode B="
           << x.b << " HQ=" << x.hq << " HK=" << x.hk << " PPS=" << x.pps << " seed=" << seed
           << ": O allclose failures " << failures << ", O rel-norm " << norm
           << ", LSE max abs err " << lse_err << "; decoys' rel-norm: contiguous pages "
           << RelativeNorm(as_float(o_contiguous), ref_o) << ", interleaved heads "
           << RelativeNorm(as_float(o_interleaved), ref_o) << ", full length "
           << RelativeNorm(as_float(o_full), ref_o) << "; " << (*baseline)->Describe().dump());
      CHECK(failures == 0);
      CHECK(norm < 0.005);
      CHECK(lse_err < 1e-3);
      CHECK(RelativeNorm(as_float(o_contiguous), ref_o) > 0.1);
      CHECK(RelativeNorm(as_float(o_full), ref_o) > 0.1);
      if (x.hk > 1) CHECK(RelativeNorm(as_float(o_interleaved), ref_o) > 0.1);
    }
  }
}

// The timed shape: its time and bandwidth (the roofline's meaning for a memory-bound task).
TEST_CASE("cuDNN's paged GQA decode time on the timed shape", "[gpu][cudnn][paged]") {
  GpuFixture& f = SharedGpu();
  cudaStream_t s = f.stream.get();
  const PagedDecode x{64, 64, 8, 128, 64, 128, 8192};
  std::vector<int32_t> table, lengths;
  PagedLayout(x, 41, table, lengths);
  const size_t q_elements = size_t(x.b) * x.hq * x.d;
  auto q = DeviceBuffer::Allocate(q_elements * 2), o = DeviceBuffer::Allocate(q_elements * 2),
       k = DeviceBuffer::Allocate(x.CacheElements() * 2),
       v = DeviceBuffer::Allocate(x.CacheElements() * 2),
       lse = DeviceBuffer::Allocate(size_t(x.b) * x.hq * 4);
  REQUIRE((q.ok() && o.ok() && k.ok() && v.ok() && lse.ok()));
  REQUIRE(
      f.builtins->Generate(q->get(), q_elements, BuiltinDType::kBF16, kDistNormal, 41, 0, s).ok());
  REQUIRE(
      f.builtins->Generate(k->get(), x.CacheElements(), BuiltinDType::kBF16, kDistNormal, 41, 1, s)
          .ok());
  REQUIRE(
      f.builtins->Generate(v->get(), x.CacheElements(), BuiltinDType::kBF16, kDistNormal, 41, 2, s)
          .ok());
  DeviceBuffer table_d = Upload(table.data(), table.size() * 4);
  DeviceBuffer lengths_d = Upload(lengths.data(), lengths.size() * 4);
  auto baseline = CreateBaseline("cudnn", kSdpaPagedDecodeOperation, x.Axes());
  INFO(baseline.status().message());
  REQUIRE(baseline.ok());
  const std::vector<const void*> inputs = {q->get(), k->get(), v->get(), table_d.get(),
                                           lengths_d.get()};
  REQUIRE((*baseline)->Run(inputs, {o->get(), lse->get()}, s).ok());
  auto start = Event::Create(), end = Event::Create();
  REQUIRE((start.ok() && end.ok()));
  std::vector<double> ms;
  for (int r = 0; r < 23; ++r) {
    REQUIRE(f.builtins->FlushL2(s).ok());
    REQUIRE(cudaEventRecord(start->get(), s) == cudaSuccess);
    REQUIRE((*baseline)->Run(inputs, {o->get(), lse->get()}, s).ok());
    REQUIRE(cudaEventRecord(end->get(), s) == cudaSuccess);
    auto elapsed = ElapsedMs(*start, *end);
    REQUIRE(elapsed.ok());
    if (r >= 3) ms.push_back(*elapsed);
  }
  std::sort(ms.begin(), ms.end());
  const double tokens = std::accumulate(lengths.begin(), lengths.end(), 0.0);
  const double kv_bytes = 4.0 * x.hk * x.d * tokens;
  WARN("cudnn paged decode timed shape: median "
       << ms[ms.size() / 2] << " ms over " << ms.size() << " runs, " << tokens
       << " context tokens, K/V " << kv_bytes / 1e9 << " GB, "
       << kv_bytes / (ms[ms.size() / 2] * 1e-3) / 1e12 << " TB/s; "
       << (*baseline)->Describe().dump());
  CHECK(ms[ms.size() / 2] > 0);
}

}  // namespace
}  // namespace ptxbench::gpu
