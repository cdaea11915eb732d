// ptxbench-server: splits off the verb, parses its flags and calls the Server library
// (server/server_cli.h: each verb's flags, options, output and exit code; server/server.h:
// the server itself).
//
//   ptxbench-server [serve] [--listen 127.0.0.1:50051] [--database-url URL] ...
//   ptxbench-server migrate [up | down N] [--database-url URL]
//   ptxbench-server token create --role admin|vendor|worker [--tenant T] [--description D]
//   ptxbench-server health [--server 127.0.0.1:50051] [--tls-ca ca.pem]
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/build_info.h"
#include "common/cli_args.h"
#include "server/server_cli.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

int main(int argc, char** argv) {
  using ptxbench::server::kServerUsage;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && (args[0] == "--version" || args[0] == "version")) {
    std::cout << ptxbench::VersionLine("ptxbench-server") << "\n";
    return 0;
  }
  std::string verb = "serve";
  if (!args.empty() && !absl::StartsWith(args[0], "-")) {
    verb = args[0];
    args.erase(args.begin());
  }
  const auto specs = ptxbench::server::ServerVerbFlags(verb);
  if (!specs.ok()) {
    std::cerr << "ptxbench-server: " << specs.status().message() << "\n" << kServerUsage;
    return 2;
  }
  const auto parsed = ptxbench::ParseArgs(args, *specs);
  if (!parsed.ok()) {
    std::cerr << "ptxbench-server " << verb << ": " << parsed.status().message() << "\n"
              << kServerUsage << ptxbench::FlagHelp(*specs);
    return 2;
  }
  if (parsed->GetBool("help")) {
    std::cout << kServerUsage << ptxbench::FlagHelp(*specs);
    return 0;
  }
  // Logs go to stderr: stdout carries only what scripts read (the "serving" line, a token's
  // secret, the schema version, the health status). The maintenance verbs log warnings and
  // errors only; serve sets --log-level.
  spdlog::set_default_logger(spdlog::stderr_color_mt("ptxbench-server"));
  spdlog::set_level(spdlog::level::warn);
  return ptxbench::server::RunServerVerb(verb, *parsed, std::cout, std::cerr);
}
