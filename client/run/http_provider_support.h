// What the HTTP model providers (openai_provider.cc, anthropic_provider.cc) share: where their
// settings come from, one request/response exchange, and tolerant reading of reply fields.
#ifndef PTXBENCH_CLIENT_RUN_HTTP_PROVIDER_SUPPORT_H_
#define PTXBENCH_CLIENT_RUN_HTTP_PROVIDER_SUPPORT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "client/run/http_client.h"
#include "nlohmann/json.hpp"

namespace ptxbench::client::run {

// The public endpoints the providers use when no base URL is given.
inline constexpr char kOpenAiPublicUrl[] = "https://api.openai.com/v1";
inline constexpr char kAnthropicPublicUrl[] = "https://api.anthropic.com";

// `given` when not empty, else the environment variable `env` when set and not empty, else
// `fallback` (flag over environment over default, as every provider option works).
std::string SettingOr(const std::string& given, const char* env, const std::string& fallback);

// The same for a base URL, without trailing '/' (the providers append their paths).
std::string BaseUrlOr(const std::string& given, const char* env, const std::string& fallback);

// POSTs `request`; returns the body of a 200 response parsed as a JSON object. A non-200 status
// is HttpError (429, 5xx transient, Retry-After kept); a 200 whose body is not a JSON object is
// UNAVAILABLE (a proxy's error page or a truncated body: the server misbehaved, not the model,
// so the turn is retried and not charged). `what` ("openai:MODEL") starts every message.
absl::StatusOr<nlohmann::json> ExchangeJson(const HttpRequest& request, const std::string& what);

// A reply field when it has the expected type, else the fallback: providers differ in which
// usage fields they send, and a missing figure is recorded as 0 rather than failing the turn.
int64_t JsonIntOr(const nlohmann::json& object, const char* key, int64_t fallback);
std::string JsonStringOr(const nlohmann::json& object, const char* key);

}  // namespace ptxbench::client::run

#endif  // PTXBENCH_CLIENT_RUN_HTTP_PROVIDER_SUPPORT_H_
