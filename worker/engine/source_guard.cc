#include "worker/engine/source_guard.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "worker/engine/source_lexer.h"

namespace ptxbench {
namespace {

std::string Available(const std::map<std::string, std::string>& headers) {
  if (headers.empty()) return "this task offers no headers";
  std::vector<std::string> names;
  names.reserve(headers.size());
  for (const auto& [name, content] : headers) names.push_back(absl::StrCat("\"", name, "\""));
  return absl::StrCat("available: ", absl::StrJoin(names, ", "));
}

// The directives a kernel source may use. Anything else is refused even where NVRTC would only
// warn or skip it: #ident, for one, changes how NVRTC reads every later directive (a block
// comment in it that spans lines ends the directive; measured with NVRTC 13.0), and the
// include gate must read the source as NVRTC does. The empty name is the null directive "#"
// and the line marker "# 7 \"file\"".
bool IsAllowedDirective(const std::string& name) {
  static const auto* const kAllowed =
      new std::set<std::string>{"",     "include", "define", "undef",  "if",    "ifdef",   "ifndef",
                                "elif", "else",    "endif",  "pragma", "error", "warning", "line"};
  return kAllowed->count(name) > 0;
}

std::optional<std::string> CheckOne(std::string_view text, std::string_view file,
                                    const std::map<std::string, std::string>& headers) {
  const LexedSource lexed = LexSource(text);
  for (const LexedSource::Ambiguity& ambiguity : lexed.ambiguities) {
    return absl::StrCat(
        std::string(file), ":", ambiguity.line, ": this line (", ambiguity.what,
        ") is refused: NVRTC reads it one way in code it compiles and another in a skipped #if "
        "group or another directive, and the readings disagree on what the next lines are "
        "(a digit separator or a character literal with a suffix, before a comment or raw "
        "string that goes on to the next line); remove the separator or the suffix");
  }
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
    if (!IsAllowedDirective(directive.name)) {
      return absl::StrCat(where, "#", directive.name,
                          " is refused: only #include (of the task's template headers), "
                          "#define, #undef, #if, #ifdef, #ifndef, #elif, #else, #endif, "
                          "#pragma, #error, #warning and #line are allowed");
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
