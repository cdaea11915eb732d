#include "client/run/http_client.h"

#include <curl/curl.h>

#include <cctype>
#include <memory>
#include <mutex>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ptxbench::client::run {
namespace {

size_t AppendBody(char* data, size_t size, size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

size_t ReadHeader(char* data, size_t size, size_t count, void* user) {
  std::string line(data, size * count);
  constexpr char kRetryAfter[] = "retry-after:";
  if (absl::StartsWithIgnoreCase(line, kRetryAfter)) {
    *static_cast<std::string*>(user) =
        std::string(absl::StripAsciiWhitespace(line.substr(sizeof(kRetryAfter) - 1)));
  }
  return size * count;
}

void GlobalInitOnce() {
  // curl_global_init is not thread-safe and must run before any other thread uses libcurl.
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace

absl::StatusOr<HttpResponse> PostJson(const HttpRequest& request) {
  GlobalInitOnce();
  std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), curl_easy_cleanup);
  if (curl == nullptr) return absl::InternalError("curl_easy_init failed");
  curl_slist* raw_headers = curl_slist_append(nullptr, "Content-Type: application/json");
  for (const std::string& header : request.headers) {
    raw_headers = curl_slist_append(raw_headers, header.c_str());
  }
  std::unique_ptr<curl_slist, void (*)(curl_slist*)> headers(raw_headers, curl_slist_free_all);
  HttpResponse response;
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(c, CURLOPT_POST, 1L);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, request.body.data());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, AppendBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &response.body);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, ReadHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &response.retry_after);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeout_seconds * 1000));
  // Worker threads call this concurrently: signals would interrupt the wrong thread.
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");
  const CURLcode code = curl_easy_perform(c);
  if (code == CURLE_OPERATION_TIMEDOUT) {
    return absl::DeadlineExceededError(
        absl::StrCat("no response from ", request.url, " within ", request.timeout_seconds, " s"));
  }
  if (code == CURLE_URL_MALFORMAT || code == CURLE_UNSUPPORTED_PROTOCOL) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot use the URL '", request.url, "': ", curl_easy_strerror(code)));
  }
  if (code != CURLE_OK) {
    return absl::UnavailableError(
        absl::StrCat("request to ", request.url, " failed: ", curl_easy_strerror(code)));
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &response.status);
  return response;
}

}  // namespace ptxbench::client::run
