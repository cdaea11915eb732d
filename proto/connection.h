// What a program needs to reach ptxbench-server (address, TLS, bearer token) and the
// connection flags (--server, --token-file, --token, --tls, --tls-ca) with their environment
// variables, parsed alike for the client and the worker. No gRPC here: the verb parser
// (client/verb.h) adds these flags, and programs that parse verbs without talking to a server
// (`ptxbench eval`, ptxbench-gpu-report) must not carry gRPC, protobuf and OpenSSL onto the GPU
// machine (44 MB of a 64 MiB device call, 2026-12-06). proto/dial.h opens the channel.
#ifndef PTXBENCH_PROTO_CONNECTION_H_
#define PTXBENCH_PROTO_CONNECTION_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/cli_args.h"

namespace ptxbench {

// Where ptxbench-server listens by default and where the client and worker look for it.
inline constexpr char kDefaultServerAddress[] = "127.0.0.1:50051";

// Client keepalive pings. A verdict stream or a Lease stream can stay quiet for minutes while
// a GPU evaluates; pings keep NAT and load-balancer state alive and notice a dead server. The
// server accepts pings down to 10 s apart (ServerOptions::min_client_ping_interval) and sends
// GOAWAY on a client that pings more often, so this must stay at or above it.
inline constexpr absl::Duration kKeepaliveTime = absl::Seconds(20);
inline constexpr absl::Duration kKeepaliveTimeout = absl::Seconds(10);

struct DialOptions {
  std::string address = kDefaultServerAddress;  // host:port
  bool tls = false;                             // TLS with the system roots (or tls_ca_file's).
  std::string tls_ca_file;                      // PEM roots of a private CA; implies TLS.
  absl::Duration keepalive = kKeepaliveTime;
  // The largest reply accepted. A Submission with its stage details is well under 1 MiB; the
  // margin is for ListSubmissions pages.
  int max_receive_message_bytes = 64 << 20;
  // The longest wait between reconnection attempts of a channel that lost its server; zero
  // keeps gRPC's default (1 s growing 1.6x to 120 s). The worker daemon sets its own retry
  // pace: with the default, workers reconnected 9-20 s after a server restart in a chaos run.
  absl::Duration max_reconnect_backoff = absl::ZeroDuration();
  // A TCP connection of this channel's own. gRPC otherwise shares one connection among all
  // channels to an address with the same settings, so a benchmark or test that stands in for
  // many machines (bench/scheduler_bench, bench/api_flood) would measure one connection.
  bool own_connection = false;
};

// What a program needs to reach the server: the channel settings and the bearer token.
struct Connection {
  DialOptions dial;
  std::string token;
  // Whether --server (or PTXBENCH_SERVER) was given; `ptxbench run` starts its own stack
  // when it was not.
  bool server_given = false;
};

// --server, --token-file, --token, --tls, --tls-ca. `default_server` is shown in help and
// used when neither --server nor PTXBENCH_SERVER is set ("" for none).
std::vector<FlagSpec> ConnectionFlags(const std::string& default_server = kDefaultServerAddress);

// The connection the flags and the environment ask for. The token comes from --token-file,
// else PTXBENCH_TOKEN_FILE, else --token, else PTXBENCH_TOKEN; --token is accepted but warned
// about on `warnings` (any user on the machine reads it in /proc/PID/cmdline). Errors name the
// flag: an unreadable or empty token file.
absl::StatusOr<Connection> ConnectionFromFlags(const ParsedArgs& args, std::ostream& warnings);

}  // namespace ptxbench

#endif  // PTXBENCH_PROTO_CONNECTION_H_
