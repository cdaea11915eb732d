// Runs a gemm_fp8bs_n7168_k16384 solution on the CPU emulator and compares C with a
// double-precision reference under the task's rule (allclose atol 1e-4, rtol 1e-2 and relative
// norm 0.01) on shapes with 1-8 scale blocks (the 6-stage ring wraps at K = 1024), partial M and
// N tiles (M = 132, N = 260) and padded SB rows (K / 128 = 1, 2, 3).
// - sm_90a (default; and, with emulate.sh --mutants, the task's wrong_result decoys that use only
//   the header's primitives): e4m3 wgmma (QGMMA) from 128B-swizzled TMA tiles, SA by a
//   non-swizzled fp32 TMA box, per-128-K promotion. Launch geometry mirrors the solution's
//   PTXBENCH_PLAN (grid ceil(N/128) x ceil(M/128), 384 threads, 200800 bytes).
//   KERNEL_SIGNATURE_WITH_SA: the decoys that take SA as a pointer too.
// - sm_100a (FP8_SM100_SMEM_BYTES, the solution's plan's dynamic shared bytes): tcgen05.mma
//   .kind::f8f6f4 (e4m3, K = 32) into two alternating tensor-memory partials, each promoted by
//   four warps (tcgen05.ld) with SA and SB read from global memory, while the next block's MMAs
//   run; grid ceil(N/128) x ceil(M/128), 192 threads. Its lazy schedule runs the MMAs at the
//   tcgen05.commit that covers them, the latest moment the hardware may read their operands.
// The e4m3 values of the reference are decoded here, from the format's definition, not by the
// emulator's decoder.
#include "emu_runtime.h"
// clang-format off
#include KERNEL_SOURCE
// clang-format on
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace emu = ::ptxbench_emu;

// e4m3: sign, 4-bit exponent (bias 7), 3-bit mantissa; exponent 0 is subnormal (m / 8 x 2^-6);
// S.1111.111 is NaN (no infinities).
static float Decode(unsigned char bits) {
  const int exponent = (bits >> 3) & 15, mantissa = bits & 7;
  if (exponent == 15 && mantissa == 7) return NAN;
  const float magnitude = exponent == 0 ? std::ldexp(mantissa / 8.0f, -6)
                                        : std::ldexp(1.0f + mantissa / 8.0f, exponent - 7);
  return (bits & 0x80) ? -magnitude : magnitude;
}

static CUtensorMap Map(const void* base, unsigned long long d0, unsigned long long d1, unsigned b0,
                       unsigned b1, unsigned elem, unsigned swz) {
  CUtensorMap map{};
  map.opaque[emu::kMapAddress] = reinterpret_cast<unsigned long long>(base);
  map.opaque[emu::kMapDim0] = d0;
  map.opaque[emu::kMapDim1] = d1;
  map.opaque[emu::kMapStride1Bytes] = d0 * elem;
  map.opaque[emu::kMapBox0] = b0;
  map.opaque[emu::kMapBox1] = b1;
  map.opaque[emu::kMapSwizzleBytes] = swz;
  map.opaque[emu::kMapElementBytes] = elem;
  return map;
}

static bool Run(int m, int n, int k) {
  std::mt19937 rng(7 + m + 3 * n + 5 * k);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> table(256);
  for (int i = 0; i < 256; ++i) table[i] = Decode(static_cast<unsigned char>(i));
  auto encode = [&](float x) {
    int best = 0;
    for (int i = 0; i < 256; ++i) {
      if (std::isnan(table[i])) continue;
      if (std::fabs(table[i] - x) < std::fabs(table[best] - x)) best = i;
    }
    return static_cast<unsigned char>(best);
  };
  const int kb = (k + 127) / 128, nb = (n + 127) / 128, ld = 4 * ((kb + 3) / 4);
  std::vector<unsigned char> a(size_t(m) * k), b(size_t(n) * k);
  for (auto& v : a) v = encode(normal(rng));
  for (auto& v : b) v = encode(normal(rng));
  std::uniform_int_distribution<int> mant(0, 7), expo(-10, -4);
  auto scale = [&] { return std::ldexp(1.0f + mant(rng) / 8.0f, expo(rng)); };
  std::vector<float> sa(size_t(kb) * m), sb(size_t(nb) * ld);
  for (auto& v : sa) v = scale();
  for (auto& v : sb) v = scale();
  std::vector<uint16_t> c(size_t(m) * n, 0xFFAA);
  const CUtensorMap tA = Map(a.data(), k, m, 128, 128, 1, 128);
  const CUtensorMap tB = Map(b.data(), k, n, 128, 128, 1, 128);
  const CUtensorMap tSA = Map(sa.data(), m, kb, 128, 1, 4, 0);
  const CUtensorMap tC = Map(c.data(), n, m, 64, 64, 2, 128);
  const EmuDim3 grid{static_cast<unsigned>((n + 127) / 128), static_cast<unsigned>((m + 127) / 128),
                     1};
#ifdef FP8_SM100_SMEM_BYTES
  (void)tSA;
  (void)tC;
  emu::Launch([&] { gemm_fp8bs_tcgen05_tma(tA, tB, sa.data(), sb.data(), c.data(), m, n, k); },
              grid, 192, FP8_SM100_SMEM_BYTES);
#else
  emu::Launch(
      [&] {
#ifdef KERNEL_SIGNATURE_WITH_SA
        gemm_fp8bs_kernel(tA, tB, tSA, tC, sa.data(), sb.data(), m, n, k);
#else
        gemm_fp8bs_kernel(tA, tB, tSA, tC, sb.data(), m, n, k);
#endif
      },
      grid, 384, 200800);
#endif
  double worst = 0, err2 = 0, ref2 = 0;
  size_t bad = 0;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double want = 0;
      for (int q = 0; q < kb; ++q) {
        double part = 0;
        for (int l = 128 * q; l < std::min(k, 128 * q + 128); ++l)
          part += double(table[a[size_t(i) * k + l]]) * table[b[size_t(j) * k + l]];
        want += part * sa[size_t(q) * m + i] * sb[size_t(j / 128) * ld + q];
      }
      const double got = __uint_as_float(unsigned(c[size_t(i) * n + j]) << 16);
      const double err = std::fabs(got - want);
      err2 += err * err;
      ref2 += want * want;
      if (!(err <= 1e-4 || err <= 1e-2 * std::fabs(want))) ++bad;
      worst = std::max(worst, std::isnan(err) ? INFINITY : err);
    }
  }
  const double rn = std::sqrt(err2 / ref2);
  const bool ok = bad == 0 && rn < 0.01;
  std::printf("  %s M=%d N=%d K=%d: outside allclose %zu, relnorm %.3g, max abs %.3g\n",
              ok ? "ok  " : "FAIL", m, n, k, bad, rn, worst);
  return ok;
}

int main(int argc, char** argv) {
  emu::state().lazy_mma = argc > 1 && std::string(argv[1]) == "lazy";
  emu::state().deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1200);
  std::printf("== %s (%s)\n", KERNEL_SOURCE, emu::state().lazy_mma ? "lazy" : "eager");
  const int shapes[][3] = {{128, 128, 128}, {384, 256, 384}, {256, 384, 256}, {132, 260, 1024}};
  int failed = 0;
  for (const auto& s : shapes) failed += Run(s[0], s[1], s[2]) ? 0 : 1;
  return failed == 0 ? 0 : 1;
}
