// compile: NVRTC + ptxas, then the launch plan validated for every workload. No GPU.
#include "common/sha256.h"
#include "common/status.h"
#include "worker/engine/compile.h"
#include "worker/evaluator/evaluator.h"
#include "worker/evaluator/modes.h"
#include "worker/evaluator/support.h"

namespace ptxbench::evaluator {

int CompileMode(const gpu::CompileRequest& request) {
  double t0 = Now();
  const gpu::Submission& submission = request.submission;
  auto task = LoadCheckedTask(submission.task);
  if (!task.ok()) return Fail(kExitInfrastructure, gpu::ErrorKind::kInfrastructure, task.status());
  auto headers = TemplateHeaders(*task, submission.arch);
  if (!headers.ok()) {
    return Fail(kExitInfrastructure, gpu::ErrorKind::kInfrastructure, headers.status());
  }
  CompileRequest compile;
  compile.source = submission.source;
  compile.language = submission.language == gpu::SubmissionLanguage::kPtx ? SourceLanguage::kPtx
                                                                          : SourceLanguage::kCuda;
  compile.arch = submission.arch;
  compile.headers = *headers;
  auto result = Compile(compile);
  if (!result.ok()) {
    return Fail(kExitInfrastructure, gpu::ErrorKind::kInfrastructure, result.status());
  }
  gpu::CompileEvent event;
  event.report = ToJson(*result);
  event.failure = CompileFailureName(result->failure);
  event.log = result->log;
  event.ptx_families = result->ptx_families;
  if (!result->ok) {
    event.outcome = gpu::CompileOutcome::kCompileError;
    event.seconds = Now() - t0;
    Emit(event);
    return kExitOk;
  }
  gpu::ModulePaths module{request.work_dir + "/module.cubin", request.work_dir + "/module.ptx"};
  if (auto s = gpu::WriteFileBytes(module.cubin_path, result->cubin); !s.ok()) {
    return Fail(kExitInfrastructure, gpu::ErrorKind::kInfrastructure, s);
  }
  if (auto s = gpu::WriteFileBytes(module.ptx_path, result->ptx); !s.ok()) {
    return Fail(kExitInfrastructure, gpu::ErrorKind::kInfrastructure, s);
  }
  auto plans = ResolvePlans(*task, submission, result->kernels);
  if (!plans.ok()) {
    event.outcome = gpu::CompileOutcome::kPlanInvalid;
    event.plan_error = std::string(plans.status().message());
    event.seconds = Now() - t0;
    Emit(event);
    return kExitOk;
  }
  gpu::CompiledModule compiled;
  compiled.module = module;
  compiled.cubin_bytes = result->cubin.size();
  for (const ResolvedLaunch& l : plans->at(task->TimedWorkload().name).launches) {
    compiled.launch_kernels.push_back(l.kernel);
    compiled.timed_launches.push_back({l.kernel,
                                       {l.grid.begin(), l.grid.end()},
                                       {l.block.begin(), l.block.end()},
                                       l.dynamic_shared_bytes});
  }
  compiled.identity = {Sha256Hex(result->cubin), Sha256Hex(result->ptx), result->nvrtc_version,
                       result->ptxas_version};
  event.outcome = gpu::CompileOutcome::kCompiled;
  event.compiled = std::move(compiled);
  event.seconds = Now() - t0;
  Emit(event);
  return kExitOk;
}

}  // namespace ptxbench::evaluator
