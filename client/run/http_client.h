// One HTTP POST of a JSON body, for the model providers. libcurl stays inside http_client.cc.
#ifndef PTXBENCH_CLIENT_RUN_HTTP_CLIENT_H_
#define PTXBENCH_CLIENT_RUN_HTTP_CLIENT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ptxbench::client::run {

struct HttpRequest {
  std::string url;
  std::vector<std::string> headers;  // "Name: value".
  std::string body;
  double timeout_seconds = 600;  // The whole exchange, connection included.
};

struct HttpResponse {
  long status = 0;  // NOLINT(google-runtime-int): libcurl's type for the response code.
  std::string body;
  std::string retry_after;  // The Retry-After header's value, when the server sent one.
};

// Any HTTP status is a response. An error status means no response arrived: DEADLINE_EXCEEDED
// for the timeout, UNAVAILABLE for connection and transfer failures, INVALID_ARGUMENT for a
// URL libcurl cannot use.
absl::StatusOr<HttpResponse> PostJson(const HttpRequest& request);

}  // namespace ptxbench::client::run

#endif  // PTXBENCH_CLIENT_RUN_HTTP_CLIENT_H_
