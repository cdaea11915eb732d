// Sketches of the timed samples' outputs and their comparison with the reference's (CPU only;
// the GPU kernel is builtin_kernels.cu ptxbench_sketch, Builtins::Sketch). docs/measurement.md
// ("Every timed sample is sketched") gives the derivation of the bounds stated here.
//
// Why: the element-wise check of timed samples (timing.h, check_every/max_checks) compares a few
// samples in full; a kernel that knows which samples are not compared can skip their work. A
// sketch is k secret random projections of EVERY sample's outputs, taken outside the timed
// region by our kernel, so every sample is checked, in the norm sense, at ~one read of the
// output per sample.
//
// Weights: w_j(i) = +-1, bit (i % 8) * 16 + j of Philox4x32-10(counter i / 8, stream
// kSketchStream + tensor, key), the key per sample SketchKey(sketch_seed, inputs' seed).
// Rademacher (+-1), not Gaussian, because (a) one Philox call gives 128 of them (8 elements x
// 16 projections), (b) the products w x are exact in fp64, and
// (c) Hoeffding's inequality then bounds an honest kernel's false alarm with no assumption on
// the distribution of its errors: for ANY fixed error vector e (the kernel cannot see the key),
//   P(|sum_i w_i e_i| >= t) <= 2 exp(-t^2 / (2 sum_i e_i^2)).
//
// The comparison of one projection, candidate c and reference r of the same seed:
//   d = |c_j - r_j|,  allowed = z * sqrt(E2) + rounding,
// where E2 bounds sum e_i^2 for every output the task's tolerance accepts: allclose (matched
// ratio 1): |e_i| <= tol_i = max(atol, rtol |r_i|) (compare.h's rule), so E2 = sum tol_i^2;
// relative norm:
// ||e|| <= eps ||r||, so E2 = eps^2 sum r_i^2. rounding = 1e-12 (sum|c| + sum|r|) covers the fp64
// summation (a few hundred serial terms per thread, then a tree: error < 1e-13 relative).
// With z = kSketchZ = 9 an honest kernel fails one projection with probability
// <= 2 exp(-40.5) = 5.2e-18, a whole evaluation (500 samples x 3 tensors x 4 projections)
// with <= 3.2e-14. Independently, allclose gives the deterministic bound sum tol_i: a
// difference above it cannot come from an accepted output (reported as `certain`).
#ifndef PTXBENCH_WORKER_ENGINE_GPU_SKETCH_H_
#define PTXBENCH_WORKER_ENGINE_GPU_SKETCH_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "worker/engine/gpu/compare.h"
#include "worker/engine/gpu/protocol_messages.h"

namespace ptxbench::gpu {

inline constexpr size_t kSketchMaxProjections = 16;  // Bits of one Philox call used: <= 128.
inline constexpr double kSketchZ = 9.0;
inline constexpr uint32_t kSketchStream = 0x5ce70000u;  // Apart from the inputs' streams.

// The Philox key of one sample's weights. A kernel that found one sample's key (say, in a
// launch-parameter buffer of our sketch kernel) learns nothing of another's: the key of the next
// sample needs sketch_seed, which never reaches the device, and that sample's inputs' seed.
uint64_t SketchKey(uint64_t sketch_seed, uint64_t sample_seed);

// What the GPU kernel computes, on the host in fp64 (tests; the GPU test checks the kernel
// against it). atol/rtol 0: the candidate's side (no tolerance sums).
TensorSketch SketchOnHost(const std::vector<double>& values, uint64_t key, uint32_t tensor_index,
                          size_t projections, double atol, double rtol);

struct SketchMismatch {
  size_t sample = 0;
  bool counted = false;
  uint64_t seed = 0;
  std::string tensor;
  size_t projection = 0;
  double difference = 0;  // |c_j - r_j|.
  double allowed = 0;     // z sqrt(E2) + rounding.
  bool certain = false;   // Above the deterministic bound too (or non-finite outputs).
  std::string reason;
};

struct SketchComparison {
  bool pass = true;
  size_t samples_compared = 0;    // Candidate samples that had a reference sketch.
  size_t samples_unverified = 0;  // Candidate samples without one (a subset was verified).
  size_t samples_failed = 0;
  double max_ratio = 0;          // max difference / allowed over every projection (honest: << 1).
  double false_alarm_bound = 0;  // Union bound for an honest kernel over what was compared.
  std::vector<SketchMismatch> mismatches;  // The first few.
  std::string reason;                      // The first mismatch, in words ("" on pass).
};

// Compares every candidate sketch that has a reference sketch of the same seed. InvalidArgument
// when the two do not describe the same sketching (projection counts, tensor lists differ), a
// reference sample has no candidate sample, the reference holds non-finite values, or the rule
// gives no bound (allclose with matched_ratio < 1: the unmatched elements' errors are unbounded).
absl::StatusOr<SketchComparison> CompareSketches(const SampleSketches& candidate,
                                                 const SampleSketches& reference,
                                                 const ToleranceRule& rule, double z = kSketchZ);

// How many of `samples` to verify, chosen uniformly without replacement AFTER the loop, so that
// a kernel whose outputs are wrong on a fraction >= `wrong_fraction` of them escapes with
// probability <= `miss_target`, given that one wrong sample's sketch escapes with probability
// `sketch_miss` (0: always caught, e.g. unwritten outputs). Exact hypergeometric tail.
size_t SketchSubsetSize(size_t samples, double wrong_fraction, double miss_target,
                        double sketch_miss = 0);
// Probability that a uniform subset of `subset` of `samples` holds none of `wrong` samples.
double SubsetMissProbability(size_t samples, size_t wrong, size_t subset);
// A uniform subset of [0, samples) of size `subset` (sorted), from a secret drawn after the loop.
std::vector<size_t> ChooseSketchSubset(size_t samples, size_t subset, uint64_t secret);

// Which of `count` sketched launches (indices into SampleSketches::samples) the supervisor has
// the reference sketch: all of them when `reference_seconds_per_seed` x count fits
// `budget_seconds`, else a subset of SketchSubsetSize(count, kSketchWrongFraction,
// kSketchMissTarget) chosen by ChooseSketchSubset from `secret` (drawn after the loop).
inline constexpr double kSketchWrongFraction = 0.05;
inline constexpr double kSketchMissTarget = 1e-6;
std::vector<size_t> SketchSamplesToVerify(size_t count, double reference_seconds_per_seed,
                                          double budget_seconds, uint64_t secret);

nlohmann::json ToJson(const SketchComparison& comparison);

}  // namespace ptxbench::gpu

#endif  // PTXBENCH_WORKER_ENGINE_GPU_SKETCH_H_
