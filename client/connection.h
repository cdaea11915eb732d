// How the client reaches the server: address and token from flags or the environment
// (PTXBENCH_SERVER, PTXBENCH_TOKEN), TLS when asked, and the bearer token on every call.
#ifndef PTXBENCH_CLIENT_CONNECTION_H_
#define PTXBENCH_CLIENT_CONNECTION_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace grpc {
class Channel;
class ClientContext;
}  // namespace grpc

namespace ptxbench::client {

struct ConnectionOptions {
  std::string server;  // host:port
  std::string token;   // The bearer secret; empty on a loopback server with no tokens.
  bool tls = false;
  std::string tls_ca_file;  // PEM roots; empty means the system roots.
};

absl::StatusOr<std::shared_ptr<grpc::Channel>> Dial(const ConnectionOptions& options);

// Adds `authorization: Bearer <token>` to a call. Metadata rather than call credentials:
// gRPC refuses call credentials on plaintext channels, and loopback test servers are plain.
void Authorize(grpc::ClientContext* context, const ConnectionOptions& options);

}  // namespace ptxbench::client

#endif  // PTXBENCH_CLIENT_CONNECTION_H_
