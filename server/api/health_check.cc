#include "server/api/health_check.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <future>
#include <vector>

#include "absl/strings/str_cat.h"
#include "proto/dial.h"

namespace ptxbench::api {
namespace {

// grpc.health.v1.HealthCheckRequest{string service = 1}.
std::string EncodeRequest(const std::string& service) {
  std::string bytes;
  if (service.empty()) return bytes;
  bytes.push_back(0x0a);  // Field 1, length-delimited.
  size_t length = service.size();
  while (length >= 0x80) {
    bytes.push_back(static_cast<char>((length & 0x7f) | 0x80));
    length >>= 7;
  }
  bytes.push_back(static_cast<char>(length));
  return bytes + service;
}

// grpc.health.v1.HealthCheckResponse{ServingStatus status = 1}: an absent field is 0.
absl::StatusOr<std::string> DecodeResponse(const std::string& bytes) {
  int status = 0;
  if (!bytes.empty()) {
    if (bytes.size() < 2 || bytes[0] != 0x08 || (bytes[1] & 0x80) != 0) {
      return absl::DataLossError("health: unexpected response encoding");
    }
    status = bytes[1];
  }
  switch (status) {
    case 0:
      return std::string("UNKNOWN");
    case 1:
      return std::string("SERVING");
    case 2:
      return std::string("NOT_SERVING");
    case 3:
      return std::string("SERVICE_UNKNOWN");
    default:
      return absl::StrCat("STATUS_", status);
  }
}

}  // namespace

absl::StatusOr<std::string> CheckHealth(const HealthCheckOptions& options) {
  DialOptions dial;
  dial.address = options.address;
  dial.tls_ca_file = options.tls_ca_file;  // TLS when set.
  auto channel = Dial(dial);
  if (!channel.ok()) return channel.status();
  grpc::GenericStub stub(*channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       absl::ToChronoNanoseconds(options.timeout));
  const std::string request_bytes = EncodeRequest(options.service);
  grpc::Slice slice(request_bytes);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status status) { done.set_value(std::move(status)); });
  grpc::Status status = done.get_future().get();
  if (!status.ok()) {
    return absl::Status(
        static_cast<absl::StatusCode>(status.error_code()),
        absl::StrCat("health check of ", options.address, ": ", status.error_message()));
  }
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return absl::DataLossError("health: unreadable response");
  std::string bytes;
  for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return DecodeResponse(bytes);
}

}  // namespace ptxbench::api
