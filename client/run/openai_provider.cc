// Chat completions (POST {base}/chat/completions), as OpenAI defines it and vLLM, SGLang,
// llama.cpp's server and Gemini's compatibility endpoint implement it.

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/run/http_client.h"
#include "client/run/http_provider_support.h"
#include "client/run/provider.h"
#include "nlohmann/json.hpp"

namespace ptxbench::client::run {
namespace {

using nlohmann::json;

class OpenAiProvider : public ModelProvider {
 public:
  OpenAiProvider(std::string model, const ProviderOptions& options)
      : model_(std::move(model)), options_(options) {
    base_url_ = BaseUrlOr(options.base_url, "OPENAI_BASE_URL", kOpenAiPublicUrl);
    api_key_ = SettingOr(options.api_key, "OPENAI_API_KEY", "");
  }

  absl::StatusOr<ModelReply> Complete(const std::vector<ChatMessage>& messages,
                                      const CallContext&) override {
    json body = {{"model", model_}, {"messages", json::array()}};
    for (const ChatMessage& m : messages) {
      body["messages"].push_back({{"role", m.role}, {"content", m.content}});
    }
    if (options_.temperature.has_value()) body["temperature"] = *options_.temperature;
    if (options_.max_tokens > 0) {
      // OpenAI's reasoning models refuse max_tokens and take max_completion_tokens; the
      // compatible servers (vLLM, SGLang, llama.cpp) know max_tokens.
      const bool openai_itself = absl::StrContains(base_url_, "api.openai.com");
      body[openai_itself ? "max_completion_tokens" : "max_tokens"] = options_.max_tokens;
    }
    HttpRequest request;
    request.url = base_url_ + "/chat/completions";
    if (!api_key_.empty()) request.headers.push_back("Authorization: Bearer " + api_key_);
    request.body = body.dump();
    request.timeout_seconds = options_.timeout_seconds;
    const std::string what = absl::StrCat("openai:", model_);
    absl::StatusOr<json> exchanged = ExchangeJson(request, what);
    if (!exchanged.ok()) return exchanged.status();
    const json& reply = *exchanged;
    if (!reply.contains("choices") || !reply["choices"].is_array() || reply["choices"].empty() ||
        !reply["choices"][0].is_object()) {
      // A proxy's answer or a truncated body: the server misbehaved, not the model.
      return absl::UnavailableError(
          absl::StrCat(what, ": a 200 response without choices: ", reply.dump().substr(0, 300)));
    }
    const json& choice = reply["choices"][0];
    // A null message or usage (some servers send them) reads as empty.
    const json message = choice.contains("message") && choice["message"].is_object()
                             ? choice["message"]
                             : json::object();
    ModelReply out;
    out.text = JsonStringOr(message, "content");
    out.reasoning = JsonStringOr(message, "reasoning_content");
    if (out.reasoning.empty()) out.reasoning = JsonStringOr(message, "reasoning");
    out.stop_reason = JsonStringOr(choice, "finish_reason");
    const json usage =
        reply.contains("usage") && reply["usage"].is_object() ? reply["usage"] : json::object();
    out.usage.input_tokens = JsonIntOr(usage, "prompt_tokens", 0);
    out.usage.output_tokens = JsonIntOr(usage, "completion_tokens", 0);
    // OpenAI and DeepSeek report completion_tokens_details.reasoning_tokens; SGLang reports
    // usage.reasoning_tokens; vLLM reports neither (its completion_tokens_details is null), and
    // then the figure is absent rather than 0.
    constexpr int64_t kAbsent = -1;
    const json details = usage.contains("completion_tokens_details")
                             ? usage["completion_tokens_details"]
                             : json::object();
    int64_t reasoning = JsonIntOr(details, "reasoning_tokens", kAbsent);
    if (reasoning == kAbsent) reasoning = JsonIntOr(usage, "reasoning_tokens", kAbsent);
    if (reasoning != kAbsent) out.usage.reasoning_tokens = reasoning;
    return out;
  }

  std::string kind() const override { return "openai"; }

 private:
  std::string model_;
  ProviderOptions options_;
  std::string base_url_;
  std::string api_key_;
};

}  // namespace

std::unique_ptr<ModelProvider> MakeOpenAiProvider(const std::string& model,
                                                  const ProviderOptions& options) {
  return std::make_unique<OpenAiProvider>(model, options);
}

}  // namespace ptxbench::client::run
