#include "worker/evaluator/evaluator.h"

#include <cstdio>
#include <string>

#include "common/build_info.h"
#include "worker/evaluator/modes.h"
#include "worker/evaluator/support.h"

namespace ptxbench::evaluator {
namespace {

template <typename Request>
int RunWithRequest(int argc, char** argv, int (*mode)(const Request&)) {
  absl::StatusOr<Request> request = ReadRequest<Request>(argc, argv);
  if (!request.ok()) {
    return Fail(kExitInfrastructure, gpu::ErrorKind::kInfrastructure, request.status());
  }
  return mode(*request);
}

}  // namespace

int Main(int argc, char** argv) {
  constexpr char kUsage[] =
      "usage: ptxbench-evaluator compile|sassmap|reference|candidate|instrument|replay|health "
      "--request FILE\n"
      "       ptxbench-evaluator --version\n"
      "Started by ptxbench-worker (worker/engine/evaluate.cc), one process per mode; by hand\n"
      "only `health` (GPU 0) is useful.\n";
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return kExitInfrastructure;
  }
  const std::string first = argv[1];
  if (first == "--version" || first == "version") {
    std::printf("%s\n", VersionLine("ptxbench-evaluator").c_str());
    return 0;
  }
  if (first == "--help" || first == "-h" || first == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const std::optional<gpu::EvaluatorMode> mode = gpu::EnumFromName<gpu::EvaluatorMode>(argv[1]);
  if (!mode.has_value()) {
    return Fail(kExitInfrastructure, gpu::ErrorKind::kInfrastructure,
                absl::InvalidArgumentError(std::string("unknown mode ") + argv[1]));
  }
  switch (*mode) {
    case gpu::EvaluatorMode::kCompile:
      return RunWithRequest(argc, argv, CompileMode);
    case gpu::EvaluatorMode::kSassMap:
      return RunWithRequest(argc, argv, SassMapMode);
    case gpu::EvaluatorMode::kReference:
      return RunWithRequest(argc, argv, ReferenceMode);
    case gpu::EvaluatorMode::kCandidate:
      return RunWithRequest(argc, argv, CandidateMode);
    case gpu::EvaluatorMode::kInstrument:
      return RunWithRequest(argc, argv, InstrumentMode);
    case gpu::EvaluatorMode::kReplay:
      return RunWithRequest(argc, argv, ReplayMode);
    case gpu::EvaluatorMode::kHealth:
      // By hand, without a request: GPU 0.
      if (argc == 2) return HealthMode(gpu::HealthRequest{});
      return RunWithRequest(argc, argv, HealthMode);
  }
  return kExitInfrastructure;
}

}  // namespace ptxbench::evaluator
