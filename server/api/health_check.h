// A client of the standard gRPC health service (grpc.health.v1.Health/Check), for
// `ptxbench-server health`, scripts/quickstart and tests. Debian ships no generated health
// stubs and no grpcurl, and the messages are two fields, so this encodes them by hand.
#ifndef PTXBENCH_SERVER_API_HEALTH_CHECK_H_
#define PTXBENCH_SERVER_API_HEALTH_CHECK_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ptxbench::api {

struct HealthCheckOptions {
  std::string address;      // host:port.
  std::string tls_ca_file;  // PEM; empty = plaintext.
  std::string service;      // "" = the whole server.
  absl::Duration timeout = absl::Seconds(5);
};

// The serving status name: "SERVING", "NOT_SERVING", "UNKNOWN" or "SERVICE_UNKNOWN"; an error
// when the call itself failed (e.g. UNAVAILABLE when nothing listens).
absl::StatusOr<std::string> CheckHealth(const HealthCheckOptions& options);

}  // namespace ptxbench::api

#endif  // PTXBENCH_SERVER_API_HEALTH_CHECK_H_
