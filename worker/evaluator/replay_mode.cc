// replay: one trial without the protocol's commands, run under compute-sanitizer memcheck by the
// supervisor after a kernel fault, for the feedback only.
#include "worker/evaluator/evaluator.h"
#include "worker/evaluator/modes.h"
#include "worker/evaluator/submission_runtime.h"
#include "worker/evaluator/support.h"

namespace ptxbench::evaluator {

int ReplayMode(const gpu::ReplayRequest& request) {
  SubmissionRuntime s;
  absl::Status opened = s.OpenDevice(request.submission, request.gpu, request.hash_key);
  if (opened.ok()) opened = s.OpenModule(request.module);
  if (!opened.ok()) return FailFromStatus(opened, gpu::FaultPhase::kSetup);
  auto event = RunTrial(s, request.workload, request.seed, request.output_prefix,
                        gpu::OutputTransfer::kFile);
  if (!event.ok()) return FailFromStatus(event.status(), gpu::FaultPhase::kReplay);
  Emit(*event);
  return kExitOk;
}

}  // namespace ptxbench::evaluator
