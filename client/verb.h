// One way to declare and parse a `ptxbench` verb: its usage line, its flags (the connection
// flags of proto/connection.h for a verb that connects), --help on stdout with exit 0, a usage
// error on stderr with exit 2; and reading the files a verb names. No gRPC: `ptxbench eval` and
// ptxbench-gpu-report parse verbs and talk to no server, and what they link travels to the GPU
// machine (client/command_support.h has what talking to the server needs).
#ifndef PTXBENCH_CLIENT_VERB_H_
#define PTXBENCH_CLIENT_VERB_H_

#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/cli_args.h"
#include "proto/connection.h"

namespace ptxbench::client {

struct Verb {
  std::string name;             // "submit"
  std::string arguments;        // After the flags in the usage line: "SOURCE".
  std::string summary;          // One line: what the verb does.
  std::vector<FlagSpec> flags;  // The verb's own flags (--help is added).
  bool connects = false;        // Adds the connection flags (proto/dial.h).
  std::string default_server = kDefaultServerAddress;  // "" for `run` (no server: own stack).
};

// "usage: ptxbench VERB [flags] ARGS\nSUMMARY\nflags:\n  --..." for --help and usage errors.
std::string VerbUsage(const Verb& verb);
// Whether `args` ask for help (--help or -h before any "--").
bool WantsHelp(const std::vector<std::string>& args);

// Parses a verb's arguments. nullopt means the verb is done and `*exit_code` says how: 0 after
// printing --help on `out`, 2 after printing the problem and the usage on `err`.
std::optional<ParsedArgs> ParseVerb(const Verb& verb, const std::vector<std::string>& args,
                                    std::ostream& out, std::ostream& err, int* exit_code);
// Prints "ptxbench VERB: PROBLEM" and the usage on `err`; returns kExitUsage.
int UsageError(const Verb& verb, const std::string& problem, std::ostream& err);

// A file named on the command line (`what`: "the source", "--plan"), through common/files'
// reader; "-" reads standard input.
absl::StatusOr<std::string> ReadInputFile(const std::string& path, std::string_view what);
// The language of the source at `source_path`: `language_flag` ("cuda" or "ptx") when given,
// else from the file name (".ptx": ptx, anything else cuda). INVALID_ARGUMENT "--language:
// 'x' is not cuda or ptx" otherwise.
absl::StatusOr<std::string> SourceLanguage(const std::string& language_flag,
                                           const std::string& source_path);

}  // namespace ptxbench::client

#endif  // PTXBENCH_CLIENT_VERB_H_
