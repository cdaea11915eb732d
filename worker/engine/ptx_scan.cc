#include "worker/engine/ptx_scan.h"

#include <cctype>
#include <cstdlib>
#include <optional>

#include "common/target_families.h"

namespace ptxbench {
namespace {

bool IsPtxIdentChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '%';
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// PTX without comments; string literals (only in directives such as .file) become "".
std::string StripComments(std::string_view ptx) {
  std::string out;
  out.reserve(ptx.size());
  size_t i = 0;
  while (i < ptx.size()) {
    if (ptx[i] == '/' && i + 1 < ptx.size() && ptx[i + 1] == '/') {
      while (i < ptx.size() && ptx[i] != '\n') ++i;
    } else if (ptx[i] == '/' && i + 1 < ptx.size() && ptx[i + 1] == '*') {
      const size_t close = ptx.find("*/", i + 2);
      out.push_back(' ');
      i = close == std::string_view::npos ? ptx.size() : close + 2;
    } else if (ptx[i] == '"') {
      out.append("\"\"");
      ++i;
      while (i < ptx.size() && ptx[i] != '"' && ptx[i] != '\n') i += ptx[i] == '\\' ? 2 : 1;
      if (i < ptx.size() && ptx[i] == '"') ++i;
    } else {
      out.push_back(ptx[i++]);
    }
  }
  return out;
}

// Whether `statement` starts with a directive that PTX ends at the end of its line rather than
// with ';' (PTX ISA 9.0, section 11.5 "Debugging Directives": .loc, .file; .section holds a
// braced block of its own and never precedes an instruction). NVRTC's --generate-line-info
// puts a .loc line before nearly every instruction, so such a line shares its piece with the
// instruction after it.
bool StartsWithLineDirective(std::string_view statement) {
  for (std::string_view directive : {std::string_view(".loc"), std::string_view(".file")}) {
    if (statement.substr(0, directive.size()) == directive &&
        (statement.size() == directive.size() ||
         std::isspace(static_cast<unsigned char>(statement[directive.size()])))) {
      return true;
    }
  }
  return false;
}

// Removes leading labels ("$L__BB0_3:", "WAIT:"), line directives (".loc 1 42 7"), and a
// predicate guard ("@!%p1").
std::string_view StripLabelsAndGuard(std::string_view statement) {
  while (true) {
    statement = Trim(statement);
    if (StartsWithLineDirective(statement)) {
      const size_t end_of_line = statement.find('\n');
      statement = end_of_line == std::string_view::npos ? std::string_view()
                                                        : statement.substr(end_of_line + 1);
      continue;
    }
    size_t n = 0;
    while (n < statement.size() && IsPtxIdentChar(statement[n])) ++n;
    if (n > 0 && n < statement.size() && statement[n] == ':' &&
        (n + 1 >= statement.size() || statement[n + 1] != ':')) {
      statement.remove_prefix(n + 1);
      continue;
    }
    break;
  }
  if (!statement.empty() && statement.front() == '@') {
    size_t n = 1;
    while (n < statement.size() && !std::isspace(static_cast<unsigned char>(statement[n]))) ++n;
    statement = Trim(statement.substr(n));
  }
  return statement;
}

std::string_view FirstToken(std::string_view statement) {
  size_t n = 0;
  while (n < statement.size() && !std::isspace(static_cast<unsigned char>(statement[n])) &&
         statement[n] != ',' && statement[n] != '(') {
    ++n;
  }
  return statement.substr(0, n);
}

int64_t ScalarTypeBytes(std::string_view type) {
  if (type.size() < 3 || type[0] != '.') return 0;
  const char kind = type[1];
  if (kind != 'b' && kind != 'u' && kind != 's' && kind != 'f') return 0;
  const std::string_view bits = type.substr(2);
  if (bits == "8") return 1;
  if (bits == "16") return 2;
  if (bits == "32") return 4;
  if (bits == "64") return 8;
  return 0;
}

// ".param .align 64 .b8 k_param_0[128]" -> {k_param_0, 128, 64}.
std::optional<KernelParameter> ParseParameter(std::string_view text) {
  KernelParameter parameter;
  int64_t element_bytes = 0;
  int64_t count = 1;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    size_t j = i;
    while (j < text.size() && !std::isspace(static_cast<unsigned char>(text[j]))) ++j;
    std::string_view token = text.substr(i, j - i);
    i = j;
    if (token.empty()) break;
    if (token == ".align") {
      while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
      parameter.alignment = std::strtoll(std::string(text.substr(i)).c_str(), nullptr, 10);
      while (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    } else if (token[0] == '.') {
      if (const int64_t bytes = ScalarTypeBytes(token); bytes > 0) element_bytes = bytes;
    } else {
      const size_t bracket = token.find('[');
      parameter.name = std::string(token.substr(0, bracket));
      if (bracket != std::string_view::npos) {
        count = std::strtoll(std::string(token.substr(bracket + 1)).c_str(), nullptr, 10);
      }
    }
  }
  if (element_bytes == 0 || parameter.name.empty() || count <= 0) return std::nullopt;
  parameter.size_bytes = element_bytes * count;
  if (parameter.alignment == 0) parameter.alignment = element_bytes;
  return parameter;
}

// Reads "N[, N[, N]]" after a directive such as .maxntid.
std::array<int64_t, 3> ParseDims(std::string_view text) {
  std::array<int64_t, 3> dims = {0, 0, 0};
  std::string buffer(text);
  const char* p = buffer.c_str();
  for (int d = 0; d < 3; ++d) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == ',') ++p;
    if (!std::isdigit(static_cast<unsigned char>(*p))) break;
    char* end = nullptr;
    dims[d] = std::strtoll(p, &end, 10);
    p = end;
  }
  for (int64_t& d : dims) {
    if (d == 0 && dims[0] != 0) d = 1;
  }
  return dims;
}

// A function header: ".visible .entry name(params) .maxntid 128, 1, 1" (the text before '{').
void ParseFunctionHeader(std::string_view header, bool is_entry, std::string& name,
                         std::vector<KernelSignature>& kernels) {
  const std::string_view keyword = is_entry ? ".entry" : ".func";
  size_t at = header.find(keyword);
  if (at == std::string_view::npos) return;
  std::string_view rest = Trim(header.substr(at + keyword.size()));
  // .func may declare its return value first: ".func (.param .b32 r) name(...)".
  if (!is_entry && !rest.empty() && rest.front() == '(') {
    const size_t close = rest.find(')');
    if (close == std::string_view::npos) return;
    rest = Trim(rest.substr(close + 1));
  }
  size_t n = 0;
  while (n < rest.size() && IsPtxIdentChar(rest[n])) ++n;
  name = std::string(rest.substr(0, n));
  if (!is_entry) return;
  KernelSignature kernel;
  kernel.name = name;
  rest = rest.substr(n);
  const size_t open = rest.find('(');
  const size_t close = rest.find(')');
  if (open != std::string_view::npos && close != std::string_view::npos && close > open) {
    std::string_view params = rest.substr(open + 1, close - open - 1);
    while (!Trim(params).empty()) {
      const size_t comma = params.find(',');
      const std::string_view one = params.substr(0, comma);
      if (auto parameter = ParseParameter(one)) kernel.parameters.push_back(*parameter);
      if (comma == std::string_view::npos) break;
      params.remove_prefix(comma + 1);
    }
    const std::string_view after = rest.substr(close + 1);
    if (size_t p = after.find(".maxntid"); p != std::string_view::npos) {
      kernel.max_threads = ParseDims(after.substr(p + 8));
    }
    if (size_t p = after.find(".reqntid"); p != std::string_view::npos) {
      kernel.required_threads = ParseDims(after.substr(p + 8));
    }
  }
  kernels.push_back(std::move(kernel));
}

// Walks statements: pieces of the comment-free text cut at ';', '{' and '}'. Calls
// on_instruction(function, mnemonic) for every instruction inside a function body. `fragment`:
// the text is a piece of a function body (one line of it), so every statement is an
// instruction, whatever braces it opens or closes.
template <typename OnInstruction>
void WalkStatements(std::string_view ptx, PtxScan* scan, OnInstruction on_instruction,
                    bool fragment = false) {
  const std::string code = StripComments(ptx);
  const int body_depth = fragment ? 1 : 0;  // Never leaves the body of a fragment.
  int depth = body_depth;
  std::string function;  // The function whose body we are in; empty at module scope.
  size_t start = 0;
  for (size_t i = 0; i <= code.size(); ++i) {
    const char c = i < code.size() ? code[i] : ';';
    if (c != ';' && c != '{' && c != '}') continue;
    const std::string_view piece =
        StripLabelsAndGuard(std::string_view(code).substr(start, i - start));
    // A '{' after the start of an instruction or a variable declaration opens a vector operand
    // ("{%f1, %f2}") or an initializer, not a scope: skip to its '}' within the statement.
    const bool opens_function = depth == 0 && (piece.find(".entry") != std::string_view::npos ||
                                               piece.find(".func") != std::string_view::npos);
    if (c == '{' && !piece.empty() && !opens_function) {
      int nesting = 0;
      for (; i < code.size(); ++i) {
        if (code[i] == '{') ++nesting;
        if (code[i] == '}' && --nesting == 0) break;
      }
      continue;
    }
    start = i + 1;
    if (depth == 0) {
      // Module scope: directives (.version, .target and .address_size end without ';', so they
      // share a piece with what follows), and function headers right before their '{'.
      if (const size_t at = piece.find(".target");
          scan != nullptr && at != std::string_view::npos) {
        std::string_view operands = Trim(piece.substr(at + 7));
        size_t n = 0;
        while (n < operands.size() && operands[n] != ',' &&
               !std::isspace(static_cast<unsigned char>(operands[n]))) {
          ++n;
        }
        scan->target = std::string(operands.substr(0, n));
      }
      if (c == '{') {
        const bool is_entry = piece.find(".entry") != std::string_view::npos;
        const bool is_func = !is_entry && piece.find(".func") != std::string_view::npos;
        std::vector<KernelSignature> ignored;
        if (is_entry || is_func) {
          ParseFunctionHeader(piece, is_entry, function, scan != nullptr ? scan->kernels : ignored);
        }
        depth = 1;
      }
      continue;
    }
    const std::string_view mnemonic = FirstToken(piece);
    if (!mnemonic.empty() && mnemonic.front() != '.') on_instruction(function, mnemonic);
    if (c == '{') {
      ++depth;
    } else if (c == '}' && depth > body_depth) {
      if (--depth == 0) function.clear();
    }
  }
}

}  // namespace

PtxScan ScanPtx(std::string_view ptx) {
  PtxScan scan;
  const auto& families = TargetFamilies();
  WalkStatements(ptx, &scan, [&](const std::string& function, std::string_view mnemonic) {
    for (const TargetFamily& family : families) {
      if (PtxMnemonicInFamily(family, mnemonic)) {
        ++scan.family_counts[family.name];
        ++scan.family_counts_by_function[function][family.name];
      }
    }
  });
  return scan;
}

std::vector<std::string> PtxMnemonics(std::string_view ptx) {
  std::vector<std::string> mnemonics;
  WalkStatements(ptx, nullptr, [&](const std::string&, std::string_view mnemonic) {
    mnemonics.emplace_back(mnemonic);
  });
  return mnemonics;
}

std::vector<std::string> PtxFragmentMnemonics(std::string_view fragment) {
  std::vector<std::string> mnemonics;
  WalkStatements(
      fragment, nullptr,
      [&](const std::string&, std::string_view mnemonic) {
        // A fragment may hold the tail of a declaration (the ')' closing a parameter list).
        if (std::isalpha(static_cast<unsigned char>(mnemonic.front()))) {
          mnemonics.emplace_back(mnemonic);
        }
      },
      /*fragment=*/true);
  return mnemonics;
}

}  // namespace ptxbench
