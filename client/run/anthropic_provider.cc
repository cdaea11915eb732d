// Anthropic's Messages API (POST {base}/v1/messages, anthropic-version 2023-06-01).

#include "absl/strings/str_cat.h"
#include "client/run/http_client.h"
#include "client/run/http_provider_support.h"
#include "client/run/provider.h"
#include "nlohmann/json.hpp"

namespace ptxbench::client::run {
namespace {

using nlohmann::json;

// The Messages API requires max_tokens; 16384 leaves room for a long kernel with its
// explanation and stays within every current Claude model's output limit.
constexpr int64_t kDefaultMaxTokens = 16384;

class AnthropicProvider : public ModelProvider {
 public:
  AnthropicProvider(std::string model, const ProviderOptions& options)
      : model_(std::move(model)), options_(options) {
    base_url_ = BaseUrlOr(options.base_url, "ANTHROPIC_BASE_URL", kAnthropicPublicUrl);
    api_key_ = SettingOr(options.api_key, "ANTHROPIC_API_KEY", "");
  }

  absl::StatusOr<ModelReply> Complete(const std::vector<ChatMessage>& messages,
                                      const CallContext&) override {
    int64_t max_tokens = options_.max_tokens > 0 ? options_.max_tokens : kDefaultMaxTokens;
    json body = {{"model", model_}, {"messages", json::array()}};
    std::string system;
    for (const ChatMessage& m : messages) {
      // The API takes the system prompt apart from the alternating user/assistant turns.
      if (m.role == "system") {
        absl::StrAppend(&system, system.empty() ? "" : "\n\n", m.content);
      } else {
        body["messages"].push_back({{"role", m.role}, {"content", m.content}});
      }
    }
    if (!system.empty()) body["system"] = system;
    if (options_.thinking_budget > 0) {
      body["thinking"] = {{"type", "enabled"}, {"budget_tokens", options_.thinking_budget}};
      // The budget counts inside max_tokens, which must exceed it.
      if (max_tokens <= options_.thinking_budget) max_tokens = options_.thinking_budget + 8192;
    } else if (options_.temperature.has_value()) {
      // Extended thinking accepts no temperature other than the default.
      body["temperature"] = *options_.temperature;
    }
    body["max_tokens"] = max_tokens;
    HttpRequest request;
    request.url = base_url_ + "/v1/messages";
    request.headers.push_back("anthropic-version: 2023-06-01");
    if (!api_key_.empty()) request.headers.push_back("x-api-key: " + api_key_);
    request.body = body.dump();
    request.timeout_seconds = options_.timeout_seconds;
    const std::string what = absl::StrCat("anthropic:", model_);
    absl::StatusOr<json> exchanged = ExchangeJson(request, what);
    if (!exchanged.ok()) return exchanged.status();
    const json& reply = *exchanged;
    if (!reply.contains("content") || !reply["content"].is_array()) {
      return absl::UnavailableError(
          absl::StrCat(what, ": a 200 response without content: ", reply.dump().substr(0, 300)));
    }
    ModelReply out;
    for (const json& block : reply["content"]) {
      if (!block.is_object()) continue;
      const std::string type = block.value("type", "");
      if (type == "text") {
        out.text += block.value("text", "");
      } else if (type == "thinking") {
        out.reasoning += block.value("thinking", "");
      } else if (type == "redacted_thinking") {
        // Encrypted by the API: kept as a marker so the record shows reasoning happened.
        out.reasoning += "[redacted thinking]";
      }
    }
    if (reply.contains("stop_reason") && reply["stop_reason"].is_string()) {
      out.stop_reason = reply["stop_reason"].get<std::string>();
    }
    const json usage =
        reply.contains("usage") && reply["usage"].is_object() ? reply["usage"] : json::object();
    out.usage.input_tokens = JsonIntOr(usage, "input_tokens", 0) +
                             JsonIntOr(usage, "cache_read_input_tokens", 0) +
                             JsonIntOr(usage, "cache_creation_input_tokens", 0);
    out.usage.output_tokens = JsonIntOr(usage, "output_tokens", 0);
    // output_tokens includes thinking; the Messages API reports no separate figure today, so
    // one is recorded only when the reply has it (absent, not 0, otherwise).
    constexpr int64_t kAbsent = -1;
    int64_t thinking = JsonIntOr(usage, "thinking_tokens", kAbsent);
    if (thinking == kAbsent) {
      const json details =
          usage.contains("output_tokens_details") ? usage["output_tokens_details"] : json::object();
      thinking = JsonIntOr(details, "thinking_tokens", kAbsent);
    }
    if (thinking != kAbsent) out.usage.reasoning_tokens = thinking;
    return out;
  }

  std::string kind() const override { return "anthropic"; }

 private:
  std::string model_;
  ProviderOptions options_;
  std::string base_url_;
  std::string api_key_;
};

}  // namespace

std::unique_ptr<ModelProvider> MakeAnthropicProvider(const std::string& model,
                                                     const ProviderOptions& options) {
  return std::make_unique<AnthropicProvider>(model, options);
}

}  // namespace ptxbench::client::run
