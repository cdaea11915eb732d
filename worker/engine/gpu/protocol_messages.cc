#include "worker/engine/gpu/protocol_messages.h"

#include <utility>

namespace ptxbench::gpu {
namespace {

template <typename Kind>
absl::StatusOr<Kind> KindOf(const nlohmann::json& message) {
  const std::string key(EnvelopeKey(Kind{}));
  if (!message.is_object() || !message.contains(key) || !message[key].is_string()) {
    return absl::InvalidArgumentError("not a protocol " + std::string(EnvelopeKind(Kind{})) +
                                      " (no '" + key + "' name): " + message.dump().substr(0, 200));
  }
  const std::string& name = message[key].get_ref<const std::string&>();
  std::optional<Kind> kind = EnumFromName<Kind>(name);
  if (!kind.has_value()) {
    return absl::InvalidArgumentError("unknown " + std::string(EnvelopeKind(Kind{})) + " '" + name +
                                      "' (known: " + codec::EnumNameList<Kind>() + ")");
  }
  return *kind;
}

}  // namespace

absl::StatusOr<CommandKind> CommandKindOf(const nlohmann::json& message) {
  return KindOf<CommandKind>(message);
}

absl::StatusOr<EventKind> EventKindOf(const nlohmann::json& message) {
  return KindOf<EventKind>(message);
}

nlohmann::json EncodeCustom(const CompareReport& report) { return ToJson(report); }

absl::Status DecodeCustom(const nlohmann::json& j, CompareReport* report) {
  absl::StatusOr<CompareReport> decoded = CompareReportFromJson(j);
  if (!decoded.ok()) return decoded.status();
  *report = std::move(*decoded);
  return absl::OkStatus();
}

SassFamilyMap UnavailableSassMap(std::string reason) {
  SassFamilyMap map;
  map.available = false;
  map.reason = std::move(reason);
  return map;
}

}  // namespace ptxbench::gpu
