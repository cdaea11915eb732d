// The lexer against the compiler it stands in for: generated "token soups" mixing quotes,
// encoding prefixes, raw strings, numbers with digit separators, comment markers, line splices,
// conditionals and directives, with #warning marker lines among them. NVRTC decides which
// markers it compiled (a #warning is reported with its text and compilation goes on); the lexer
// must find exactly those as active directives. A marker the lexer misses is a line the include
// gate would not have looked at.
#include "worker/engine/source_lexer.h"

#include <catch2/catch.hpp>
#include <cctype>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "worker/engine/nvrtc_program.h"

namespace ptxbench {
namespace {

struct Soup {
  std::string text;
  std::vector<std::string> markers;  // Every marker name the soup contains.
};

// Fragments weighted by how often they appear; they combine into the constructs whose reading
// differs between the standard, a naive lexer and NVRTC.
const std::vector<std::string>& Fragments() {
  static const std::vector<std::string> fragments = {
      // Quotes, encoding prefixes, user-defined suffixes.
      "'", "'", "'", "\"", "\"", "L'", "u'", "U'", "u8'", "L\"", "u\"", "U\"", "u8\"", "'a'",
      "\"s\"", "_x", "_y'", "\\'", "\\\"", "''", "'\\''",
      // Raw strings: prefixes, delimiters, a prefix that is not one, a delimiter too long.
      "R\"(", ")\"", "R\"x(", ")x\"", "u8R\"(", "LR\"(", "uR\"(", "UR\"x(", "xR\"(", "R\"a b(",
      ")a b\"", "R\"", "R\"12345678901234567(", "R", "(",
      // Numbers and digit separators.
      "0", "1", "7", "0x", "0b", "1e", "1E", "0x1p", "e", "p", "+", "-", ".", "1.", ".5", "1'000",
      "0x1'F", "0'", "9'", "'0", "f", "F",
      // Identifiers and characters that are not identifier characters for NVRTC.
      "x", "a", "_", "\\u00e9", "\\u00", "$", "\xc3\xa9",
      // Comments.
      "/*", "/*", "*/", "*/", "//", "/", "*",
      // Splices and near-splices.
      "\\\n", "\\\n", "\\\r\n", "\\ \n", "?\?/\n", "\\",
      // Blanks and line ends.
      " ", " ", "\t", "\n", "\r\n",
      // Directive pieces.
      // No #ident: the gate refuses it, and NVRTC keeps state from one (a block comment in
      // it that spans lines makes later ones in directives end the directive; measured).
      "#", "%:", "#pragma ", "#line 7", "# ", "#define Z ", "#undef Z ", "#pragma unroll ",
      "#pragma once ", "#if 1 ", "#endif "};
  return fragments;
}

std::string MarkerName(int soup, int k) { return absl::StrCat("M", soup, "x", k); }

// A soup of 3-12 lines: marker lines (some at a line start, some after other tokens), balanced
// #if 0 / #if 1 / #else / #endif lines, and lines of random fragments.
Soup MakeSoup(std::mt19937& rng, int index) {
  Soup soup;
  const auto& fragments = Fragments();
  std::uniform_int_distribution<size_t> pick(0, fragments.size() - 1);
  std::uniform_int_distribution<int> percent(0, 99);
  std::uniform_int_distribution<int> line_count(3, 12);
  std::uniform_int_distribution<int> fragment_count(1, 6);
  const std::vector<std::string> marker_prefixes = {"",     "",   " ",      "\t",
                                                    "/**/", "  ", "/* */ ", "/*\n*/"};
  const std::vector<std::string> hashes = {"#", "#", "#", "%:", "# ", "#  "};
  std::vector<bool> open_has_else;  // The open #if groups: has each had its #else?
  auto random_fragments = [&](int count) {
    std::string text;
    for (int f = 0; f < count; ++f) text += fragments[pick(rng)];
    return text;
  };
  const int lines = line_count(rng);
  for (int l = 0; l < lines; ++l) {
    const int roll = percent(rng);
    if (roll < 35) {
      const std::string name = MarkerName(index, static_cast<int>(soup.markers.size()));
      soup.markers.push_back(name);
      std::string line;
      if (percent(rng) < 20) {
        line = random_fragments(fragment_count(rng)) + " ";  // Not at a line start.
      } else {
        line = marker_prefixes[static_cast<size_t>(percent(rng)) % marker_prefixes.size()];
      }
      line += hashes[static_cast<size_t>(percent(rng)) % hashes.size()];
      line += "warning " + name;
      if (percent(rng) < 40) line += " " + random_fragments(fragment_count(rng));
      soup.text += line + "\n";
    } else if (roll < 45) {
      const int kind = percent(rng);
      if (!open_has_else.empty() && kind < 30) {
        soup.text += "#endif\n";
        open_has_else.pop_back();
      } else if (!open_has_else.empty() && !open_has_else.back() && kind < 45) {
        soup.text += "#else\n";
        open_has_else.back() = true;
      } else {
        soup.text += kind < 75 ? "#if 0\n" : "#if 1\n";
        open_has_else.push_back(false);
      }
    } else {
      soup.text += random_fragments(fragment_count(rng)) + "\n";
    }
  }
  for (size_t open = open_has_else.size(); open > 0; --open) soup.text += "\n#endif\n";
  // A last marker shows how each side leaves the soup: a conditional one side closed and the
  // other did not hides it on that side (and would otherwise hide the next soups of a batch).
  const std::string last = MarkerName(index, static_cast<int>(soup.markers.size()));
  soup.markers.push_back(last);
  soup.text += "\n#warning " + last + "\n";
  return soup;
}

// The markers an active #warning names, by the lexer's directives and a conditional stack.
// Conditions are "0" or "1"; nullopt when a directive's condition is anything else (a soup the
// stack cannot follow, counted and bounded by the test).
std::optional<std::set<std::string>> VisibleToLexer(const Soup& soup) {
  struct Frame {
    bool parent_active;
    bool taken;
    bool active;
  };
  std::vector<Frame> stack;
  auto active = [&] { return stack.empty() || stack.back().active; };
  std::set<std::string> visible;
  const LexedSource lexed = LexSource(soup.text);
  if (!lexed.ambiguities.empty()) return std::nullopt;  // The gate refuses these.
  for (const SourceDirective& directive : lexed.directives) {
    if (directive.name == "if" || directive.name == "ifdef" || directive.name == "ifndef") {
      if (directive.name != "if") return std::nullopt;
      // NVRTC takes a condition with an error ("1 #pragma") as false; keep to plain ones.
      const std::string& condition_text = directive.argument;
      if (active() && condition_text != "0" && condition_text != "1") return std::nullopt;
      const bool condition = condition_text == "1";
      stack.push_back({active(), active() && condition, active() && condition});
    } else if (directive.name == "else") {
      if (stack.empty()) continue;
      stack.back().active = stack.back().parent_active && !stack.back().taken;
      stack.back().taken = true;
    } else if (directive.name == "elif") {
      return std::nullopt;
    } else if (directive.name == "endif") {
      if (!stack.empty()) stack.pop_back();
    } else if (directive.name == "warning" && active()) {
      const std::string& argument = directive.argument;
      size_t end = 0;
      while (end < argument.size() && std::isalnum(static_cast<unsigned char>(argument[end]))) {
        ++end;
      }
      const std::string word = argument.substr(0, end);
      for (const std::string& marker : soup.markers) {
        if (marker == word) visible.insert(marker);
      }
    }
  }
  return visible;
}

std::string Escaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\n') {
      out += "\\n\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// The markers NVRTC reports as compiled when it compiles `soups`, one header each, in one
// program. Soups are mostly not valid C++: the front end's limit of 100 errors is lifted.
std::set<std::string> VisibleToNvrtc(const std::vector<const Soup*>& soups) {
  std::map<std::string, std::string> headers;
  std::string main;
  for (size_t s = 0; s < soups.size(); ++s) {
    const std::string name = absl::StrCat("s", s, ".h");
    headers[name] = soups[s]->text;
    // A soup that leaves an #if open (its #endif in a raw string that runs to the end, say)
    // leaves it open for the includer too (measured); #endif lines close it before the next.
    main += absl::StrCat("#include \"", name, "\"\n");
    for (int e = 0; e < 16; ++e) main += "#endif\n";
  }
  auto compiled = CompileToPtx(main, "main.cu", headers,
                               {"-arch=compute_90a", "-std=c++17", "-default-device",
                                "-no-source-include", "-Xcudafe=--error_limit=100000000"},
                               300);
  REQUIRE(compiled.ok());
  REQUIRE(compiled->log.find("Error limit reached") == std::string::npos);
  REQUIRE(compiled->log.find("catastrophic") == std::string::npos);
  static const std::regex kReported("#warning directive: (M[0-9]+x[0-9]+)");
  std::set<std::string> visible;
  for (std::sregex_iterator it(compiled->log.begin(), compiled->log.end(), kReported), end;
       it != end; ++it) {
    visible.insert((*it)[1].str());
  }
  return visible;
}

std::set<std::string> Only(const std::set<std::string>& visible, const Soup& soup) {
  std::set<std::string> out;
  for (const std::string& marker : soup.markers) {
    if (visible.count(marker) > 0) out.insert(marker);
  }
  return out;
}

TEST_CASE("The lexer reads generated token soups exactly as NVRTC does") {
  // 3000 soups take about 2 s here. A deeper search (a new NVRTC, a lexer change):
  // PTXBENCH_LEXER_SOUPS=200000 PTXBENCH_LEXER_SEED=7 engine_test "The lexer reads*".
  const char* soups_variable = std::getenv("PTXBENCH_LEXER_SOUPS");
  const char* seed_variable = std::getenv("PTXBENCH_LEXER_SEED");
  const int kSoups = soups_variable != nullptr ? std::atoi(soups_variable) : 3000;
  constexpr size_t kBatch = 500;  // Soups per NVRTC compile.
  std::mt19937 rng(seed_variable != nullptr ? static_cast<unsigned>(std::atol(seed_variable))
                                            : 20261201u);
  std::vector<Soup> soups;
  for (int s = 0; s < kSoups; ++s) soups.push_back(MakeSoup(rng, s));

  int compared = 0, skipped = 0, markers_compiled = 0, markers_hidden = 0;
  bool agreed = true;
  for (size_t first = 0; first < soups.size() && agreed; first += kBatch) {
    std::vector<const Soup*> batch;
    for (size_t s = first; s < first + kBatch && s < soups.size(); ++s) batch.push_back(&soups[s]);
    const std::set<std::string> by_nvrtc = VisibleToNvrtc(batch);
    for (const Soup* soup : batch) {
      const auto by_lexer = VisibleToLexer(*soup);
      if (!by_lexer.has_value()) {
        ++skipped;
        continue;
      }
      ++compared;
      const std::set<std::string> compiled = Only(by_nvrtc, *soup);
      markers_compiled += static_cast<int>(compiled.size());
      markers_hidden += static_cast<int>(soup->markers.size() - compiled.size());
      if (compiled == *by_lexer) continue;
      // A disagreement can be carried into the next soups of the batch by an #if whose #endif
      // one side did not see: name the first soup that disagrees when compiled alone.
      agreed = false;
      for (const Soup* alone : batch) {
        const auto lexer_alone = VisibleToLexer(*alone);
        if (!lexer_alone.has_value()) continue;
        const std::set<std::string> nvrtc_alone = Only(VisibleToNvrtc({alone}), *alone);
        if (nvrtc_alone == *lexer_alone) continue;
        std::string lexer_list, nvrtc_list;
        for (const auto& m : *lexer_alone) lexer_list += m + " ";
        for (const auto& m : nvrtc_alone) nvrtc_list += m + " ";
        FAIL("the lexer and NVRTC disagree on this soup:\n"
             << Escaped(alone->text) << "\nactive #warning markers by the lexer: " << lexer_list
             << "\nby NVRTC: " << nvrtc_list);
      }
      const size_t at = static_cast<size_t>(soup - batch.front());
      FAIL("soup " << at << " of a batch disagrees there but not alone; it and the soup before:\n"
                   << Escaped(soup->text) << "\n----\n"
                   << (at > 0 ? Escaped(batch[at - 1]->text) : std::string()));
    }
  }
  INFO("compared " << compared << ", skipped " << skipped << ", markers compiled "
                   << markers_compiled << ", hidden " << markers_hidden);
  CHECK(agreed);
  // The soups must exercise both outcomes, and the conditional stack must follow nearly all.
  CHECK(markers_compiled > 1000);
  CHECK(markers_hidden > 1000);
  CHECK(skipped < kSoups / 8);
}

// The standard's readings that NVRTC does not share, pinned so that a change of NVRTC shows up
// as a named failure, not only as a soup.
TEST_CASE("Quotes after numbers, identifiers and literals are read as NVRTC reads them") {
  auto directives = [](const std::string& text) {
    std::vector<std::string> names;
    for (const SourceDirective& d : LexSource(text).directives) names.push_back(d.name);
    return names;
  };
  using Names = std::vector<std::string>;
  // A character literal after an identifier, an encoding prefix or a literal's suffix: the
  // comment marker is inside it and the next line is code.
  for (const char* prefix :
       {"x'/*'", "L'/*'", "u'/*'", "U'/*'", "u8'/*'", "'a'_x'/*'", "\"a\"_x'/*'", "1$'/*'"}) {
    INFO(prefix);
    CHECK(directives(std::string(prefix) + "\n#include <x>\n// */\n") == Names{"include"});
  }
  // NVRTC takes quotes after digits into the number: 0'/* is the number 0' and a comment.
  for (const char* number :
       {"0'/*'", "1'000'000 /*", "0x1'F /*", "1'a' /*", "1e'+' /*", "1'' /*", "1\\u00e9'/*"}) {
    INFO(number);
    CHECK(directives(std::string(number) + "\n#include <x>\n// */\n").empty());
  }
  // Three quotes after digits: two go to the number, the third opens a character literal.
  CHECK(directives("1''' /*\n#include <x>\n// */\n") == Names{"include"});
  // Raw strings: only the five prefixes; a literal's suffix R is no prefix.
  CHECK(directives("auto s = u8R\"(\n#include <x>\n)\";\n").empty());
  CHECK(directives("auto s = xR\"(\n#include <x>\n)\";\n") == Names{"include"});
  CHECK(directives("auto s = \"a\"R\"(\n#include <x>\n)\";\n") == Names{"include"});
  CHECK(directives("auto s = R\"12345678901234567(\n#include <x>\n)12345678901234567\";\n") ==
        Names{"include"});
  CHECK(directives("auto s = R\"a b(\n#include <x>\n)a b\";\n").empty());
  // Splices: a backslash-newline joins lines everywhere, inside raw strings too; a backslash,
  // a blank and a newline or a trigraph does not.
  CHECK(directives("// x \\\n#include <x>\n").empty());
  CHECK(directives("// x \\ \n#include <x>\n") == Names{"include"});
  CHECK(directives("// x ?\?/\n#include <x>\n") == Names{"include"});
  CHECK(directives("auto s = R\"x(\\\n)x\\\n\";\n#include <x>\n)x\";\n") == Names{"include"});
}

}  // namespace
}  // namespace ptxbench
