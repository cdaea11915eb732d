// A verdict as feedback for the model, in a fixed order: compile log with resource and spill
// lines -> runtime error or sanitizer report -> per-workload correctness with error figures ->
// target-instruction evidence per family -> speedup. The figures come from each stage's
// detail_json (keys in docs/api.md); a stage that did not run says so.
#ifndef PTXBENCH_CLIENT_RUN_FEEDBACK_H_
#define PTXBENCH_CLIENT_RUN_FEEDBACK_H_

#include <string>

#include "ptxbench/v1/types.pb.h"

namespace ptxbench::client::run {

struct FeedbackOptions {
  double target_speedup = 1.0;
  bool compile_only = false;     // Only the compile stage was asked for.
  size_t max_log_bytes = 12000;  // Compile logs and sanitizer reports are cut beyond this.
};

std::string VerdictFeedback(const v1::Verdict& verdict, const FeedbackOptions& options);

// Whether the verdict's speedup reaches `target` as a clean figure: a speedup whose samples
// scattered far more than the library's (sampling.speedup_stable false) counts in no ranking
// (docs/metrics.md), so it neither ends a trajectory nor is called reached in the feedback.
bool SpeedupReachesTarget(const v1::Verdict& verdict, double target);

// The server refused the submission itself (INVALID_ARGUMENT: too large, bad UTF-8 ...).
std::string RejectedSubmissionFeedback(const std::string& reason);

}  // namespace ptxbench::client::run

#endif  // PTXBENCH_CLIENT_RUN_FEEDBACK_H_
