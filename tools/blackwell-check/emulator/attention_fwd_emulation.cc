// Runs one attention-forward solution (sm_90a with ATTN_SM90, sm_100a with ATTN_SM100; any head
// dim, causal or not) on the CPU emulator and compares O and LSE with a double-precision
// reference under the tasks' rule (allclose, atol = rtol = 1e-2, every element).
//
// Built by emulate.sh with KERNEL_SOURCE (the solution rewritten by make_header.py). The launch
// geometry is not copied from the solution: emulate.sh evaluates the solution's own
// PTXBENCH_PLAN for each workload (plan_launch.py) and passes it on the command line:
//   attention_fwd MODE B H S D grid_x grid_y block smem {dim0 dim1 box0 box1} x 3 (Q, K, V)
// The kernel's parameter order is the plan's argument order of the task's solutions:
//   sm_90a:  attn_fwd_kernel(tmQ, tmK, tmV, O, LSE, scale, S)
//   sm_100a: mha_fwd_tcgen05(tmQ, tmK, tmV, O, LSE, S, scale)
#include "driver_util.h"
#include "emu_runtime.h"
#if defined(FWD_PINGPONG)
// The ping-pong solutions' own inline-PTX turn taking (make_header.py kernel --strip-asm
// removed their bodies): consumer c waits on named barrier 1 + c for both consumers' 256
// threads and passes the turn by arriving on the other one's, 2 - c.
#include "ptxbench_hopper.cuh"
inline void WaitTurn(int consumer) {
  ptxbench::sm90::named_barrier_sync(static_cast<unsigned>(1 + consumer), 256);
}
inline void PassTurn(int consumer) {
  ptxbench::sm90::named_barrier_arrive(static_cast<unsigned>(2 - consumer), 256);
}
#endif
// clang-format off
#include KERNEL_SOURCE
// clang-format on

#include <cstdint>
#include <random>
#include <string>

namespace {

namespace emu = ::ptxbench_emu;

using ptxbench_emu_driver::FromBf16;
using ptxbench_emu_driver::MapArgs;
using ptxbench_emu_driver::ToBf16;

// O and LSE (natural log) in double from the bf16 inputs.
void ReferenceForward(const std::vector<uint16_t>& q, const std::vector<uint16_t>& k,
                      const std::vector<uint16_t>& v, int bh_count, int s, int d, bool causal,
                      double scale, std::vector<double>* o, std::vector<double>* lse) {
  o->assign(static_cast<size_t>(bh_count) * s * d, 0.0);
  lse->assign(static_cast<size_t>(bh_count) * s, 0.0);
  std::vector<double> logits(s);
  for (int bh = 0; bh < bh_count; ++bh) {
    const size_t base = static_cast<size_t>(bh) * s * d;
    for (int i = 0; i < s; ++i) {
      const int last = causal ? i : s - 1;
      double max_logit = -1e300;
      for (int j = 0; j <= last; ++j) {
        double dot = 0.0;
        for (int c = 0; c < d; ++c) {
          dot += static_cast<double>(FromBf16(q[base + static_cast<size_t>(i) * d + c])) *
                 FromBf16(k[base + static_cast<size_t>(j) * d + c]);
        }
        logits[j] = scale * dot;
        max_logit = std::max(max_logit, logits[j]);
      }
      double sum = 0.0;
      for (int j = 0; j <= last; ++j) sum += std::exp(logits[j] - max_logit);
      for (int j = 0; j <= last; ++j) {
        const double p = std::exp(logits[j] - max_logit) / sum;
        for (int c = 0; c < d; ++c) {
          (*o)[base + static_cast<size_t>(i) * d + c] +=
              p * FromBf16(v[base + static_cast<size_t>(j) * d + c]);
        }
      }
      (*lse)[static_cast<size_t>(bh) * s + i] = max_logit + std::log(sum);
    }
  }
}

// allclose(atol, rtol) over every element; `worst` is the largest error / allowance.
bool AllClose(const std::vector<float>& got, const std::vector<double>& want, double atol,
              double rtol, double* worst) {
  *worst = 0.0;
  bool ok = true;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    const double allowed = atol + rtol * std::fabs(want[i]);
    *worst = std::max(*worst, err / allowed);
    if (!(err <= allowed)) ok = false;  // NaN fails.
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 22) {
    std::fprintf(stderr,
                 "usage: %s eager|lazy B H S D grid_x grid_y block smem "
                 "{dim0 dim1 box0 box1} x 3\n",
                 argv[0]);
    return 2;
  }
  emu::state().lazy_mma = std::string(argv[1]) == "lazy";
  emu::state().deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1200);
  const int b = std::atoi(argv[2]), h = std::atoi(argv[3]), s = std::atoi(argv[4]),
            d = std::atoi(argv[5]);
  const EmuDim3 grid{static_cast<unsigned>(std::atoi(argv[6])),
                     static_cast<unsigned>(std::atoi(argv[7])), 1};
  const unsigned block = static_cast<unsigned>(std::atoi(argv[8]));
  const unsigned smem = static_cast<unsigned>(std::atoi(argv[9]));
  MapArgs maps[3];
  for (int t = 0; t < 3; ++t) {
    maps[t] = MapArgs{std::stoull(argv[10 + 4 * t]), std::stoull(argv[11 + 4 * t]),
                      std::stoull(argv[12 + 4 * t]), std::stoull(argv[13 + 4 * t])};
  }
  const int bh_count = b * h;
  for (const MapArgs& m : maps) {
    if (m.dim0 != static_cast<unsigned long long>(d) ||
        m.dim1 != static_cast<unsigned long long>(bh_count) * s) {
      std::fprintf(stderr, "the plan's tensor maps are not [D, B*H*S] views\n");
      return 2;
    }
  }
  std::printf("== %s D=%d, kCausal = %d, MMAs executed at %s\n", KERNEL_SOURCE, d,
              static_cast<int>(kCausal),
              emu::state().lazy_mma ? "wait/commit (lazy)" : "issue (eager)");

  const size_t elements = static_cast<size_t>(bh_count) * s * d;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  std::mt19937 rng(1234 + s + 7 * bh_count + 131 * d);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> q(elements), k(elements), v(elements);
  for (auto* x : {&q, &k, &v}) {
    for (uint16_t& e : *x) e = ToBf16(normal(rng));
  }
  std::vector<uint16_t> o(elements, 0xFFFF);  // NaN, as the harness poisons outputs.
  std::vector<float> lse(static_cast<size_t>(bh_count) * s, NAN);
  const CUtensorMap tm_q = ptxbench_emu_driver::MakeBf16Map(q.data(), maps[0]);
  const CUtensorMap tm_k = ptxbench_emu_driver::MakeBf16Map(k.data(), maps[1]);
  const CUtensorMap tm_v = ptxbench_emu_driver::MakeBf16Map(v.data(), maps[2]);
#if defined(ATTN_SM90)
  emu::Launch([&] { attn_fwd_kernel(tm_q, tm_k, tm_v, o.data(), lse.data(), scale, s); }, grid,
              block, smem);
#elif defined(ATTN_SM100)
  emu::Launch([&] { mha_fwd_tcgen05(tm_q, tm_k, tm_v, o.data(), lse.data(), s, scale); }, grid,
              block, smem);
#else
#error "define ATTN_SM90 or ATTN_SM100"
#endif
  std::vector<double> o_ref, lse_ref;
  ReferenceForward(q, k, v, bh_count, s, d, kCausal != 0, scale, &o_ref, &lse_ref);
  std::vector<float> o_got(elements);
  for (size_t i = 0; i < elements; ++i) o_got[i] = FromBf16(o[i]);
  double worst_o, worst_lse;
  const bool o_ok = AllClose(o_got, o_ref, 1e-2, 1e-2, &worst_o);
  const bool lse_ok = AllClose(lse, lse_ref, 1e-2, 1e-2, &worst_lse);
  std::printf("  %s forward B=%d H=%d S=%d D=%d: O allclose (worst err/allowed %.3f)\n",
              o_ok ? "ok  " : "FAIL", b, h, s, d, worst_o);
  std::printf("  %s forward B=%d H=%d S=%d D=%d: LSE allclose (worst %.4f)\n",
              lse_ok ? "ok  " : "FAIL", b, h, s, d, worst_lse);
  return o_ok && lse_ok ? 0 : 1;
}
