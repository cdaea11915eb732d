#include "client/enums.h"

#include "absl/strings/str_cat.h"
#include "proto/wire_names.h"

namespace ptxbench::client {

absl::StatusOr<v1::Arch> ParseArch(const std::string& text) {
  absl::StatusOr<v1::Arch> arch = wire::ParseArch(text);
  if (arch.ok()) return arch;
  return absl::InvalidArgumentError(
      absl::StrCat("--arch: '", text, "' is not an arch; use sm_90a or sm_100a"));
}

std::string ArchName(v1::Arch arch) {
  const std::string name = wire::ArchName(arch);
  return name.empty() ? "unspecified" : name;
}

absl::StatusOr<v1::KnowledgeLevel> ParseKnowledgeLevel(const std::string& text) {
  absl::StatusOr<v1::KnowledgeLevel> level = wire::ParseKnowledgeLevel(text);
  if (level.ok()) return level;
  return absl::InvalidArgumentError(absl::StrCat(
      "--knowledge: '", text, "' is not a knowledge level; use none, templates or contract"));
}

std::string StageText(v1::Stage stage) { return wire::StageName(stage); }

std::string VerdictClassText(v1::VerdictClass verdict_class) {
  return wire::VerdictClassName(verdict_class);
}

}  // namespace ptxbench::client
