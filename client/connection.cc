#include "client/connection.h"

#include <grpcpp/grpcpp.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace ptxbench::client {

absl::StatusOr<std::shared_ptr<grpc::Channel>> Dial(const ConnectionOptions& options) {
  if (options.server.empty()) {
    return absl::InvalidArgumentError(
        "no server given: pass --server HOST:PORT or set PTXBENCH_SERVER");
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (options.tls) {
    grpc::SslCredentialsOptions ssl;
    if (!options.tls_ca_file.empty()) {
      std::ifstream in(options.tls_ca_file);
      if (!in) {
        return absl::NotFoundError(absl::StrCat("--tls-ca: cannot read ", options.tls_ca_file));
      }
      std::stringstream pem;
      pem << in.rdbuf();
      ssl.pem_root_certs = pem.str();
    }
    credentials = grpc::SslCredentials(ssl);
  } else {
    credentials = grpc::InsecureChannelCredentials();
  }
  grpc::ChannelArguments arguments;
  // Verdict streams can stay quiet for minutes while a GPU evaluates; keepalive pings keep
  // NAT and load-balancer state alive without relying on application traffic.
  arguments.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30000);
  arguments.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  arguments.SetMaxReceiveMessageSize(64 << 20);
  return grpc::CreateCustomChannel(options.server, credentials, arguments);
}

void Authorize(grpc::ClientContext* context, const ConnectionOptions& options) {
  if (!options.token.empty()) {
    context->AddMetadata("authorization", absl::StrCat("Bearer ", options.token));
  }
}

}  // namespace ptxbench::client
