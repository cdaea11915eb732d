// The GPU comparison (Builtins::Compare, builtin_kernels.cu) against its oracle, the CPU
// comparison of compare.h, on crafted buffers: every element format, poison, NaN, Inf,
// non-finite references, values on the tolerance boundary, mismatches spread over many blocks
// (the first eight must be the lowest indices), both rules, and a timed-GEMM-sized output
// (label "gpu": scripts/gpu-test runs it on the GPU machine), and the fp64 SDPA backward of the
// fp64 reference rule against its host loop, with its time at S = 32768 ([fp64ref]).
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tests/gpu/gpu_fixture.h"
#include "worker/engine/gpu/compare.h"
#include "worker/engine/gpu/poison.h"
#include "worker/engine/gpu/runtime.h"

namespace ptxbench::gpu {
namespace {

bool SameNumber(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

// Runs both comparisons and checks that they agree field by field.
CompareReport CheckAgainstHost(const void* got, const void* expected, uint64_t count,
                               ElementType type, const std::vector<int64_t>& shape,
                               const ToleranceRule& rule, uint32_t poison) {
  const size_t bytes = count * ElementBytes(type);
  DeviceBuffer g = Upload(got, bytes), e = Upload(expected, bytes);
  auto gpu = SharedGpu().builtins->Compare(g.get(), e.get(), count, type, shape, rule, poison,
                                           SharedGpu().stream.get());
  INFO(gpu.status().message());
  REQUIRE(gpu.ok());
  CompareReport host = CompareOutputs(got, expected, count, type, shape, rule, poison, 4);
  CHECK(gpu->pass == host.pass);
  CHECK(gpu->reason == host.reason);
  CHECK(gpu->elements == host.elements);
  CHECK(gpu->mismatched == host.mismatched);
  CHECK(gpu->nonfinite == host.nonfinite);
  CHECK(gpu->unwritten == host.unwritten);
  CHECK(gpu->reference_nonfinite == host.reference_nonfinite);
  CHECK(gpu->max_abs_error == host.max_abs_error);
  CHECK(gpu->max_rel_error == host.max_rel_error);
  CHECK(gpu->matched_ratio == host.matched_ratio);
  CHECK(gpu->reference_norm == Approx(host.reference_norm).epsilon(1e-12));
  CHECK(gpu->relative_norm == Approx(host.relative_norm).epsilon(1e-9).margin(1e-300));
  CHECK(gpu->block_norm_checked == host.block_norm_checked);
  CHECK(gpu->block_norm_pass == host.block_norm_pass);
  CHECK(gpu->worst_block == host.worst_block);
  CHECK(gpu->block_rows == host.block_rows);
  CHECK(gpu->worst_block_relative_norm ==
        Approx(host.worst_block_relative_norm).epsilon(1e-9).margin(1e-300));
  REQUIRE(gpu->first_mismatches.size() == host.first_mismatches.size());
  for (size_t i = 0; i < host.first_mismatches.size(); ++i) {
    const Mismatch &a = gpu->first_mismatches[i], &b = host.first_mismatches[i];
    INFO("mismatch #" << i << " host index " << b.index);
    CHECK(a.index == b.index);
    CHECK(a.coordinates == b.coordinates);
    CHECK(a.kind == b.kind);
    CHECK(SameNumber(a.got, b.got));
    CHECK(SameNumber(a.expected, b.expected));
  }
  return *gpu;
}

uint16_t Bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<uint16_t>((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
}

TEST_CASE("GPU compare: bf16 with poison, NaN, Inf and mismatches across blocks",
          "[gpu][compare]") {
  // 3 M + 17 elements: many blocks, a ragged last one.
  const uint64_t n = 3000017;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<uint16_t> expected(n), got(n);
  for (uint64_t i = 0; i < n; ++i) {
    expected[i] = Bf16(normal(rng));
    got[i] = expected[i];
    // Small differences (one bf16 step) on some elements: inside or just outside tolerance.
    if (i % 5 == 0) got[i] = static_cast<uint16_t>(expected[i] + 1);
  }
  // Crafted failures, the first eight by index in different blocks.
  const uint16_t poison = static_cast<uint16_t>(kPoisonBF16 & 0xFFFF);
  got[5] = poison;
  got[70001] = Bf16(std::nanf(""));
  got[70002] = Bf16(INFINITY);
  got[900000] = Bf16(-INFINITY);
  got[1234567] = static_cast<uint16_t>(expected[1234567] ^ 0x4000);
  got[2000000] = poison;
  got[2500000] = static_cast<uint16_t>(expected[2500000] ^ 0x0100);
  got[2999999] = static_cast<uint16_t>(expected[2999999] ^ 0x4000);
  got[n - 1] = poison;
  got[n - 2] = static_cast<uint16_t>(expected[n - 2] ^ 0x4000);
  CompareReport r = CheckAgainstHost(got.data(), expected.data(), n, ElementType::kBF16,
                                     {1000003, 3}, ToleranceRule{}, kPoisonBF16);
  CHECK_FALSE(r.pass);
  CHECK(r.unwritten == 3);
  CHECK(r.first_mismatches.size() == kMaxReportedMismatches);
  CHECK(r.first_mismatches[0].index == 5);
  CHECK(r.first_mismatches[0].kind == "unwritten");

  // A non-finite reference element is reported as such, never compared.
  expected[17] = Bf16(std::nanf(""));
  CompareReport ref_bad = CheckAgainstHost(got.data(), expected.data(), n, ElementType::kBF16,
                                           {static_cast<int64_t>(n)}, ToleranceRule{}, kPoisonBF16);
  CHECK(ref_bad.reference_nonfinite == 1);
}

TEST_CASE("GPU compare: values on the atol/rtol boundary, fp32 and fp16", "[gpu][compare]") {
  // fp32: errors just below, at and just above atol = rtol·|ref| = 0.01 (ref 1.0), and cases
  // where only one of the two bounds is exceeded.
  std::vector<float> e, g;
  for (int k = 0; k < 50000; ++k) {
    float ref = 1.0f + static_cast<float>(k % 13) * 0.25f;
    float step = std::nextafter(0.01f * ref, 1.0f) - 0.01f * ref;
    float delta = 0.01f * ref + static_cast<float>(k % 3 - 1) * step;
    e.push_back(ref);
    g.push_back(ref + ((k % 2) ? delta : -delta));
  }
  e.push_back(100.0f);  // |err| 0.5 > atol but <= rtol·|ref|: matches.
  g.push_back(100.5f);
  e.push_back(0.0f);  // Zero reference: only atol applies.
  g.push_back(0.011f);
  e.push_back(0.5f);
  g.push_back(std::nanf(""));
  ToleranceRule rule;
  CompareReport r = CheckAgainstHost(g.data(), e.data(), e.size(), ElementType::kFP32,
                                     {static_cast<int64_t>(e.size())}, rule, kPoisonFP32);
  CHECK(r.mismatched > 0);
  rule.matched_ratio = 0.0;
  CheckAgainstHost(g.data(), e.data(), e.size(), ElementType::kFP32,
                   {static_cast<int64_t>(e.size())}, rule, kPoisonFP32);

  // fp16, subnormals included; poison and an unwritten tail.
  std::vector<uint16_t> he(70000), hg(70000);
  for (size_t i = 0; i < he.size(); ++i) {
    he[i] = static_cast<uint16_t>((i * 2654435761u) & 0x7BFF);  // finite, any exponent
    hg[i] = static_cast<uint16_t>(he[i] + ((i % 11) == 0 ? 3 : 0));
  }
  for (size_t i = 69990; i < he.size(); ++i) hg[i] = static_cast<uint16_t>(kPoisonFP16 & 0xFFFF);
  CheckAgainstHost(hg.data(), he.data(), he.size(), ElementType::kFP16, {700, 100}, ToleranceRule{},
                   kPoisonFP16);
}

TEST_CASE("GPU compare: e4m3 and int32", "[gpu][compare]") {
  std::vector<uint8_t> fe(40000), fg(40000);
  for (size_t i = 0; i < fe.size(); ++i) {
    fe[i] = static_cast<uint8_t>(i % 255 == 0x7F ? 0x10 : i % 255);  // avoid the NaN code in refs
    if ((fe[i] & 0x7F) == 0x7F) fe[i] = 0x11;
    fg[i] = static_cast<uint8_t>((i % 17 == 0) ? fe[i] ^ 0x01 : fe[i]);
  }
  fg[123] = 0xFF;  // the poison: unwritten
  fg[124] = 0x7F;  // NaN
  CheckAgainstHost(fg.data(), fe.data(), fe.size(), ElementType::kFP8E4M3, {200, 200},
                   ToleranceRule{}, kPoisonFP8E4M3);
  std::vector<int32_t> ie(30000), ig(30000);
  for (size_t i = 0; i < ie.size(); ++i) {
    ie[i] = static_cast<int32_t>(i * 7919 % 1000) - 500;
    ig[i] = ie[i] + ((i % 1001 == 0) ? 1 : 0);
  }
  ig[29999] = static_cast<int32_t>(kPoisonInt32);
  CheckAgainstHost(ig.data(), ie.data(), ie.size(), ElementType::kInt32, {30000}, ToleranceRule{},
                   kPoisonInt32);
}

TEST_CASE("GPU compare: relative-norm rule, tiny and empty outputs", "[gpu][compare]") {
  std::vector<float> e(100), g(100);
  for (int i = 0; i < 100; ++i) {
    e[i] = static_cast<float>(i % 7) - 3.0f;
    g[i] = e[i] + ((i == 5) ? 0.5f : 0.0f);
  }
  ToleranceRule rule;
  rule.all_close = false;
  rule.max_relative_norm = 0.05;
  CHECK(
      CheckAgainstHost(g.data(), e.data(), 100, ElementType::kFP32, {100}, rule, kPoisonFP32).pass);
  rule.max_relative_norm = 0.001;
  CHECK_FALSE(
      CheckAgainstHost(g.data(), e.data(), 100, ElementType::kFP32, {100}, rule, kPoisonFP32).pass);
  auto empty =
      SharedGpu().builtins->Compare(nullptr, nullptr, 0, ElementType::kBF16, {0}, ToleranceRule{},
                                    kPoisonBF16, SharedGpu().stream.get());
  REQUIRE(empty.ok());
  CHECK_FALSE(empty->pass);
  CHECK(empty->reason == "empty output");
}

TEST_CASE("GPU compare: the block rule on a backward-shaped output, one skipped 64-row block",
          "[gpu][compare]") {
  // [B=2, H=3, S=320, D=128] bf16: 30 blocks of 64 rows, the last of each head whole; S = 320 is
  // not a multiple of the compare's usual 4096-element ranges, so the block ranges are exercised.
  const std::vector<int64_t> shape = {2, 3, 320, 128};
  const uint64_t n = 2 * 3 * 320 * 128;
  std::mt19937 rng(11);
  std::normal_distribution<float> value(0.0f, 1.0f), noise(0.0f, 0.003f);
  std::vector<uint16_t> e(n), g(n);
  for (uint64_t i = 0; i < n; ++i) {
    const float x = value(rng);
    e[i] = Bf16(x);
    g[i] = Bf16(x * (1.0f + noise(rng)));
  }
  ToleranceRule rule;
  rule.all_close = false;
  rule.max_relative_norm = 0.01;
  rule.block_rows = 64;
  rule.max_block_relative_norm = 0.05;
  CompareReport honest =
      CheckAgainstHost(g.data(), e.data(), n, ElementType::kBF16, shape, rule, kPoisonBF16);
  CHECK(honest.pass);
  CHECK(honest.block_norm_checked);
  CHECK(honest.worst_block_relative_norm < 0.01);
  // Block 17 (rows 1088..1151: head 3, rows 128..191) zeroed: overall ~sqrt(1/30) = 0.18 would
  // fail too, so also a run where only an eighth of the block's rows are zero (overall ~0.065,
  // under a 0.1 bound; the block at ~0.35).
  for (uint64_t i = 17 * 64 * 128; i < 17 * 64 * 128 + 8 * 128; ++i) g[i] = 0;
  rule.max_relative_norm = 0.1;
  CompareReport skipped =
      CheckAgainstHost(g.data(), e.data(), n, ElementType::kBF16, shape, rule, kPoisonBF16);
  CHECK_FALSE(skipped.pass);
  CHECK(skipped.relative_norm_pass);
  CHECK_FALSE(skipped.block_norm_pass);
  CHECK(skipped.worst_block == 17);
  CHECK(skipped.reason.find("block 17 (rows 1088..1151)") != std::string::npos);
}

TEST_CASE("GPU compare: a timed-GEMM output (8192 x 7168 bf16), GPU against CPU time",
          "[gpu][compare]") {
  const uint64_t n = 8192ull * 7168;
  std::vector<uint16_t> e(n), g(n);
  for (uint64_t i = 0; i < n; ++i) {
    e[i] = Bf16(std::sin(static_cast<float>(i % 100003)) * 20.0f);
    g[i] = (i % 4099 == 0) ? static_cast<uint16_t>(e[i] ^ 1) : e[i];
  }
  DeviceBuffer gd = Upload(g.data(), n * 2), ed = Upload(e.data(), n * 2);
  using Clock = std::chrono::steady_clock;
  double best_gpu = 1e9;
  CompareReport gpu;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = Clock::now();
    auto r = SharedGpu().builtins->Compare(gd.get(), ed.get(), n, ElementType::kBF16, {8192, 7168},
                                           ToleranceRule{}, kPoisonBF16, SharedGpu().stream.get());
    best_gpu = std::min(best_gpu, std::chrono::duration<double>(Clock::now() - t0).count());
    REQUIRE(r.ok());
    gpu = *r;
  }
  auto t1 = Clock::now();
  CompareReport host = CompareOutputs(g.data(), e.data(), n, ElementType::kBF16, {8192, 7168},
                                      ToleranceRule{}, kPoisonBF16);
  double host_seconds = std::chrono::duration<double>(Clock::now() - t1).count();
  CHECK(gpu.pass == host.pass);
  CHECK(gpu.mismatched == host.mismatched);
  CHECK(gpu.max_abs_error == host.max_abs_error);
  CHECK(gpu.max_rel_error == host.max_rel_error);
  CHECK(gpu.relative_norm == Approx(host.relative_norm).epsilon(1e-9));
  // Reported for docs/measurement.md (scripts/gpu-test keeps the Catch2 XML).
  WARN("compare of 58.7 M bf16 elements: GPU " << best_gpu * 1e3 << " ms (best of 5), CPU "
                                               << host_seconds * 1e3 << " ms");
  CHECK(best_gpu < host_seconds);
}

// ---------------------------------------------------------------- the fp64 reference
// Builtins::SdpaBackwardFp64 (the backward tasks' fp64 reference rule) against the host fp64
// loop of compare.h, and its time at the causal task's `long` workload (S = 32768).

double Bf16ToDouble(uint16_t bits) {
  const uint32_t word = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &word, 4);
  return f;
}

std::vector<double> DownloadDoubles(const DeviceBuffer& buffer, size_t count) {
  std::vector<double> out(count);
  REQUIRE(cudaMemcpy(out.data(), buffer.get(), count * sizeof(double), cudaMemcpyDeviceToHost) ==
          cudaSuccess);
  return out;
}

// Spiky bf16 draws (N(0,1) with 1 % of elements x8), as the backward tasks' inputs.
std::vector<uint16_t> SpikyBf16(size_t count, std::mt19937_64& rng) {
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> uniform;
  std::vector<uint16_t> out(count);
  for (size_t i = 0; i < count; ++i) {
    const float x = normal(rng);
    out[i] = Bf16(uniform(rng) < 0.01f ? 8 * x : x);
  }
  return out;
}

TEST_CASE("GPU fp64 SDPA backward: equals the host fp64 loop at S = 256 and 200, causal or not",
          "[gpu][compare][fp64ref]") {
  struct Case {
    int64_t heads, s;
    bool causal;
  };
  for (const Case& c :
       {Case{2, 256, false}, Case{2, 256, true}, Case{1, 200, false}, Case{1, 200, true}}) {
    INFO("heads " << c.heads << " S " << c.s << " causal " << c.causal);
    constexpr int64_t kD = 128;
    SdpaFp64Shape shape{c.heads, c.s, kD, static_cast<float>(1.0 / std::sqrt(128.0)), c.causal};
    const size_t n = static_cast<size_t>(c.heads * c.s * kD), rows = c.heads * c.s;
    std::mt19937_64 rng(c.s * 2 + c.causal);
    std::vector<uint16_t> q = SpikyBf16(n, rng), k = SpikyBf16(n, rng), v = SpikyBf16(n, rng),
                          d_o = SpikyBf16(n, rng);
    auto to_double = [](const std::vector<uint16_t>& x) {
      std::vector<double> out(x.size());
      for (size_t i = 0; i < x.size(); ++i) out[i] = Bf16ToDouble(x[i]);
      return out;
    };
    std::vector<double> qd = to_double(q), kd = to_double(k), vd = to_double(v),
                        dod = to_double(d_o);
    // The forward state as a library hands it over: O rounded to bf16, LSE to fp32.
    std::vector<uint16_t> o(n);
    std::vector<float> lse(rows);
    for (int64_t h = 0; h < c.heads; ++h) {
      for (int64_t i = 0; i < c.s; ++i) {
        const int64_t keys = c.causal ? i + 1 : c.s;
        std::vector<double> score(keys);
        double top = -INFINITY;
        for (int64_t j = 0; j < keys; ++j) {
          double x = 0;
          for (int64_t e = 0; e < kD; ++e)
            x += qd[(h * c.s + i) * kD + e] * kd[(h * c.s + j) * kD + e];
          score[j] = shape.scale * x;
          top = std::max(top, score[j]);
        }
        double sum = 0;
        for (double x : score) sum += std::exp(x - top);
        const double l = top + std::log(sum);
        lse[h * c.s + i] = static_cast<float>(l);
        for (int64_t e = 0; e < kD; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < keys; ++j)
            acc += std::exp(score[j] - l) * vd[(h * c.s + j) * kD + e];
          o[(h * c.s + i) * kD + e] = Bf16(static_cast<float>(acc));
        }
      }
    }
    std::vector<double> od = to_double(o), lsed(lse.begin(), lse.end());
    std::vector<double> dq, dk, dv;
    SdpaBackwardFp64Host(shape, qd, kd, vd, od, dod, lsed, &dq, &dk, &dv);

    DeviceBuffer gq = Upload(q.data(), n * 2), gk = Upload(k.data(), n * 2),
                 gv = Upload(v.data(), n * 2), go = Upload(o.data(), n * 2),
                 gdo = Upload(d_o.data(), n * 2), glse = Upload(lse.data(), rows * 4);
    auto alloc = [&] {
      auto b = DeviceBuffer::Allocate(n * sizeof(double));
      REQUIRE(b.ok());
      return std::move(*b);
    };
    DeviceBuffer gdq = alloc(), gdk = alloc(), gdv = alloc();
    cudaStream_t stream = SharedGpu().stream.get();
    absl::Status run = SharedGpu().builtins->SdpaBackwardFp64(
        shape, gq.get(), gk.get(), gv.get(), go.get(), gdo.get(), glse.get(),
        static_cast<double*>(gdq.get()), static_cast<double*>(gdk.get()),
        static_cast<double*>(gdv.get()), stream);
    INFO(run.message());
    REQUIRE(run.ok());
    REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
    const char* names[] = {"dQ", "dK", "dV"};
    const std::vector<double>* host[] = {&dq, &dk, &dv};
    const DeviceBuffer* device[] = {&gdq, &gdk, &gdv};
    for (int x = 0; x < 3; ++x) {
      INFO(names[x]);
      std::vector<double> got = DownloadDoubles(*device[x], n);
      double err_sq = 0, ref_sq = 0;
      for (size_t i = 0; i < n; ++i) {
        err_sq += (got[i] - (*host[x])[i]) * (got[i] - (*host[x])[i]);
        ref_sq += (*host[x])[i] * (*host[x])[i];
      }
      // Summation order alone differs (fma and tile order): ~1e-15 relative.
      CHECK(ref_sq > 0);
      CHECK(std::sqrt(err_sq / ref_sq) < 1e-12);
      // The GPU's bf16-against-fp64 sums equal the CPU mirror's on a bf16 rounding of the host
      // values (about 2^-9 relative per element: a figure near 0.0023).
      std::vector<uint16_t> rounded(n);
      for (size_t i = 0; i < n; ++i) rounded[i] = Bf16(static_cast<float>((*host[x])[i] * 1.003));
      DeviceBuffer grounded = Upload(rounded.data(), n * 2);
      auto sums = SharedGpu().builtins->Fp64ErrorSums(grounded.get(), ElementType::kBF16,
                                                      static_cast<const double*>(device[x]->get()),
                                                      n, stream);
      REQUIRE(sums.ok());
      const Fp64Sums cpu = Fp64ErrorSums(rounded.data(), ElementType::kBF16, got.data(), n);
      CHECK(sums->err_sq == Approx(cpu.err_sq).epsilon(1e-12));
      CHECK(sums->ref_sq == Approx(cpu.ref_sq).epsilon(1e-12));
      CHECK(Fp64RelativeNorm(*sums) == Approx(0.003).margin(0.002));
    }
  }
}

TEST_CASE("GPU fp64 SDPA backward: time at the causal long workload (S = 32768, D = 128)",
          "[gpu][compare][fp64ref]") {
  constexpr int64_t kS = 32768, kD = 128;
  const size_t n = kS * kD;
  SdpaFp64Shape shape{1, kS, kD, static_cast<float>(1.0 / std::sqrt(128.0)), true};
  std::mt19937_64 rng(7);
  std::vector<uint16_t> q = SpikyBf16(n, rng), k = SpikyBf16(n, rng), v = SpikyBf16(n, rng),
                        d_o = SpikyBf16(n, rng), o = SpikyBf16(n, rng);
  // Not the forward's LSE (that needs O(S^2 D) on the host): ln(i + 1) + 1/2 keeps P in range,
  // which is all the timing needs.
  std::vector<float> lse(kS);
  for (int64_t i = 0; i < kS; ++i) lse[i] = static_cast<float>(std::log(i + 1.0) + 0.5);
  DeviceBuffer gq = Upload(q.data(), n * 2), gk = Upload(k.data(), n * 2),
               gv = Upload(v.data(), n * 2), go = Upload(o.data(), n * 2),
               gdo = Upload(d_o.data(), n * 2), glse = Upload(lse.data(), kS * 4);
  auto alloc = [&] {
    auto b = DeviceBuffer::Allocate(n * sizeof(double));
    REQUIRE(b.ok());
    return std::move(*b);
  };
  DeviceBuffer gdq = alloc(), gdk = alloc(), gdv = alloc();
  cudaStream_t stream = SharedGpu().stream.get();
  auto run = [&](bool all) {
    const auto t0 = std::chrono::steady_clock::now();
    absl::Status status = SharedGpu().builtins->SdpaBackwardFp64(
        shape, gq.get(), gk.get(), gv.get(), go.get(), gdo.get(), glse.get(),
        static_cast<double*>(gdq.get()), all ? static_cast<double*>(gdk.get()) : nullptr,
        all ? static_cast<double*>(gdv.get()) : nullptr, stream);
    REQUIRE(status.ok());
    REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  run(true);  // Warm: module load and first-launch costs out of the figures.
  const double dq_seconds = run(false), all_seconds = run(true);
  // ~4.1e11 fp64 flops for dQ (768 per visible pair, S^2/2 pairs), ~5.5e11 for dK and dV.
  WARN("fp64 SDPA backward, causal S = 32768, D = 128: dQ "
       << dq_seconds * 1e3 << " ms (" << 4.12e11 / dq_seconds / 1e12
       << " fp64 TFLOP/s), dQ + dK + dV " << all_seconds * 1e3 << " ms");
  CHECK(all_seconds < 2.0);
  std::vector<double> dq = DownloadDoubles(gdq, n);
  size_t finite = 0;
  for (double x : dq) finite += std::isfinite(x) ? 1 : 0;
  CHECK(finite == n);
}

}  // namespace
}  // namespace ptxbench::gpu
