// The modes of ptxbench-evaluator (evaluator.h lists what each does), one file each. Every mode
// returns the process's exit code (evaluator.h) and reports through events (support.h Emit).
#ifndef PTXBENCH_WORKER_EVALUATOR_MODES_H_
#define PTXBENCH_WORKER_EVALUATOR_MODES_H_

#include "worker/engine/gpu/protocol_messages.h"

namespace ptxbench::evaluator {

int CompileMode(const gpu::CompileRequest& request);
int SassMapMode(const gpu::SassMapRequest& request);
int ReferenceMode(const gpu::ReferenceRequest& request);
int CandidateMode(const gpu::CandidateRequest& request);
int InstrumentMode(const gpu::InstrumentRequest& request);
int ReplayMode(const gpu::ReplayRequest& request);
int HealthMode(const gpu::HealthRequest& request);

}  // namespace ptxbench::evaluator

#endif  // PTXBENCH_WORKER_EVALUATOR_MODES_H_
