// ptxbench-evaluator: the process that touches the GPU (and, in compile mode, the compilers)
// for one evaluation step, started by the supervisor (worker/engine/evaluate.cc) inside a
// sandbox (worker/engine/sandbox.h). One binary, one mode per process, one file per mode:
//
//   compile     compile_mode.cc: NVRTC + ptxas, plan validation for every workload. No GPU.
//   sassmap     sassmap_mode.cc: static SASS map of the target families (nvdisasm). No GPU.
//   reference   reference_mode.cc: trusted. Regenerates inputs from seeds, runs the library
//               baseline, keeps the references on its device and compares the candidate's
//               outputs with them there. Commands on stdin.
//   candidate   candidate_mode.cc: untrusted code. Correctness trials (module reloaded per
//               trial, inputs hashed before and after, outputs poisoned) and the interleaved
//               timing loop.
//   instrument  instrument_mode.cc: untrusted code under CUPTI SASS metrics, for ONE kernel.
//   replay      replay_mode.cc: one trial without the protocol (under compute-sanitizer).
//   health      health_mode.cc: a tiny known kernel: is the GPU usable?
//
// Usage: ptxbench-evaluator MODE --request FILE (health: the request is optional). The request,
// commands and events are the structs of worker/engine/gpu/protocol_messages.h; events are JSON
// lines on fd 3 (protocol.h). What the modes share is in support.h and submission_runtime.h.
// Exit codes: 0 done, 2 infrastructure failure, 3 kernel fault, 4 plan invalid.
#ifndef PTXBENCH_WORKER_EVALUATOR_EVALUATOR_H_
#define PTXBENCH_WORKER_EVALUATOR_EVALUATOR_H_

namespace ptxbench::evaluator {

inline constexpr int kExitOk = 0;
inline constexpr int kExitInfrastructure = 2;
inline constexpr int kExitKernelFault = 3;
inline constexpr int kExitPlanInvalid = 4;

// Reads the mode and its request and runs the mode.
int Main(int argc, char** argv);

}  // namespace ptxbench::evaluator

#endif  // PTXBENCH_WORKER_EVALUATOR_EVALUATOR_H_
