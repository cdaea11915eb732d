#include "proto/connection.h"

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"

namespace ptxbench {
namespace {

// A token file: 1 MiB is far above any token.
absl::StatusOr<std::string> ReadSmallFile(const std::string& path, std::string_view what) {
  return ReadFileToString(path, what, {.max_bytes = size_t{1} << 20});
}

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::string(value) : std::string();
}

}  // namespace

std::vector<FlagSpec> ConnectionFlags(const std::string& default_server) {
  return {
      {"server", true, "server address HOST:PORT (or PTXBENCH_SERVER)", default_server},
      {"token-file", true, "file holding the bearer token (or PTXBENCH_TOKEN_FILE)"},
      {"token", true,
       "bearer token (or PTXBENCH_TOKEN); prefer --token-file: other users can read "
       "arguments"},
      {"tls", false, "connect with TLS (the system roots unless --tls-ca)"},
      {"tls-ca", true, "PEM roots of a private CA that signed the server's certificate"},
  };
}

absl::StatusOr<Connection> ConnectionFromFlags(const ParsedArgs& args, std::ostream& warnings) {
  Connection connection;
  const std::string server_flag = args.Has("server") ? args.Get("server") : Env("PTXBENCH_SERVER");
  connection.server_given = !server_flag.empty();
  connection.dial.address = connection.server_given ? server_flag : args.Get("server");
  connection.dial.tls_ca_file = args.Get("tls-ca");
  connection.dial.tls = args.GetBool("tls") || !connection.dial.tls_ca_file.empty();

  std::string token_file =
      args.Has("token-file") ? args.Get("token-file") : Env("PTXBENCH_TOKEN_FILE");
  if (!token_file.empty()) {
    absl::StatusOr<std::string> token = ReadSmallFile(token_file, "--token-file");
    if (!token.ok()) return token.status();
    connection.token = std::string(absl::StripAsciiWhitespace(*token));
    if (connection.token.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--token-file: ", token_file, " is empty"));
    }
    return connection;
  }
  if (args.Has("token")) {
    warnings << "warning: --token is visible to every user of this machine (/proc/PID/cmdline); "
                "use --token-file or PTXBENCH_TOKEN_FILE\n";
    connection.token = args.Get("token");
    return connection;
  }
  connection.token = Env("PTXBENCH_TOKEN");
  return connection;
}

}  // namespace ptxbench
