#include "client/command_support.h"

#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace ptxbench::client {

std::vector<FlagSpec> WithConnectionFlags(std::vector<FlagSpec> verb_flags) {
  std::vector<FlagSpec> all = {
      {"server", true, "server address HOST:PORT (or PTXBENCH_SERVER)"},
      {"token", true, "bearer token (or PTXBENCH_TOKEN)"},
      {"tls", false, "use TLS"},
      {"tls-ca", true, "PEM file of the roots that signed the server's certificate"},
  };
  all.insert(all.end(), verb_flags.begin(), verb_flags.end());
  return all;
}

ConnectionOptions ConnectionFrom(const ParsedArgs& args) {
  ConnectionOptions options;
  options.server = args.GetOrEnv("server", "PTXBENCH_SERVER");
  options.token = args.GetOrEnv("token", "PTXBENCH_TOKEN");
  options.tls = args.GetBool("tls") || args.Has("tls-ca");
  options.tls_ca_file = args.Get("tls-ca");
  return options;
}

std::string RpcError(const grpc::Status& status) {
  return absl::StrCat("rpc failed (", status.error_code(), "): ", status.error_message());
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::stringstream buffer;
  if (path == "-") {
    buffer << std::cin.rdbuf();
    return buffer.str();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  buffer << in.rdbuf();
  return buffer.str();
}

std::string ToJson(const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.add_whitespace = true;
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  return json;
}

}  // namespace ptxbench::client
