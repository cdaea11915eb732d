#include "common/cli_args.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace ptxbench {

std::string ParsedArgs::Get(const std::string& name, const std::string& fallback) const {
  if (auto it = values_.find(name); it != values_.end()) return it->second;
  if (auto it = defaults_.find(name); it != defaults_.end() && !it->second.empty()) {
    return it->second;
  }
  return fallback;
}

std::string ParsedArgs::GetOrEnv(const std::string& name, const char* env) const {
  if (auto it = values_.find(name); it != values_.end()) return it->second;
  if (const char* value = std::getenv(env); value != nullptr && *value != '\0') return value;
  return Get(name);
}

absl::StatusOr<int64_t> ParsedArgs::GetInt(const std::string& name, int64_t fallback) const {
  const std::string text = Get(name);
  if (text.empty()) return fallback;
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value)) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, ": '", text, "' is not an integer"));
  }
  return value;
}

absl::StatusOr<double> ParsedArgs::GetDouble(const std::string& name, double fallback) const {
  const std::string text = Get(name);
  if (text.empty()) return fallback;
  double value = 0;
  if (!absl::SimpleAtod(text, &value)) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, ": '", text, "' is not a number"));
  }
  return value;
}

absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& args,
                                     const std::vector<FlagSpec>& specs) {
  ParsedArgs parsed;
  std::map<std::string, const FlagSpec*> by_name;
  for (const FlagSpec& spec : specs) {
    by_name[spec.name] = &spec;
    parsed.defaults_[spec.name] = spec.default_value;
  }
  bool only_positional = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (only_positional || arg.size() < 3 || arg.compare(0, 2, "--") != 0) {
      if (arg == "--") {
        only_positional = true;
        continue;
      }
      parsed.positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::optional<std::string> inline_value;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
    if (!it->second->takes_value) {
      if (inline_value.has_value()) {
        return absl::InvalidArgumentError(absl::StrCat("flag --", name, " takes no value"));
      }
      parsed.values_[name] = "true";
      continue;
    }
    if (inline_value.has_value()) {
      parsed.values_[name] = *inline_value;
    } else if (i + 1 < args.size()) {
      parsed.values_[name] = args[++i];
    } else {
      return absl::InvalidArgumentError(absl::StrCat("flag --", name, " needs a value"));
    }
  }
  return parsed;
}

std::string FlagHelp(const std::vector<FlagSpec>& specs) {
  // Wrapped at 80 columns, the width of a default terminal, under a 29-column flag column.
  constexpr size_t kWidth = 80;
  constexpr size_t kIndent = 29;
  std::string out;
  for (const FlagSpec& spec : specs) {
    std::string left = absl::StrCat("  --", spec.name, spec.takes_value ? " VALUE" : "");
    std::string help = spec.help;
    if (!spec.default_value.empty()) absl::StrAppend(&help, " (default: ", spec.default_value, ")");
    std::string line = absl::StrFormat("%-28s", left);
    if (line.size() >= kIndent) {
      absl::StrAppend(&out, line, "\n");
      line = std::string(kIndent - 1, ' ');
    }
    for (absl::string_view word : absl::StrSplit(help, ' ', absl::SkipEmpty())) {
      if (line.size() + 1 + word.size() > kWidth && line.size() > kIndent) {
        absl::StrAppend(&out, line, "\n");
        line = std::string(kIndent - 1, ' ');
      }
      absl::StrAppend(&line, " ", word);
    }
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

}  // namespace ptxbench
