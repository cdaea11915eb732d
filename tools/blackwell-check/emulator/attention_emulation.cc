// Runs one sm_100a attention solution (forward or backward, causal or not) on the CPU emulator
// and compares its outputs with a double-precision reference, on small workloads that cover one
// block, several blocks (ring wrap-around, both score buffers, the causal diagonal at several
// positions) and several heads.
//
// Built by emulate.sh with KERNEL_SOURCE (the solution rewritten by make_header.py) and ATTN_FWD
// or ATTN_BWD. The launch geometry below mirrors the solution's PTXBENCH_PLAN (grid, block,
// dynamic shared memory, argument order, tensor maps [D, B*H*S] with box [64, 128] and the 128B
// swizzle); engine_test validates the plan itself.
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

uint16_t ToBf16(float value) { return static_cast<uint16_t>(bwe::Bf16Bits(value)); }
float FromBf16(uint16_t bits) { return __uint_as_float(static_cast<unsigned>(bits) << 16); }

CUtensorMap MakeMap(const void* base, unsigned long long rows) {
  CUtensorMap map{};
  map.opaque[bwe::kMapAddress] = reinterpret_cast<unsigned long long>(base);
  map.opaque[bwe::kMapDim0] = 128;
  map.opaque[bwe::kMapDim1] = rows;
  map.opaque[bwe::kMapStride1Bytes] = 256;
  map.opaque[bwe::kMapBox0] = 64;
  map.opaque[bwe::kMapBox1] = 128;
  map.opaque[bwe::kMapSwizzleBytes] = 128;
  map.opaque[bwe::kMapElementBytes] = 2;
  return map;
}

std::vector<uint16_t> RandomBf16(size_t count, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> out(count);
  for (uint16_t& v : out) v = ToBf16(normal(rng));
  return out;
}

// Forward reference in double: O and LSE (natural log) from bf16 inputs.
void ReferenceForward(const std::vector<uint16_t>& q, const std::vector<uint16_t>& k,
                      const std::vector<uint16_t>& v, int bh_count, int s, bool causal,
                      double scale, std::vector<double>* o, std::vector<double>* lse) {
  const int d = 128;
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
          dot += static_cast<double>(FromBf16(q[base + i * d + c])) * FromBf16(k[base + j * d + c]);
        }
        logits[j] = scale * dot;
        max_logit = std::max(max_logit, logits[j]);
      }
      double sum = 0.0;
      for (int j = 0; j <= last; ++j) sum += std::exp(logits[j] - max_logit);
      for (int j = 0; j <= last; ++j) {
        const double p = std::exp(logits[j] - max_logit) / sum;
        for (int c = 0; c < d; ++c) (*o)[base + i * d + c] += p * FromBf16(v[base + j * d + c]);
      }
      (*lse)[static_cast<size_t>(bh) * s + i] = max_logit + std::log(sum);
    }
  }
}

struct Check {
  int passed = 0;
  int failed = 0;
  void Expect(bool ok, const std::string& what) {
    std::printf("  %s %s\n", ok ? "ok  " : "FAIL", what.c_str());
    (ok ? passed : failed)++;
  }
};

// allclose(atol, rtol) over every element, as the task's tolerance.
[[maybe_unused]] bool AllClose(const std::vector<float>& got, const std::vector<double>& want,
                               double atol, double rtol, double* worst) {
  *worst = 0.0;
  bool ok = true;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    const double allowed = atol + rtol * std::fabs(want[i]);
    *worst = std::max(*worst, err / allowed);
    if (!(err <= allowed)) ok = false;
  }
  return ok;
}

[[maybe_unused]] double RelativeNorm(const std::vector<float>& got,
                                     const std::vector<double>& want) {
  double num = 0.0;
  double den = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double diff = static_cast<double>(got[i]) - want[i];
    if (!std::isfinite(got[i])) return INFINITY;
    num += diff * diff;
    den += want[i] * want[i];
  }
  return std::sqrt(num / den);
}

#ifdef ATTN_FWD
void RunForward(int b, int h, int s, Check* check) {
  const int bh_count = b * h;
  const size_t elements = static_cast<size_t>(bh_count) * s * 128;
  const float scale = 0.08838834764831845f;
  std::mt19937 rng(1234 + s + 7 * bh_count);
  const auto q = RandomBf16(elements, rng);
  const auto k = RandomBf16(elements, rng);
  const auto v = RandomBf16(elements, rng);
  std::vector<uint16_t> o(elements, 0xFFFF);  // NaN, as the harness.
  std::vector<float> lse(static_cast<size_t>(bh_count) * s, NAN);
  const CUtensorMap tm_q = MakeMap(q.data(), static_cast<unsigned long long>(bh_count) * s);
  const CUtensorMap tm_k = MakeMap(k.data(), static_cast<unsigned long long>(bh_count) * s);
  const CUtensorMap tm_v = MakeMap(v.data(), static_cast<unsigned long long>(bh_count) * s);
  emu::Launch([&] { mha_fwd_tcgen05(tm_q, tm_k, tm_v, o.data(), lse.data(), s, scale); },
              EmuDim3{static_cast<unsigned>(bh_count), static_cast<unsigned>(s / 128), 1}, 192,
              197632);
  std::vector<double> o_ref, lse_ref;
  ReferenceForward(q, k, v, bh_count, s, kCausal != 0, scale, &o_ref, &lse_ref);
  std::vector<float> o_got(elements);
  for (size_t i = 0; i < elements; ++i) o_got[i] = FromBf16(o[i]);
  double worst_o, worst_lse;
  const bool o_ok = AllClose(o_got, o_ref, 1e-2, 1e-2, &worst_o);
  const bool lse_ok = AllClose(lse, lse_ref, 1e-2, 1e-2, &worst_lse);
  char line[200];
  std::snprintf(line, sizeof(line), "forward B=%d H=%d S=%d: O allclose (worst err/allowed %.3f)",
                b, h, s, worst_o);
  check->Expect(o_ok, line);
  std::snprintf(line, sizeof(line), "forward B=%d H=%d S=%d: LSE allclose (worst %.3f)", b, h, s,
                worst_lse);
  check->Expect(lse_ok, line);
}
#endif  // ATTN_FWD

#ifdef ATTN_BWD
void RunBackward(int b, int h, int s, Check* check) {
  const int bh_count = b * h;
  const int d = 128;
  const size_t elements = static_cast<size_t>(bh_count) * s * d;
  const size_t rows = static_cast<size_t>(bh_count) * s;
  const double scale = 0.08838834764831845;
  const bool causal = kCausal != 0;
  std::mt19937 rng(4321 + s + 7 * bh_count);
  const auto q = RandomBf16(elements, rng);
  const auto k = RandomBf16(elements, rng);
  const auto v = RandomBf16(elements, rng);
  const auto d_o = RandomBf16(elements, rng);
  // Derived inputs, as the harness makes them: O (bf16) and LSE (fp32) of the same forward.
  std::vector<double> o_ref, lse_ref;
  ReferenceForward(q, k, v, bh_count, s, causal, scale, &o_ref, &lse_ref);
  std::vector<uint16_t> o(elements);
  for (size_t i = 0; i < elements; ++i) o[i] = ToBf16(static_cast<float>(o_ref[i]));
  std::vector<float> lse(rows);
  for (size_t i = 0; i < rows; ++i) lse[i] = static_cast<float>(lse_ref[i]);

  std::vector<uint16_t> dq(elements, 0xFFFF), dk(elements, 0xFFFF), dv(elements, 0xFFFF);
  std::vector<float> delta(rows, 0.0f), dq_accum(elements, 0.0f);  // Scratch is zero-filled.
  const CUtensorMap tm_q = MakeMap(q.data(), rows);
  const CUtensorMap tm_k = MakeMap(k.data(), rows);
  const CUtensorMap tm_v = MakeMap(v.data(), rows);
  const CUtensorMap tm_do = MakeMap(d_o.data(), rows);
  const float scale_f = static_cast<float>(scale);
  emu::Launch([&] { mha_bwd_delta(o.data(), d_o.data(), delta.data(), b, h, s); },
              EmuDim3{static_cast<unsigned>((rows + 15) / 16), 1, 1}, 256, 0);
  emu::Launch(
      [&] {
        mha_bwd_tcgen05(tm_q, tm_k, tm_v, tm_do, lse.data(), delta.data(), dq_accum.data(),
                        dk.data(), dv.data(), s, scale_f);
      },
      EmuDim3{static_cast<unsigned>(bh_count), static_cast<unsigned>(s / 128), 1}, 192, 197632);
  emu::Launch([&] { mha_bwd_dq_convert(dq_accum.data(), dq.data(), b, h, s, d, scale_f); },
              EmuDim3{static_cast<unsigned>((elements + 2047) / 2048), 1, 1}, 256, 0);

  // Reference gradients in double from the same bf16 inputs, O and LSE.
  std::vector<double> dq_ref(elements, 0.0), dk_ref(elements, 0.0), dv_ref(elements, 0.0);
  std::vector<double> p(static_cast<size_t>(s) * s), ds(static_cast<size_t>(s) * s);
  for (int bh = 0; bh < bh_count; ++bh) {
    const size_t base = static_cast<size_t>(bh) * s * d;
    for (int i = 0; i < s; ++i) {
      double delta_i = 0.0;
      for (int c = 0; c < d; ++c) {
        delta_i +=
            static_cast<double>(FromBf16(d_o[base + i * d + c])) * FromBf16(o[base + i * d + c]);
      }
      for (int j = 0; j < s; ++j) {
        if (causal && j > i) {
          p[i * s + j] = 0.0;
          ds[i * s + j] = 0.0;
          continue;
        }
        double dot = 0.0;
        double dp = 0.0;
        for (int c = 0; c < d; ++c) {
          dot += static_cast<double>(FromBf16(q[base + i * d + c])) * FromBf16(k[base + j * d + c]);
          dp +=
              static_cast<double>(FromBf16(d_o[base + i * d + c])) * FromBf16(v[base + j * d + c]);
        }
        p[i * s + j] = std::exp(scale * dot - lse[static_cast<size_t>(bh) * s + i]);
        ds[i * s + j] = p[i * s + j] * (dp - delta_i);
      }
    }
    for (int i = 0; i < s; ++i) {
      for (int j = 0; j < s; ++j) {
        const double pij = p[i * s + j];
        const double dsij = ds[i * s + j];
        if (pij == 0.0 && dsij == 0.0) continue;
        for (int c = 0; c < d; ++c) {
          dv_ref[base + j * d + c] += pij * FromBf16(d_o[base + i * d + c]);
          dk_ref[base + j * d + c] += scale * dsij * FromBf16(q[base + i * d + c]);
          dq_ref[base + i * d + c] += scale * dsij * FromBf16(k[base + j * d + c]);
        }
      }
    }
  }
  const auto widen = [](const std::vector<uint16_t>& x) {
    std::vector<float> out(x.size());
    for (size_t i = 0; i < x.size(); ++i) out[i] = FromBf16(x[i]);
    return out;
  };
  const char* names[3] = {"dQ", "dK", "dV"};
  const std::vector<float> got[3] = {widen(dq), widen(dk), widen(dv)};
  const std::vector<double>* want[3] = {&dq_ref, &dk_ref, &dv_ref};
  for (int t = 0; t < 3; ++t) {
    const double rel = RelativeNorm(got[t], *want[t]);
    char line[200];
    std::snprintf(line, sizeof(line),
                  "backward B=%d H=%d S=%d: %s relative L2 error %.2e (<= 1e-2)", b, h, s, names[t],
                  rel);
    check->Expect(rel <= 1e-2, line);
  }
}
#endif  // ATTN_BWD

}  // namespace

int main(int argc, char** argv) {
  emu::state().lazy_mma = argc > 1 && std::string(argv[1]) == "lazy";
  emu::state().deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1200);
  std::printf("== %s, kCausal = %d, MMAs executed at %s\n", KERNEL_SOURCE,
              static_cast<int>(kCausal), emu::state().lazy_mma ? "commit (lazy)" : "issue (eager)");
  Check check;
  // (B, H, S): one block; three blocks (ring wrap, both score buffers, diagonal at 0, 1, 2);
  // two batches of two heads.
  const int workloads[][3] = {{1, 1, 128}, {1, 2, 384}, {2, 2, 256}};
  for (const auto& w : workloads) {
#ifdef ATTN_FWD
    RunForward(w[0], w[1], w[2], &check);
#endif
#ifdef ATTN_BWD
    RunBackward(w[0], w[1], w[2], &check);
#endif
  }
  std::printf("%d passed, %d failed\n", check.passed, check.failed);
  return check.failed == 0 ? 0 : 1;
}
