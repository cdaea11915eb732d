#include "worker/engine/source_guard.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "worker/engine/source_lexer.h"

namespace ptxbench {
namespace {

std::string Available(const std::map<std::string, std::string>& headers) {
  if (headers.empty()) return "this task offers no headers";
  std::vector<std::string> names;
  for (const auto& [name, content] : headers) names.push_back(absl::StrCat("\"", name, "\""));
  return absl::StrCat("available: ", absl::StrJoin(names, ", "));
}

std::optional<std::string> CheckOne(std::string_view text, std::string_view file,
                                    const std::map<std::string, std::string>& headers) {
  const LexedSource lexed = LexSource(text);
  for (const auto& [name, line] : lexed.has_include_uses) {
    return absl::StrCat(std::string(file), ":", line, ": ", name,
                        " is refused: it would probe the host's files; only the task's template "
                        "headers exist here (",
                        Available(headers), ")");
  }
  for (const SourceDirective& directive : lexed.directives) {
    const std::string where = absl::StrCat(std::string(file), ":", directive.line, ": ");
    if (directive.name == "include_next" || directive.name == "import" ||
        directive.name == "embed") {
      return absl::StrCat(where, "#", directive.name,
                          " is refused: only #include of the task's template headers is allowed (",
                          Available(headers), ")");
    }
    if (directive.name != "include") continue;
    const std::string& argument = directive.argument;
    const char open = argument.empty() ? '\0' : argument.front();
    const char close = open == '<' ? '>' : '"';
    const size_t end = (open == '<' || open == '"') ? argument.find(close, 1) : std::string::npos;
    if (end == std::string::npos) {
      return absl::StrCat(where, "#include ", argument,
                          " is refused: the header must be named literally, as \"name\" (",
                          Available(headers), ")");
    }
    const std::string name = argument.substr(1, end - 1);
    if (headers.count(name) == 0) {
      return absl::StrCat(where, "#include ", argument.substr(0, end + 1),
                          " is refused: only the task's template headers can be included (",
                          Available(headers), ")");
    }
  }
  return std::nullopt;
}

}  // namespace

absl::Status CheckHeaderName(const std::string& name) {
  if (name.empty()) return absl::InvalidArgumentError("empty header name");
  if (name.front() == '/' || name.find('\\') != std::string::npos ||
      name.find('\0') != std::string::npos || name.find('\n') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("header name '", name, "' is not a relative name"));
  }
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find('/', start);
    if (end == std::string::npos) end = name.size();
    const std::string part = name.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") {
      return absl::InvalidArgumentError(
          absl::StrCat("header name '", name, "' has a '", part, "' component"));
    }
    start = end + 1;
  }
  return absl::OkStatus();
}

std::optional<std::string> CheckIncludes(std::string_view source, std::string_view source_name,
                                         const std::map<std::string, std::string>& headers) {
  if (auto refusal = CheckOne(source, source_name, headers)) return refusal;
  for (const auto& [name, content] : headers) {
    if (auto refusal = CheckOne(content, name, headers)) return refusal;
  }
  return std::nullopt;
}

}  // namespace ptxbench
