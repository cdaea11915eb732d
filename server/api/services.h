// The three gRPC services of API v1. Constructed by server/server.cc, which registers them
// with the grpc::ServerBuilder; this header keeps gRPC's own headers out of its includers.
#ifndef PTXBENCH_SERVER_API_SERVICES_H_
#define PTXBENCH_SERVER_API_SERVICES_H_

#include <memory>

#include "server/api/api_context.h"

namespace grpc {
class Service;
}  // namespace grpc

namespace ptxbench::api {

std::unique_ptr<grpc::Service> NewSubmissionService(ApiContext* ctx);
std::unique_ptr<grpc::Service> NewWorkerService(ApiContext* ctx);
std::unique_ptr<grpc::Service> NewAdminService(ApiContext* ctx);

}  // namespace ptxbench::api

#endif  // PTXBENCH_SERVER_API_SERVICES_H_
