#include "common/json_fields.h"

#include <algorithm>
#include <cctype>
#include <exception>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ptxbench {
namespace {

using nlohmann::json;

// Keys and quoted values longer than this are cut in messages: enough to recognise a name, and
// a hostile 200 KB key does not make a 200 KB error message.
constexpr size_t kMaxQuotedBytes = 64;

// The length of the well-formed UTF-8 sequence at `i`, or 0 when there is none.
size_t Utf8SequenceLength(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) return 1;
  size_t length = 0;
  uint32_t min_value = 0;
  uint32_t value = 0;
  if ((lead & 0xE0) == 0xC0) {
    length = 2, min_value = 0x80, value = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, min_value = 0x800, value = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, min_value = 0x10000, value = lead & 0x07;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    value = (value << 6) | (byte(i + k) & 0x3F);
  }
  if (value < min_value || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) return 0;
  return length;
}

// `text` fit for a message: control characters escaped, bytes that are not UTF-8 written as
// \xNN, and at most `max_bytes` of the original (cut at a character boundary, "..." appended).
std::string Printable(std::string_view text, size_t max_bytes) {
  std::string out;
  size_t i = 0;
  while (i < text.size() && i < max_bytes) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const size_t length = Utf8SequenceLength(text, i);
    if (length == 0) {
      absl::StrAppend(&out, "\\x", absl::Hex(c, absl::kZeroPad2));
      ++i;
    } else if (c == '\n') {
      out += "\\n";
      ++i;
    } else if (c == '\t') {
      out += "\\t";
      ++i;
    } else if (c < 0x20 || c == 0x7f) {
      absl::StrAppend(&out, "\\u", absl::Hex(c, absl::kZeroPad4));
      ++i;
    } else if (c == '\\') {
      out += "\\\\";
      ++i;
    } else {
      if (i + length > max_bytes) break;
      out.append(text.substr(i, length));
      i += length;
    }
  }
  if (i < text.size()) out += "...";
  return out;
}

// The parser's own description of malformed text, without its "[json.exception.parse_error.101]
// parse error at line 1, column 5: " prefix (the caller says where, in its own terms).
std::string MalformedMessage(const json::exception& error) {
  std::string what = error.what();
  const size_t column = what.find("column");
  if (const size_t colon = what.find(": ", column == std::string::npos ? 0 : column);
      colon != std::string::npos) {
    what = what.substr(colon + 2);
  }
  return Printable(what, 512);
}

// Builds the document like nlohmann's DOM parser, and refuses what ParseJson promises to refuse
// at the moment it is read, with the path of the value being read.
class BoundedDomBuilder {
 public:
  BoundedDomBuilder(std::string_view text, const JsonLimits& limits)
      : text_(text), limits_(limits) {}

  // ---- nlohmann's SAX interface. ----
  bool null() { return Add(json(nullptr)); }
  bool boolean(bool value) { return Add(json(value)); }
  bool number_integer(json::number_integer_t value) { return Add(json(value)); }
  bool number_unsigned(json::number_unsigned_t value) {
    if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Refuse(absl::StrCat("integer ", value, " is outside the int64 range"));
    }
    return Add(json(static_cast<int64_t>(value)));
  }
  bool number_float(json::number_float_t value, const std::string& text) {
    // An integer literal beyond uint64 arrives here as a rounded double; it is an integer that
    // does not fit, not a real number.
    if (text.find_first_of(".eE") == std::string::npos) {
      return Refuse(absl::StrCat("integer ", Printable(text, kMaxQuotedBytes),
                                 " is outside the int64 range"));
    }
    return Add(json(value));
  }
  bool string(std::string& value) {
    if (value.find('\0') != std::string::npos) return Refuse(kNulByteRefusal);
    return Add(json(std::move(value)));
  }
  bool binary(json::binary_t& /*value*/) { return Refuse("binary values are not JSON"); }
  bool start_object(size_t /*elements*/) { return Open(json::object()); }
  bool key(std::string& key) {
    Frame& frame = frames_.back();
    json& object = *frame.container;
    if (key.find('\0') != std::string::npos) {
      frame.key = key;
      return Refuse(absl::StrCat("the key ", kNulByteRefusal));
    }
    if (object.contains(key)) {
      frame.key = key;
      return Refuse("duplicate key");
    }
    if (object.size() >= limits_.max_entries) {
      return Refuse(absl::StrCat("more than ", limits_.max_entries, " entries"), /*here=*/false);
    }
    frame.key = std::move(key);
    return true;
  }
  bool end_object() { return Close(); }
  bool start_array(size_t /*elements*/) { return Open(json::array()); }
  bool end_array() { return Close(); }
  bool parse_error(size_t position, const std::string& last_token, const json::exception& error) {
    if (error_.has_value()) return false;
    JsonParseError failure;
    failure.field = CurrentPath();
    // 406: a number beyond the range of a double ("1e400"). The text is JSON; the value is not
    // one this reader can hold.
    if (error.id == 406) {
      failure.message = last_token.find_first_of(".eE") == std::string::npos
                            ? absl::StrCat("integer ", Printable(last_token, kMaxQuotedBytes),
                                           " is outside the int64 range")
                            : absl::StrCat("number ", Printable(last_token, kMaxQuotedBytes),
                                           " is beyond the range of a double");
    } else {
      failure.malformed = true;
      failure.message = MalformedMessage(error);
      failure.byte = std::min(position, text_.size());
      // nlohmann counts the byte it stopped at as read; the offset points at it.
      if (failure.byte > 0) --failure.byte;
      failure.line =
          1 + static_cast<size_t>(std::count(
                  text_.begin(), text_.begin() + static_cast<ptrdiff_t>(failure.byte), '\n'));
    }
    error_ = std::move(failure);
    return false;
  }

  std::variant<json, JsonParseError> Result(bool parsed) && {
    if (error_.has_value()) return *std::move(error_);
    if (!parsed) return JsonParseError{"", "not valid JSON", true, 0, 1};
    return std::move(root_);
  }

  // Records an error of this reader (not of the parser) at the value being read.
  bool Refuse(std::string message, bool here = true) {
    if (!error_.has_value()) {
      error_ = JsonParseError{here ? CurrentPath() : ContainerPath(), std::move(message)};
    }
    return false;
  }

 private:
  struct Frame {
    json* container = nullptr;
    size_t next_index = 0;  // Arrays: the index of the value being read.
    std::string key;        // Objects: the key of the value being read.
  };

  // The path of the value being read now.
  std::string CurrentPath() const {
    std::string path;
    for (const Frame& frame : frames_) {
      path = frame.container->is_array() ? FieldIndex(path, frame.next_index)
                                         : FieldJoin(path, frame.key);
    }
    return path;
  }
  // The path of the innermost open container.
  std::string ContainerPath() const {
    std::string path;
    for (size_t i = 0; i + 1 < frames_.size(); ++i) {
      const Frame& frame = frames_[i];
      path = frame.container->is_array() ? FieldIndex(path, frame.next_index)
                                         : FieldJoin(path, frame.key);
    }
    return path;
  }

  // Places `value` where the document is being read; the container it lands in, or nullptr.
  json* Place(json value) {
    if (frames_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    Frame& frame = frames_.back();
    if (frame.container->is_array()) {
      if (frame.container->size() >= limits_.max_entries) {
        Refuse(absl::StrCat("more than ", limits_.max_entries, " entries"), /*here=*/false);
        return nullptr;
      }
      frame.container->push_back(std::move(value));
      return &frame.container->back();
    }
    json& slot = (*frame.container)[frame.key];
    slot = std::move(value);
    return &slot;
  }

  bool Add(json value) {
    if (Place(std::move(value)) == nullptr) return false;
    Advance();
    return true;
  }

  bool Open(json container) {
    if (frames_.size() >= static_cast<size_t>(limits_.max_depth)) {
      return Refuse(absl::StrCat("nested deeper than ", limits_.max_depth, " levels"));
    }
    json* placed = Place(std::move(container));
    if (placed == nullptr) return false;
    frames_.push_back(Frame{placed, 0, {}});
    return true;
  }

  bool Close() {
    frames_.pop_back();
    Advance();
    return true;
  }

  // After a value of an array is complete, the next one has the next index.
  void Advance() {
    if (!frames_.empty() && frames_.back().container->is_array()) ++frames_.back().next_index;
  }

  std::string_view text_;
  const JsonLimits& limits_;
  json root_;
  std::vector<Frame> frames_;
  std::optional<JsonParseError> error_;
};

}  // namespace

std::string FieldIndex(const std::string& parent, size_t index) {
  return absl::StrCat(parent, "[", index, "]");
}

std::string FieldJoin(const std::string& parent, std::string_view key) {
  const std::string printable = Printable(key, kMaxQuotedBytes);
  return parent.empty() ? printable : absl::StrCat(parent, ".", printable);
}

std::string QuoteForMessage(std::string_view text) {
  return absl::StrCat("'", Printable(text, kMaxQuotedBytes), "'");
}

std::optional<size_t> FindControlCharacter(std::string_view text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) return i;
  }
  return std::nullopt;
}

std::optional<size_t> FindInvalidUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const size_t length = Utf8SequenceLength(text, i);
    if (length == 0) return i;
    i += length;
  }
  return std::nullopt;
}

bool IsIdentifier(std::string_view text) {
  if (text.empty() || !(std::isalpha(static_cast<unsigned char>(text[0])) || text[0] == '_')) {
    return false;
  }
  return std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

std::variant<json, JsonParseError> ParseJson(std::string_view text, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return JsonParseError{
        "", absl::StrCat(text.size(), " bytes of JSON exceed the limit of ", limits.max_bytes)};
  }
  BoundedDomBuilder builder(text, limits);
  bool parsed = false;
  try {
    parsed = json::sax_parse(text.begin(), text.end(), &builder);
  } catch (const std::exception& e) {
    // The SAX interface reports the parser's errors through parse_error; what could still
    // escape is an allocation failure. The promise is "never throws", so it becomes an error.
    builder.Refuse(absl::StrCat("cannot be read: ", Printable(e.what(), 256)));
  }
  return std::move(builder).Result(parsed);
}

std::optional<FieldError> CheckKeys(const json& object, const std::string& field,
                                    const std::vector<std::string_view>& allowed) {
  for (const auto& [key, value] : object.items()) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      std::vector<std::string> sorted(allowed.begin(), allowed.end());
      std::sort(sorted.begin(), sorted.end());
      return FieldError{FieldJoin(field, key),
                        absl::StrCat("unknown key (allowed: ", absl::StrJoin(sorted, ", "), ")")};
    }
  }
  return std::nullopt;
}

FieldOr<const json*> GetMember(const json& object, const std::string& parent, std::string_view key,
                               bool required) {
  auto it = object.find(key);
  if (it == object.end()) {
    if (required) return FieldError{FieldJoin(parent, key), "missing"};
    return static_cast<const json*>(nullptr);
  }
  return &*it;
}

FieldOr<std::string> GetString(const json& object, const std::string& parent, std::string_view key,
                               bool required, bool allow_empty) {
  FieldOr<const json*> member = GetMember(object, parent, key, required);
  if (!member.ok()) return member.error();
  const json* value = member.value();
  if (value == nullptr) return std::string();
  if (!value->is_string()) return FieldError{FieldJoin(parent, key), "expected a string"};
  std::string text = value->get<std::string>();
  if (!allow_empty && text.empty()) return FieldError{FieldJoin(parent, key), "must not be empty"};
  return text;
}

FieldOr<std::optional<int64_t>> GetInt(const json& object, const std::string& parent,
                                       std::string_view key, bool required) {
  FieldOr<const json*> member = GetMember(object, parent, key, required);
  if (!member.ok()) return member.error();
  const json* value = member.value();
  if (value == nullptr) return std::optional<int64_t>();
  // ParseJson leaves no unsigned values; a document built in code might hold one.
  if (!value->is_number_integer() ||
      (value->is_number_unsigned() &&
       value->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))) {
    return FieldError{FieldJoin(parent, key), "expected an integer"};
  }
  return std::optional<int64_t>(value->get<int64_t>());
}

FieldOr<std::optional<double>> GetNumber(const json& object, const std::string& parent,
                                         std::string_view key, bool required) {
  FieldOr<const json*> member = GetMember(object, parent, key, required);
  if (!member.ok()) return member.error();
  const json* value = member.value();
  if (value == nullptr) return std::optional<double>();
  if (!value->is_number()) return FieldError{FieldJoin(parent, key), "expected a number"};
  return std::optional<double>(value->get<double>());
}

FieldOr<bool> GetBool(const json& object, const std::string& parent, std::string_view key,
                      bool default_value) {
  FieldOr<const json*> member = GetMember(object, parent, key, false);
  if (!member.ok()) return member.error();
  const json* value = member.value();
  if (value == nullptr) return default_value;
  if (!value->is_boolean()) return FieldError{FieldJoin(parent, key), "expected true or false"};
  return value->get<bool>();
}

FieldOr<const json*> GetObject(const json& object, const std::string& parent, std::string_view key,
                               bool required) {
  FieldOr<const json*> member = GetMember(object, parent, key, required);
  if (member.ok() && member.value() != nullptr && !member.value()->is_object()) {
    return FieldError{FieldJoin(parent, key), "expected an object"};
  }
  return member;
}

FieldOr<const json*> GetArray(const json& object, const std::string& parent, std::string_view key,
                              bool required) {
  FieldOr<const json*> member = GetMember(object, parent, key, required);
  if (member.ok() && member.value() != nullptr && !member.value()->is_array()) {
    return FieldError{FieldJoin(parent, key), "expected an array"};
  }
  return member;
}

FieldOr<std::string> ReadExpressionText(const json& value, const std::string& field) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_integer()) {
    if (value.is_number_unsigned()) {
      const uint64_t number = value.get<uint64_t>();
      if (number > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return FieldError{field, absl::StrCat("integer ", number, " is outside the int64 range")};
      }
    }
    return std::to_string(value.get<int64_t>());
  }
  return FieldError{field,
                    "expected an expression (a string such as \"ceil_div(M, 128)\") or an integer"};
}

}  // namespace ptxbench
