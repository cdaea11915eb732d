#include "common/expr.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"

namespace ptxbench {

struct Expr::Node {
  enum class Kind { kNumber, kName, kNegate, kAdd, kSubtract, kMultiply, kDivide, kModulo, kCall };
  Kind kind = Kind::kNumber;
  int64_t int_value = 0;  // kNumber in integer mode.
  double real_value = 0;  // kNumber (both modes; exact for integers up to 2^53).
  std::string name;       // kName: the value's name; kCall: the function's name.
  std::vector<std::shared_ptr<const Node>> operands;
  size_t position = 0;  // 1-based column of the token that this node stands for.
};

namespace {

using Node = Expr::Node;
using NodePtr = std::shared_ptr<const Node>;

absl::Status ExprError(std::string_view what, std::string_view text, size_t position) {
  return absl::InvalidArgumentError(
      absl::StrCat(std::string(what), " in '", std::string(text), "' at position ", position));
}

class Parser {
 public:
  Parser(std::string_view text, ExprMode mode) : text_(text), mode_(mode) {}

  absl::StatusOr<NodePtr> ParseAll() {
    ASSIGN_OR_RETURN(NodePtr root, ParseSum(0));
    SkipSpace();
    if (pos_ < text_.size()) {
      return SyntaxError(absl::StrCat("unexpected '", std::string(1, text_[pos_]), "'"));
    }
    return root;
  }

 private:
  absl::Status SyntaxError(std::string_view what) const {
    return ExprError(absl::StrCat("syntax error: ", std::string(what)), text_, pos_ + 1);
  }

  void SkipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }

  bool Accept(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  static NodePtr Binary(Node::Kind kind, NodePtr lhs, NodePtr rhs, size_t position) {
    auto node = std::make_shared<Node>();
    node->kind = kind;
    node->operands = {std::move(lhs), std::move(rhs)};
    node->position = position;
    return node;
  }

  absl::Status CheckDepth(int depth) const {
    if (depth > kMaxExprDepth) {
      return ExprError(absl::StrCat("nesting deeper than ", kMaxExprDepth), text_, pos_ + 1);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<NodePtr> ParseSum(int depth) {
    RETURN_IF_ERROR(CheckDepth(depth));
    ASSIGN_OR_RETURN(NodePtr lhs, ParseProduct(depth + 1));
    while (true) {
      SkipSpace();
      const size_t op_position = pos_ + 1;
      if (Accept('+')) {
        ASSIGN_OR_RETURN(NodePtr rhs, ParseProduct(depth + 1));
        lhs = Binary(Node::Kind::kAdd, lhs, rhs, op_position);
      } else if (Accept('-')) {
        ASSIGN_OR_RETURN(NodePtr rhs, ParseProduct(depth + 1));
        lhs = Binary(Node::Kind::kSubtract, lhs, rhs, op_position);
      } else {
        return lhs;
      }
    }
  }

  absl::StatusOr<NodePtr> ParseProduct(int depth) {
    RETURN_IF_ERROR(CheckDepth(depth));
    ASSIGN_OR_RETURN(NodePtr lhs, ParseUnary(depth + 1));
    while (true) {
      SkipSpace();
      const size_t op_position = pos_ + 1;
      Node::Kind kind;
      if (Accept('*')) {
        kind = Node::Kind::kMultiply;
      } else if (Accept('/')) {
        kind = Node::Kind::kDivide;
      } else if (Accept('%')) {
        if (mode_ == ExprMode::kReal) {
          return ExprError("'%' is not defined for real expressions", text_, op_position);
        }
        kind = Node::Kind::kModulo;
      } else {
        return lhs;
      }
      ASSIGN_OR_RETURN(NodePtr rhs, ParseUnary(depth + 1));
      lhs = Binary(kind, lhs, rhs, op_position);
    }
  }

  absl::StatusOr<NodePtr> ParseUnary(int depth) {
    RETURN_IF_ERROR(CheckDepth(depth));
    SkipSpace();
    const size_t op_position = pos_ + 1;
    if (Accept('+')) return ParseUnary(depth + 1);
    if (Accept('-')) {
      ASSIGN_OR_RETURN(NodePtr operand, ParseUnary(depth + 1));
      auto node = std::make_shared<Node>();
      node->kind = Node::Kind::kNegate;
      node->operands = {std::move(operand)};
      node->position = op_position;
      return NodePtr(node);
    }
    return ParsePrimary(depth + 1);
  }

  absl::StatusOr<NodePtr> ParsePrimary(int depth) {
    RETURN_IF_ERROR(CheckDepth(depth));
    SkipSpace();
    if (pos_ >= text_.size()) return SyntaxError("expected a number, a name or '(' at the end");
    const char c = text_[pos_];
    const size_t start = pos_;
    if (c == '(') {
      ++pos_;
      ASSIGN_OR_RETURN(NodePtr inner, ParseSum(depth + 1));
      if (!Accept(')')) return SyntaxError("expected ')'");
      return inner;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') return ParseNumber();
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      while (pos_ < text_.size() &&
             (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) {
        ++pos_;
      }
      auto node = std::make_shared<Node>();
      node->name = std::string(text_.substr(start, pos_ - start));
      node->position = start + 1;
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == '(') {
        ++pos_;
        node->kind = Node::Kind::kCall;
        RETURN_IF_ERROR(CheckFunction(*node));
        if (Accept(')')) {
          return ExprError(absl::StrCat(node->name, "() needs arguments"), text_, node->position);
        }
        while (true) {
          ASSIGN_OR_RETURN(NodePtr argument, ParseSum(depth + 1));
          node->operands.push_back(std::move(argument));
          if (Accept(')')) break;
          if (!Accept(',')) return SyntaxError("expected ',' or ')'");
        }
        RETURN_IF_ERROR(CheckArity(*node));
        return NodePtr(node);
      }
      node->kind = Node::Kind::kName;
      return NodePtr(node);
    }
    return SyntaxError(
        absl::StrCat("expected a number, a name or '(' but found '", std::string(1, c), "'"));
  }

  absl::Status CheckFunction(const Node& call) const {
    static const std::set<std::string> kIntegerFunctions = {"ceil_div", "min", "max"};
    static const std::set<std::string> kRealFunctions = {"ceil_div", "min", "max", "sqrt"};
    const auto& known = mode_ == ExprMode::kReal ? kRealFunctions : kIntegerFunctions;
    if (known.count(call.name) == 0) {
      return ExprError(absl::StrCat("unknown function '", call.name,
                                    "' (known: ", absl::StrJoin(known, ", "), ")"),
                       text_, call.position);
    }
    return absl::OkStatus();
  }

  absl::Status CheckArity(const Node& call) const {
    const size_t n = call.operands.size();
    bool ok = true;
    std::string expected;
    if (call.name == "ceil_div") {
      ok = n == 2;
      expected = "2 arguments";
    } else if (call.name == "sqrt") {
      ok = n == 1;
      expected = "1 argument";
    } else {  // min, max
      ok = n >= 2;
      expected = "at least 2 arguments";
    }
    if (!ok) {
      return ExprError(absl::StrCat(call.name, " takes ", expected, ", got ", n), text_,
                       call.position);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<NodePtr> ParseNumber() {
    const size_t start = pos_;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    bool is_real = false;
    if (pos_ < text_.size() && text_[pos_] == '.') {
      is_real = true;
      ++pos_;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      is_real = true;
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      const size_t exponent_start = pos_;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
      if (pos_ == exponent_start) return SyntaxError("malformed exponent");
    }
    // "128x" or "0x80": a number glued to letters is almost certainly a typo or a hex literal.
    if (pos_ < text_.size() &&
        (std::isalpha(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) {
      return SyntaxError("a number must not run into letters (hex literals are not supported)");
    }
    const std::string literal(text_.substr(start, pos_ - start));
    auto node = std::make_shared<Node>();
    node->kind = Node::Kind::kNumber;
    node->position = start + 1;
    if (is_real) {
      if (mode_ == ExprMode::kInteger) {
        return ExprError(
            absl::StrCat("fractional literal '", literal, "' in an integer expression"), text_,
            start + 1);
      }
      if (literal == ".") return ExprError("malformed number '.'", text_, start + 1);
      node->real_value = std::strtod(literal.c_str(), nullptr);
      if (!std::isfinite(node->real_value)) {
        return ExprError(absl::StrCat("literal '", literal, "' is out of range"), text_, start + 1);
      }
      return NodePtr(node);
    }
    int64_t value = 0;
    for (char digit : literal) {
      if (__builtin_mul_overflow(value, int64_t{10}, &value) ||
          __builtin_add_overflow(value, int64_t{digit - '0'}, &value)) {
        return ExprError(absl::StrCat("literal '", literal, "' does not fit in 64 bits"), text_,
                         start + 1);
      }
    }
    node->int_value = value;
    node->real_value = static_cast<double>(value);
    return NodePtr(node);
  }

  std::string_view text_;
  ExprMode mode_;
  size_t pos_ = 0;
};

void CollectNames(const Node& node, std::set<std::string>& names) {
  if (node.kind == Node::Kind::kName) names.insert(node.name);
  for (const auto& operand : node.operands) CollectNames(*operand, names);
}

std::string KnownNames(const std::map<std::string, int64_t>& values) {
  if (values.empty()) return "no names are defined here";
  std::vector<std::string> names;
  for (const auto& [name, value] : values) names.push_back(name);
  return absl::StrCat("known: ", absl::StrJoin(names, ", "));
}

class IntEvaluator {
 public:
  IntEvaluator(const std::string& text, const std::map<std::string, int64_t>& values)
      : text_(text), values_(values) {}

  absl::StatusOr<int64_t> Eval(const Node& node) const {
    switch (node.kind) {
      case Node::Kind::kNumber:
        return node.int_value;
      case Node::Kind::kName: {
        auto it = values_.find(node.name);
        if (it == values_.end()) {
          return ExprError(
              absl::StrCat("unknown name '", node.name, "' (", KnownNames(values_), ")"), text_,
              node.position);
        }
        return it->second;
      }
      case Node::Kind::kNegate: {
        ASSIGN_OR_RETURN(int64_t value, Eval(*node.operands[0]));
        if (value == std::numeric_limits<int64_t>::min()) return Overflow(node);
        return -value;
      }
      case Node::Kind::kCall:
        return EvalCall(node);
      default:
        break;
    }
    ASSIGN_OR_RETURN(int64_t lhs, Eval(*node.operands[0]));
    ASSIGN_OR_RETURN(int64_t rhs, Eval(*node.operands[1]));
    int64_t result = 0;
    switch (node.kind) {
      case Node::Kind::kAdd:
        if (__builtin_add_overflow(lhs, rhs, &result)) return Overflow(node);
        return result;
      case Node::Kind::kSubtract:
        if (__builtin_sub_overflow(lhs, rhs, &result)) return Overflow(node);
        return result;
      case Node::Kind::kMultiply:
        if (__builtin_mul_overflow(lhs, rhs, &result)) return Overflow(node);
        return result;
      case Node::Kind::kDivide:
      case Node::Kind::kModulo:
        if (rhs == 0) return ExprError("division by zero", text_, node.position);
        if (lhs == std::numeric_limits<int64_t>::min() && rhs == -1) return Overflow(node);
        return node.kind == Node::Kind::kDivide ? lhs / rhs : lhs % rhs;
      default:
        return absl::InternalError("unhandled expression node");
    }
  }

 private:
  absl::Status Overflow(const Node& node) const {
    return ExprError("integer overflow", text_, node.position);
  }

  absl::StatusOr<int64_t> EvalCall(const Node& node) const {
    std::vector<int64_t> args;
    for (const auto& operand : node.operands) {
      ASSIGN_OR_RETURN(int64_t value, Eval(*operand));
      args.push_back(value);
    }
    if (node.name == "min") return *std::min_element(args.begin(), args.end());
    if (node.name == "max") return *std::max_element(args.begin(), args.end());
    if (node.name == "ceil_div") {
      const int64_t a = args[0], b = args[1];
      if (b == 0) return ExprError("division by zero", text_, node.position);
      if (a == std::numeric_limits<int64_t>::min() && b == -1) return Overflow(node);
      int64_t quotient = a / b;
      // Truncation rounded toward zero; step up when the exact quotient is positive and inexact.
      if (a % b != 0 && ((a < 0) == (b < 0))) ++quotient;
      return quotient;
    }
    return ExprError(absl::StrCat("function '", node.name, "' is not an integer function"), text_,
                     node.position);
  }

  const std::string& text_;
  const std::map<std::string, int64_t>& values_;
};

class RealEvaluator {
 public:
  RealEvaluator(const std::string& text, const std::map<std::string, int64_t>& values)
      : text_(text), values_(values) {}

  absl::StatusOr<double> Eval(const Node& node) const {
    ASSIGN_OR_RETURN(double value, EvalUnchecked(node));
    if (!std::isfinite(value)) return ExprError("non-finite result", text_, node.position);
    return value;
  }

 private:
  absl::StatusOr<double> EvalUnchecked(const Node& node) const {
    switch (node.kind) {
      case Node::Kind::kNumber:
        return node.real_value;
      case Node::Kind::kName: {
        auto it = values_.find(node.name);
        if (it == values_.end()) {
          return ExprError(
              absl::StrCat("unknown name '", node.name, "' (", KnownNames(values_), ")"), text_,
              node.position);
        }
        return static_cast<double>(it->second);
      }
      case Node::Kind::kNegate: {
        ASSIGN_OR_RETURN(double value, Eval(*node.operands[0]));
        return -value;
      }
      case Node::Kind::kCall:
        return EvalCall(node);
      default:
        break;
    }
    ASSIGN_OR_RETURN(double lhs, Eval(*node.operands[0]));
    ASSIGN_OR_RETURN(double rhs, Eval(*node.operands[1]));
    switch (node.kind) {
      case Node::Kind::kAdd:
        return lhs + rhs;
      case Node::Kind::kSubtract:
        return lhs - rhs;
      case Node::Kind::kMultiply:
        return lhs * rhs;
      case Node::Kind::kDivide:
        if (rhs == 0) return ExprError("division by zero", text_, node.position);
        return lhs / rhs;
      default:
        return absl::InternalError("unhandled expression node");
    }
  }

  absl::StatusOr<double> EvalCall(const Node& node) const {
    std::vector<double> args;
    for (const auto& operand : node.operands) {
      ASSIGN_OR_RETURN(double value, Eval(*operand));
      args.push_back(value);
    }
    if (node.name == "min") return *std::min_element(args.begin(), args.end());
    if (node.name == "max") return *std::max_element(args.begin(), args.end());
    if (node.name == "sqrt") {
      if (args[0] < 0) return ExprError("sqrt of a negative value", text_, node.position);
      return std::sqrt(args[0]);
    }
    if (node.name == "ceil_div") {
      if (args[1] == 0) return ExprError("division by zero", text_, node.position);
      return std::ceil(args[0] / args[1]);
    }
    return ExprError(absl::StrCat("unknown function '", node.name, "'"), text_, node.position);
  }

  const std::string& text_;
  const std::map<std::string, int64_t>& values_;
};

}  // namespace

absl::StatusOr<Expr> Expr::Parse(std::string_view text, ExprMode mode) {
  if (text.size() > kMaxExprLength) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expression of ", text.size(), " characters exceeds the limit of ", kMaxExprLength));
  }
  bool blank = true;
  for (char c : text) {
    if (!std::isspace(static_cast<unsigned char>(c))) blank = false;
  }
  if (blank) return absl::InvalidArgumentError("empty expression");
  Parser parser(text, mode);
  ASSIGN_OR_RETURN(NodePtr root, parser.ParseAll());
  return Expr(std::string(text), mode, std::move(root));
}

absl::StatusOr<int64_t> Expr::EvaluateInt(const std::map<std::string, int64_t>& values) const {
  if (mode_ != ExprMode::kInteger) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text_, "' is a real expression; an integer is needed here"));
  }
  return IntEvaluator(text_, values).Eval(*root_);
}

absl::StatusOr<double> Expr::EvaluateReal(const std::map<std::string, int64_t>& values) const {
  return RealEvaluator(text_, values).Eval(*root_);
}

std::vector<std::string> Expr::Names() const {
  std::set<std::string> names;
  CollectNames(*root_, names);
  return {names.begin(), names.end()};
}

absl::StatusOr<int64_t> EvalIntExpr(std::string_view text,
                                    const std::map<std::string, int64_t>& values) {
  ASSIGN_OR_RETURN(Expr expr, Expr::Parse(text, ExprMode::kInteger));
  return expr.EvaluateInt(values);
}

absl::StatusOr<double> EvalRealExpr(std::string_view text,
                                    const std::map<std::string, int64_t>& values) {
  ASSIGN_OR_RETURN(Expr expr, Expr::Parse(text, ExprMode::kReal));
  return expr.EvaluateReal(values);
}

}  // namespace ptxbench
