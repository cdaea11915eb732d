#include "proto/dial.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cstdint>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/build_info.h"
#include "common/files.h"

namespace ptxbench {
namespace {

// A CA bundle: 1 MiB is far above any.
absl::StatusOr<std::string> ReadSmallFile(const std::string& path, std::string_view what) {
  return ReadFileToString(path, what, {.max_bytes = size_t{1} << 20});
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::Channel>> Dial(const DialOptions& options) {
  if (options.address.empty()) {
    return absl::InvalidArgumentError(
        "no server address: pass --server HOST:PORT or set PTXBENCH_SERVER");
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (options.tls || !options.tls_ca_file.empty()) {
    grpc::SslCredentialsOptions ssl;
    if (!options.tls_ca_file.empty()) {
      absl::StatusOr<std::string> pem = ReadSmallFile(options.tls_ca_file, "--tls-ca");
      if (!pem.ok()) return pem.status();
      if (pem->find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("--tls-ca: ", options.tls_ca_file, " holds no PEM certificate"));
      }
      ssl.pem_root_certs = *pem;
    }
    credentials = grpc::SslCredentials(ssl);
  } else {
    credentials = grpc::InsecureChannelCredentials();
  }
  grpc::ChannelArguments arguments;
  arguments.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS,
                   static_cast<int>(absl::ToInt64Milliseconds(options.keepalive)));
  arguments.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                   static_cast<int>(absl::ToInt64Milliseconds(kKeepaliveTimeout)));
  arguments.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  arguments.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  if (options.own_connection) arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // The server's logs and metrics can then tell our programs (and their versions) apart from
  // other gRPC clients.
  arguments.SetUserAgentPrefix(UserAgent());
  if (options.max_reconnect_backoff > absl::ZeroDuration()) {
    arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    arguments.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
    arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
                     static_cast<int>(absl::ToInt64Milliseconds(options.max_reconnect_backoff)));
  }
  return grpc::CreateCustomChannel(options.address, credentials, arguments);
}

void Authorize(grpc::ClientContext* context, const std::string& token) {
  if (!token.empty()) context->AddMetadata("authorization", absl::StrCat("Bearer ", token));
}

std::optional<absl::Duration> RetryPushback(const grpc::ClientContext& context) {
  const auto& trailers = context.GetServerTrailingMetadata();
  auto it = trailers.find(kRetryPushbackMetadata);
  int64_t ms = 0;
  if (it == trailers.end() ||
      !absl::SimpleAtoi(absl::string_view(it->second.data(), it->second.size()), &ms) || ms < 0) {
    return std::nullopt;
  }
  // A server's hint, not an order: a wrong or hostile value must not park a client for hours.
  return std::min(absl::Milliseconds(ms), absl::Seconds(60));
}

}  // namespace ptxbench
