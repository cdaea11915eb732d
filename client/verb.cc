#include "client/verb.h"

#include <unistd.h>

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/exit_codes.h"
#include "common/files.h"

namespace ptxbench::client {
namespace {

std::vector<FlagSpec> AllFlags(const Verb& verb) {
  std::vector<FlagSpec> all;
  if (verb.connects) all = ConnectionFlags(verb.default_server);
  all.insert(all.end(), verb.flags.begin(), verb.flags.end());
  all.push_back({"help", false, "print this help and exit"});
  return all;
}

}  // namespace

std::string VerbUsage(const Verb& verb) {
  return absl::StrCat("usage: ptxbench ", verb.name, " [flags]", verb.arguments.empty() ? "" : " ",
                      verb.arguments, "\n", verb.summary, "\nflags:\n", FlagHelp(AllFlags(verb)));
}

bool WantsHelp(const std::vector<std::string>& args) {
  for (const std::string& arg : args) {
    if (arg == "--") return false;
    if (arg == "--help" || arg == "-h") return true;
  }
  return false;
}

std::optional<ParsedArgs> ParseVerb(const Verb& verb, const std::vector<std::string>& args,
                                    std::ostream& out, std::ostream& err, int* exit_code) {
  if (WantsHelp(args)) {
    out << VerbUsage(verb);
    *exit_code = kExitPass;
    return std::nullopt;
  }
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, AllFlags(verb));
  if (!parsed.ok()) {
    *exit_code = UsageError(verb, std::string(parsed.status().message()), err);
    return std::nullopt;
  }
  return std::move(*parsed);
}

int UsageError(const Verb& verb, const std::string& problem, std::ostream& err) {
  // The problem stays the last thing but one on the screen: the flag list is one --help away.
  err << "ptxbench " << verb.name << ": " << problem << "\n"
      << "usage: ptxbench " << verb.name << " [flags]" << (verb.arguments.empty() ? "" : " ")
      << verb.arguments << "   (ptxbench " << verb.name << " --help lists the flags)\n";
  return kExitUsage;
}

absl::StatusOr<std::string> ReadInputFile(const std::string& path, std::string_view what) {
  // The user's own command line: a pipe (`--plan <(generate)`) is read like a file.
  if (path == "-")
    return ReadFdToString(STDIN_FILENO, "standard input", what, {.allow_pipes = true});
  return ReadFileToString(path, what, {.allow_pipes = true});
}

absl::StatusOr<std::string> SourceLanguage(const std::string& language_flag,
                                           const std::string& source_path) {
  if (language_flag.empty()) return absl::EndsWith(source_path, ".ptx") ? "ptx" : "cuda";
  if (language_flag != "cuda" && language_flag != "ptx") {
    return absl::InvalidArgumentError(
        absl::StrCat("--language: '", language_flag, "' is not cuda or ptx"));
  }
  return language_flag;
}

}  // namespace ptxbench::client
