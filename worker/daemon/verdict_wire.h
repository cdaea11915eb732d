// Conversion of the engine's Verdict (common/verdict.h) to the wire message, in one place.
#ifndef PTXBENCH_WORKER_DAEMON_VERDICT_WIRE_H_
#define PTXBENCH_WORKER_DAEMON_VERDICT_WIRE_H_

#include "common/verdict.h"
#include "ptxbench/v1/types.pb.h"

namespace ptxbench::worker {

v1::Verdict ToWire(const Verdict& verdict);
v1::StageResult ToWire(const StageReport& report);

}  // namespace ptxbench::worker

#endif  // PTXBENCH_WORKER_DAEMON_VERDICT_WIRE_H_
