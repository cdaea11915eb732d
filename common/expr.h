// Arithmetic expressions over named integer values (a task's axes). Task files use them for
// tensor shapes, roofline formulas and scalars; launch plans use them for grid and block sizes,
// shared-memory and scratch sizes and tensor-map boxes. Submitted plans come from untrusted
// models, so every failure is an error value naming the expression and the 1-based position of
// the offending token, never a crash, a wrap-around or a silent truncation.
//
// Grammar (whitespace is ignored between tokens):
//   expr    := term (('+' | '-') term)*
//   term    := unary (('*' | '/' | '%') unary)*
//   unary   := ('+' | '-') unary | primary
//   primary := number | name | name '(' expr (',' expr)* ')' | '(' expr ')'
//   name    := [A-Za-z_][A-Za-z0-9_]*
// Functions: ceil_div(a, b), min(a, b, ...), max(a, b, ...); real expressions add sqrt(a).
// Integer mode: decimal literals only, int64 arithmetic; '/' and '%' truncate toward zero like
// C++; ceil_div rounds toward +infinity; overflow and division by zero are errors.
// Real mode: literals may have a fraction and an exponent ("0.5", "1e-3"); computed in double;
// a non-finite result is an error.
#ifndef PTXBENCH_COMMON_EXPR_H_
#define PTXBENCH_COMMON_EXPR_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ptxbench {

enum class ExprMode { kInteger, kReal };

// Longest accepted expression text and deepest nesting: far beyond any real plan, small enough
// that a hostile expression cannot exhaust the parser's stack.
inline constexpr size_t kMaxExprLength = 1024;
inline constexpr int kMaxExprDepth = 64;

class Expr {
 public:
  // Parses `text`; syntax errors are InvalidArgument ("syntax error in 'M*' at position 3:
  // expected a number, a name or '('").
  static absl::StatusOr<Expr> Parse(std::string_view text, ExprMode mode = ExprMode::kInteger);

  // Evaluates an integer expression. Names must all be in `values`.
  absl::StatusOr<int64_t> EvaluateInt(const std::map<std::string, int64_t>& values) const;
  // Evaluates in double (either mode); integer names are converted exactly up to 2^53.
  absl::StatusOr<double> EvaluateReal(const std::map<std::string, int64_t>& values) const;

  const std::string& text() const { return text_; }
  ExprMode mode() const { return mode_; }
  // Every name the expression reads (not function names), sorted, without duplicates.
  std::vector<std::string> Names() const;

  struct Node;  // Defined in expr.cc.

 private:
  Expr(std::string text, ExprMode mode, std::shared_ptr<const Node> root)
      : text_(std::move(text)), mode_(mode), root_(std::move(root)) {}

  std::string text_;
  ExprMode mode_;
  std::shared_ptr<const Node> root_;
};

// Parse and evaluate in one step.
absl::StatusOr<int64_t> EvalIntExpr(std::string_view text,
                                    const std::map<std::string, int64_t>& values);
absl::StatusOr<double> EvalRealExpr(std::string_view text,
                                    const std::map<std::string, int64_t>& values);

}  // namespace ptxbench

#endif  // PTXBENCH_COMMON_EXPR_H_
