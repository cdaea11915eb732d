// A small command-line parser for the project's programs: one optional verb, then
// `--flag value`, `--flag=value` and boolean `--flag`, then positional arguments. Unknown
// flags are errors that name the flag, so a typo never silently changes behaviour.
#ifndef PTXBENCH_COMMON_CLI_ARGS_H_
#define PTXBENCH_COMMON_CLI_ARGS_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace ptxbench {

struct FlagSpec {
  FlagSpec(std::string flag_name, bool flag_takes_value, std::string flag_help,
           std::string flag_default = "")
      : name(std::move(flag_name)),
        takes_value(flag_takes_value),
        help(std::move(flag_help)),
        default_value(std::move(flag_default)) {}

  std::string name;  // Without dashes.
  bool takes_value = true;
  std::string help;
  std::string default_value;  // Shown in help; applied when the flag is absent.
};

class ParsedArgs {
 public:
  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  // The flag's value, its default, or `fallback` when neither exists.
  std::string Get(const std::string& name, const std::string& fallback = "") const;
  // As Get, then the environment variable `env` when the flag was not given.
  std::string GetOrEnv(const std::string& name, const char* env) const;
  absl::StatusOr<int64_t> GetInt(const std::string& name, int64_t fallback) const;
  absl::StatusOr<double> GetDouble(const std::string& name, double fallback) const;
  bool GetBool(const std::string& name) const { return Has(name); }
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  friend absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& args,
                                              const std::vector<FlagSpec>& specs);
  std::map<std::string, std::string> values_;
  std::map<std::string, std::string> defaults_;
  std::vector<std::string> positional_;
};

// Parses `args` (without the program name and verb) against `specs`.
absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& args,
                                     const std::vector<FlagSpec>& specs);

// "  --name VALUE   help (default: x)" lines for a usage message.
std::string FlagHelp(const std::vector<FlagSpec>& specs);

}  // namespace ptxbench

#endif  // PTXBENCH_COMMON_CLI_ARGS_H_
