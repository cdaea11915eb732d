// Tolerance-margin simulation for mha_fp8_with_lse_d128 (a dev tool, not part of the product
// build): an fp64 model of the sm_90a solution's roundings and of each decoy that changes the
// numerics, compared with a model of the library under the task's rule (default: task.json's of
// 2026-12-06, all-close atol 0.05 / rtol 0.1 on >= 99.5 % of the elements, relative norm <= 0.07
// and every 128-row block's <= 0.1, for O and LSE; --atol --rtol --matched --bound --block-bound
// change it: the first provisional rule was 1e-2 / 1e-2 / 0.995 / 0.05 / none), over every trial
// of every workload as the task draws them.
//
//   g++ -std=c++20 -O2 -o /tmp/fp8_margin tools/attention-dev/fp8_fwd_margin_sim.cc
//   /tmp/fp8_margin [--descales task|unit|tensor] [--draws N] [--timed-rows R] [--fp64-reference]
//
// Inputs: Q, K, V N(0, 1) rounded to e4m3 (nearest even, saturating), as the task's fp8 normal
// draw; descales (1 + m/8) 2^e, m in 0..7, with e in -10..-4 (`task`: the block_scale kind the
// task declared first) or e in -1..0 (`unit`: descales near 1, logits of O(1), the regime fp8
// attention is used in); or `tensor`: the fp8_normal and tensor_descale kinds (Q, K, V e4m3 of
// N(0, 64^2), saturated; descales (1 + m/8) 2^-6: dequantized values ~N(0, 1..1.9^2)). The timed workload (S = 4096) is sampled: R query rows of 2 heads per
// trial; `medium` 128 rows of each of its 8 heads; `small` and `odd_blocks` every row. O is compared after bf16 rounding on both sides.
//
// The library is modelled as an fp8 P V of its own: P = exp(s - m) with the exact row maximum,
// scaled by 448 (--lib-scale: 256, cuDNN's own choice in the baseline) and rounded to e4m3 (448:
// a rounding grid independent of the solution's 256 and per-block maximum, so the two P roundings
// are uncorrelated, the pessimistic case for an honest kernel; 256 with the exact row maximum
// still differs from the solution's per-block maximum wherever the row maximum is not in the
// first key block). The block rule is applied to 128-row blocks of O (one query tile of a head;
// the timed workload's sampled rows as one partial block per head) and to LSE as one block (its
// rows are B*H <= 128 heads here), with task.json's floor: 0.1 x the norm a block of that size
// has at the output's RMS. Every candidate:
//   solution        256 P in e4m3, running maximum per 128-key block, row sums of unrounded P
//   p_unscaled      P (scale 1) in e4m3: probabilities < 2^-6 subnormal, < 2^-10 zero
//   p_e5m2          256 P in e5m2 (2 mantissa bits)
//   skip_keys_1pct  the last S/100 keys dropped
//   logits_ignored  every probability equal (O = descale_v mean V, LSE = ln S)
//   descale_q_only  logits 1/descale_k too large
//   descale_hardcoded  descales 2^-6 each
// --fp64-reference compares with the exact definition in fp64 instead of the library model (the
// figures an fp64 reference rule would see). Prints, per candidate and workload, the O relative norm against the library (min-max over the
// draws' trials), the lowest O matched ratio, the LSE worst error / allowance, and the share of
// draws (a draw = every trial of every workload, as one evaluation) that the rule passes.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

double DecodeE4m3(int bits) {
  const int sign = bits >> 7, exponent = (bits >> 3) & 0xF, mantissa = bits & 7;
  if (exponent == 0xF && mantissa == 7) return NAN;
  const double v = exponent == 0 ? std::ldexp(mantissa, -9) : std::ldexp(mantissa | 8, exponent - 10);
  return sign ? -v : v;
}

// Nearest-even rounding to a float format with `mantissa_bits`, normals from 2^min_exp, saturating
// at max_value (cvt.rn.satfinite).
double RoundFormat(double x, int mantissa_bits, int min_exp, double max_value) {
  const double a = std::fabs(x);
  if (a >= max_value) return std::copysign(max_value, x);
  if (a == 0) return 0;
  const int e = a < std::ldexp(1.0, min_exp) ? min_exp : std::ilogb(a);
  const double quantum = std::ldexp(1.0, e - mantissa_bits);
  return std::copysign(std::nearbyint(a / quantum) * quantum, x);
}
double E4m3(double x) { return RoundFormat(x, 3, -6, 448.0); }
double E5m2(double x) { return RoundFormat(x, 2, -14, 57344.0); }

double Bf16(double x) {
  float f = static_cast<float>(x);
  unsigned bits;
  std::memcpy(&bits, &f, 4);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  bits &= 0xFFFF0000u;
  std::memcpy(&f, &bits, 4);
  return f;
}

struct Candidate {
  const char* name;
  double p_scale_log2;  // P rounded as 2^p_scale_log2 * P
  bool e5m2;
  bool skip_1pct;
  bool logits_ignored;
  bool descale_q_only;
  bool descale_hardcoded;
};

const Candidate kCandidates[] = {
    {"solution", 8, false, false, false, false, false},
    {"p_unscaled", 0, false, false, false, false, false},
    {"p_e5m2", 8, true, false, false, false, false},
    {"skip_keys_1pct", 8, false, true, false, false, false},
    {"logits_ignored", 8, false, false, true, false, false},
    {"descale_q_only", 8, false, false, false, true, false},
    {"descale_hardcoded", 8, false, false, false, false, true},
};
constexpr int kNumCandidates = sizeof(kCandidates) / sizeof(kCandidates[0]);

struct Workload {
  const char* name;
  int b, h, s, trials;
  int sampled_rows;  // 0: every row
};

// One row of the solution-style online softmax: logits in natural units (already scaled by
// scale * descales), V rows decoded. Writes O (times out_scale, bf16-rounded) and LSE.
void ModelRow(const std::vector<double>& logits, const std::vector<double>& v, int s, int key_limit,
              double p_scale_log2, bool e5m2, int block, double out_scale, double* o, double* lse,
              bool exact = false) {
  const double log2e = 1.0 / std::log(2.0);
  double m = -INFINITY, l = 0;
  std::vector<double> acc(128, 0.0);
  for (int j0 = 0; j0 < key_limit; j0 += block) {
    const int j1 = std::min(j0 + block, key_limit);
    double block_max = -INFINITY;
    for (int j = j0; j < j1; ++j) block_max = std::max(block_max, logits[j] * log2e);
    const double m_new = std::max(m, block_max);
    const double correction = std::exp2(m - m_new);
    l *= correction;
    for (double& a : acc) a *= correction;
    for (int j = j0; j < j1; ++j) {
      const double p = std::exp2(logits[j] * log2e - m_new + p_scale_log2);
      l += p;
      const double pq = exact ? p : e5m2 ? E5m2(p) : E4m3(p);
      if (pq == 0) continue;
      const double* vr = &v[static_cast<size_t>(j) * 128];
      for (int c = 0; c < 128; ++c) acc[c] += pq * vr[c];
    }
    m = m_new;
  }
  for (int c = 0; c < 128; ++c) o[c] = exact ? out_scale * acc[c] / l : Bf16(out_scale * acc[c] / l);
  *lse = (m + std::log2(l) - p_scale_log2) * std::log(2.0);
}

struct Stats {
  double rn_min = 1e300, rn_max = 0, matched_min = 1, lse_worst = 0, lse_rn_max = 0, block_max = 0;
  int trials = 0, trials_failed = 0;
};

}  // namespace

int main(int argc, char** argv) {
  std::string descales = "task";
  bool fp64_reference = false;
  double atol = 0.05, rtol = 0.1, matched_bound = 0.995, bound = 0.07, block_bound = 0.1;
  double lib_scale = 448.0;
  int draws = 10, timed_rows = 48;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--descales" && i + 1 < argc) descales = argv[++i];
    else if (a == "--draws" && i + 1 < argc) draws = std::atoi(argv[++i]);
    else if (a == "--timed-rows" && i + 1 < argc) timed_rows = std::atoi(argv[++i]);
    else if (a == "--fp64-reference") fp64_reference = true;
    else if (a == "--atol" && i + 1 < argc) atol = std::atof(argv[++i]);
    else if (a == "--rtol" && i + 1 < argc) rtol = std::atof(argv[++i]);
    else if (a == "--matched" && i + 1 < argc) matched_bound = std::atof(argv[++i]);
    else if (a == "--bound" && i + 1 < argc) bound = std::atof(argv[++i]);
    else if (a == "--block-bound" && i + 1 < argc) block_bound = std::atof(argv[++i]);  // 0: none
    else if (a == "--lib-scale" && i + 1 < argc) lib_scale = std::atof(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--descales task|unit|tensor] [--draws N] [--timed-rows R] "
                   "[--fp64-reference] [--lib-scale 448|256] [--atol A] [--rtol R] [--matched M] "
                   "[--bound B] [--block-bound BB]\n", argv[0]);
      return 2;
    }
  }
  // tensor: the fp8_normal / tensor_descale kinds (e4m3 of N(0, 64^2), descales (1 + m/8) 2^-6).
  const bool tensor_kinds = descales == "tensor";
  const double input_sd = tensor_kinds ? 64.0 : 1.0;
  const int e_lo = descales == "unit" ? -1 : tensor_kinds ? -6 : -10;
  const int e_hi = descales == "unit" ? 0 : tensor_kinds ? -6 : -4;
  const Workload workloads[] = {{"timed", 1, 2, 4096, 3, timed_rows},
                                {"small", 1, 2, 128, 3, 0},
                                {"odd_blocks", 1, 3, 384, 3, 0},
                                {"medium", 2, 4, 1024, 2, 128}};
  constexpr int kWorkloads = 4;
  std::vector<double> table(256);
  for (int i = 0; i < 256; ++i) table[i] = DecodeE4m3(i);
  Stats stats[kNumCandidates][kWorkloads];
  int draws_passed[kNumCandidates] = {};
  std::mt19937_64 rng(20261206);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_int_distribution<int> mant(0, 7), expo(e_lo, e_hi);
  auto draw_scale = [&] { return std::ldexp(1.0 + mant(rng) / 8.0, expo(rng)); };
  const double scale = 1.0 / std::sqrt(128.0);
  for (int draw = 0; draw < draws; ++draw) {
    bool draw_ok[kNumCandidates];
    std::fill(draw_ok, draw_ok + kNumCandidates, true);
    for (int w = 0; w < kWorkloads; ++w) {
      const Workload& wl = workloads[w];
      for (int trial = 0; trial < wl.trials; ++trial) {
        const double dq = draw_scale(), dk = draw_scale(), dv = draw_scale();
        const int s = wl.s, heads = wl.b * wl.h;
        const int rows = wl.sampled_rows > 0 ? wl.sampled_rows : s;
        // Per trial and candidate: squared sums over every compared element.
        std::vector<double> err2(kNumCandidates, 0), ref2(kNumCandidates, 0);
        std::vector<long> outside(kNumCandidates, 0), lse_outside(kNumCandidates, 0);
        std::vector<double> lse_err2(kNumCandidates, 0), lse_ref2(kNumCandidates, 0);
        std::vector<double> lse_worst(kNumCandidates, 0);
        // Per candidate, per head: the head's rows as one block (128 rows, or the sampled ones).
        std::vector<std::vector<double>> block_err2(kNumCandidates, std::vector<double>(heads, 0));
        std::vector<std::vector<double>> block_ref2(kNumCandidates, std::vector<double>(heads, 0));
        std::vector<std::vector<long>> block_elements(kNumCandidates, std::vector<long>(heads, 0));
        long elements = 0, lse_elements = 0;
        for (int head = 0; head < heads; ++head) {
          std::vector<double> q(static_cast<size_t>(rows) * 128), k(static_cast<size_t>(s) * 128),
              v(static_cast<size_t>(s) * 128);
          for (double& x : q) x = E4m3(input_sd * normal(rng));
          for (double& x : k) x = E4m3(input_sd * normal(rng));
          for (double& x : v) x = E4m3(input_sd * normal(rng));
          std::vector<double> dots(s), logits(s);
          std::vector<double> o_lib(128), o_c(128);
          for (int i = 0; i < rows; ++i) {
            for (int j = 0; j < s; ++j) {
              double dot = 0;
              for (int c = 0; c < 128; ++c) dot += q[static_cast<size_t>(i) * 128 + c] * k[static_cast<size_t>(j) * 128 + c];
              dots[j] = dot;
              logits[j] = scale * dq * dk * dot;
            }
            double lse_lib;
            ModelRow(logits, v, s, s, std::log2(lib_scale), false, s, dv, o_lib.data(), &lse_lib,
                     fp64_reference);
            for (int ci = 0; ci < kNumCandidates; ++ci) {
              const Candidate& cand = kCandidates[ci];
              std::vector<double> lg(s);
              double out_scale = dv;
              for (int j = 0; j < s; ++j) {
                double f = scale * dq * dk;
                if (cand.logits_ignored) f = 0;
                if (cand.descale_q_only) f = scale * dq;
                if (cand.descale_hardcoded) f = scale / 4096.0;
                lg[j] = f * dots[j];
              }
              if (cand.descale_hardcoded) out_scale = 1.0 / 64.0;
              const int limit = cand.skip_1pct ? s - s / 100 : s;
              double lse_c;
              ModelRow(lg, v, s, limit, cand.p_scale_log2, cand.e5m2, 128, out_scale, o_c.data(), &lse_c);
              for (int c = 0; c < 128; ++c) {
                const double e = o_c[c] - o_lib[c];
                err2[ci] += e * e;
                ref2[ci] += o_lib[c] * o_lib[c];
                if (i < 128) {  // the head's first 128-row block (every row at S = 128)
                  block_err2[ci][head] += e * e;
                  block_ref2[ci][head] += o_lib[c] * o_lib[c];
                  block_elements[ci][head] += 1;
                }
                if (!(std::fabs(e) <= atol || std::fabs(e) <= rtol * std::fabs(o_lib[c]))) ++outside[ci];
              }
              const double le = std::fabs(lse_c - lse_lib);
              lse_err2[ci] += le * le;
              lse_ref2[ci] += lse_lib * lse_lib;
              if (!(le <= atol || le <= rtol * std::fabs(lse_lib))) ++lse_outside[ci];
              lse_worst[ci] = std::max(lse_worst[ci], le / (atol + rtol * std::fabs(lse_lib)));
            }
            elements += 128;
            lse_elements += 1;
          }
        }
        for (int ci = 0; ci < kNumCandidates; ++ci) {
          Stats& st = stats[ci][w];
          const double rn = std::sqrt(err2[ci] / ref2[ci]);
          const double matched = 1.0 - static_cast<double>(outside[ci]) / elements;
          const double lse_rn = std::sqrt(lse_err2[ci] / lse_ref2[ci]);
          const double lse_matched = 1.0 - static_cast<double>(lse_outside[ci]) / lse_elements;
          double worst_block = 0;
          const double rms = std::sqrt(ref2[ci] / elements);
          for (int hd = 0; hd < heads; ++hd) {
            const double floor = 0.1 * std::sqrt(static_cast<double>(block_elements[ci][hd])) * rms;
            worst_block = std::max(worst_block, std::sqrt(block_err2[ci][hd]) /
                                                    std::max(std::sqrt(block_ref2[ci][hd]), floor));
          }
          st.block_max = std::max(st.block_max, worst_block);
          const bool ok = rn <= bound && matched >= matched_bound && lse_rn <= bound &&
                          lse_matched >= matched_bound &&
                          (block_bound <= 0 || (worst_block <= block_bound && lse_rn <= block_bound));
          st.rn_min = std::min(st.rn_min, rn);
          st.rn_max = std::max(st.rn_max, rn);
          st.matched_min = std::min(st.matched_min, matched);
          st.lse_worst = std::max(st.lse_worst, lse_worst[ci]);
          st.lse_rn_max = std::max(st.lse_rn_max, lse_rn);
          st.trials += 1;
          if (!ok) {
            st.trials_failed += 1;
            draw_ok[ci] = false;
          }
        }
      }
    }
    for (int ci = 0; ci < kNumCandidates; ++ci) draws_passed[ci] += draw_ok[ci] ? 1 : 0;
  }
  std::printf("descales %s (e in %d..%d), %d draws (a draw = every trial of every workload), "
              "timed rows sampled %d x 2 heads, against %s (P x %g); rule: all-close %g / %g on "
              "%g, relative norm %g, block %g\n", descales.c_str(), e_lo, e_hi, draws, timed_rows,
              fp64_reference ? "the exact fp64 definition" : "the library model", lib_scale, atol,
              rtol, matched_bound, bound, block_bound);
  std::printf("%-18s %-11s %-17s %-9s %-9s %-10s %-9s %s\n", "candidate", "workload",
              "O relnorm vs lib", "O matched", "O block", "LSE worst", "LSE rn", "trials failed");
  for (int ci = 0; ci < kNumCandidates; ++ci) {
    for (int w = 0; w < kWorkloads; ++w) {
      const Stats& st = stats[ci][w];
      std::printf("%-18s %-11s %.4f-%.4f     %.4f    %-9.3g %-10.3g %-9.2g %d/%d\n",
                  kCandidates[ci].name, workloads[w].name, st.rn_min, st.rn_max, st.matched_min,
                  st.block_max, st.lse_worst, st.lse_rn_max, st.trials_failed, st.trials);
    }
    std::printf("%-18s passes the rule in %d of %d draws\n", kCandidates[ci].name, draws_passed[ci], draws);
  }
  return 0;
}
