// Model providers for `ptxbench run`: one chat call in, one reply with its token usage out.
//   openai:MODEL     chat completions (OpenAI, vLLM, SGLang, llama.cpp's server, Gemini's
//                    OpenAI-compatible endpoint); --base-url or OPENAI_BASE_URL, OPENAI_API_KEY
//   anthropic:MODEL  the Messages API; ANTHROPIC_API_KEY, --base-url or ANTHROPIC_BASE_URL
//   replay:DIR       replies read from files (layout in docs/client.md), for offline evaluation
//                    of existing generations and for tests
#ifndef PTXBENCH_CLIENT_RUN_PROVIDER_H_
#define PTXBENCH_CLIENT_RUN_PROVIDER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/trajectory.h"

namespace ptxbench::client::run {

// The trajectory record's own types (client/trajectory.h), so a reply is recorded as it came.
using ::ptxbench::client::ChatMessage;
using ::ptxbench::client::TokenUsage;

struct ModelReply {
  std::string text;
  // Reasoning the API returns apart from the answer: reasoning_content (vLLM, SGLang, DeepSeek)
  // or reasoning (OpenRouter-style), Anthropic thinking blocks.
  std::string reasoning;
  std::string stop_reason;
  TokenUsage usage;
};

// Which trajectory and turn a call is for: the replay provider finds its files by these.
struct CallContext {
  std::string task;
  std::string arch;
  std::string knowledge;
  int trajectory = 0;  // As in the trajectory's file name (traj-NN).
  int turn = 1;        // 1-based.
};

struct ProviderOptions {
  std::string spec;      // "openai:MODEL", "anthropic:MODEL" or "replay:DIR".
  std::string base_url;  // Empty: the provider's environment variable, then its public URL.
  std::string api_key;   // Empty: the provider's environment variable.
  std::optional<double> temperature;
  int64_t max_tokens = 0;       // 0: the provider's default (Anthropic requires one: 16384).
  int64_t thinking_budget = 0;  // Anthropic extended thinking budget; 0 leaves thinking off.
  double timeout_seconds = 600;
  int concurrency = 4;  // Calls in flight at once to this provider.
};

class ModelProvider {
 public:
  virtual ~ModelProvider() = default;
  // The reply, or why there is none. IsTransient() errors are worth retrying (rate limits,
  // server errors, timeouts); any other error is a configuration problem (a bad key, an
  // unknown model) that no retry fixes.
  virtual absl::StatusOr<ModelReply> Complete(const std::vector<ChatMessage>& messages,
                                              const CallContext& context) = 0;
  // "openai", "anthropic" or "replay".
  virtual std::string kind() const = 0;
};

// The provider `options.spec` names, limited to `options.concurrency` calls at once.
absl::StatusOr<std::unique_ptr<ModelProvider>> MakeProvider(const ProviderOptions& options);

// Catches, before anything starts, a provider that cannot work: openai: or anthropic: with its
// public endpoint and no API key (a local server given by --base-url needs none). The error
// names the variable to set.
absl::Status CheckProviderCredentials(const ProviderOptions& options);

// Rate limits (RESOURCE_EXHAUSTED), server errors and lost connections (UNAVAILABLE, INTERNAL)
// and timeouts (DEADLINE_EXCEEDED).
bool IsTransient(const absl::Status& status);
// The error for an HTTP status that is not 200, keeping the server's Retry-After hint.
absl::Status HttpError(const std::string& what, int64_t status, const std::string& body,
                       const std::string& retry_after);
// The Retry-After hint (seconds) carried by an error, if any.
std::optional<double> RetryAfterSeconds(const absl::Status& status);

// The replay provider runs out of replies: OUT_OF_RANGE with this message prefix.
inline constexpr char kReplayExhausted[] = "replay exhausted";

// Constructors behind MakeProvider, for tests.
std::unique_ptr<ModelProvider> MakeOpenAiProvider(const std::string& model,
                                                  const ProviderOptions& options);
std::unique_ptr<ModelProvider> MakeAnthropicProvider(const std::string& model,
                                                     const ProviderOptions& options);
absl::StatusOr<std::unique_ptr<ModelProvider>> MakeReplayProvider(const std::string& dir);

}  // namespace ptxbench::client::run

#endif  // PTXBENCH_CLIENT_RUN_PROVIDER_H_
