// What a worker's result may say, given the job it was for: the server's second line behind
// the worker token (docs/operations.md, "What a worker token allows"). A worker holding a
// lease could otherwise store any verdict for it (issue: a PASS with TIC and speedup 1e9 was
// accepted for a compile-only submission). Refused here, before anything is stored:
// - a compile job's result that a compile job cannot produce: a runtime verdict class, a
//   correctness, target-instruction or timing stage, correct/target_executed/tic, a speedup;
// - a verdict without the stages its class needs (PASS: compile, correctness and target
//   instructions, all passed; a speedup needs a timing stage), or whose flags contradict its
//   class (tic only with PASS; a PASS without tic is allowed: the strong check was not made);
// - numbers outside physical bounds: a speedup above kMaxPlausibleSpeedup; a timed median
//   below the task's roofline floor on the fastest GPU of the arch that is not classed
//   impossible_time; a speedup that is not the timing stage's baseline / candidate medians.
// It cannot tell a plausible forged verdict from a true one: only a GPU can.
#ifndef PTXBENCH_SERVER_API_RESULT_CHECK_H_
#define PTXBENCH_SERVER_API_RESULT_CHECK_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/task.h"
#include "ptxbench/v1/types.pb.h"
#include "server/store/store.h"

namespace ptxbench::api {

// The largest speedup over the task's library that a correct kernel can show. A kernel is
// never faster than the roofline floor, so its speedup is at most library time / floor. The
// libraries ran at 1.36-2.17 x their floor on the H200 (docs/results/2026-11-30-h200-gpu-test-5:
// cuBLASLt GEMM 1.36, cuDNN attention forward 1.58-1.76, backward 1.85-2.17); a slower GPU of
// the same arch (an H100 PCIe: 0.85 x the compute, 0.41 x the bandwidth of the H200 whose
// peaks set the floor) can raise that ratio to about 5. 8 leaves room for libraries that are
// slower on some shape, and is still far below anything a forger gains from.
inline constexpr double kMaxPlausibleSpeedup = 8;

// The roofline floor, in milliseconds, of the task's timed workload on the fastest GPU of
// `arch` the server knows (sm_90a: H200/H100 SXM, 132 SMs x 4096 bf16 FLOP/clock x 1.98 GHz
// = 1070 TFLOP/s and 4.9 TB/s, the engine's figures on the lent H200; sm_100a: B200,
// 148 SMs x 8192 x 1.965 GHz = 2380 TFLOP/s and 8 TB/s, NVIDIA's data sheet, not measured
// here). INVALID_ARGUMENT for an arch without figures or formulas that do not evaluate.
absl::StatusOr<double> ServerRooflineFloorMs(const Task& task, v1::Arch arch);

// OK when `verdict` is a result `job` can have produced. `task` is the job's task as this
// server has it (nullptr when it has not that version: the bound on timed medians is then
// skipped, the others still apply). INVALID_ARGUMENT names what is wrong.
absl::Status CheckResult(const store::CompletingJob& job, const v1::Verdict& verdict,
                         const Task* task);

}  // namespace ptxbench::api

#endif  // PTXBENCH_SERVER_API_RESULT_CHECK_H_
