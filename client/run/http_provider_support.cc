#include "client/run/http_provider_support.h"

#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/run/provider.h"

namespace ptxbench::client::run {

using nlohmann::json;

std::string SettingOr(const std::string& given, const char* env, const std::string& fallback) {
  if (!given.empty()) return given;
  const char* value = std::getenv(env);
  return value != nullptr && *value != '\0' ? std::string(value) : fallback;
}

std::string BaseUrlOr(const std::string& given, const char* env, const std::string& fallback) {
  std::string url = SettingOr(given, env, fallback);
  while (absl::EndsWith(url, "/")) url.pop_back();
  return url;
}

absl::StatusOr<json> ExchangeJson(const HttpRequest& request, const std::string& what) {
  absl::StatusOr<HttpResponse> response = PostJson(request);
  if (!response.ok()) return response.status();
  if (response->status != 200) {
    return HttpError(what, response->status, response->body, response->retry_after);
  }
  json reply = json::parse(response->body, nullptr, /*allow_exceptions=*/false);
  if (!reply.is_object()) {
    return absl::UnavailableError(absl::StrCat(
        what, ": a 200 response that is not a JSON object: ", response->body.substr(0, 300)));
  }
  return reply;
}

int64_t JsonIntOr(const json& object, const char* key, int64_t fallback) {
  if (object.is_object() && object.contains(key) && object[key].is_number_integer()) {
    return object[key].get<int64_t>();
  }
  return fallback;
}

std::string JsonStringOr(const json& object, const char* key) {
  if (object.is_object() && object.contains(key) && object[key].is_string()) {
    return object[key].get<std::string>();
  }
  return "";
}

}  // namespace ptxbench::client::run
