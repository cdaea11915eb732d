// Target-instruction work share: how much of a task's arithmetic the target families did, from
// hardware counters read on the timed path (cupti_counters.h), and whether the instrumented
// (SASS-metrics) run saw the same work. CPU-only arithmetic; the evaluator collects the numbers.
//
// Why: "a target instruction executed with its predicate on" (the paper's check) is met by one
// token wgmma next to a GEMM done with mma.sync. The benchmark asks whether the architecture's
// instructions did the work, so the strong check relates the family's FLOPs
//   - to the task's FLOPs for the counted workload (share_of_task), and
//   - to every multiply-add the kernel executed on any unit: tensor paths of every precision,
//     plus the FMA and fp64 pipes at 2 FLOPs per thread instruction (share_of_executed).
// A kernel that adds full-size target instructions on data that never reaches the outputs and
// does the real work elsewhere keeps share_of_task but halves share_of_executed: every FLOP of
// the product has to be executed by some unit, and every unit that can multiply-add is counted.
// docs/measurement.md ("Work share") gives the derivation and the residual risks.
#ifndef PTXBENCH_WORKER_ENGINE_GPU_WORK_SHARE_H_
#define PTXBENCH_WORKER_ENGINE_GPU_WORK_SHARE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/task.h"
#include "common/verdict.h"
#include "nlohmann/json.hpp"
#include "worker/engine/gpu/protocol_messages.h"

namespace ptxbench::gpu {

// The hardware counters behind the work share, for one chip and operand precision. One
// definition: the evaluator asks CUPTI for AllMetrics() and this file interprets the values.
struct WorkCounterSet {
  std::string chip;                              // "GH100", "GB100".
  std::string target_matrix_flops;               // FLOPs of the credited matrix family.
  std::vector<std::string> tensor_flops;         // Every tensor path, one per precision.
  std::vector<std::string> scalar_thread_insts;  // FMA and fp64 pipes (2 FLOPs each).
  std::string tensor_warp_insts;                 // All tensor-pipe warp instructions.
  std::string target_matrix_warp_insts;          // Of them, the credited family's.
  std::string bulk_copy_insts;                   // TMA-pipe warp instructions.
  std::string bulk_copy_load_bytes;              // Bytes TMA loads read from L2.
  std::string l2_read_bytes;                     // Bytes of every load from L2 into the SMs.
  std::vector<std::string> AllMetrics() const;
};

// The set for an arch ("sm_90a" -> GH100 wgmma, "sm_100a" -> GB100 tcgen05) and the precision of
// the task's matrix operands (bf16 for the core suite; fp8 e4m3 for the fp8 tasks).
// InvalidArgument for an arch or precision without a credited matrix family.
absl::StatusOr<WorkCounterSet> WorkCountersFor(std::string_view arch, DType operands);

// FLOPs that ONE WARP's execution of a SASS matrix instruction stands for, from its shape in the
// opcode: "HGMMA.64x256x16.F32.BF16" -> 2*64*256*16 / 4 (a warpgroup instruction is executed by
// its 4 warps; CUPTI counts warp executions). nullopt when the opcode carries no shape (tcgen05's
// UTC*MMA keep it in a descriptor register) or is not a warpgroup MMA. The caller excludes
// ptxas's no-op form (gdesc[URZ]) first.
std::optional<double> WarpInstructionMatrixFlops(std::string_view sass_instruction);

struct MatrixWorkShare {
  double target_flops = 0;  // Per counted sample (mean over the samples of its config).
  double tensor_flops = 0;  // Every tensor path.
  double scalar_flops = 0;  // 2 x FMA/fp64-pipe thread instructions.
  double task_flops = 0;
  double share_of_task = 0;      // target / task.
  double share_of_executed = 0;  // target / (tensor + scalar).
  // (tensor + scalar - target) / task: the multiply-add work done on other units, against the
  // task's FLOPs rather than against the executed total. share_of_executed alone is met by
  // padding: a GEMM done with mma.sync (1x the task's FLOPs) beside 9x the task's FLOPs of
  // wgmma on data that never reaches C gives share_of_executed 0.9 and share_of_task 9. This
  // figure stays at 1.0 for that kernel, whatever the padding.
  double other_work_over_task = 0;
  // The executed multiply-add work that did not run on the target, by unit ("bf16 tensor
  // (not the target)", "FMA pipe", ...), largest first: where the work went, for the feedback.
  std::vector<std::pair<std::string, double>> other_units;
  // Reported, not judged: tensor-pipe warp instructions other than the target family's. ptxas
  // also issues HFMA2.MMA on the tensor pipe to materialize constants, so an instruction count
  // cannot bound legacy FLOPs; the per-precision FLOP counters above do, exactly.
  double other_tensor_warp_insts = 0;
};

struct BulkCopyShare {
  double instructions = 0;
  double load_bytes = 0;         // Read from L2 by bulk tensor loads.
  double l2_read_bytes = 0;      // Read from L2 by every kind of load.
  double task_min_bytes = 0;     // The task's byte formula (each input read once).
  double share_of_l2_reads = 0;  // load_bytes / l2_read_bytes.
};

struct WorkShare {
  MatrixWorkShare matrix;
  BulkCopyShare bulk_copy;
  int counted_samples = 0;
  // How far the counted samples of one configuration disagreed (max/min - 1 of the target
  // FLOPs): a kernel that does different work on different samples shows here.
  double target_flops_spread = 0;
};

// Averages each metric over the samples that collected it and computes the shares. Every
// metric of `set` must appear in at least one sample (else InvalidArgument naming it).
absl::StatusOr<WorkShare> ComputeWorkShare(
    const WorkCounterSet& set, const std::vector<std::map<std::string, double>>& samples,
    double task_flops, double task_min_bytes);

// What the instrumented (SASS-metrics) run saw, summed over the plan's kernels.
struct ProfiledWork {
  double target_flops = 0;  // Executed target warp instructions x WarpInstructionMatrixFlops.
  double target_warp_insts = 0;
  double bulk_copy_warp_insts = 0;
  bool flops_known = false;  // False when some executed target instruction had no shape.
  // Executed warp instructions at tma_control sites (tensor-map prefetches, bulk-group commits,
  // non-tensor bulk copies): on the TMA pipe, so in the timed path's TMA-pipe counter, but not
  // in the per-PC TMA metric that bulk_copy_warp_insts sums.
  double tma_pipe_other_warp_insts = 0;
  // FLOPs of the family's shaped sites that the timed path's FLOP counter also counts
  // (WarpInstructionCountedAs): on GH100 the fp8 counter counts QGMMA of both fp8 formats, so
  // for an e4m3 task this adds the e5m2 QGMMA that target_flops does not credit. Equal to
  // target_flops where the counter is of the task's precision alone.
  double counter_flops = 0;
};

struct PathAgreement {
  bool checked = false;  // False when either side is missing (then `reason` says which).
  bool agrees = false;
  double target_flops_difference = 0;  // |timed - profiled| / max(timed, profiled).
  double target_insts_difference = 0;
  double bulk_copy_insts_difference = 0;
  // Median time of the counted launches over the timed samples' median (0: not known); see
  // CheckCountedLaunchTimes.
  double counted_over_timed = 0;
  std::string reason;
};

// The profiled path is the timed path when the instrumented run's target work equals the
// counters' within `tolerance` (relative), for FLOPs (where known) and target instructions, and
// when the timed path's TMA-pipe instructions lie between the instrumented run's bulk copies and
// its bulk copies plus its other TMA-pipe instructions (tma_pipe_other_warp_insts), each end
// widened by `tolerance`. The counts of a deterministic kernel on one workload are exact on both
// sides (H200 probe, 2026-12-01); a kernel that switches paths when profiled moves them by far
// more than 1 %.
PathAgreement CompareProfiledWithTimed(const ProfiledWork& profiled, const WorkCounterSet& set,
                                       const std::vector<std::map<std::string, double>>& samples,
                                       double tolerance = 0.01);

// The counted launches' time against the timed samples' (docs/measurement.md, "Counted launches
// and their gap"). A counted launch is the same launch with counters on after ~140 ms of idle
// GPU (the counters' Begin), which a kernel can see; counting never makes a kernel faster: on
// the H200 (2026-12-02, run 5) the honest solutions' counted medians were 1.000-1.065 x their
// timed medians, cuBLASLt's 1.11 x. A kernel whose counted launches run in less than
// `min_ratio` of its timed time took another, faster path while counted (the decoy
// counted_launch_detect: wgmma when counted, mma.sync when timed, 0.18 x): the path then
// differs. The other direction (a kernel slower when counted) is reported, not judged, until
// the honest band is measured on every task.
void CheckCountedLaunchTimes(double counted_median_ms, double timed_median_ms, PathAgreement* path,
                             double min_ratio = 0.8);

// What the instrumented runs (one per distinct kernel of the plan, timed workload) executed,
// from their per-PC counts joined with the static SASS map: target FLOPs = executed warp
// instructions at each `matrix_family` site x WarpInstructionMatrixFlops of its opcode (ptxas's
// no-op form gdesc[URZ] is no site: it does no work), target warp instructions and bulk copies
// as CUPTI counted them at every PC (no-ops included, as the hardware counters include them).
// Only sites of the task's operand precision (WarpInstructionOperandsAre) add target FLOPs, as
// the timed path's FLOP counter is per precision: a bf16 task's kernel on fp16 HGMMA did its
// instructions but none of the task's target FLOPs, on both sides (the H200, 2026-12-02: the
// fp16_operands decoy's counter said 0 FLOPs where its SASS shapes said 6.0e11).
ProfiledWork ProfiledWorkFromRuns(const SassFamilyMap& sass_map,
                                  const std::vector<InstrumentEvent>& runs,
                                  const std::string& matrix_family, DType operands);

// True when a warpgroup MMA's SASS names the operand type: BF16 for bf16, E4M3 (and no E5M2)
// on a QGMMA for fp8 e4m3, and for fp16 an HGMMA that names neither BF16 nor TF32 (the bf16 and
// tf32 forms carry their type; fp16's spelling was not measured, so it is told by exclusion).
bool WarpInstructionOperandsAre(std::string_view sass_instruction, DType operands);
// True when the timed path's FLOP counter for a task of `operands` counts the instruction's
// FLOPs: any QGMMA for fp8 e4m3 (GH100's sm__ops_path_tensor_src_fp8 counts both fp8 formats),
// else exactly WarpInstructionOperandsAre.
bool WarpInstructionCountedAs(std::string_view sass_instruction, DType operands);

// The work share with only the task's operand precision credited. Where the timed counter also
// counted target-family FLOPs of another precision (profiled.counter_flops > target_flops: an
// e4m3 task's kernel running some QGMMA on e5m2 operands), that fraction of the counted target
// FLOPs, as the SASS side measured it, moves to other work ("wgmma of another operand
// precision") and the shares are recomputed. Unchanged otherwise.
WorkShare CreditTaskPrecisionOnly(const WorkShare& share, const ProfiledWork& profiled);

// The credited matrix family of an arch: "wgmma" (sm_90a), "tcgen05_mma" (sm_100a); "" else.
std::string MatrixFamilyOf(std::string_view arch);

// The strong check's decision for a correct submission whose target families executed.
struct TargetWorkJudgement {
  // kPass when met; kTargetWorkInsufficient, kProfiledPathDiffers; kPass with
  // work.strong_check == kNotMade when the evidence is missing (then TIC is false).
  VerdictClass verdict_class = VerdictClass::kPass;
  TargetWork work;       // For the verdict.
  std::string feedback;  // One paragraph naming the figures ("" when met).
  // When made and met: the family's shares in one line, for the passing verdict's message
  // ("wgmma did 100.0 % of the task's FLOPs and 99.97 % of the executed multiply-add work").
  std::string summary;
};

// Judges the work share against the arch's thresholds and the path agreement. Three bounds,
// from task.json's min_work_share: share_of_task >= min_share_of_task (the family did the
// task's work), share_of_executed >= min_share_of_executed (little else ran beside it), and
// other_work_over_task <= (1 - s) / s with s = min_share_of_executed (0.111 at 0.9): what ran
// elsewhere is bounded against the task itself, as share_of_executed would bound it had the
// family done exactly the task's FLOPs, so target work padded onto discarded data cannot
// dilute it. On the H200 (run 9) the honest sm_90a solutions measured 0.0003 (GEMM) to 0.040
// (GQA decode); every GEMM decoy that did the product on another unit 1.02-1.03. `share` nullopt:
// the counters were not collected (`not_collected_reason` says why) and the check is not made.
// The path is judged first: a kernel that switches paths when profiled is named for that.
TargetWorkJudgement JudgeTargetWork(const ArchSpec& arch, const std::optional<WorkShare>& share,
                                    const std::string& not_collected_reason,
                                    const PathAgreement& path);

nlohmann::json ToJson(const WorkShare& share);
nlohmann::json ToJson(const PathAgreement& agreement);

}  // namespace ptxbench::gpu

#endif  // PTXBENCH_WORKER_ENGINE_GPU_WORK_SHARE_H_
