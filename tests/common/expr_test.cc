#include "common/expr.h"

#include <catch2/catch.hpp>
#include <limits>
#include <map>
#include <string>

namespace ptxbench {
namespace {

const std::map<std::string, int64_t> kAxes = {{"M", 8192}, {"N", 7168}, {"K", 5120}, {"Z", 0}};

int64_t Int(const std::string& text) {
  auto value = EvalIntExpr(text, kAxes);
  INFO(text << " -> " << value.status().ToString());
  REQUIRE(value.ok());
  return *value;
}

std::string IntError(const std::string& text) {
  auto value = EvalIntExpr(text, kAxes);
  REQUIRE_FALSE(value.ok());
  CHECK(value.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(value.status().message());
}

TEST_CASE("Integer expressions: arithmetic, precedence and functions") {
  CHECK(Int("42") == 42);
  CHECK(Int("M") == 8192);
  CHECK(Int(" 2 * M * N * K ") == int64_t{2} * 8192 * 7168 * 5120);
  CHECK(Int("1 + 2 * 3") == 7);
  CHECK(Int("(1 + 2) * 3") == 9);
  CHECK(Int("10 - 4 - 3") == 3);  // Left-associative.
  CHECK(Int("64 / 4 / 2") == 8);
  CHECK(Int("-7 / 2") == -3);  // Truncates toward zero like C++.
  CHECK(Int("-7 % 2") == -1);
  CHECK(Int("--5") == 5);
  CHECK(Int("+5") == 5);
  CHECK(Int("ceil_div(M, 128)") == 64);
  CHECK(Int("ceil_div(384, 128)") == 3);
  CHECK(Int("ceil_div(385, 128)") == 4);
  CHECK(Int("ceil_div(0, 128)") == 0);
  CHECK(Int("ceil_div(-7, 2)") == -3);  // Exact ceiling for negatives too.
  CHECK(Int("ceil_div(7, -2)") == -3);
  CHECK(Int("ceil_div(-7, -2)") == 4);
  CHECK(Int("min(M, N, K)") == 5120);
  CHECK(Int("max(M, N)") == 8192);
  CHECK(Int("min(max(1, 2), 3)") == 2);
  CHECK(Int("4*(128*64 + 256*64)*2 + 1024") == 197632);
  CHECK(Int("9223372036854775807") == std::numeric_limits<int64_t>::max());
}

TEST_CASE("Integer expressions: errors name the problem, the expression and the position") {
  CHECK(IntError("N/0") == "division by zero in 'N/0' at position 2");
  CHECK(IntError("N % Z") == "division by zero in 'N % Z' at position 3");
  CHECK(IntError("ceil_div(M, Z)") == "division by zero in 'ceil_div(M, Z)' at position 1");
  CHECK(IntError("ceil_div(Q,128)") ==
        "unknown name 'Q' (known: K, M, N, Z) in 'ceil_div(Q,128)' at position 10");
  CHECK(IntError("M*") ==
        "syntax error: expected a number, a name or '(' at the end in 'M*' at position 3");
  CHECK(IntError("(M") == "syntax error: expected ')' in '(M' at position 3");
  CHECK(IntError("M N") == "syntax error: unexpected 'N' in 'M N' at position 3");
  CHECK(IntError("M # 2") == "syntax error: unexpected '#' in 'M # 2' at position 3");
  CHECK(IntError("foo(1)") ==
        "unknown function 'foo' (known: ceil_div, max, min) in 'foo(1)' at position 1");
  CHECK(IntError("sqrt(4)") ==
        "unknown function 'sqrt' (known: ceil_div, max, min) in 'sqrt(4)' at position 1");
  CHECK(IntError("ceil_div(1)") ==
        "ceil_div takes 2 arguments, got 1 in 'ceil_div(1)' at position 1");
  CHECK(IntError("min(1)") == "min takes at least 2 arguments, got 1 in 'min(1)' at position 1");
  CHECK(IntError("max()") == "max() needs arguments in 'max()' at position 1");
  CHECK(IntError("1.5 * M") ==
        "fractional literal '1.5' in an integer expression in '1.5 * M' at position 1");
  CHECK(IntError("0x80") ==
        "syntax error: a number must not run into letters (hex literals are not supported) in "
        "'0x80' at position 2");
  CHECK(IntError("") == "empty expression");
  CHECK(IntError("   ") == "empty expression");
}

TEST_CASE("Integer expressions: overflow is an error, never a wrap-around") {
  CHECK(IntError("9223372036854775807 + 1") ==
        "integer overflow in '9223372036854775807 + 1' at position 21");
  CHECK(IntError("M*N*K*M*N") == "integer overflow in 'M*N*K*M*N' at position 8");
  CHECK(IntError("-9223372036854775807 - 2") ==
        "integer overflow in '-9223372036854775807 - 2' at position 22");
  CHECK(IntError("99999999999999999999") ==
        "literal '99999999999999999999' does not fit in 64 bits in '99999999999999999999' at "
        "position 1");
  CHECK(IntError("(-9223372036854775807 - 1) / -1") ==
        "integer overflow in '(-9223372036854775807 - 1) / -1' at position 28");
  CHECK(IntError("-(-9223372036854775807 - 1)") ==
        "integer overflow in '-(-9223372036854775807 - 1)' at position 1");
}

TEST_CASE("Integer expressions: hostile input is bounded") {
  const std::string deep = std::string(100, '(') + "1" + std::string(100, ')');
  CHECK(IntError(deep).find("nesting deeper than 64") != std::string::npos);
  const std::string long_text(2000, '1');
  CHECK(IntError(long_text) == "expression of 2000 characters exceeds the limit of 1024");
  const std::string nested_minus = std::string(500, '-') + "1";
  CHECK(IntError(nested_minus).find("nesting deeper") != std::string::npos);
}

TEST_CASE("Real expressions: fractions, sqrt and errors") {
  auto value = EvalRealExpr("1 / sqrt(D)", {{"D", 128}});
  REQUIRE(value.ok());
  CHECK(*value == Approx(0.08838834764831845));
  CHECK(*EvalRealExpr("2*M*N*K", kAxes) == Approx(2.0 * 8192 * 7168 * 5120));
  CHECK(*EvalRealExpr("1.5e3 + .5", {}) == 1500.5);
  CHECK(*EvalRealExpr("7 / 2", {}) == 3.5);  // Real division.
  CHECK(EvalRealExpr("sqrt(-1)", {}).status().message() ==
        "sqrt of a negative value in 'sqrt(-1)' at position 1");
  CHECK(EvalRealExpr("1 / Z", kAxes).status().message() ==
        "division by zero in '1 / Z' at position 3");
  CHECK(EvalRealExpr("M % 2", kAxes).status().message() ==
        "'%' is not defined for real expressions in 'M % 2' at position 3");
  CHECK(EvalRealExpr("1e400", {}).status().message() ==
        "literal '1e400' is out of range in '1e400' at position 1");
  CHECK(EvalRealExpr("1e", {}).status().message() ==
        "syntax error: malformed exponent in '1e' at position 3");
}

TEST_CASE("Expr reports the names it reads and refuses integer evaluation of real expressions") {
  auto expr = Expr::Parse("ceil_div(M, 128) * N + min(K, M)");
  REQUIRE(expr.ok());
  CHECK(expr->Names() == std::vector<std::string>{"K", "M", "N"});
  CHECK(expr->text() == "ceil_div(M, 128) * N + min(K, M)");
  auto real = Expr::Parse("M / 2", ExprMode::kReal);
  REQUIRE(real.ok());
  CHECK(real->EvaluateInt(kAxes).status().message() ==
        "'M / 2' is a real expression; an integer is needed here");
  CHECK(*real->EvaluateReal(kAxes) == 4096.0);
}

}  // namespace
}  // namespace ptxbench
