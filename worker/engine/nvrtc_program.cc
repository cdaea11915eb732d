#include "worker/engine/nvrtc_program.h"

#include <dlfcn.h>
#include <nvrtc.h>

#include <atomic>
#include <chrono>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ptxbench {
namespace {

struct Deadline {
  std::chrono::steady_clock::time_point at;
  std::atomic<bool> expired{false};
};

// NVRTC calls this from its worker threads during compilation; returning 1 cancels. Once it
// has returned 1 it must keep doing so (nvrtc.h, nvrtcSetFlowCallback), hence the sticky flag.
int CancelAfterDeadline(void* payload, void* /*reserved*/) {
  auto* deadline = static_cast<Deadline*>(payload);
  if (deadline->expired.load(std::memory_order_relaxed)) return 1;
  if (std::chrono::steady_clock::now() >= deadline->at) {
    deadline->expired.store(true, std::memory_order_relaxed);
    return 1;
  }
  return 0;
}

absl::Status NvrtcError(const char* call, nvrtcResult result) {
  return absl::InternalError(
      absl::StrCat("NVRTC ", call, " failed: ", nvrtcGetErrorString(result)));
}

struct ProgramDeleter {
  void operator()(nvrtcProgram program) const { nvrtcDestroyProgram(&program); }
};
using ProgramHandle = std::unique_ptr<std::remove_pointer_t<nvrtcProgram>, ProgramDeleter>;

}  // namespace

absl::StatusOr<NvrtcOutput> CompileToPtx(const std::string& source, const std::string& program_name,
                                         const std::map<std::string, std::string>& headers,
                                         const std::vector<std::string>& options,
                                         double max_seconds) {
  std::vector<const char*> header_sources, header_names;
  header_sources.reserve(headers.size());
  header_names.reserve(headers.size());
  for (const auto& [name, content] : headers) {
    header_names.push_back(name.c_str());
    header_sources.push_back(content.c_str());
  }
  nvrtcProgram raw = nullptr;
  nvrtcResult result = nvrtcCreateProgram(&raw, source.c_str(), program_name.c_str(),
                                          static_cast<int>(headers.size()), header_sources.data(),
                                          header_names.data());
  if (result != NVRTC_SUCCESS) return NvrtcError("nvrtcCreateProgram", result);
  ProgramHandle program(raw);

  Deadline deadline;
  deadline.at = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double>(max_seconds));
  result = nvrtcSetFlowCallback(program.get(), &CancelAfterDeadline, &deadline);
  if (result != NVRTC_SUCCESS) return NvrtcError("nvrtcSetFlowCallback", result);

  std::vector<const char*> option_pointers;
  option_pointers.reserve(options.size());
  for (const std::string& option : options) option_pointers.push_back(option.c_str());
  const nvrtcResult compiled = nvrtcCompileProgram(
      program.get(), static_cast<int>(option_pointers.size()), option_pointers.data());

  NvrtcOutput output;
  size_t log_size = 0;
  if (nvrtcGetProgramLogSize(program.get(), &log_size) == NVRTC_SUCCESS && log_size > 1) {
    output.log.resize(log_size);
    if (nvrtcGetProgramLog(program.get(), output.log.data()) != NVRTC_SUCCESS) output.log.clear();
    while (!output.log.empty() && output.log.back() == '\0') output.log.pop_back();
  }
  switch (compiled) {
    case NVRTC_SUCCESS:
      break;
    case NVRTC_ERROR_COMPILATION:
      return output;
    case NVRTC_ERROR_CANCELLED:
      output.timed_out = true;
      return output;
    default:
      // Options are built by Compile(), so a rejected option is our bug; memory and builtins
      // failures belong to the machine. Neither says anything about the source.
      return absl::InternalError(
          absl::StrCat("NVRTC nvrtcCompileProgram failed: ", nvrtcGetErrorString(compiled),
                       "; log: ", output.log));
  }
  size_t ptx_size = 0;
  result = nvrtcGetPTXSize(program.get(), &ptx_size);
  if (result != NVRTC_SUCCESS) return NvrtcError("nvrtcGetPTXSize", result);
  output.ptx.resize(ptx_size);
  result = nvrtcGetPTX(program.get(), output.ptx.data());
  if (result != NVRTC_SUCCESS) return NvrtcError("nvrtcGetPTX", result);
  while (!output.ptx.empty() && output.ptx.back() == '\0') output.ptx.pop_back();
  output.ok = true;
  return output;
}

absl::Status PreloadNvrtcBuiltins() {
  static const absl::Status* const kLoaded = [] {
    int major = 0, minor = 0;
    if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) {
      return new absl::Status(absl::InternalError("nvrtcVersion failed"));
    }
    // NVRTC opens it by this name (strace of a compile, NVRTC 13.0); once loaded, its dlopen
    // of the same name returns this copy.
    const std::string name = absl::StrCat("libnvrtc-builtins.so.", major, ".", minor);
    if (dlopen(name.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
      return new absl::Status(
          absl::InternalError(absl::StrCat("cannot load NVRTC's builtins (", dlerror(), ")")));
    }
    return new absl::Status();
  }();
  return *kLoaded;
}

std::string NvrtcVersion() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "unknown";
  return absl::StrCat(major, ".", minor);
}

}  // namespace ptxbench
