#include "worker/engine/compile_artifact.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/sha256.h"
#include "worker/engine/gpu/protocol_codec.h"
#include "worker/engine/gpu/protocol_messages.h"

namespace ptxbench::engine {
namespace {

using nlohmann::json;

// A compile that ended this way says nothing about what the same inputs compile to: the
// compiler was stopped by this machine's limits, or died (compile.h CompileFailure).
bool FailureOfThisMachine(const std::string& failure) {
  return failure == "timeout" || failure == "out_of_memory" || failure == "compiler_crashed";
}

// The keys of the compile report that describe the run rather than the result
// (compile.cc ToJson(CompileResult)): wall times, peak memory and where the jail put the
// compilers differ between two runs of the same compile.
constexpr const char* kRunFigures[] = {"timings", "memory", "jail"};

// Up to `limit` paths at which `a` and `b` differ, two levels deep ("report.kernels").
void Differences(const json& a, const json& b, const std::string& prefix, int depth,
                 std::vector<std::string>* out, size_t limit) {
  if (out->size() >= limit || a == b) return;
  if (depth == 0 || !a.is_object() || !b.is_object()) {
    out->push_back(prefix.empty() ? "(the whole event)" : prefix);
    return;
  }
  std::vector<std::string> keys;
  for (const auto& [key, value] : a.items()) keys.push_back(key);
  for (const auto& [key, value] : b.items()) {
    if (!a.contains(key)) keys.push_back(key);
  }
  for (const std::string& key : keys) {
    const json missing;
    const json& x = a.contains(key) ? a[key] : missing;
    const json& y = b.contains(key) ? b[key] : missing;
    Differences(x, y, prefix.empty() ? key : absl::StrCat(prefix, ".", key), depth - 1, out, limit);
  }
}

}  // namespace

std::string ArtifactOutcomeName(ArtifactOutcome outcome) {
  switch (outcome) {
    case ArtifactOutcome::kNone:
      return "none";
    case ArtifactOutcome::kUsed:
      return "used";
    case ArtifactOutcome::kVerifiedMatch:
      return "verified_match";
    case ArtifactOutcome::kMismatch:
      return "mismatch";
    case ArtifactOutcome::kRefused:
      return "refused";
  }
  return "unknown";
}

absl::Status CheckArtifact(const CompileArtifact& artifact, const Toolchain& own) {
  const auto refuse = [](const std::string& why) {
    return absl::FailedPreconditionError(absl::StrCat("compile artifact refused: ", why));
  };
  // The bytes first: they are what would run.
  if (Sha256Hex(artifact.cubin) != artifact.cubin_sha256) {
    return refuse(absl::StrCat("its cubin (", artifact.cubin.size(), " bytes) does not hash to ",
                               "its cubin_sha256 ", artifact.cubin_sha256));
  }
  if (Sha256Hex(artifact.ptx) != artifact.ptx_sha256) {
    return refuse(absl::StrCat("its PTX (", artifact.ptx.size(), " bytes) does not hash to ",
                               "its ptx_sha256 ", artifact.ptx_sha256));
  }
  const json parsed = json::parse(artifact.compile_event_json, nullptr, /*allow_exceptions=*/false);
  absl::StatusOr<gpu::CompileEvent> event = gpu::FromJson<gpu::CompileEvent>(parsed);
  if (!event.ok()) {
    return refuse(absl::StrCat("its compile event is not one: ", event.status().message()));
  }
  if (event->outcome != gpu::CompileOutcome::kCompiled || !event->compiled.has_value()) {
    return refuse("its compile event is not of a successful compile");
  }
  // The event is what the compile stage reports and the later processes rely on (the timed
  // launches); it must describe these bytes and this toolchain.
  const gpu::ModuleIdentity& identity = event->compiled->identity;
  if (identity.cubin_sha256 != artifact.cubin_sha256 ||
      identity.ptx_sha256 != artifact.ptx_sha256 ||
      event->compiled->cubin_bytes != artifact.cubin.size()) {
    return refuse("its compile event describes another module than its bytes");
  }
  if (identity.nvrtc_version != artifact.nvrtc_version ||
      identity.ptxas_version != artifact.ptxas_version) {
    return refuse("its compile event names another toolchain than the artifact declares");
  }
  if (artifact.harness_version != own.harness_version) {
    return refuse(absl::StrCat("made by harness ", artifact.harness_version, ", this worker is ",
                               own.harness_version));
  }
  if (own.ptxas_version.empty()) {
    return refuse(absl::StrCat(
        "this worker has compiled nothing yet, so the toolchain it compiles with is not known "
        "and the artifact's (NVRTC ",
        artifact.nvrtc_version, ", ptxas ", artifact.ptxas_version,
        ") cannot be matched with it; compiled here"));
  }
  if (artifact.nvrtc_version != own.nvrtc_version || artifact.ptxas_version != own.ptxas_version) {
    return refuse(absl::StrCat("made by NVRTC ", artifact.nvrtc_version, " and ptxas ",
                               artifact.ptxas_version, ", this worker compiles with NVRTC ",
                               own.nvrtc_version, " and ptxas ", own.ptxas_version));
  }
  return absl::OkStatus();
}

bool ShouldVerify(double fraction, uint64_t draw) {
  if (!(fraction > 0)) return false;  // Also NaN.
  if (fraction >= 1) return true;
  // 2^64: draw / 2^64 is uniform in [0, 1).
  constexpr double kTwoTo64 = 18446744073709551616.0;
  return static_cast<double>(draw) / kTwoTo64 < fraction;
}

json ReproducibleCompile(const gpu::CompileEvent& event) {
  gpu::CompileEvent copy = event;
  copy.seconds = 0;
  if (copy.compiled.has_value()) copy.compiled->module = {};
  json j = gpu::ToJson(copy);
  j.erase("seconds");
  if (j.contains("report") && j["report"].is_object()) {
    for (const char* key : kRunFigures) j["report"].erase(key);
  }
  return j;
}

ArtifactUse CompareWithOwnCompile(const CompileArtifact& artifact, const gpu::CompileEvent& own) {
  if (own.outcome == gpu::CompileOutcome::kCompileError && FailureOfThisMachine(own.failure)) {
    return {ArtifactOutcome::kNone,
            absl::StrCat("not compared: this worker's own compile ended with ", own.failure,
                         ", which says nothing about what the source compiles to")};
  }
  // The toolchain this worker's compile ran with, which CheckArtifact matched against its
  // previous compile's: one upgraded in between makes the two incomparable, not different.
  std::string nvrtc = own.report.is_object() ? own.report.value("nvrtc_version", "") : "";
  std::string ptxas = own.report.is_object() ? own.report.value("ptxas_version", "") : "";
  if (own.compiled.has_value()) {
    nvrtc = own.compiled->identity.nvrtc_version;
    ptxas = own.compiled->identity.ptxas_version;
  }
  if ((!nvrtc.empty() && nvrtc != artifact.nvrtc_version) ||
      (!ptxas.empty() && ptxas != artifact.ptxas_version)) {
    return {ArtifactOutcome::kRefused,
            absl::StrCat("not comparable: this worker compiled with NVRTC ", nvrtc, " and ptxas ",
                         ptxas, ", the artifact was made by NVRTC ", artifact.nvrtc_version,
                         " and ptxas ", artifact.ptxas_version)};
  }
  absl::StatusOr<gpu::CompileEvent> theirs = gpu::FromJson<gpu::CompileEvent>(
      json::parse(artifact.compile_event_json, nullptr, /*allow_exceptions=*/false));
  if (!theirs.ok()) {
    return {ArtifactOutcome::kRefused,
            absl::StrCat("its compile event is not one: ", theirs.status().message())};
  }
  const json expected = ReproducibleCompile(own);
  const json got = ReproducibleCompile(*theirs);
  if (expected == got) {
    return {ArtifactOutcome::kVerifiedMatch,
            absl::StrCat("this worker compiled the source itself and got the same module (cubin ",
                         artifact.cubin_sha256.substr(0, 16), ", PTX ",
                         artifact.ptx_sha256.substr(0, 16), ") and compile event")};
  }
  std::vector<std::string> paths;
  Differences(expected, got, "", /*depth=*/3, &paths, /*limit=*/8);
  std::string own_result;
  if (own.outcome == gpu::CompileOutcome::kCompiled && own.compiled.has_value()) {
    own_result = absl::StrCat("compiled, cubin ", own.compiled->identity.cubin_sha256);
  } else if (own.outcome == gpu::CompileOutcome::kPlanInvalid) {
    own_result = "the launch plan is invalid";
  } else {
    own_result = absl::StrCat("compile error, ", own.failure);
  }
  return {ArtifactOutcome::kMismatch,
          absl::StrCat("this worker compiled the source itself (", own_result,
                       ") and the artifact (cubin ", artifact.cubin_sha256, ") differs in ",
                       absl::StrJoin(paths, ", "))};
}

}  // namespace ptxbench::engine
