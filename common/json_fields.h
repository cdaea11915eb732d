// Reading JSON documents that other parties write (task.json, launch plans): one parser that
// never throws and bounds its work, and field readers whose every refusal names the field by
// its path ("launches[1].args[2].tensor: expected a string").
//
// nlohmann::json::parse is not safe on hostile text by itself: a number beyond the range of a
// double ("1e400") throws out_of_range rather than parse_error (nlohmann 3.11.2, measured: a
// caller catching parse_error crashes), duplicate keys silently keep the last value, NUL bytes
// in strings pass through, and integers beyond int64 become unsigned or floating values that
// get<int64_t>() wraps. ParseJson refuses each of these with the field it is in.
#ifndef PTXBENCH_COMMON_JSON_FIELDS_H_
#define PTXBENCH_COMMON_JSON_FIELDS_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "nlohmann/json.hpp"

namespace ptxbench {

// A refused field: where and why.
struct FieldError {
  std::string field;    // "launches[1].args[2].tensor"; empty for the document as a whole.
  std::string message;  // "unknown tensor 'D' (tensors: A, B, C)".
  std::string ToString() const { return field.empty() ? message : field + ": " + message; }
};

// Either a value or a FieldError.
template <typename T>
class FieldOr {
 public:
  FieldOr(T value) : state_(std::move(value)) {}           // NOLINT: implicit like absl::StatusOr.
  FieldOr(FieldError error) : state_(std::move(error)) {}  // NOLINT
  bool ok() const { return std::holds_alternative<T>(state_); }
  const T& value() const& { return std::get<T>(state_); }
  T&& value() && { return std::get<T>(std::move(state_)); }
  const FieldError& error() const { return std::get<FieldError>(state_); }

 private:
  std::variant<T, FieldError> state_;
};

// Field paths. A key is written as it is when it is printable ASCII or UTF-8, with control
// characters escaped (\n, \u0001) and anything past 64 bytes cut at a character boundary: a
// key is chosen by whoever wrote the document, and a path is copied into logs and verdicts.
std::string FieldIndex(const std::string& parent, size_t index);         // "grid[1]"
std::string FieldJoin(const std::string& parent, std::string_view key);  // "launches[0].grid"

// A value of the document quoted for a message: '<text>', escaped and cut like a key.
std::string QuoteForMessage(std::string_view text);

// The byte offset of the first control character (below 0x20, or 0x7f), or nullopt.
std::optional<size_t> FindControlCharacter(std::string_view text);

// The byte offset of the first byte that is not part of well-formed UTF-8 (RFC 3629: no
// overlong forms, no surrogates, nothing above U+10FFFF), or nullopt when all of it is.
std::optional<size_t> FindInvalidUtf8(std::string_view text);

// The name rule of task and plan fields: [A-Za-z_][A-Za-z0-9_]*.
bool IsIdentifier(std::string_view text);

// ---- Parsing. ----

struct JsonLimits {
  size_t max_bytes = 4 << 20;
  // Containers nested at most this deep (the document itself is depth 1).
  int max_depth = 32;
  // Entries of one array or object.
  size_t max_entries = 4096;
};

struct JsonParseError {
  // The path of the value being read when parsing stopped ("" for the document).
  std::string field;
  // "duplicate key", "nested deeper than 8 levels", or, for text that is not JSON, the
  // parser's own description ("syntax error while parsing value - unexpected end of input").
  std::string message;
  // True when the text is not JSON at all (then `line` and `byte` say where), false when it is
  // JSON that this reader refuses (then `field` says where).
  bool malformed = false;
  size_t byte = 0;  // 0-based offset at which the parser stopped, for malformed text.
  size_t line = 1;  // 1-based line of that offset.
};

// What a string holding a NUL byte is told, after its field path: here and by the API's
// request check (server/api/request_check.cc), so that the API and the engine refuse a launch
// plan with the same words (tests/server/api/launch_plan_api_test).
inline constexpr char kNulByteRefusal[] = "contains a NUL byte (\\u0000)";

// Parses `text` as one JSON value. Every integer of the result is an int64 (is_number_integer()
// and never is_number_unsigned()); every string and key is free of NUL bytes; no object has a
// key twice. Never throws.
std::variant<nlohmann::json, JsonParseError> ParseJson(std::string_view text,
                                                       const JsonLimits& limits = {});

// ---- Field readers. `parent` is the path of `object`; errors name `parent.key`. ----

// "unknown key (allowed: a, b, c)" for the first key of `object` not in `allowed`.
std::optional<FieldError> CheckKeys(const nlohmann::json& object, const std::string& field,
                                    const std::vector<std::string_view>& allowed);

// The member `key` of `object`, nullptr when absent and not required ("missing" when required).
FieldOr<const nlohmann::json*> GetMember(const nlohmann::json& object, const std::string& parent,
                                         std::string_view key, bool required);

// A string member; "" when absent and not required. Empty strings are refused unless allowed.
FieldOr<std::string> GetString(const nlohmann::json& object, const std::string& parent,
                               std::string_view key, bool required = true,
                               bool allow_empty = false);
// An integer member (JSON numbers without a fraction or exponent, within int64).
FieldOr<std::optional<int64_t>> GetInt(const nlohmann::json& object, const std::string& parent,
                                       std::string_view key, bool required = true);
// A number member, integer or not.
FieldOr<std::optional<double>> GetNumber(const nlohmann::json& object, const std::string& parent,
                                         std::string_view key, bool required = true);
FieldOr<bool> GetBool(const nlohmann::json& object, const std::string& parent, std::string_view key,
                      bool default_value);
// An object or array member; nullptr when absent and not required.
FieldOr<const nlohmann::json*> GetObject(const nlohmann::json& object, const std::string& parent,
                                         std::string_view key, bool required = true);
FieldOr<const nlohmann::json*> GetArray(const nlohmann::json& object, const std::string& parent,
                                        std::string_view key, bool required = true);

// An expression written as a JSON string, or as a JSON integer ([128] and ["128"] are the same
// expression). `field` is the value's own path.
FieldOr<std::string> ReadExpressionText(const nlohmann::json& value, const std::string& field);

// ---- Choices: an enumeration read from one table of names. ----

template <typename Enum>
struct Choice {
  std::string_view name;
  Enum value;
};

// "\"none\", \"32B\", \"64B\"".
template <typename Enum, size_t N>
std::string ChoiceNames(const std::array<Choice<Enum>, N>& choices) {
  std::string names;
  for (const Choice<Enum>& choice : choices) {
    if (!names.empty()) names += ", ";
    names += "\"";
    names += choice.name;
    names += "\"";
  }
  return names;
}

template <typename Enum, size_t N>
std::optional<Enum> FindChoice(const std::array<Choice<Enum>, N>& choices, std::string_view name) {
  for (const Choice<Enum>& choice : choices) {
    if (choice.name == name) return choice.value;
  }
  return std::nullopt;
}

template <typename Enum, size_t N>
std::string_view ChoiceName(const std::array<Choice<Enum>, N>& choices, Enum value) {
  for (const Choice<Enum>& choice : choices) {
    if (choice.value == value) return choice.name;
  }
  return "unknown";
}

// Reads `text` as one of `choices`; an empty text is the first choice (proto3's unset string).
template <typename Enum, size_t N>
FieldOr<Enum> ParseChoice(const std::array<Choice<Enum>, N>& choices, std::string_view text,
                          const std::string& field) {
  if (text.empty()) return choices.front().value;
  if (std::optional<Enum> value = FindChoice(choices, text)) return *value;
  return FieldError{field, QuoteForMessage(text) + " is not one of " + ChoiceNames(choices)};
}

}  // namespace ptxbench

#endif  // PTXBENCH_COMMON_JSON_FIELDS_H_
