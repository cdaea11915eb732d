#include "worker/engine/gpu/sketch.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "worker/engine/gpu/philox.h"
#include "worker/engine/gpu/protocol.h"

namespace ptxbench::gpu {
namespace {

constexpr size_t kMismatchesKept = 8;
constexpr double kRoundingSlack = 1e-12;

// sum e_i^2 allowed by the rule for this reference tensor; nullopt-like -1 when unbounded.
double AllowedSquareSum(const ToleranceRule& rule, const TensorSketch& ref) {
  if (rule.kind == ToleranceRule::Kind::kRelativeNorm) {
    return rule.max_relative_norm * rule.max_relative_norm * ref.square_sum;
  }
  return ref.tolerance_square_sum;
}

}  // namespace

uint64_t SketchKey(uint64_t sketch_seed, uint64_t sample_seed) {
  return Mix64(sketch_seed ^ Mix64(sample_seed + 0x5ce7c4e75ce7c4e7ull));
}

TensorSketch SketchOnHost(const std::vector<double>& values, uint64_t key, uint32_t tensor_index,
                          size_t projections, double atol, double rtol) {
  TensorSketch s;
  s.projections.assign(projections, 0.0);
  for (size_t i = 0; i < values.size(); ++i) {
    const double x = values[i];
    if (!std::isfinite(x)) {
      ++s.nonfinite;
      continue;
    }
    const Philox4 r = Philox4x32_10(i >> 3, kSketchStream + tensor_index, key);
    const unsigned base = static_cast<unsigned>(i & 7) * 16;
    for (size_t j = 0; j < projections; ++j) {
      s.projections[j] += SketchWeightNegative(r, base + static_cast<unsigned>(j)) ? -x : x;
    }
    s.abs_sum += std::abs(x);
    s.square_sum += x * x;
    const double tol = std::max(atol, rtol * std::abs(x));
    s.tolerance_sum += tol;
    s.tolerance_square_sum += tol * tol;
  }
  return s;
}

absl::StatusOr<SketchComparison> CompareSketches(const SampleSketches& candidate,
                                                 const SampleSketches& reference,
                                                 const ToleranceRule& rule, double z) {
  if (rule.kind == ToleranceRule::Kind::kAllClose && rule.matched_ratio < 1.0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sketch comparison: an allclose rule with matched_ratio ", rule.matched_ratio,
        " < 1 bounds no error norm (unmatched elements may be anything); verify element-wise"));
  }
  if (candidate.projections != reference.projections || candidate.projections == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sketch comparison: the candidate took ", candidate.projections,
                     " projections, the reference ", reference.projections));
  }
  if (candidate.tensors != reference.tensors) {
    return absl::InvalidArgumentError(
        "sketch comparison: the candidate and the reference sketched different output tensors");
  }
  const size_t k = candidate.projections;
  const size_t tensors = candidate.tensors.size();
  std::map<uint64_t, const SampleSketch*> by_seed;
  for (const SampleSketch& r : reference.samples) {
    if (r.tensors.size() != tensors) {
      return absl::InvalidArgumentError(absl::StrCat("sketch comparison: reference sketch of seed ",
                                                     U64(r.seed), " has ", r.tensors.size(),
                                                     " tensors, expected ", tensors));
    }
    for (size_t t = 0; t < tensors; ++t) {
      const TensorSketch& rt = r.tensors[t];
      bool finite = rt.nonfinite == 0 && rt.projections.size() == k;
      for (double p : rt.projections) finite = finite && std::isfinite(p);
      if (!finite) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sketch comparison: the reference of seed ", U64(r.seed), " tensor ",
            candidate.tensors[t], " is not finite or has the wrong number of projections"));
      }
    }
    by_seed[r.seed] = &r;
  }
  SketchComparison out;
  size_t projections_compared = 0;
  std::map<uint64_t, bool> matched;
  for (const SampleSketch& c : candidate.samples) {
    auto found = by_seed.find(c.seed);
    if (found == by_seed.end()) {
      ++out.samples_unverified;
      continue;
    }
    matched[c.seed] = true;
    ++out.samples_compared;
    const SampleSketch& r = *found->second;
    bool sample_failed = false;
    auto fail = [&](SketchMismatch m) {
      sample_failed = true;
      if (out.reason.empty()) {
        out.reason = absl::StrCat(c.counted ? "counted launch " : "timed sample ", c.sample,
                                  ", tensor ", m.tensor, ": ", m.reason);
      }
      if (out.mismatches.size() < kMismatchesKept) out.mismatches.push_back(std::move(m));
    };
    if (c.tensors.size() != tensors) {
      return absl::InvalidArgumentError(absl::StrCat("sketch comparison: candidate sample ",
                                                     c.sample, " has ", c.tensors.size(),
                                                     " tensors, expected ", tensors));
    }
    for (size_t t = 0; t < tensors; ++t) {
      const TensorSketch& ct = c.tensors[t];
      const TensorSketch& rt = r.tensors[t];
      if (ct.projections.size() != k) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sketch comparison: candidate sample ", c.sample, " has ", ct.projections.size(),
            " projections of ", candidate.tensors[t], ", expected ", k));
      }
      if (ct.nonfinite > 0) {
        fail({c.sample, c.counted, c.seed, candidate.tensors[t], 0, std::nan(""), 0, true,
              absl::StrCat(ct.nonfinite,
                           " non-finite output elements (unwritten outputs keep the NaN poison)")});
        continue;
      }
      const double allowed_sq = AllowedSquareSum(rule, rt);
      const double rounding = kRoundingSlack * (ct.abs_sum + rt.abs_sum);
      const double allowed = z * std::sqrt(std::max(allowed_sq, 0.0)) + rounding;
      const bool has_certain = rule.kind == ToleranceRule::Kind::kAllClose;
      const double certain_bound = rt.tolerance_sum + rounding;
      for (size_t j = 0; j < k; ++j) {
        ++projections_compared;
        const double d = std::abs(ct.projections[j] - rt.projections[j]);
        if (!std::isfinite(d) || d > allowed) {
          const bool certain = !std::isfinite(d) || (has_certain && d > certain_bound);
          fail({c.sample, c.counted, c.seed, candidate.tensors[t], j, d, allowed, certain,
                absl::StrFormat("projection %d differs from the reference's by %.6g, allowed "
                                "%.6g (%.1f x the bound)%s",
                                j, d, allowed, allowed > 0 ? d / allowed : INFINITY,
                                certain ? "; above the deterministic bound too: certain" : "")});
          out.max_ratio = INFINITY;
        } else if (allowed > 0) {
          out.max_ratio = std::max(out.max_ratio, d / allowed);
        }
      }
    }
    if (sample_failed) ++out.samples_failed;
  }
  for (const SampleSketch& r : reference.samples) {
    if (!matched.count(r.seed)) {
      return absl::InvalidArgumentError(absl::StrCat("sketch comparison: reference seed ",
                                                     U64(r.seed), " matches no candidate sample"));
    }
  }
  out.pass = out.samples_failed == 0;
  out.false_alarm_bound =
      std::min(1.0, static_cast<double>(projections_compared) * 2.0 * std::exp(-z * z / 2.0));
  return out;
}

double SubsetMissProbability(size_t samples, size_t wrong, size_t subset) {
  if (wrong == 0) return 1.0;
  if (subset + wrong > samples) return 0.0;
  // C(N-w, n) / C(N, n) = prod_{i<n} (N-w-i)/(N-i).
  double p = 1.0;
  for (size_t i = 0; i < subset; ++i) {
    p *= static_cast<double>(samples - wrong - i) / static_cast<double>(samples - i);
  }
  return p;
}

size_t SketchSubsetSize(size_t samples, double wrong_fraction, double miss_target,
                        double sketch_miss) {
  const size_t wrong =
      static_cast<size_t>(std::ceil(wrong_fraction * static_cast<double>(samples) - 1e-9));
  if (wrong == 0) return samples;  // No fraction of so few samples is one sample: verify all.
  // With escapes: P(miss) = E[s^M], M the hypergeometric count of wrong samples drawn; s^m is
  // convex in m and the hypergeometric is below the binomial in convex order (Hoeffding 1963,
  // Theorem 4), so P(miss) <= E[s^B] = (1 - p + p s)^n with p = wrong / samples.
  const double p = static_cast<double>(wrong) / static_cast<double>(samples);
  for (size_t n = 1; n <= samples; ++n) {
    const double miss = sketch_miss <= 0
                            ? SubsetMissProbability(samples, wrong, n)
                            : std::pow(1 - p + p * sketch_miss, static_cast<double>(n));
    if (miss <= miss_target) return n;
  }
  return samples;
}

std::vector<size_t> ChooseSketchSubset(size_t samples, size_t subset, uint64_t secret) {
  std::vector<size_t> all(samples);
  std::iota(all.begin(), all.end(), size_t{0});
  subset = std::min(subset, samples);
  // Partial Fisher-Yates with a counter-based draw per step.
  for (size_t i = 0; i < subset; ++i) {
    const uint64_t r = Mix64(secret + 0x9E3779B97F4A7C15ull * (i + 1));
    const size_t j = i + static_cast<size_t>(r % (samples - i));
    std::swap(all[i], all[j]);
  }
  all.resize(subset);
  std::sort(all.begin(), all.end());
  return all;
}

std::vector<size_t> SketchSamplesToVerify(size_t count, double reference_seconds_per_seed,
                                          double budget_seconds, uint64_t secret) {
  if (reference_seconds_per_seed * static_cast<double>(count) <= budget_seconds) {
    std::vector<size_t> all(count);
    std::iota(all.begin(), all.end(), size_t{0});
    return all;
  }
  return ChooseSketchSubset(count, SketchSubsetSize(count, kSketchWrongFraction, kSketchMissTarget),
                            secret);
}

nlohmann::json ToJson(const SketchComparison& c) {
  nlohmann::json mismatches = nlohmann::json::array();
  for (const SketchMismatch& m : c.mismatches) {
    mismatches.push_back({{"sample", m.sample},
                          {"counted", m.counted},
                          {"seed", U64(m.seed)},
                          {"tensor", m.tensor},
                          {"projection", m.projection},
                          {"difference", m.difference},
                          {"allowed", m.allowed},
                          {"certain", m.certain},
                          {"reason", m.reason}});
  }
  return {{"pass", c.pass},
          {"samples_compared", c.samples_compared},
          {"samples_unverified", c.samples_unverified},
          {"samples_failed", c.samples_failed},
          {"max_ratio",
           std::isfinite(c.max_ratio) ? nlohmann::json(c.max_ratio) : nlohmann::json("inf")},
          {"false_alarm_bound", c.false_alarm_bound},
          {"mismatches", mismatches},
          {"reason", c.reason}};
}

}  // namespace ptxbench::gpu
