// Text names of the API's enums as the command line and reports spell them ("sm_90a",
// "templates", "wrong_result"), converted in one place.
#ifndef PTXBENCH_CLIENT_ENUMS_H_
#define PTXBENCH_CLIENT_ENUMS_H_

#include <string>

#include "absl/status/statusor.h"
#include "ptxbench/v1/types.pb.h"

namespace ptxbench::client {

absl::StatusOr<v1::Arch> ParseArch(const std::string& text);
std::string ArchName(v1::Arch arch);
absl::StatusOr<v1::KnowledgeLevel> ParseKnowledgeLevel(const std::string& text);
std::string StageText(v1::Stage stage);
std::string VerdictClassText(v1::VerdictClass verdict_class);

}  // namespace ptxbench::client

#endif  // PTXBENCH_CLIENT_ENUMS_H_
