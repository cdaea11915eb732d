// A small lexer for CUDA C++ and PTX sources: it finds comments and preprocessing directives the
// way NVRTC's front end does in translation phases 1-3 (line splices, then comments, with
// string, character and raw string literals, their encoding prefixes and user-defined suffixes,
// and numbers with digit separators left intact), so that the include gate and the launch-plan
// block finder look at exactly what the compiler sees. Where the compiler departs from the
// standard's grammar, this lexer follows the compiler (source_lexer.cc says where, with the
// measurement); tests/worker/engine/source_lexer_test.cc checks it against NVRTC itself.
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
  // Token sequences that NVRTC reads one way in code it compiles and another way inside a
  // skipped #if group, which a lexer cannot tell apart without preprocessing: what (quoted)
  // and where. The include gate refuses a source that has one; no valid C++ does.
  struct Ambiguity {
    std::string what;
    size_t line = 0;
  };
  std::vector<Ambiguity> ambiguities;
};

LexedSource LexSource(std::string_view source);

}  // namespace ptxbench

#endif  // PTXBENCH_WORKER_ENGINE_SOURCE_LEXER_H_
