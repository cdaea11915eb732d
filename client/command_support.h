// What the client's verbs share: the connection flags, reading input files, error text for
// RPC failures and JSON output of messages.
#ifndef PTXBENCH_CLIENT_COMMAND_SUPPORT_H_
#define PTXBENCH_CLIENT_COMMAND_SUPPORT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/connection.h"
#include "common/cli_args.h"

namespace google::protobuf {
class Message;
}  // namespace google::protobuf

namespace grpc {
class Status;
}  // namespace grpc

namespace ptxbench::client {

// --server, --token, --tls, --tls-ca followed by a verb's own flags.
std::vector<FlagSpec> WithConnectionFlags(std::vector<FlagSpec> verb_flags);
ConnectionOptions ConnectionFrom(const ParsedArgs& args);

std::string RpcError(const grpc::Status& status);
// A file's bytes; "-" reads standard input.
absl::StatusOr<std::string> ReadFile(const std::string& path);
std::string ToJson(const google::protobuf::Message& message);

}  // namespace ptxbench::client

#endif  // PTXBENCH_CLIENT_COMMAND_SUPPORT_H_
