// CUPTI result -> absl::Status, shared by the two files that wrap CUPTI (cupti_sass.cc,
// cupti_counters.cc). Includes CUPTI's header, so it is included only by those .cc files, never
// by a header: CUPTI's types do not leak out of the wrappers.
#ifndef PTXBENCH_WORKER_ENGINE_GPU_CUPTI_STATUS_H_
#define PTXBENCH_WORKER_ENGINE_GPU_CUPTI_STATUS_H_

#include <cupti.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ptxbench::gpu {

inline std::string CuptiMessage(CUptiResult result) {
  const char* text = nullptr;
  cuptiGetResultString(result, &text);
  return text ? text : absl::StrCat("CUPTI error ", static_cast<int>(result));
}

// Results that mean "profiling cannot be done on this machine" (driver restriction, unsupported
// or virtualized device) are kUnavailable, so the caller can report the stage as not made;
// anything else is kInternal.
inline absl::Status CuptiStatus(CUptiResult result, const char* call, const char* file, int line) {
  std::string message = absl::StrCat(call, " at ", file, ":", line, ": ", CuptiMessage(result));
  switch (result) {
    case CUPTI_ERROR_NOT_SUPPORTED:
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_NOT_INITIALIZED:
    case CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
      return absl::UnavailableError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace ptxbench::gpu

#define PTXBENCH_CUPTI_TRY(call)                                                         \
  do {                                                                                   \
    const CUptiResult ptxbench_cupti_r_ = (call);                                        \
    if (ptxbench_cupti_r_ != CUPTI_SUCCESS) {                                            \
      return ::ptxbench::gpu::CuptiStatus(ptxbench_cupti_r_, #call, __FILE__, __LINE__); \
    }                                                                                    \
  } while (false)

#endif  // PTXBENCH_WORKER_ENGINE_GPU_CUPTI_STATUS_H_
