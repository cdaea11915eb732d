// health: the harness's tiny known kernel on the device: is the GPU usable?
#include "worker/evaluator/evaluator.h"
#include "worker/evaluator/modes.h"
#include "worker/evaluator/support.h"

namespace ptxbench::evaluator {

int HealthMode(const gpu::HealthRequest& request) {
  double t0 = Now();
  auto g = OpenGpu(request.gpu);
  if (!g.ok()) return Fail(kExitInfrastructure, gpu::ErrorKind::kUnavailable, g.status());
  if (auto s = g->builtins->HealthCheck(); !s.ok()) {
    return Fail(kExitInfrastructure, gpu::ErrorKind::kUnhealthy, s);
  }
  Emit(gpu::HealthEvent{gpu::Describe(g->device), Now() - t0});
  return kExitOk;
}

}  // namespace ptxbench::evaluator
