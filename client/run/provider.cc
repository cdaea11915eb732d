#include "client/run/provider.h"

#include <condition_variable>
#include <cstdlib>
#include <mutex>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/run/http_provider_support.h"
#include "nlohmann/json.hpp"

namespace ptxbench::client::run {
namespace {

constexpr char kRetryAfterPayload[] = "ptxbench.retry_after_seconds";

// At most `limit` calls in flight: hosted APIs rate-limit per key, local servers have a fixed
// number of batch slots, and trajectories outnumber both.
class LimitedProvider : public ModelProvider {
 public:
  LimitedProvider(std::unique_ptr<ModelProvider> inner, int limit)
      : inner_(std::move(inner)), free_(limit < 1 ? 1 : limit) {}

  absl::StatusOr<ModelReply> Complete(const std::vector<ChatMessage>& messages,
                                      const CallContext& context) override {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      available_.wait(lock, [this] { return free_ > 0; });
      --free_;
    }
    absl::StatusOr<ModelReply> reply = inner_->Complete(messages, context);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++free_;
    }
    available_.notify_one();
    return reply;
  }
  std::string kind() const override { return inner_->kind(); }

 private:
  std::unique_ptr<ModelProvider> inner_;
  std::mutex mutex_;
  std::condition_variable available_;
  int free_;
};

// The API's own error message when the body is the usual {"error": {"message": ...}}.
std::string ErrorText(const std::string& body) {
  auto json = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (json.is_object() && json.contains("error")) {
    const auto& error = json["error"];
    if (error.is_object() && error.contains("message") && error["message"].is_string()) {
      return error["message"].get<std::string>();
    }
    if (error.is_string()) return error.get<std::string>();
  }
  return body.substr(0, 300);
}

}  // namespace

bool IsTransient(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kDeadlineExceeded:
      return true;
    default:
      return false;
  }
}

absl::Status HttpError(const std::string& what, int64_t status, const std::string& body,
                       const std::string& retry_after) {
  const std::string message = absl::StrCat(what, ": HTTP ", status, ": ", ErrorText(body));
  absl::Status error;
  if (status == 429) {
    error = absl::ResourceExhaustedError(message);
  } else if (status >= 500 || status == 408 || status == 409) {
    // 529 is Anthropic's "overloaded"; 408 and 409 are documented as retryable by both APIs.
    error = absl::UnavailableError(message);
  } else if (status == 401) {
    error = absl::UnauthenticatedError(message);
  } else if (status == 403) {
    error = absl::PermissionDeniedError(message);
  } else if (status == 404) {
    error = absl::NotFoundError(message);
  } else {
    error = absl::InvalidArgumentError(message);
  }
  double seconds = 0;
  if (!retry_after.empty() && absl::SimpleAtod(retry_after, &seconds) && seconds >= 0) {
    error.SetPayload(kRetryAfterPayload, absl::Cord(absl::StrCat(seconds)));
  }
  return error;
}

std::optional<double> RetryAfterSeconds(const absl::Status& status) {
  auto payload = status.GetPayload(kRetryAfterPayload);
  double seconds = 0;
  if (payload.has_value() && absl::SimpleAtod(std::string(*payload), &seconds)) return seconds;
  return std::nullopt;
}

absl::Status CheckProviderCredentials(const ProviderOptions& options) {
  struct Endpoint {
    const char* provider;
    const char* url_env;
    const char* public_url;
    const char* key_env;
  };
  for (const Endpoint& e :
       {Endpoint{"openai", "OPENAI_BASE_URL", kOpenAiPublicUrl, "OPENAI_API_KEY"},
        Endpoint{"anthropic", "ANTHROPIC_BASE_URL", kAnthropicPublicUrl, "ANTHROPIC_API_KEY"}}) {
    if (!absl::StartsWith(options.spec, absl::StrCat(e.provider, ":"))) continue;
    const std::string url = BaseUrlOr(options.base_url, e.url_env, e.public_url);
    if (url == e.public_url && SettingOr(options.api_key, e.key_env, "").empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--model ", options.spec, ": ", e.key_env, " is not set, and ", url, " needs it; set ",
          e.key_env, ", or pass --base-url (or ", e.url_env, ") of a server that needs no key"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ModelProvider>> MakeProvider(const ProviderOptions& options) {
  const size_t colon = options.spec.find(':');
  if (colon == std::string::npos || colon + 1 == options.spec.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--model '", options.spec,
                     "': expected PROVIDER:MODEL (openai:MODEL, anthropic:MODEL or replay:DIR)"));
  }
  const std::string provider = options.spec.substr(0, colon);
  const std::string rest = options.spec.substr(colon + 1);
  std::unique_ptr<ModelProvider> inner;
  if (provider == "openai") {
    inner = MakeOpenAiProvider(rest, options);
  } else if (provider == "anthropic") {
    inner = MakeAnthropicProvider(rest, options);
  } else if (provider == "replay") {
    auto replay = MakeReplayProvider(rest);
    if (!replay.ok()) return replay.status();
    inner = std::move(*replay);
  } else {
    return absl::InvalidArgumentError(absl::StrCat("--model '", options.spec,
                                                   "': unknown provider '", provider,
                                                   "' (known: openai, anthropic, replay)"));
  }
  return std::unique_ptr<ModelProvider>(new LimitedProvider(std::move(inner), options.concurrency));
}

}  // namespace ptxbench::client::run
