#include "server/api/request_check.h"

#include <cstring>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/json_fields.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "server/api/validate.h"

namespace ptxbench::api {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::internal::WireFormatLite;

// protobuf's own default recursion limit.
constexpr int kMaxDepth = 100;

absl::Status CheckMessage(const google::protobuf::Descriptor* descriptor, std::string_view bytes,
                          const std::string& prefix, int depth) {
  if (depth > kMaxDepth) return absl::OkStatus();  // The parser refuses it.
  google::protobuf::io::CodedInputStream input(reinterpret_cast<const uint8_t*>(bytes.data()),
                                               static_cast<int>(bytes.size()));
  input.SetTotalBytesLimit(static_cast<int>(bytes.size()));
  std::map<int, int> seen;  // Occurrences per field number: the index of repeated fields.
  while (const uint32_t tag = input.ReadTag()) {
    const FieldDescriptor* field =
        descriptor->FindFieldByNumber(WireFormatLite::GetTagFieldNumber(tag));
    if (field == nullptr ||
        WireFormatLite::GetTagWireType(tag) != WireFormatLite::WIRETYPE_LENGTH_DELIMITED ||
        (field->type() != FieldDescriptor::TYPE_STRING &&
         field->type() != FieldDescriptor::TYPE_MESSAGE)) {
      if (!WireFormatLite::SkipField(&input, tag)) return absl::OkStatus();
      if (field != nullptr) ++seen[field->number()];
      continue;
    }
    uint32_t length = 0;
    const void* data = nullptr;
    int available = 0;
    if (!input.ReadVarint32(&length) || !input.GetDirectBufferPointer(&data, &available) ||
        static_cast<uint32_t>(available) < length) {
      return absl::OkStatus();  // Truncated: the parser refuses it.
    }
    const std::string_view value(static_cast<const char*>(data), length);
    input.Skip(static_cast<int>(length));
    std::string path = prefix.empty() ? field->name() : absl::StrCat(prefix, ".", field->name());
    const int index = seen[field->number()]++;
    if (field->is_repeated()) absl::StrAppend(&path, "[", index, "]");
    if (field->type() == FieldDescriptor::TYPE_MESSAGE) {
      if (absl::Status nested = CheckMessage(field->message_type(), value, path, depth + 1);
          !nested.ok()) {
        return nested;
      }
      continue;
    }
    if (std::memchr(value.data(), '\0', value.size()) != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", kNulByteRefusal));
    }
    if (auto offset = FindInvalidUtf8(std::string(value))) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": not valid UTF-8 (byte ", *offset, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckRequestText(const google::protobuf::Descriptor* descriptor,
                              std::string_view bytes) {
  return CheckMessage(descriptor, bytes, "", 0);
}

absl::Status CheckRequestText(const google::protobuf::Message& message) {
  return CheckRequestText(message.GetDescriptor(), message.SerializeAsString());
}

}  // namespace ptxbench::api
