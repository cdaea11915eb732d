#include "common/json_fields.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace ptxbench {
namespace {

using nlohmann::json;

json Parsed(const std::string& text, const JsonLimits& limits = {}) {
  auto result = ParseJson(text, limits);
  INFO(text);
  if (const auto* failure = std::get_if<JsonParseError>(&result)) {
    FAIL(failure->field << ": " << failure->message);
  }
  return std::get<json>(result);
}

JsonParseError Refused(const std::string& text, const JsonLimits& limits = {}) {
  auto result = ParseJson(text, limits);
  INFO(text);
  REQUIRE(std::holds_alternative<JsonParseError>(result));
  return std::get<JsonParseError>(result);
}

// "field: message" of a refusal that is not a syntax error.
std::string RefusedField(const std::string& text, const JsonLimits& limits = {}) {
  const JsonParseError error = Refused(text, limits);
  CHECK_FALSE(error.malformed);
  return FieldError{error.field, error.message}.ToString();
}

TEST_CASE("Numbers that do not fit are refused with their field, never thrown") {
  // nlohmann::json::parse throws out_of_range (not parse_error) for this one.
  CHECK(RefusedField(R"({"grid": [1e400]})") ==
        "grid[0]: number 1e400 is beyond the range of a double");
  CHECK(RefusedField(R"({"a": {"b": -1e400}})") ==
        "a.b: number -1e400 is beyond the range of a double");
  CHECK(RefusedField(R"({"x": 18446744073709551615})") ==
        "x: integer 18446744073709551615 is outside the int64 range");
  CHECK(RefusedField(R"({"x": 9223372036854775808})") ==
        "x: integer 9223372036854775808 is outside the int64 range");
  // Beyond uint64, nlohmann reads an integer literal as a rounded double.
  CHECK(RefusedField(R"([0, 18446744073709551616])") ==
        "[1]: integer 18446744073709551616 is outside the int64 range");
  CHECK(RefusedField(R"([-9223372036854775809])") ==
        "[0]: integer -9223372036854775809 is outside the int64 range");
  CHECK(RefusedField("[" + std::string(400, '9') + "]").rfind("[0]: integer 9999", 0) == 0);

  const json edges = Parsed("[9223372036854775807, -9223372036854775808, 0, 1e-400, 1.5e300]");
  CHECK(edges[0].get<int64_t>() == INT64_MAX);
  CHECK(edges[1].get<int64_t>() == INT64_MIN);
  for (const json& value : edges) CHECK_FALSE(value.is_number_unsigned());
  CHECK(edges[3].get<double>() == 0.0);  // Underflow rounds to zero; it is a finite number.

  // Negative zero: an integer -0 is 0; a real -0.0 keeps its sign (readers decide).
  const json zeros = Parsed("[-0, -0.0]");
  CHECK(zeros[0].is_number_integer());
  CHECK(zeros[0].get<int64_t>() == 0);
  CHECK(zeros[1].is_number_float());
  CHECK(std::signbit(zeros[1].get<double>()));

  // JSON has no NaN or infinity: they are syntax errors.
  for (const char* text : {"[NaN]", "[nan]", "[Infinity]", "[-Infinity]", "[inf]", "[0x10]", "[+1]",
                           "[01]", "[1.]", "[.5]"}) {
    const JsonParseError error = Refused(text);
    CHECK(error.malformed);
    CHECK(error.line == 1);
  }
}

TEST_CASE("Duplicate keys, NUL bytes, depth and size are refused at their field") {
  CHECK(RefusedField(R"({"a": 1, "a": 2})") == "a: duplicate key");
  CHECK(RefusedField(R"({"x": [{"k": 1}, {"k": 1, "k": 1}]})") == "x[1].k: duplicate key");
  CHECK(RefusedField(R"({"s": "a\u0000b"})") == "s: contains a NUL byte (\\u0000)");
  CHECK(RefusedField(R"({"a\u0000b": 1})") == "a\\u0000b: the key contains a NUL byte (\\u0000)");
  CHECK(RefusedField(R"(["ok", "\u0000"])") == "[1]: contains a NUL byte (\\u0000)");

  JsonLimits limits;
  limits.max_depth = 3;
  CHECK(Parsed("[[[1]]]", limits)[0][0][0] == 1);
  CHECK(RefusedField("[[[[1]]]]", limits) == "[0][0][0]: nested deeper than 3 levels");
  CHECK(RefusedField(R"({"a": {"b": {"c": {}}}})", limits) == "a.b.c: nested deeper than 3 levels");
  // The default depth bounds a hostile document long before any stack could.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  CHECK(Refused(deep).message == "nested deeper than 32 levels");

  limits = JsonLimits{};
  limits.max_entries = 3;
  CHECK(Parsed("[1, 2, 3]", limits).size() == 3);
  CHECK(RefusedField(R"({"list": [1, 2, 3, 4]})", limits) == "list: more than 3 entries");
  CHECK(RefusedField(R"({"o": {"a": 1, "b": 2, "c": 3, "d": 4}})", limits) ==
        "o: more than 3 entries");
  std::string huge = "[";
  for (int i = 0; i < 100000; ++i) huge += i == 0 ? "0" : ",0";
  huge += "]";
  CHECK(RefusedField(huge) == "more than 4096 entries");

  limits = JsonLimits{};
  limits.max_bytes = 10;
  CHECK(RefusedField("[1,2,3,4,5,6]", limits) == "13 bytes of JSON exceed the limit of 10");
}

TEST_CASE("Malformed text says where it stopped") {
  const JsonParseError error = Refused("{\n  \"a\": ,\n  \"b\": 2\n}");
  CHECK(error.malformed);
  CHECK(error.line == 2);
  CHECK(error.byte == 9);  // The ','.
  CHECK(error.message.rfind("syntax error while parsing value - unexpected ','", 0) == 0);
  CHECK(Refused("").malformed);
  CHECK(Refused("{} x").malformed);
  CHECK(Refused("{\"a\": 1,}").malformed);
  CHECK(Refused("[\"\\ud800\"]").malformed);  // A lone surrogate.
  // Bytes that are not UTF-8: the parser refuses them, and its message quotes none of them.
  const JsonParseError bytes = Refused("[\"\xff\xfe\"]");
  CHECK(bytes.malformed);
  CHECK_FALSE(FindInvalidUtf8(bytes.message).has_value());
  CHECK_FALSE(FindControlCharacter(bytes.message).has_value());
}

TEST_CASE("Field paths and quoted values are fit for a log line") {
  CHECK(FieldJoin("", "grid") == "grid");
  CHECK(FieldJoin("launches[0]", "grid") == "launches[0].grid");
  CHECK(FieldIndex("grid", 2) == "grid[2]");
  CHECK(FieldJoin("a", "line\nbreak") == "a.line\\nbreak");
  CHECK(FieldJoin("", std::string(1000, 'k')) == std::string(64, 'k') + "...");
  // Cut at a character boundary: 63 ASCII bytes and a 2-byte character do not fit in 64.
  CHECK(FieldJoin("", std::string(63, 'k') + "\xc3\xa9" + "z") == std::string(63, 'k') + "...");
  CHECK(QuoteForMessage("ok") == "'ok'");
  CHECK(QuoteForMessage("a\tb\x01\x7f\xff") == "'a\\tb\\u0001\\u007f\\xff'");
  CHECK(QuoteForMessage("Σ→😀") == "'Σ→😀'");

  const json document = Parsed(R"({"known": 1, "evil\nkey": 2})");
  std::optional<FieldError> unknown = CheckKeys(document, "root", {"known"});
  REQUIRE(unknown.has_value());
  CHECK(unknown->ToString() == "root.evil\\nkey: unknown key (allowed: known)");
  CHECK_FALSE(CheckKeys(document, "", {"known", "evil\nkey"}).has_value());

  CHECK(IsIdentifier("_a1"));
  CHECK_FALSE(IsIdentifier("1a"));
  CHECK_FALSE(IsIdentifier(""));
  CHECK_FALSE(IsIdentifier("a-b"));
  CHECK(FindControlCharacter("ab\ncd").value() == 2);
  CHECK_FALSE(FindControlCharacter("abc").has_value());
}

TEST_CASE("Field readers name the field and the expected type") {
  const json object = Parsed(
      R"({"s": "text", "empty": "", "i": 42, "r": 2.5, "b": true, "o": {}, "a": [1], "n": null})");
  CHECK(GetString(object, "p", "s").value() == "text");
  CHECK(GetString(object, "p", "missing").error().ToString() == "p.missing: missing");
  CHECK(GetString(object, "p", "missing", false).value().empty());
  CHECK(GetString(object, "p", "empty").error().ToString() == "p.empty: must not be empty");
  CHECK(GetString(object, "p", "empty", true, true).value().empty());
  CHECK(GetString(object, "p", "i").error().ToString() == "p.i: expected a string");
  CHECK(GetInt(object, "", "i").value() == 42);
  CHECK(GetInt(object, "", "r").error().ToString() == "r: expected an integer");
  CHECK_FALSE(GetInt(object, "", "nope", false).value().has_value());
  CHECK(GetNumber(object, "", "r").value() == 2.5);
  CHECK(GetNumber(object, "", "i").value() == 42.0);
  CHECK(GetNumber(object, "", "s").error().ToString() == "s: expected a number");
  CHECK(GetBool(object, "", "b", false).value());
  CHECK(GetBool(object, "", "nope", true).value());
  CHECK(GetBool(object, "", "n", true).error().ToString() == "n: expected true or false");
  CHECK(GetObject(object, "", "o").value() != nullptr);
  CHECK(GetObject(object, "", "a").error().ToString() == "a: expected an object");
  CHECK(GetArray(object, "", "a").value()->size() == 1);
  CHECK(GetArray(object, "", "o").error().ToString() == "o: expected an array");
  CHECK(GetArray(object, "", "nope", false).value() == nullptr);
  // A document built in code may hold an unsigned integer beyond int64.
  const json built = {{"u", uint64_t{1} << 63}};
  CHECK(GetInt(built, "", "u").error().ToString() == "u: expected an integer");

  CHECK(ReadExpressionText(json(128), "f").value() == "128");
  CHECK(ReadExpressionText(json(-7), "f").value() == "-7");
  CHECK(ReadExpressionText(json("M / 2"), "f").value() == "M / 2");
  CHECK(ReadExpressionText(json(uint64_t{1} << 63), "f").error().ToString() ==
        "f: integer 9223372036854775808 is outside the int64 range");
  for (const json& wrong : {json(1.5), json(true), json(nullptr), json::array(), json::object()}) {
    CHECK(ReadExpressionText(wrong, "f").error().ToString() ==
          "f: expected an expression (a string such as \"ceil_div(M, 128)\") or an integer");
  }
}

TEST_CASE("Choices read from one table") {
  enum class Mode { kOff, kOn };
  constexpr std::array<Choice<Mode>, 2> kModes = {{{"off", Mode::kOff}, {"on", Mode::kOn}}};
  CHECK(ParseChoice(kModes, "", "m").value() == Mode::kOff);  // Unset: the first.
  CHECK(ParseChoice(kModes, "on", "m").value() == Mode::kOn);
  CHECK(ParseChoice(kModes, "ON", "m").error().ToString() ==
        "m: 'ON' is not one of \"off\", \"on\"");
  CHECK(ParseChoice(kModes, "x\ny", "m").error().ToString() ==
        "m: 'x\\ny' is not one of \"off\", \"on\"");
  CHECK(ChoiceName(kModes, Mode::kOn) == "on");
}

// Whatever the bytes, ParseJson returns a value or an error whose text is printable UTF-8.
TEST_CASE("Random documents never throw and never print raw bytes") {
  std::mt19937 rng(20261201);
  const std::vector<std::string> fragments = {"{",
                                              "}",
                                              "[",
                                              "]",
                                              ",",
                                              ":",
                                              "\"k\"",
                                              "\"a\\u0000\"",
                                              "1",
                                              "-0",
                                              "1e400",
                                              "-1e-400",
                                              "1.5",
                                              "true",
                                              "null",
                                              "18446744073709551616",
                                              " ",
                                              "\n",
                                              "\"",
                                              "\\",
                                              "\xff",
                                              "\xc3",
                                              "NaN",
                                              "\"\\ud800\"",
                                              "\t",
                                              "/* */",
                                              "\x01",
                                              "\"\xe2\x82\xac\"",
                                              "9223372036854775808"};
  for (int i = 0; i < 20000; ++i) {
    std::string text;
    const int count = 1 + static_cast<int>(rng() % 40);
    for (int k = 0; k < count; ++k) text += fragments[rng() % fragments.size()];
    auto result = ParseJson(text);
    if (const auto* failure = std::get_if<JsonParseError>(&result)) {
      CHECK_FALSE(failure->message.empty());
      CHECK_FALSE(FindInvalidUtf8(failure->message).has_value());
      CHECK_FALSE(FindControlCharacter(failure->message).has_value());
      CHECK_FALSE(FindInvalidUtf8(failure->field).has_value());
      CHECK_FALSE(FindControlCharacter(failure->field).has_value());
    }
  }
}

}  // namespace
}  // namespace ptxbench
