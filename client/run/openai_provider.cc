// Chat completions (POST {base}/chat/completions), as OpenAI defines it and vLLM, SGLang,
// llama.cpp's server and Gemini's compatibility endpoint implement it.
#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/run/http_client.h"
#include "client/run/provider.h"
#include "nlohmann/json.hpp"

namespace ptxbench::client::run {
namespace {

using nlohmann::json;

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::string(value) : fallback;
}

int64_t IntOr(const json& object, const char* key, int64_t fallback) {
  if (object.is_object() && object.contains(key) && object[key].is_number_integer()) {
    return object[key].get<int64_t>();
  }
  return fallback;
}

std::string StringOr(const json& object, const char* key) {
  if (object.is_object() && object.contains(key) && object[key].is_string()) {
    return object[key].get<std::string>();
  }
  return "";
}

class OpenAiProvider : public ModelProvider {
 public:
  OpenAiProvider(std::string model, const ProviderOptions& options)
      : model_(std::move(model)), options_(options) {
    base_url_ = options.base_url.empty() ? EnvOr("OPENAI_BASE_URL", "https://api.openai.com/v1")
                                         : options.base_url;
    while (absl::EndsWith(base_url_, "/")) base_url_.pop_back();
    api_key_ = options.api_key.empty() ? EnvOr("OPENAI_API_KEY", "") : options.api_key;
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
    absl::StatusOr<HttpResponse> response = PostJson(request);
    if (!response.ok()) return response.status();
    const std::string what = absl::StrCat("openai:", model_);
    if (response->status != 200) {
      return HttpError(what, response->status, response->body, response->retry_after);
    }
    json reply = json::parse(response->body, nullptr, /*allow_exceptions=*/false);
    if (!reply.is_object() || !reply.contains("choices") || !reply["choices"].is_array() ||
        reply["choices"].empty() || !reply["choices"][0].is_object()) {
      // A proxy's error page or a truncated body: the server misbehaved, not the model.
      return absl::UnavailableError(
          absl::StrCat(what, ": a 200 response without choices: ", response->body.substr(0, 300)));
    }
    const json& choice = reply["choices"][0];
    const json message = choice.value("message", json::object());
    ModelReply out;
    out.text = StringOr(message, "content");
    out.reasoning = StringOr(message, "reasoning_content");
    if (out.reasoning.empty()) out.reasoning = StringOr(message, "reasoning");
    out.stop_reason = StringOr(choice, "finish_reason");
    const json usage = reply.value("usage", json::object());
    out.usage.input_tokens = IntOr(usage, "prompt_tokens", 0);
    out.usage.output_tokens = IntOr(usage, "completion_tokens", 0);
    out.usage.reasoning_tokens =
        IntOr(usage.value("completion_tokens_details", json::object()), "reasoning_tokens", 0);
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
