#include "worker/engine/gpu/protocol_codec.h"

#include "worker/engine/gpu/protocol.h"

namespace ptxbench::gpu::codec {

// Abseil 20220623's string_view is not std::string_view: plain std::string concatenation here.

absl::StatusOr<uint64_t> ParseDecimalU64(const nlohmann::json& value) { return ParseU64(value); }

absl::Status Invalid(std::string_view where, std::string_view what) {
  return absl::InvalidArgumentError(std::string(where) + ": " + std::string(what));
}

std::string Expected(std::string_view expected, const nlohmann::json& value) {
  return "expected " + std::string(expected) + ", got " + value.type_name();
}

std::string JoinPath(std::string_view path, std::string_view key) {
  // The message name ("trial event") is followed by a colon, nested keys by a dot.
  const char* separator = path.find(':') == std::string_view::npos ? ": " : ".";
  return std::string(path) + separator + std::string(key);
}

std::string IndexPath(std::string_view path, size_t index) {
  return std::string(path) + "[" + std::to_string(index) + "]";
}

absl::Status Reader::Finish(std::string_view envelope_key) {
  if (!status_.ok()) return status_;
  for (auto it = object_.begin(); it != object_.end(); ++it) {
    if (it.key() == envelope_key || visited_.count(it.key())) continue;
    return Invalid(where_, "unexpected key '" + it.key() + "'");
  }
  return absl::OkStatus();
}

void Reader::Decimal(std::string_view key, std::optional<uint64_t>* value, bool required) {
  if (!status_.ok()) return;
  visited_.insert(std::string(key));
  auto it = object_.find(std::string(key));
  if (it == object_.end() || (!required && it->is_null())) {
    if (required) status_ = Invalid(where_, "missing key '" + std::string(key) + "'");
    value->reset();
    return;
  }
  absl::StatusOr<uint64_t> parsed = ParseDecimalU64(*it);
  if (!parsed.ok()) {
    status_ = Invalid(JoinPath(where_, key), std::string(parsed.status().message()));
    return;
  }
  *value = *parsed;
}

}  // namespace ptxbench::gpu::codec
