// A small lexer for CUDA C++ and PTX sources: it finds comments and preprocessing directives the
// way the compiler's first translation phases do (line splices first, then comments, with string
// and character literals, raw strings included, left intact), so that the include gate and the
// launch-plan block finder look at exactly what the compiler would see.
#ifndef PTXBENCH_WORKER_ENGINE_SOURCE_LEXER_H_
#define PTXBENCH_WORKER_ENGINE_SOURCE_LEXER_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ptxbench {

struct SourceComment {
  bool block = false;  // /* ... */ (true) or // ... (false).
  std::string text;    // Between the delimiters, line splices removed.
  size_t line = 0;     // 1-based source line of the opening delimiter.
};

struct SourceDirective {
  std::string name;      // "include", "define", ... (after '#' or the digraph "%:").
  std::string argument;  // The rest of the logical line, comments replaced by one space, trimmed.
  size_t line = 0;       // 1-based source line of the '#'.
};

struct LexedSource {
  std::vector<SourceComment> comments;
  std::vector<SourceDirective> directives;
  // Uses of __has_include / __has_include_next in code (outside comments and literals): the
  // name and its line. They probe the host's file system, so the include gate refuses them.
  std::vector<std::pair<std::string, size_t>> has_include_uses;
  bool unterminated_comment = false;
  size_t unterminated_comment_line = 0;
};

LexedSource LexSource(std::string_view source);

}  // namespace ptxbench

#endif  // PTXBENCH_WORKER_ENGINE_SOURCE_LEXER_H_
