// The messages sent to the model on each turn: a fixed system message (role and reply
// format), the task's prompt as the server renders it (definition, submission and launch-plan
// contract, knowledge level), and the earlier turns as the context policy shows them:
//   full    every earlier reply and its feedback, as a conversation
//   latest  only the latest reply and its feedback
//   single  one user message, rebuilt each turn: the task, the latest source, its feedback
#ifndef PTXBENCH_CLIENT_RUN_PROMPT_H_
#define PTXBENCH_CLIENT_RUN_PROMPT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/run/provider.h"

namespace ptxbench::client::run {

enum class ContextPolicy { kFull, kLatest, kSingle };
absl::StatusOr<ContextPolicy> ParseContextPolicy(const std::string& name);
std::string ContextPolicyName(ContextPolicy policy);

// One charged turn as the next prompt shows it.
struct PastTurn {
  std::string reply;     // The model's reply.
  std::string source;    // The source extracted from it ("" when none).
  std::string feedback;  // What the evaluation said.
};

std::string SystemMessage(const std::string& arch);

std::vector<ChatMessage> BuildMessages(const std::string& task_prompt,
                                       const std::vector<PastTurn>& past, ContextPolicy policy,
                                       const std::string& arch);

}  // namespace ptxbench::client::run

#endif  // PTXBENCH_CLIENT_RUN_PROMPT_H_
