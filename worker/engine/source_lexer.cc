#include "worker/engine/source_lexer.h"

#include <algorithm>
#include <array>
#include <cctype>

// How NVRTC 13.0 (EDG front end) reads a source in translation phases 1-3, as measured on
// generated sources in which a #warning line is compiled or not depending on how one token is
// read (the method of tests/worker/engine/source_lexer_test.cc, which keeps checking it). The
// standard is C++20 [lex.phases], [lex.pptoken], [lex.ppnumber], [lex.string]; where NVRTC
// departs from it, NVRTC is followed, because it decides what is compiled.
//
// - Phase 1: no trigraphs ("??/" before a newline is no splice).
// - Phase 2: a backslash immediately followed by a newline (LF or CR LF) is deleted everywhere,
//   also inside raw strings ([lex.pptoken]/3.1 reverts splices there; NVRTC does not:
//   R"x(\<nl>)x\<nl>" ends the string). Backslash, blanks, newline is no splice (C++23 P2223
//   would make it one).
// - Identifiers: letters, digits, '_' and universal-character-names, also malformed ones
//   ("\UR" is one identifier, so \UR"( opens no raw string). '$' and bytes above 0x7f are no
//   identifier characters ("unrecognized token").
// - Literals: an identifier R, u8R, uR, UR or LR right before '"' opens a raw string; xR"( is an
//   identifier and an ordinary string. A raw string's '(' must come within 16 characters on the
//   same line or the raw indicator is ignored (an ordinary string follows); invalid delimiter
//   characters (space, backslash, ')') are an error but the raw string stands. A literal's
//   user-defined suffix is part of it ("a"R"( is a string with suffix R and an ordinary string),
//   with exceptions below. An unterminated character or string literal ends at the end of its
//   line; a raw string or block comment at the end of the file.
// - A block comment that spans lines, outside a directive, counts as a newline: a '#' right
//   after it starts a directive ([cpp.pre]/1: white space containing a new-line). Inside a
//   directive it is a space and the directive goes on.
//
// Numbers and suffixes are read by one of several rules, depending on the line:
// - Code NVRTC compiles, #if, #elif, #ident and some pragmas (unroll, nv_diag_suppress, STDC):
//   the numeric literal is scanned, and a ' in it is taken as a (possibly misplaced: "digit
//   separator cannot appear here") separator: among the digits a run of up to two quotes, after
//   a suffix, exponent marker or sign one quote; a sign follows e/E/p/P, also after a quote
//   that follows one unless the letter was a hex digit (0xe'+ stops before '+'). So 0'/*' is
//   the number 0' and a comment, where the standard has 0 and the character literal '/*'.
//   A character literal whose value is in error ('', 'abcde', u8'ab') takes no suffix, so
//   ''R"( opens a raw string; in #if, #elif and #ident not even "" takes one.
// - Other directives (#define, #undef, #ifdef, #ifndef, #endif, #warning, #include, other
//   pragmas, unknown names): the standard's pp-number (a ' only before a digit or letter), and
//   every literal takes its suffix.
// - #line and line markers ("# 7"): a number is its digits only (#line 7R"x( opens a raw string).
// - Inside a skipped #if group: C's pp-number, no digit separators at all (1'0 is 1 and a
//   character literal), and every literal takes its suffix.
// Which groups are skipped, and which rule an unknown pragma gets, cannot be known without
// preprocessing. So the lexer reads the source with every rule on every line: where all
// readings leave every line in the same state (code, or inside a comment or raw string), every
// mix of them does too, and the source is read exactly; where they part, the line is an
// ambiguity, which the include gate refuses (no valid C++ has one: it takes a digit separator
// or a suffixed character literal followed by a comment or raw string that spans lines).
namespace ptxbench {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHexDigit(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }
bool IsIdentifierStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool IsIdentifierContinue(char c) { return IsIdentifierStart(c) || IsDigit(c); }
bool IsExponentMarker(char c) { return c == 'e' || c == 'E' || c == 'p' || c == 'P'; }
bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

// The length of the universal-character-name at `i` (\u and 4 hex digits, \U and 8), or 0.
// `partial`: also a malformed one, \u or \U with fewer digits, which NVRTC takes into an
// identifier but not into a number (1\u00'a: 1, then the identifier \u00).
size_t UcnLength(const std::string& text, size_t i, bool partial) {
  if (text[i] != '\\' || i + 1 >= text.size()) return 0;
  const size_t digits = text[i + 1] == 'u' ? 4 : text[i + 1] == 'U' ? 8 : 0;
  if (digits == 0) return 0;
  size_t length = 2;
  while (length < 2 + digits && i + length < text.size() && IsHexDigit(text[i + length])) ++length;
  return partial || length == 2 + digits ? length : 0;
}

bool StartsIdentifier(const std::string& text, size_t i) {
  return i < text.size() && (IsIdentifierStart(text[i]) || UcnLength(text, i, true) > 0);
}

// The end of the identifier characters from `i`.
size_t ScanIdentifier(const std::string& text, size_t i) {
  while (i < text.size()) {
    if (IsIdentifierContinue(text[i])) {
      ++i;
    } else if (const size_t ucn = UcnLength(text, i, true); ucn > 0) {
      i += ucn;
    } else {
      break;
    }
  }
  return i;
}

enum class NumberRule { kLiteral, kPpNumber, kDigits, kSkippedPpNumber };

// The end of the numeric literal from `begin` (a digit, or '.' before one) by NVRTC's literal
// scan (the comment at the top of this file).
size_t ScanLiteralNumber(const std::string& text, size_t begin) {
  enum class Part { kDigits, kExponentStart, kExponentDigits, kSuffix };
  const size_t size = text.size();
  int base = 10;
  size_t i = begin;
  if (text[i] == '0' && i + 1 < size && (text[i + 1] == 'x' || text[i + 1] == 'X')) {
    base = 16;
    i += 2;
  } else if (text[i] == '0' && i + 1 < size && (text[i + 1] == 'b' || text[i + 1] == 'B')) {
    base = 2;
    i += 2;
  }
  bool seen_dot = false;
  Part part = Part::kDigits;
  auto is_digit = [&](char c) { return IsDigit(c) || (base == 16 && IsHexDigit(c)); };
  auto last_non_quote = [&](size_t at) {
    while (at > begin && text[at - 1] == '\'') --at;
    return at > begin ? text[at - 1] : '\0';
  };
  while (i < size) {
    const char c = text[i];
    const char previous = text[i - 1];
    if (c == '\'') {
      if (part == Part::kDigits || part == Part::kExponentDigits) {
        if (previous == '\'' && i >= begin + 2 && text[i - 2] == '\'') break;
      } else if (previous == '\'') {
        break;
      }
      ++i;
      continue;
    }
    if (c == '+' || c == '-') {
      if (IsExponentMarker(previous) ||
          (part != Part::kDigits && IsExponentMarker(last_non_quote(i)))) {
        part = Part::kExponentStart;
        ++i;
        continue;
      }
      break;
    }
    if (part == Part::kDigits) {
      if (is_digit(c)) {
        ++i;
        continue;
      }
      if (c == '.' && base != 2 && !seen_dot) {
        seen_dot = true;
        ++i;
        continue;
      }
      if ((base == 10 && (c == 'e' || c == 'E')) || (base == 16 && (c == 'p' || c == 'P'))) {
        part = Part::kExponentStart;
        ++i;
        continue;
      }
    } else if (part == Part::kExponentStart || part == Part::kExponentDigits) {
      if (IsDigit(c)) {
        part = Part::kExponentDigits;
        ++i;
        continue;
      }
    }
    if (IsIdentifierContinue(c) || c == '.') {
      part = Part::kSuffix;
      ++i;
      continue;
    }
    if (const size_t ucn = UcnLength(text, i, false); ucn > 0) {
      part = Part::kSuffix;
      i += ucn;
      continue;
    }
    break;
  }
  return i;
}

// The end of the pp-number from `begin`: identifier characters, '.', a sign after e/E/p/P and,
// with `separators`, a ' before a digit or letter ([lex.ppnumber]).
size_t ScanPpNumber(const std::string& text, size_t begin, bool separators) {
  size_t i = begin + 1;
  while (i < text.size()) {
    const bool sign = (text[i] == '+' || text[i] == '-') && IsExponentMarker(text[i - 1]);
    if (IsIdentifierContinue(text[i]) || text[i] == '.' || sign) {
      ++i;
    } else if (separators && text[i] == '\'' && i + 1 < text.size() &&
               IsIdentifierContinue(text[i + 1])) {
      i += 2;
    } else if (const size_t ucn = UcnLength(text, i, false); ucn > 0) {
      i += ucn;
    } else {
      break;
    }
  }
  return i;
}

size_t ScanNumber(const std::string& text, size_t begin, NumberRule rule) {
  switch (rule) {
    case NumberRule::kLiteral:
      return ScanLiteralNumber(text, begin);
    case NumberRule::kPpNumber:
      return ScanPpNumber(text, begin, true);
    case NumberRule::kSkippedPpNumber:
      return ScanPpNumber(text, begin, false);
    case NumberRule::kDigits:
      break;
  }
  size_t i = begin + 1;
  while (i < text.size() && IsDigit(text[i])) ++i;
  return i;
}

// From the opening quote at `i` to the matching quote (a backslash escapes the next character)
// or, unterminated, to the end of the line.
size_t ScanQuoted(const std::string& text, size_t i) {
  const char quote = text[i];
  size_t k = i + 1;
  while (k < text.size() && text[k] != quote && text[k] != '\n') {
    if (text[k] == '\\' && k + 1 < text.size() && text[k + 1] != '\n') ++k;
    ++k;
  }
  if (k < text.size() && text[k] == quote) ++k;
  return k;
}

// A raw string whose '"' is at `quote`: its end (past the closing '"', or the end of the text),
// or npos when no '(' comes within 16 characters on the line (the raw indicator is ignored).
size_t ScanRawString(const std::string& text, size_t quote) {
  constexpr size_t kMaxDelimiter = 16;  // [lex.string]/2; NVRTC's message says the same.
  size_t open = std::string::npos;
  for (size_t k = quote + 1; k < text.size() && k <= quote + 1 + kMaxDelimiter; ++k) {
    if (text[k] == '(') {
      open = k;
      break;
    }
    if (text[k] == '\n') return std::string::npos;
  }
  if (open == std::string::npos) return std::string::npos;
  const std::string terminator = ")" + text.substr(quote + 1, open - quote - 1) + "\"";
  const size_t close = text.find(terminator, open + 1);
  return close == std::string::npos ? text.size() : close + terminator.size();
}

bool IsRawPrefix(std::string_view identifier) {
  return identifier == "R" || identifier == "u8R" || identifier == "uR" || identifier == "UR" ||
         identifier == "LR";
}

bool IsHasInclude(std::string_view identifier) {
  return identifier == "__has_include" || identifier == "__has_include_next";
}

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

// How one reading treats numbers and suffixes: as NVRTC does on each kind of line
// (`by_line`), or with one rule on every line.
struct Rules {
  bool by_line = false;
  NumberRule numbers = NumberRule::kLiteral;
  bool checked_character_suffix = false;  // A character literal with an invalid value: none.
  bool string_suffix = true;
  // A block comment that spans lines inside a directive ends the directive (#ident, #pragma
  // unroll, and after an #ident with such a comment, every directive: NVRTC keeps that state)
  // instead of being a space in it.
  bool directive_comment_ends_line = false;
};

// The rules of a line, as NVRTC applies them (the comment at the top of this file).
Rules LineRules(std::string_view directive) {
  Rules rules;
  if (directive.empty() || directive == "if" || directive == "elif" || directive == "ident" ||
      directive == "pragma") {
    rules.numbers = NumberRule::kLiteral;
    rules.checked_character_suffix = true;
    rules.string_suffix = directive.empty() || directive == "pragma";
    rules.directive_comment_ends_line = directive == "ident";
  } else if (directive == "line" || directive == "#number") {
    rules.numbers = NumberRule::kDigits;
  } else {
    rules.numbers = NumberRule::kPpNumber;
  }
  return rules;
}

// One reading of the spliced text.
struct Reading {
  // The text with comments replaced (a block comment by one space, or by a newline where it
  // starts a line for phase 4; a line comment by nothing) and newlines inside raw strings by
  // spaces: phase 4 reads the directives from its lines.
  std::string code;
  std::vector<size_t> code_lines;  // The source line of each character of `code`.
  // Where the lines of the text end outside comments and raw strings, and where directives
  // start, as positions in the spliced text: readings that agree on both leave every line in
  // the same state and see the same directives.
  std::vector<size_t> line_ends;
  std::vector<size_t> directive_starts;
  std::vector<SourceComment> comments;
  std::vector<std::pair<std::string, size_t>> has_include_uses;
  bool unterminated_comment = false;
  size_t unterminated_comment_line = 0;
};

Reading Read(const std::string& text, const std::vector<size_t>& lines, const Rules& fixed) {
  Reading r;
  r.code.reserve(text.size());
  r.code_lines.reserve(text.size());
  auto emit = [&](size_t from, size_t to) {
    for (size_t k = from; k < to; ++k) {
      r.code.push_back(text[k] == '\n' ? ' ' : text[k]);
      r.code_lines.push_back(lines[k]);
    }
  };

  // Phase 4 is needed here for the directive a line is (its rules) and for block comments that
  // span lines.
  enum class Directive { kNone, kAfterHash, kNamed };
  Directive directive = Directive::kNone;
  Rules rules = fixed.by_line ? LineRules("") : fixed;
  bool at_line_start = true;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    const size_t line = lines[i];
    if (c == '\n') {
      at_line_start = true;
      directive = Directive::kNone;
      if (fixed.by_line) rules = LineRules("");
      r.code.push_back(c);
      r.code_lines.push_back(line);
      r.line_ends.push_back(i);
      ++i;
      continue;
    }
    const bool comment_start =
        c == '/' && i + 1 < text.size() && (text[i + 1] == '*' || text[i + 1] == '/');
    if (!IsBlank(c) && !comment_start) {
      const bool digraph = c == '%' && i + 1 < text.size() && text[i + 1] == ':';
      if (at_line_start && (c == '#' || digraph)) {
        at_line_start = false;
        r.directive_starts.push_back(i);
        directive = Directive::kAfterHash;
        const size_t end = i + (digraph ? 2 : 1);
        emit(i, end);
        i = end;
        continue;
      }
      at_line_start = false;
      if (directive == Directive::kAfterHash) {
        directive = Directive::kNamed;
        if (fixed.by_line) {
          const size_t end = IsIdentifierStart(c) ? ScanIdentifier(text, i) : i;
          // A directive with no name is a null directive or, before a number, a line marker.
          rules = LineRules(IsDigit(c) ? "#number" : end > i ? text.substr(i, end - i) : "#");
        }
      }
    }
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '*') {
      const size_t close = text.find("*/", i + 2);
      SourceComment comment;
      comment.block = true;
      comment.line = line;
      if (close == std::string::npos) {
        comment.text = text.substr(i + 2);
        r.unterminated_comment = true;
        r.unterminated_comment_line = line;
        r.comments.push_back(std::move(comment));
        break;
      }
      comment.text = text.substr(i + 2, close - i - 2);
      const bool new_line = (directive == Directive::kNone || rules.directive_comment_ends_line) &&
                            comment.text.find('\n') != std::string::npos;
      r.comments.push_back(std::move(comment));
      r.code.push_back(new_line ? '\n' : ' ');
      r.code_lines.push_back(lines[close]);
      if (new_line) {
        at_line_start = true;
        directive = Directive::kNone;
        if (fixed.by_line) rules = LineRules("");
      }
      i = close + 2;
      continue;
    }
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      size_t end = text.find('\n', i);
      if (end == std::string::npos) end = text.size();
      r.comments.push_back({false, text.substr(i + 2, end - i - 2), line});
      i = end;
      continue;
    }
    if (c == '"' || c == '\'') {
      size_t end = ScanQuoted(text, i);
      if (StartsIdentifier(text, end)) {
        const size_t suffix_end = ScanIdentifier(text, end);
        // A character literal of one plain character has a valid value, whatever its prefix;
        // any other takes its suffix in one reading and not in another.
        const bool valid_character =
            end == i + 3 && text[i + 1] != '\\' && static_cast<unsigned char>(text[i + 1]) < 0x80;
        const bool takes_suffix =
            c == '"' ? rules.string_suffix : valid_character || !rules.checked_character_suffix;
        if (takes_suffix) {
          const std::string suffix = text.substr(end, suffix_end - end);
          if (IsHasInclude(suffix)) r.has_include_uses.emplace_back(suffix, line);
          end = suffix_end;
        }
      }
      emit(i, end);
      i = end;
      continue;
    }
    if (IsDigit(c) || (c == '.' && i + 1 < text.size() && IsDigit(text[i + 1]))) {
      const size_t end = ScanNumber(text, i, rules.numbers);
      emit(i, end);
      i = end;
      continue;
    }
    if (StartsIdentifier(text, i)) {
      const size_t end = ScanIdentifier(text, i);
      const std::string_view identifier(text.data() + i, end - i);
      if (IsHasInclude(identifier)) r.has_include_uses.emplace_back(identifier, line);
      if (end < text.size() && text[end] == '"' && IsRawPrefix(identifier)) {
        if (size_t raw_end = ScanRawString(text, end); raw_end != std::string::npos) {
          if (StartsIdentifier(text, raw_end)) raw_end = ScanIdentifier(text, raw_end);
          emit(i, raw_end);
          i = raw_end;
          continue;
        }
      }
      emit(i, end);
      i = end;
      continue;
    }
    emit(i, i + 1);
    ++i;
  }
  return r;
}

// Phase 4 (the part the gate needs): a directive is a logical line whose first non-blank
// characters are '#' or the digraph "%:".
std::vector<SourceDirective> Directives(const Reading& r) {
  std::vector<SourceDirective> directives;
  const std::string& code = r.code;
  size_t begin = 0;
  while (begin < code.size()) {
    size_t end = code.find('\n', begin);
    if (end == std::string::npos) end = code.size();
    size_t k = begin;
    while (k < end && IsBlank(code[k])) ++k;
    size_t after_hash = std::string::npos;
    if (k < end && code[k] == '#') after_hash = k + 1;
    if (k + 1 < end && code[k] == '%' && code[k + 1] == ':') after_hash = k + 2;
    if (after_hash != std::string::npos) {
      SourceDirective directive;
      directive.line = r.code_lines[k];
      size_t n = after_hash;
      while (n < end && std::isspace(static_cast<unsigned char>(code[n]))) ++n;
      const size_t name_begin = n;
      // A line marker ("# 12") or a null directive ("#") has no name.
      if (n < end && IsIdentifierStart(code[n])) {
        while (n < end && IsIdentifierContinue(code[n])) ++n;
      }
      directive.name = code.substr(name_begin, n - name_begin);
      size_t arg_end = end;
      while (arg_end > n && std::isspace(static_cast<unsigned char>(code[arg_end - 1]))) --arg_end;
      while (n < arg_end && std::isspace(static_cast<unsigned char>(code[n]))) ++n;
      directive.argument = code.substr(n, arg_end - n);
      directives.push_back(std::move(directive));
    }
    begin = end + 1;
  }
  return directives;
}

// Every rule on every line: NVRTC's per line, and each combination on all lines.
std::vector<Rules> AllReadings() {
  std::vector<Rules> all = {Rules{true}};
  for (NumberRule numbers : {NumberRule::kLiteral, NumberRule::kPpNumber, NumberRule::kDigits,
                             NumberRule::kSkippedPpNumber}) {
    for (bool checked : {false, true}) {
      for (bool string_suffix : {false, true}) {
        for (bool comment_ends_line : {false, true}) {
          all.push_back({false, numbers, checked, string_suffix, comment_ends_line});
        }
      }
    }
  }
  return all;
}

}  // namespace

LexedSource LexSource(std::string_view source) {
  std::string text;
  std::vector<size_t> lines;
  Splice(source, text, lines);
  static const std::vector<Rules> kReadings = AllReadings();
  Reading primary = Read(text, lines, kReadings[0]);

  LexedSource result;
  result.directives = Directives(primary);
  result.comments = std::move(primary.comments);
  result.unterminated_comment = primary.unterminated_comment;
  result.unterminated_comment_line = primary.unterminated_comment_line;
  result.has_include_uses = std::move(primary.has_include_uses);
  // Where the other readings part from NVRTC's own (by line kind) is an ambiguity: the line
  // after the last line end they agree on.
  size_t agreed = text.size();  // The first position where a reading departs.
  bool differ = false;
  for (size_t k = 1; k < kReadings.size(); ++k) {
    const Reading other = Read(text, lines, kReadings[k]);
    for (const auto& use : other.has_include_uses) {
      if (std::find(result.has_include_uses.begin(), result.has_include_uses.end(), use) ==
          result.has_include_uses.end()) {
        result.has_include_uses.push_back(use);
      }
    }
    if (other.line_ends == primary.line_ends &&
        other.directive_starts == primary.directive_starts &&
        other.unterminated_comment == primary.unterminated_comment) {
      continue;
    }
    differ = true;
    // The first line end after which the readings part: the one before the first difference.
    size_t first_difference = text.size();
    for (const auto* positions : {&primary.line_ends, &primary.directive_starts}) {
      const auto& theirs =
          positions == &primary.line_ends ? other.line_ends : other.directive_starts;
      size_t k = 0;
      while (k < positions->size() && k < theirs.size() && (*positions)[k] == theirs[k]) ++k;
      if (k < positions->size()) first_difference = std::min(first_difference, (*positions)[k]);
      if (k < theirs.size()) first_difference = std::min(first_difference, theirs[k]);
    }
    agreed = std::min(agreed, first_difference);
  }
  if (differ) {
    // Report from the start of the last line that all readings began in the same state.
    size_t from = 0;
    for (size_t end : primary.line_ends) {
      if (end >= agreed) break;
      from = end + 1;
    }
    const size_t line = from < lines.size() ? lines[from] : (lines.empty() ? 1 : lines.back());
    size_t line_end = text.find('\n', from);
    if (line_end == std::string::npos) line_end = text.size();
    result.ambiguities.push_back({text.substr(from, std::min<size_t>(line_end - from, 80)), line});
  }
  return result;
}

}  // namespace ptxbench
