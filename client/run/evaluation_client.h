// The server side of `ptxbench run`: task prompts, and submissions followed to their
// verdicts. gRPC stays inside evaluation_client.cc.
#ifndef PTXBENCH_CLIENT_RUN_EVALUATION_CLIENT_H_
#define PTXBENCH_CLIENT_RUN_EVALUATION_CLIENT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/dial.h"
#include "ptxbench/v1/types.pb.h"

namespace ptxbench::client::run {

struct TaskPrompt {
  std::string prompt;
  std::string version_hash;
};

struct SubmitSpec {
  std::string task;
  v1::Arch arch = v1::ARCH_UNSPECIFIED;
  v1::KnowledgeLevel knowledge = v1::KNOWLEDGE_LEVEL_UNSPECIFIED;
  std::string language;  // "cuda" or "ptx".
  std::string source;
  std::string launch_plan_json;  // Empty: the plan block in the source.
  std::string model;
  std::string session_id;
  int turn_index = 0;  // 0-based, as SubmitRequest counts.
  bool compile_only = false;
  std::string idempotency_key;
};

struct EvaluationOutcome {
  // The server refused the submission itself (too large, a launch plan that is not JSON ...):
  // the model's fault, told to it as feedback.
  bool rejected = false;
  std::string rejection;
  std::string submission_id;
  v1::Verdict verdict;
};

class EvaluationClient {
 public:
  virtual ~EvaluationClient() = default;
  static absl::StatusOr<std::unique_ptr<EvaluationClient>> Connect(const Connection& connection);

  // The server's task ids (for the hint after an unknown one).
  virtual absl::StatusOr<std::vector<std::string>> TaskIds() = 0;
  // NOT_FOUND or INVALID_ARGUMENT when the server has no such task for the arch.
  virtual absl::StatusOr<TaskPrompt> GetTask(const std::string& task, v1::Arch arch,
                                             v1::KnowledgeLevel knowledge) = 0;
  // Submits (idempotently, by spec.idempotency_key) and waits for the verdict, at most
  // `verdict_timeout`. Errors are infrastructure: the server unreachable or stopping
  // (UNAVAILABLE; a graceful stop's CANCELLED is reported as UNAVAILABLE, since the same
  // call sent again succeeds), no verdict in time (DEADLINE_EXCEEDED), a refused token
  // (UNAUTHENTICATED) ...
  virtual absl::StatusOr<EvaluationOutcome> Evaluate(const SubmitSpec& spec,
                                                     absl::Duration verdict_timeout) = 0;
};

}  // namespace ptxbench::client::run

#endif  // PTXBENCH_CLIENT_RUN_EVALUATION_CLIENT_H_
