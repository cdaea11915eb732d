// sassmap: the static SASS map of the target families (worker/engine/sass_families.h), in a
// process of its own, sandboxed like compile (nvdisasm reads a cubin built from untrusted
// source), started beside the correctness stage. No GPU.
#include "worker/engine/sass_families.h"
#include "worker/evaluator/evaluator.h"
#include "worker/evaluator/modes.h"
#include "worker/evaluator/support.h"

namespace ptxbench::evaluator {

int SassMapMode(const gpu::SassMapRequest& request) {
  double t0 = Now();
  auto cubin = gpu::ReadFileBytes(request.module.cubin_path);
  auto ptx = gpu::ReadFileBytes(request.module.ptx_path);
  if (!cubin.ok()) {
    return Fail(kExitInfrastructure, gpu::ErrorKind::kInfrastructure, cubin.status());
  }
  if (!ptx.ok()) return Fail(kExitInfrastructure, gpu::ErrorKind::kInfrastructure, ptx.status());
  gpu::SassMapEvent event{StaticFamilyMap(request.arch, request.module.cubin_path, *cubin, *ptx)};
  event.sass.seconds = Now() - t0;
  Emit(event);
  return kExitOk;
}

}  // namespace ptxbench::evaluator
