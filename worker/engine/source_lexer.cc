#include "worker/engine/source_lexer.h"

#include <cctype>

namespace ptxbench {
namespace {

bool IsIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Translation phase 2: backslash-newline pairs vanish. `lines[i]` is the 1-based source line of
// spliced character i.
void Splice(std::string_view source, std::string& text, std::vector<size_t>& lines) {
  size_t line = 1;
  text.reserve(source.size());
  lines.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\\') {
      size_t next = i + 1;
      if (next < source.size() && source[next] == '\r') ++next;
      if (next < source.size() && source[next] == '\n') {
        ++line;
        i = next;
        continue;
      }
    }
    text.push_back(source[i]);
    lines.push_back(line);
    if (source[i] == '\n') ++line;
  }
}

}  // namespace

LexedSource LexSource(std::string_view source) {
  LexedSource result;
  std::string text;
  std::vector<size_t> lines;
  Splice(source, text, lines);

  // Phase 3: comments become one space (block) or vanish up to the newline (line comment);
  // literals are copied untouched so that "/*" inside a string stays a string.
  std::string code;
  std::vector<size_t> code_lines;
  code.reserve(text.size());
  code_lines.reserve(text.size());
  auto emit = [&](char c, size_t line) {
    code.push_back(c);
    code_lines.push_back(line);
  };
  std::string identifier;
  size_t identifier_line = 0;
  auto end_identifier = [&] {
    if (identifier == "__has_include" || identifier == "__has_include_next") {
      result.has_include_uses.emplace_back(identifier, identifier_line);
    }
    identifier.clear();
  };

  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    const size_t line = lines[i];
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '*') {
      end_identifier();
      const size_t close = text.find("*/", i + 2);
      SourceComment comment;
      comment.block = true;
      comment.line = line;
      if (close == std::string::npos) {
        comment.text = text.substr(i + 2);
        result.unterminated_comment = true;
        result.unterminated_comment_line = line;
        result.comments.push_back(std::move(comment));
        break;
      }
      comment.text = text.substr(i + 2, close - i - 2);
      result.comments.push_back(std::move(comment));
      emit(' ', line);
      i = close + 2;
      continue;
    }
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      end_identifier();
      size_t end = text.find('\n', i);
      if (end == std::string::npos) end = text.size();
      result.comments.push_back({false, text.substr(i + 2, end - i - 2), line});
      i = end;
      continue;
    }
    if (c == '"' || (c == '\'' && (code.empty() || !IsIdentChar(code.back())))) {
      // A raw string R"delim( ... )delim" ends only at its own delimiter.
      const bool raw = c == '"' && !identifier.empty() && identifier.back() == 'R';
      end_identifier();
      if (raw) {
        const size_t open = text.find('(', i + 1);
        if (open != std::string::npos && open - i - 1 <= 16) {
          const std::string terminator = ")" + text.substr(i + 1, open - i - 1) + "\"";
          size_t close = text.find(terminator, open + 1);
          close = close == std::string::npos ? text.size() : close + terminator.size();
          for (size_t k = i; k < close; ++k) emit(text[k], lines[k]);
          i = close;
          continue;
        }
      }
      emit(c, line);
      size_t k = i + 1;
      while (k < text.size() && text[k] != c && text[k] != '\n') {
        if (text[k] == '\\' && k + 1 < text.size() && text[k + 1] != '\n') {
          emit(text[k], lines[k]);
          ++k;
        }
        emit(text[k], lines[k]);
        ++k;
      }
      if (k < text.size() && text[k] == c) {
        emit(c, lines[k]);
        ++k;
      }
      i = k;
      continue;
    }
    if (IsIdentChar(c)) {
      if (identifier.empty()) identifier_line = line;
      identifier.push_back(c);
    } else {
      end_identifier();
    }
    emit(c, line);
    ++i;
  }
  end_identifier();

  // Phase 4 (the part the gate needs): a directive is a logical line whose first non-blank
  // characters are '#' or the digraph "%:".
  size_t begin = 0;
  while (begin < code.size()) {
    size_t end = code.find('\n', begin);
    if (end == std::string::npos) end = code.size();
    size_t k = begin;
    while (k < end && (code[k] == ' ' || code[k] == '\t' || code[k] == '\r' || code[k] == '\f' ||
                       code[k] == '\v')) {
      ++k;
    }
    size_t after_hash = std::string::npos;
    if (k < end && code[k] == '#') after_hash = k + 1;
    if (k + 1 < end && code[k] == '%' && code[k + 1] == ':') after_hash = k + 2;
    if (after_hash != std::string::npos) {
      SourceDirective directive;
      directive.line = code_lines[k];
      size_t n = after_hash;
      while (n < end && std::isspace(static_cast<unsigned char>(code[n]))) ++n;
      const size_t name_begin = n;
      while (n < end && IsIdentChar(code[n])) ++n;
      directive.name = code.substr(name_begin, n - name_begin);
      size_t arg_end = end;
      while (arg_end > n && std::isspace(static_cast<unsigned char>(code[arg_end - 1]))) --arg_end;
      while (n < arg_end && std::isspace(static_cast<unsigned char>(code[n]))) ++n;
      directive.argument = code.substr(n, arg_end - n);
      result.directives.push_back(std::move(directive));
    }
    begin = end + 1;
  }
  return result;
}

}  // namespace ptxbench
