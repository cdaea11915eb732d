#include "server/api/call_guard.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/descriptor.h"
#include "spdlog/spdlog.h"

namespace ptxbench::api {
namespace {

using grpc::experimental::InterceptionHookPoints;

bool IsUnauthenticatedStream(const std::string& method) {
  return absl::StartsWith(method, "/grpc.reflection.") || method == "/grpc.health.v1.Health/Watch";
}

// "/ptxbench.v1.WorkerService/Lease" -> the request type, for methods of our package.
const google::protobuf::Descriptor* RequestTypeOf(const std::string& method) {
  if (!absl::StartsWith(method, "/ptxbench.")) return nullptr;
  std::string name = method.substr(1);
  const size_t slash = name.find('/');
  if (slash == std::string::npos) return nullptr;
  name[slash] = '.';
  const auto* found = google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(name);
  return found == nullptr ? nullptr : found->input_type();
}

std::string ParseFailureMessage(const google::protobuf::Descriptor* request) {
  std::vector<std::string> text_fields;
  for (int i = 0; i < request->field_count(); ++i) {
    if (request->field(i)->type() == google::protobuf::FieldDescriptor::TYPE_STRING) {
      text_fields.push_back(request->field(i)->name());
    }
  }
  if (text_fields.size() == 1) {
    return absl::StrCat(text_fields[0], ": not valid UTF-8 (or the request is not a valid ",
                        request->full_name(), ")");
  }
  return absl::StrCat("request: not a valid ", request->full_name(),
                      text_fields.empty()
                          ? std::string()
                          : absl::StrCat(" (is one of its text fields, ",
                                         absl::StrJoin(text_fields, ", "), ", not UTF-8?)"));
}

class CallGuard : public grpc::experimental::Interceptor {
 public:
  CallGuard(grpc::experimental::ServerRpcInfo* info, std::atomic<int>* open, int max_open)
      : info_(info), method_(info->method() == nullptr ? "" : info->method()) {
    if (IsUnauthenticatedStream(method_)) {
      open_ = open;
      over_cap_ = open->fetch_add(1) >= max_open;
      if (over_cap_) {
        spdlog::warn("stream refused method={} peer={}: {} streams without a token are open",
                     method_, info->server_context()->peer(), max_open);
      }
    }
    request_type_ = RequestTypeOf(method_);
  }
  ~CallGuard() override {
    if (open_ != nullptr) open_->fetch_sub(1);
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_INITIAL_METADATA) &&
        over_cap_) {
      info_->server_context()->TryCancel();
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE) &&
        methods->GetRecvMessage() == nullptr) {
      receive_failed_ = true;
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS) &&
        receive_failed_ && request_type_ != nullptr &&
        methods->GetSendStatus().error_code() == grpc::StatusCode::INTERNAL) {
      methods->ModifySendStatus(
          grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, ParseFailureMessage(request_type_)));
    }
    methods->Proceed();
  }

 private:
  grpc::experimental::ServerRpcInfo* info_;
  const std::string method_;
  std::atomic<int>* open_ = nullptr;
  bool over_cap_ = false;
  bool receive_failed_ = false;
  const google::protobuf::Descriptor* request_type_ = nullptr;
};

class CallGuardFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit CallGuardFactory(int max_open) : max_open_(max_open) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new CallGuard(info, &open_, max_open_);
  }

 private:
  const int max_open_;
  std::atomic<int> open_{0};
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> NewCallGuardFactory(
    int max_unauthenticated_streams) {
  return std::make_unique<CallGuardFactory>(max_unauthenticated_streams);
}

}  // namespace ptxbench::api
