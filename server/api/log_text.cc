#include "server/api/log_text.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ptxbench::api {
namespace {

// The length of the well-formed UTF-8 sequence at text[i] (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF), or 0 when the bytes there are not one.
size_t SequenceLength(std::string_view text, size_t i, uint32_t* code_point) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[i + k]); };
  const unsigned char lead = byte(0);
  size_t length = 0;
  uint32_t value = 0;
  uint32_t min = 0;
  if (lead < 0x80) {
    *code_point = lead;
    return 1;
  } else if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2, value = lead & 0x1f, min = 0x80;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3, value = lead & 0x0f, min = 0x800;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4, value = lead & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((byte(k) & 0xc0) != 0x80) return 0;
    value = (value << 6) | (byte(k) & 0x3f);
  }
  if (value < min || value > 0x10ffff || (value >= 0xd800 && value <= 0xdfff)) return 0;
  *code_point = value;
  return length;
}

}  // namespace

std::string LogQuoted(std::string_view text, size_t max_bytes) {
  const std::string_view shown = text.substr(0, max_bytes);
  std::string out = "\"";
  out.reserve(shown.size() + 2);
  for (size_t i = 0; i < shown.size();) {
    uint32_t code_point = 0;
    const size_t length = SequenceLength(shown, i, &code_point);
    if (length == 0) {
      absl::StrAppend(&out, absl::StrFormat("\\x%02x", static_cast<unsigned char>(shown[i])));
      ++i;
      continue;
    }
    switch (code_point) {
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      default:
        if (code_point < 0x20 || code_point == 0x7f) {
          absl::StrAppend(&out, absl::StrFormat("\\x%02x", code_point));
        } else if ((code_point >= 0x80 && code_point <= 0x9f) || code_point == 0x2028 ||
                   code_point == 0x2029) {
          absl::StrAppend(&out, absl::StrFormat("\\u%04x", code_point));
        } else {
          out.append(shown.substr(i, length));
        }
    }
    i += length;
  }
  if (text.size() > shown.size())
    absl::StrAppend(&out, "...(+", text.size() - shown.size(), " bytes)");
  out += "\"";
  return out;
}

}  // namespace ptxbench::api
