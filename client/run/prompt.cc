#include "client/run/prompt.h"

#include "absl/strings/str_cat.h"

namespace ptxbench::client::run {
namespace {

constexpr char kNextAttempt[] =
    "Fix the problems above and improve the kernel. Reply with the complete source file in one "
    "fenced code block, including its /* PTXBENCH_PLAN {...} */ launch plan.";

std::string FeedbackMessage(int turn, const std::string& feedback) {
  return absl::StrCat("Feedback on attempt ", turn, ":\n\n", feedback, "\n", kNextAttempt);
}

}  // namespace

absl::StatusOr<ContextPolicy> ParseContextPolicy(const std::string& name) {
  if (name == "full") return ContextPolicy::kFull;
  if (name == "latest") return ContextPolicy::kLatest;
  if (name == "single") return ContextPolicy::kSingle;
  return absl::InvalidArgumentError(
      absl::StrCat("--context '", name, "': expected full, latest or single"));
}

std::string ContextPolicyName(ContextPolicy policy) {
  switch (policy) {
    case ContextPolicy::kFull:
      return "full";
    case ContextPolicy::kLatest:
      return "latest";
    case ContextPolicy::kSingle:
      return "single";
  }
  return "full";
}

std::string SystemMessage(const std::string& arch) {
  return absl::StrCat(
      "You are an expert GPU kernel engineer writing CUDA C++ and PTX for NVIDIA ", arch,
      ". Each of your replies is compiled and evaluated automatically, and you receive the "
      "evaluation as feedback.\n\n"
      "Reply format: exactly one fenced code block (```cuda for CUDA C++ device code, ```ptx "
      "for a PTX module) holding the complete source file, with its launch plan inside the "
      "file as a /* PTXBENCH_PLAN {...} */ block comment. If your reply has several code "
      "blocks, the last one with a PTXBENCH_PLAN block is evaluated. Keep prose short.");
}

std::vector<ChatMessage> BuildMessages(const std::string& task_prompt,
                                       const std::vector<PastTurn>& past, ContextPolicy policy,
                                       const std::string& arch) {
  std::vector<ChatMessage> messages = {{"system", SystemMessage(arch)}};
  if (past.empty()) {
    messages.push_back({"user", task_prompt});
    return messages;
  }
  const int latest = static_cast<int>(past.size());
  switch (policy) {
    case ContextPolicy::kFull:
      messages.push_back({"user", task_prompt});
      for (size_t i = 0; i < past.size(); ++i) {
        messages.push_back({"assistant", past[i].reply});
        messages.push_back({"user", FeedbackMessage(static_cast<int>(i) + 1, past[i].feedback)});
      }
      break;
    case ContextPolicy::kLatest:
      messages.push_back({"user", task_prompt});
      messages.push_back({"assistant", past.back().reply});
      messages.push_back({"user", FeedbackMessage(latest, past.back().feedback)});
      break;
    case ContextPolicy::kSingle: {
      std::string text =
          absl::StrCat(task_prompt, "\n\n## Your previous attempt (attempt ", latest, ")\n\n");
      if (past.back().source.empty()) {
        absl::StrAppend(&text, "(no source could be taken from your reply)\n\n");
      } else {
        absl::StrAppend(&text, "```\n", past.back().source,
                        past.back().source.back() == '\n' ? "" : "\n", "```\n\n");
      }
      absl::StrAppend(&text, FeedbackMessage(latest, past.back().feedback));
      messages.push_back({"user", text});
      break;
    }
  }
  return messages;
}

}  // namespace ptxbench::client::run
