#include "client/enums.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ptxbench::client {
namespace {

// "VERDICT_CLASS_WRONG_RESULT" with prefix "VERDICT_CLASS_" -> "wrong_result".
std::string StripPrefixLower(const std::string& name, const std::string& prefix) {
  std::string out = name;
  if (absl::StartsWith(out, prefix)) out = out.substr(prefix.size());
  return absl::AsciiStrToLower(out);
}

}  // namespace

absl::StatusOr<v1::Arch> ParseArch(const std::string& text) {
  if (text == "sm_90a") return v1::ARCH_SM_90A;
  if (text == "sm_100a") return v1::ARCH_SM_100A;
  return absl::InvalidArgumentError(
      absl::StrCat("--arch: '", text, "' is not an arch; use sm_90a or sm_100a"));
}

std::string ArchName(v1::Arch arch) {
  switch (arch) {
    case v1::ARCH_SM_90A:
      return "sm_90a";
    case v1::ARCH_SM_100A:
      return "sm_100a";
    default:
      return "unspecified";
  }
}

absl::StatusOr<v1::KnowledgeLevel> ParseKnowledgeLevel(const std::string& text) {
  if (text == "none") return v1::KNOWLEDGE_LEVEL_NONE;
  if (text == "templates") return v1::KNOWLEDGE_LEVEL_TEMPLATES;
  if (text == "contract") return v1::KNOWLEDGE_LEVEL_CONTRACT;
  return absl::InvalidArgumentError(absl::StrCat(
      "--knowledge: '", text, "' is not a knowledge level; use none, templates or contract"));
}

std::string StageText(v1::Stage stage) { return StripPrefixLower(v1::Stage_Name(stage), "STAGE_"); }

std::string VerdictClassText(v1::VerdictClass verdict_class) {
  return StripPrefixLower(v1::VerdictClass_Name(verdict_class), "VERDICT_CLASS_");
}

}  // namespace ptxbench::client
