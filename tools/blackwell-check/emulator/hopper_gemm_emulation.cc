// Runs an sm_90a source of gemm_n7168_k5120 (C = A * B^T, bf16 in and out) on the CPU emulator
// and compares C with a double-precision reference under the task's rule (allclose, atol = rtol
// = 1e-2, every element; task.json).
//
// Built by emulate.sh with KERNEL_SOURCE (the source rewritten by make_header.py). The launch
// geometry is the source's own PTXBENCH_PLAN evaluated for the workload (plan_launch.py):
//   hopper_gemm MODE M N K grid_x grid_y block smem {dim0 dim1 box0 box1} x 3 (tmA, tmB, tmC)
//               [grid_x ...]
// Maps without dims in the plan (-1 -1) get their tensor's dense shape. Each further grid_x
// runs the same workload again on that many CTAs: a persistent kernel (one CTA walks tiles
// blockIdx.x, blockIdx.x + gridDim.x, ...) must give the same C on any grid, and a grid smaller
// than the tile count is what makes one CTA take several tiles, i.e. what exercises the ring's
// phases across tiles and an epilogue overlapped with the next tile. The kernel's parameters are
// the plan's argument order of those sources: gemm_kernel(tmA, tmB, tmC, M, N, K).
#include "driver_util.h"
#include "emu_runtime.h"
// clang-format off
#include KERNEL_SOURCE
// clang-format on

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace {

namespace emu = ::ptxbench_emu;
using ptxbench_emu_driver::FromBf16;
using ptxbench_emu_driver::MakeBf16Map;
using ptxbench_emu_driver::MapArgs;
using ptxbench_emu_driver::ToBf16;

// A map whose plan gives no dims (-1 -1 from plan_launch.py) gets its tensor's dense shape.
MapArgs Resolved(const long long (&m)[4], unsigned long long dense_dim0,
                 unsigned long long dense_dim1) {
  return {m[0] < 0 ? dense_dim0 : static_cast<unsigned long long>(m[0]),
          m[0] < 0 ? dense_dim1 : static_cast<unsigned long long>(m[1]),
          static_cast<unsigned long long>(m[2]), static_cast<unsigned long long>(m[3])};
}

// One launch on `grid_x` x `grid_y` CTAs; C starts as 0xFFFF (NaN) so an element never written
// fails the comparison.
bool RunGemm(int m, int n, int k, unsigned grid_x, unsigned grid_y, unsigned block, unsigned smem,
             const long long (&maps)[3][4]) {
  std::mt19937 rng(99 + m + n + k);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> a(static_cast<size_t>(m) * k), b(static_cast<size_t>(n) * k);
  for (uint16_t& v : a) v = ToBf16(normal(rng));
  for (uint16_t& v : b) v = ToBf16(normal(rng));
  std::vector<uint16_t> c(static_cast<size_t>(m) * n, 0xFFFF);
  const CUtensorMap tm_a = MakeBf16Map(a.data(), Resolved(maps[0], k, m));
  const CUtensorMap tm_b = MakeBf16Map(b.data(), Resolved(maps[1], k, n));
  const CUtensorMap tm_c = MakeBf16Map(c.data(), Resolved(maps[2], n, m));
  const std::vector<double> want = ptxbench_emu_driver::ReferenceGemmAbT(a, b, m, n, k);
  emu::Launch([&] { gemm_kernel(tm_a, tm_b, tm_c, m, n, k); }, EmuDim3{grid_x, grid_y, 1}, block,
              smem);
  double worst = 0.0;
  size_t bad = 0;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      const size_t at = static_cast<size_t>(i) * n + j;
      const double err = std::fabs(FromBf16(c[at]) - want[at]);
      const double allowed = 1e-2 + 1e-2 * std::fabs(want[at]);
      if (!(err <= allowed)) {
        ++bad;
        worst = INFINITY;
      } else {
        worst = std::max(worst, err / allowed);
      }
    }
  }
  std::printf(
      "  %s M=%d N=%d K=%d on %ux%u CTAs: C outside allclose %zu (worst err/allowed %.3f)\n",
      bad == 0 ? "ok  " : "FAIL", m, n, k, grid_x, grid_y, bad, worst);
  return bad == 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 21) {
    std::fprintf(stderr,
                 "usage: %s MODE M N K grid_x grid_y block smem {dim0 dim1 box0 box1} x 3 "
                 "[grid_x ...]\n",
                 argv[0]);
    return 2;
  }
  emu::state().lazy_mma = std::string(argv[1]) == "lazy";
  emu::state().deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1200);
  const int m = std::atoi(argv[2]), n = std::atoi(argv[3]), k = std::atoi(argv[4]);
  const unsigned grid_x = std::strtoul(argv[5], nullptr, 10);
  const unsigned grid_y = std::strtoul(argv[6], nullptr, 10);
  const unsigned block = std::strtoul(argv[7], nullptr, 10);
  const unsigned smem = std::strtoul(argv[8], nullptr, 10);
  long long maps[3][4];
  for (int i = 0; i < 3; ++i) {
    for (int f = 0; f < 4; ++f) maps[i][f] = std::atoll(argv[9 + 4 * i + f]);
  }
  std::printf("== %s, MMAs executed at %s\n", KERNEL_SOURCE,
              emu::state().lazy_mma ? "wait_group (lazy)" : "issue (eager)");
  bool ok = RunGemm(m, n, k, grid_x, grid_y, block, smem, maps);
  for (int i = 21; i < argc; ++i) {
    ok = RunGemm(m, n, k, std::strtoul(argv[i], nullptr, 10), grid_y, block, smem, maps) && ok;
  }
  return ok ? 0 : 1;
}
