// Runs the gemm_n7168_k5120 sm_100a solution (C = A * B^T) on the CPU emulator and compares it
// with a double-precision reference, on shapes that cover full tiles, ragged M / N / K (TMA zero
// fill, the epilogue's row and column guards, its scalar path for N % 8 != 0) and a K long
// enough to wrap the 4-stage ring. Launch geometry mirrors the solution's PTXBENCH_PLAN.
#include "driver_util.h"
#include "emu_runtime.h"
// clang-format off
#include KERNEL_SOURCE
// clang-format on

#include <cstdint>
#include <random>
#include <string>

namespace {

namespace emu = ::ptxbench_emu;
namespace bwe = ::ptxbench::sm100;

using ptxbench_emu_driver::FromBf16;

// A and B as the plan's maps: 64-element inner boxes of `box_rows` rows.
CUtensorMap MakeMap(const void* base, unsigned long long cols, unsigned long long rows,
                    unsigned box_rows) {
  return ptxbench_emu_driver::MakeBf16Map(base, {cols, rows, 64, box_rows});
}

bool RunGemm(int m, int n, int k) {
  std::mt19937 rng(99 + m + n + k);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> a(static_cast<size_t>(m) * k), b(static_cast<size_t>(n) * k);
  for (uint16_t& v : a) v = static_cast<uint16_t>(bwe::Bf16Bits(normal(rng)));
  for (uint16_t& v : b) v = static_cast<uint16_t>(bwe::Bf16Bits(normal(rng)));
  std::vector<uint16_t> c(static_cast<size_t>(m) * n, 0xFFFF);
  const CUtensorMap tm_a = MakeMap(a.data(), k, m, 128);
  const CUtensorMap tm_b = MakeMap(b.data(), k, n, 256);
  emu::Launch(
      [&] { gemm_bf16_tcgen05_tma(tm_a, tm_b, c.data(), m, n, k); },
      EmuDim3{static_cast<unsigned>((n + 255) / 256), static_cast<unsigned>((m + 127) / 128), 1},
      128, 197632);
  const std::vector<double> want = ptxbench_emu_driver::ReferenceGemmAbT(a, b, m, n, k);
  double worst = 0.0;
  bool ok = true;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      const size_t at = static_cast<size_t>(i) * n + j;
      const double err = std::fabs(FromBf16(c[at]) - want[at]);
      const double allowed = 1e-2 + 1e-2 * std::fabs(want[at]);
      worst = std::max(worst, err / allowed);
      if (!(err <= allowed)) ok = false;
    }
  }
  std::printf("  %s gemm M=%d N=%d K=%d: C allclose (worst err/allowed %.3f)\n",
              ok ? "ok  " : "FAIL", m, n, k, worst);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  emu::state().lazy_mma = argc > 1 && std::string(argv[1]) == "lazy";
  emu::state().deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1200);
  std::printf("== %s, MMAs executed at %s\n", KERNEL_SOURCE,
              emu::state().lazy_mma ? "commit (lazy)" : "issue (eager)");
  const int shapes[][3] = {{256, 512, 256}, {200, 264, 320}, {130, 260, 136}};
  int passed = 0;
  int failed = 0;
  for (const auto& s : shapes) (RunGemm(s[0], s[1], s[2]) ? passed : failed)++;
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
