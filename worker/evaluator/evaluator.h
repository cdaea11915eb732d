// ptxbench-evaluator: the process that touches the GPU (and, in compile mode, the compilers)
// for one evaluation step, started by the supervisor (worker/engine/evaluate.cc) inside a
// sandbox (worker/engine/sandbox.h). One binary, one mode per process:
//
//   compile     NVRTC + ptxas, plan validation for every workload. No GPU needed.
//   sassmap     Static SASS map of the target families (nvdisasm). No GPU needed.
//   reference   Trusted: regenerates inputs from seeds and runs the library baseline, writing
//               reference outputs to files the candidate process cannot read. Commands on stdin.
//   candidate   Untrusted code: correctness trials (module reloaded per trial, inputs hashed
//               before and after, outputs poisoned) and the interleaved timing loop.
//   instrument  Untrusted code under CUPTI SASS metrics, for ONE kernel of the plan.
//   replay      One trial without the protocol (run under compute-sanitizer for feedback).
//   health      A tiny known kernel: is the GPU usable?
//
// Usage: ptxbench-evaluator MODE --request FILE. Events are JSON lines on fd 3 (protocol.h).
// Exit codes: 0 done, 2 infrastructure failure, 3 kernel fault, 4 plan invalid.
#ifndef PTXBENCH_WORKER_EVALUATOR_EVALUATOR_H_
#define PTXBENCH_WORKER_EVALUATOR_EVALUATOR_H_

namespace ptxbench::evaluator {

inline constexpr int kExitOk = 0;
inline constexpr int kExitInfrastructure = 2;
inline constexpr int kExitKernelFault = 3;
inline constexpr int kExitPlanInvalid = 4;

int Main(int argc, char** argv);

}  // namespace ptxbench::evaluator

#endif  // PTXBENCH_WORKER_EVALUATOR_EVALUATOR_H_
