#include "worker/engine/nvjitlink_linker.h"

#include <nvJitLink.h>

#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ptxbench {
namespace {

const char* ResultName(nvJitLinkResult result) {
  switch (result) {
    case NVJITLINK_SUCCESS:
      return "NVJITLINK_SUCCESS";
    case NVJITLINK_ERROR_UNRECOGNIZED_OPTION:
      return "NVJITLINK_ERROR_UNRECOGNIZED_OPTION";
    case NVJITLINK_ERROR_MISSING_ARCH:
      return "NVJITLINK_ERROR_MISSING_ARCH";
    case NVJITLINK_ERROR_INVALID_INPUT:
      return "NVJITLINK_ERROR_INVALID_INPUT";
    case NVJITLINK_ERROR_PTX_COMPILE:
      return "NVJITLINK_ERROR_PTX_COMPILE";
    case NVJITLINK_ERROR_NVVM_COMPILE:
      return "NVJITLINK_ERROR_NVVM_COMPILE";
    case NVJITLINK_ERROR_INTERNAL:
      return "NVJITLINK_ERROR_INTERNAL";
    case NVJITLINK_ERROR_THREADPOOL:
      return "NVJITLINK_ERROR_THREADPOOL";
    case NVJITLINK_ERROR_UNRECOGNIZED_INPUT:
      return "NVJITLINK_ERROR_UNRECOGNIZED_INPUT";
    case NVJITLINK_ERROR_FINALIZE:
      return "NVJITLINK_ERROR_FINALIZE";
    case NVJITLINK_ERROR_ARCH_MISMATCH:
      return "NVJITLINK_ERROR_ARCH_MISMATCH";
    default:
      return "NVJITLINK_ERROR (other)";
  }
}

// Results that describe the submitted PTX rather than the library or our use of it.
bool IsInputFailure(nvJitLinkResult result) {
  return result == NVJITLINK_ERROR_PTX_COMPILE || result == NVJITLINK_ERROR_INVALID_INPUT ||
         result == NVJITLINK_ERROR_UNRECOGNIZED_INPUT || result == NVJITLINK_ERROR_FINALIZE ||
         result == NVJITLINK_ERROR_ARCH_MISMATCH;
}

std::string ReadLog(nvJitLinkHandle handle, bool info) {
  size_t size = 0;
  const nvJitLinkResult sized =
      info ? nvJitLinkGetInfoLogSize(handle, &size) : nvJitLinkGetErrorLogSize(handle, &size);
  if (sized != NVJITLINK_SUCCESS || size <= 1) return "";
  std::string log(size, '\0');
  const nvJitLinkResult read =
      info ? nvJitLinkGetInfoLog(handle, log.data()) : nvJitLinkGetErrorLog(handle, log.data());
  if (read != NVJITLINK_SUCCESS) return "";
  while (!log.empty() && log.back() == '\0') log.pop_back();
  return log;
}

struct HandleDeleter {
  void operator()(nvJitLinkHandle handle) const { nvJitLinkDestroy(&handle); }
};
using LinkHandle = std::unique_ptr<std::remove_pointer_t<nvJitLinkHandle>, HandleDeleter>;

}  // namespace

absl::StatusOr<LinkOutput> LinkPtx(const std::string& ptx, const std::string& module_name,
                                   const std::string& arch,
                                   const std::vector<std::string>& options) {
  std::vector<std::string> all_options = {absl::StrCat("-arch=", arch)};
  all_options.insert(all_options.end(), options.begin(), options.end());
  std::vector<const char*> option_pointers;
  for (const std::string& option : all_options) option_pointers.push_back(option.c_str());

  nvJitLinkHandle raw = nullptr;
  nvJitLinkResult result =
      nvJitLinkCreate(&raw, static_cast<uint32_t>(option_pointers.size()), option_pointers.data());
  if (result != NVJITLINK_SUCCESS) {
    return absl::InternalError(absl::StrCat("nvJitLinkCreate failed: ", ResultName(result)));
  }
  LinkHandle handle(raw);

  LinkOutput output;
  // ptxas runs inside nvJitLinkAddData for PTX input: a PTX error surfaces there, and
  // nvJitLinkComplete afterwards still succeeds with an empty module (measured with CUDA 13.0),
  // so the AddData result decides.
  result = nvJitLinkAddData(handle.get(), NVJITLINK_INPUT_PTX, ptx.data(), ptx.size(),
                            module_name.c_str());
  if (result == NVJITLINK_SUCCESS) result = nvJitLinkComplete(handle.get());
  output.info_log = ReadLog(handle.get(), /*info=*/true);
  output.error_log = ReadLog(handle.get(), /*info=*/false);
  if (result != NVJITLINK_SUCCESS) {
    if (IsInputFailure(result)) return output;
    return absl::InternalError(
        absl::StrCat("nvJitLink failed: ", ResultName(result), "; log: ", output.error_log));
  }
  size_t cubin_size = 0;
  result = nvJitLinkGetLinkedCubinSize(handle.get(), &cubin_size);
  if (result != NVJITLINK_SUCCESS) {
    return absl::InternalError(
        absl::StrCat("nvJitLinkGetLinkedCubinSize failed: ", ResultName(result)));
  }
  output.cubin.resize(cubin_size);
  result = nvJitLinkGetLinkedCubin(handle.get(), output.cubin.data());
  if (result != NVJITLINK_SUCCESS) {
    return absl::InternalError(
        absl::StrCat("nvJitLinkGetLinkedCubin failed: ", ResultName(result)));
  }
  output.ok = true;
  return output;
}

std::string NvJitLinkVersion() {
  unsigned major = 0, minor = 0;
  if (nvJitLinkVersion(&major, &minor) != NVJITLINK_SUCCESS) return "unknown";
  return absl::StrCat(major, ".", minor);
}

}  // namespace ptxbench
