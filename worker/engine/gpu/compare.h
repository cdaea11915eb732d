// Output comparison against the library reference. The evaluation compares on the GPU, in the
// reference process (Builtins::Compare, builtin_kernels.cu): the process that ran candidate code
// never holds the reference. CompareOutputs below is the same rule on the CPU: the test oracle
// of the GPU kernel, the fake evaluator's comparison, and what the GPU side runs on the few
// element ranges that hold the first mismatches. Multi-threaded.
#ifndef PTXBENCH_WORKER_ENGINE_GPU_COMPARE_H_
#define PTXBENCH_WORKER_ENGINE_GPU_COMPARE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/task.h"
#include "nlohmann/json.hpp"

namespace ptxbench::gpu {

enum class ElementType { kBF16, kFP16, kFP32, kFP8E4M3, kInt32 };
int ElementBytes(ElementType type);
// Decodes one element to double (exact for every listed type).
double DecodeElement(const void* data, uint64_t index, ElementType type);

// Every rule that is set must hold (common/task.h Tolerance, the task's declaration).
struct ToleranceRule {
  // all_close: an element mismatches only if |got-ref| > atol AND |got-ref| > rtol·|ref|; the
  // fraction of matching elements must reach matched_ratio (1.0: all of them).
  bool all_close = true;
  double atol = 1e-2;
  double rtol = 1e-2;
  double matched_ratio = 1.0;
  // > 0: ‖got-ref‖₂ / ‖ref‖₂ must not exceed this too; 0: no norm bound.
  double max_relative_norm = 0;
  // > 0: every block of block_rows consecutive rows (rows: the leading dims flattened; the last
  // dim is the columns) must also keep ‖got-ref‖₂ / max(‖ref‖₂, floor) <= max_block_relative_norm,
  // floor = kBlockNormFloor x the norm of a block of the output's RMS. A cheaper computation that
  // drops a few keys or rows moves the overall norm by little but one block by a lot
  // (docs/task-authoring.md, "Backward margin decoys").
  int64_t block_rows = 0;
  double max_block_relative_norm = 0;
};
// A block whose reference norm is below this share of an RMS-valued block's norm is judged
// against that share instead: a zero reference block is neither a division by zero nor a
// free pass (its error counts against 10 % of a typical block's norm).
inline constexpr double kBlockNormFloor = 0.1;
// Elements per block of the block rule for an output of `shape` (block_rows x the last dim);
// 0 when the rule is off.
uint64_t BlockElements(const ToleranceRule& rule, const std::vector<int64_t>& shape,
                       uint64_t count);
// Sums over one block's finite elements.
struct BlockSums {
  double err_sq = 0;
  double ref_sq = 0;
  uint64_t elements = 0;
};
// The task's declaration as the comparison's rule: one definition for the reference process,
// the fake evaluator and the tests.
ToleranceRule RuleOf(const Tolerance& tolerance);

struct Mismatch {
  uint64_t index = 0;
  std::vector<int64_t> coordinates;  // Row-major multi-index in the tensor's shape.
  double got = 0;
  double expected = 0;
  std::string kind;  // "mismatch", "nan", "inf", "unwritten".
};

struct CompareReport {
  bool pass = false;
  std::string reason;  // Why it failed, one line; "" on pass.
  uint64_t elements = 0;
  uint64_t mismatched = 0;           // Elements outside tolerance (finite ones).
  uint64_t nonfinite = 0;            // NaN or Inf in the output: never pass.
  uint64_t unwritten = 0;            // Still holding the exact poison bits (a subset of NaN).
  uint64_t reference_nonfinite = 0;  // Should be 0: the reference itself is broken otherwise.
  double max_abs_error = 0;
  double max_rel_error = 0;  // Over elements with a nonzero reference.
  double matched_ratio = 0;
  double relative_norm = 0;  // ‖got-ref‖₂ / ‖ref‖₂ over finite elements.
  double reference_norm = 0;
  // Which rules judged it and whether each held (both figures are reported either way).
  bool all_close_checked = false;
  bool all_close_pass = false;
  bool relative_norm_checked = false;
  bool relative_norm_pass = false;
  // The block rule (ToleranceRule::block_rows): the worst block's figure and its index (block b
  // holds rows [b·block_rows, (b+1)·block_rows)); reported whenever the rule is set.
  bool block_norm_checked = false;
  bool block_norm_pass = false;
  double worst_block_relative_norm = 0;
  int64_t worst_block = -1;
  int64_t block_rows = 0;
  std::vector<Mismatch> first_mismatches;  // The lowest indices, at most 8.
  // The fp64 reference (Tolerance::fp64_outputs): ‖got-ref64‖₂/‖ref64‖₂ against the engine's
  // fp64 computation of the same inputs, measured for every output the fp64 kernel computes on a
  // correctness workload of a task that declares the rule (fp64_measured), judged only for the
  // outputs the rule lists (fp64_checked). library_fp64_relative_norm: the library reference's
  // own figure on the same inputs (< 0: not measured), so a report shows both.
  bool fp64_measured = false;
  bool fp64_checked = false;
  bool fp64_pass = false;
  double fp64_relative_norm = 0;
  double fp64_max_relative_norm = 0;
  double library_fp64_relative_norm = -1;
};
nlohmann::json ToJson(const CompareReport& report);
// The inverse of ToJson (a report sent by the reference process); InvalidArgument names the
// first missing or mistyped field.
absl::StatusOr<CompareReport> CompareReportFromJson(const nlohmann::json& json);

// Row-major multi-index of element `index` in `shape`.
std::vector<int64_t> Coordinates(uint64_t index, const std::vector<int64_t>& shape);

// Completes a report whose counts, maxima and first mismatches are set, from the sums of squared
// errors and squared references over finite elements: norms, matched ratio, reason and verdict.
// One function for the CPU and GPU comparisons, so both judge alike.
// `blocks`: the block rule's per-block sums (BlockElements elements each, the last may be
// short); must be given when the rule sets block_rows, else the report fails naming the gap.
void FinishCompareReport(const ToleranceRule& rule, double err_sq, double ref_sq,
                         CompareReport* report, const std::vector<BlockSums>* blocks = nullptr);

// Sums of an output against an fp64 reference over the output's finite elements (a non-finite
// output element already fails the library comparison): sum (got-ref)², sum ref².
struct Fp64Sums {
  double err_sq = 0;
  double ref_sq = 0;
};
// The CPU mirror of Builtins::Fp64ErrorSums (ptxbench_compare_fp64): `got` holds `count`
// elements of `type`, `reference` `count` doubles.
Fp64Sums Fp64ErrorSums(const void* got, ElementType type, const double* reference, uint64_t count);
// ‖got-ref64‖₂/‖ref64‖₂ from the sums; infinite when the reference is zero and the error not.
double Fp64RelativeNorm(const Fp64Sums& sums);
// Records the fp64 figure of an output in a finished report and, when `bound` > 0 (the output
// is one the rule lists), judges it: a figure above the bound fails the report, its reason naming
// the rule, the figure and the bound ("relative norm 0.0114 against the fp64 reference exceeds
// 0.006"), after any reason the library comparison gave.
void ApplyFp64Reference(const Fp64Sums& sums, double bound, double library_relative_norm,
                        CompareReport* report);

// The fp64 SDPA backward, the definition the fp64 reference kernels implement
// (builtin_kernels.cu, ptxbench_sdpa_bwd_fp64_*; tools/attention-dev/bwd_margin_sim.py):
// per head, P_ij = exp(scale q_i.k_j - LSE_i) (0 where causal and j > i), delta_i = dO_i.O_i,
// dS = P (dO V^T - delta), dQ = scale dS K, dK = scale dS^T Q, dV = P^T dO. Tensors are
// [heads, S, D] row-major, LSE [heads, S]; O and LSE are the given forward state (not
// recomputed). The host mirror the GPU test checks the kernels against: O(heads S^2 D).
struct SdpaFp64Shape {
  int64_t heads = 1;  // B x H.
  int64_t s = 0;
  int64_t d = 0;
  double scale = 0;
  bool causal = false;
};
void SdpaBackwardFp64Host(const SdpaFp64Shape& shape, const std::vector<double>& q,
                          const std::vector<double>& k, const std::vector<double>& v,
                          const std::vector<double>& o, const std::vector<double>& d_o,
                          const std::vector<double>& lse, std::vector<double>* dq,
                          std::vector<double>* dk, std::vector<double>* dv);

// The lowest-index mismatches a report lists.
inline constexpr size_t kMaxReportedMismatches = 8;

// `got` and `expected` hold `count` elements of `type`; `shape` (row-major) gives coordinates;
// `poison` is the 32-bit pattern written over outputs before the run (its low element bits
// mark unwritten elements). threads <= 0: hardware concurrency.
CompareReport CompareOutputs(const void* got, const void* expected, uint64_t count,
                             ElementType type, const std::vector<int64_t>& shape,
                             const ToleranceRule& rule, uint32_t poison, int threads = 0);

}  // namespace ptxbench::gpu

#endif  // PTXBENCH_WORKER_ENGINE_GPU_COMPARE_H_
