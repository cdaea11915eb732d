// Compiles a PTXBench submission for an architecture the way the worker does (NVRTC to PTX with
// the task's template headers supplied by name, then nvJitLink to a cubin) and reports what a
// reviewer needs without a GPU of that architecture: success, the ptxas resource lines, and
// which architecture-specific instruction families appear in the PTX.
//
// Why PTX and not SASS: no cuobjdump/nvdisasm on the development machines reads CUDA 13 sm_100a
// cubins, so the PTX is the most concrete evidence available there; ptxas accepting it for
// sm_100a proves the instructions are legal on that target.
//
// Usage: compile_check --arch=sm_100a [--header=path ...] [--ptx-out=file] source.cu
// Exit status: 0 compiled, 1 compile/link error, 2 usage or I/O error.
#include <nvJitLink.h>
#include <nvrtc.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

bool ReadFile(const std::string& path, std::string* content) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  *content = buffer.str();
  return true;
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Counts PTX instructions whose opcode starts with `prefix` (at the start of a statement, after
// optional predicate), so comments and labels do not count.
int CountOpcode(const std::string& ptx, const std::string& prefix) {
  int count = 0;
  std::istringstream lines(ptx);
  std::string line;
  while (std::getline(lines, line)) {
    size_t pos = line.find_first_not_of(" \t");
    if (pos == std::string::npos) continue;
    if (line[pos] == '@') {  // Predicated: skip "@p " / "@!p ".
      pos = line.find_first_of(" \t", pos);
      if (pos == std::string::npos) continue;
      pos = line.find_first_not_of(" \t", pos);
      if (pos == std::string::npos) continue;
    }
    if (line.compare(pos, prefix.size(), prefix) == 0) ++count;
  }
  return count;
}

}  // namespace

int main(int argc, char** argv) {
  std::string arch;
  std::string source_path;
  std::string ptx_out;
  std::vector<std::string> header_paths;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--arch=", 0) == 0) {
      arch = arg.substr(7);
    } else if (arg.rfind("--header=", 0) == 0) {
      header_paths.push_back(arg.substr(9));
    } else if (arg.rfind("--ptx-out=", 0) == 0) {
      ptx_out = arg.substr(10);
    } else {
      source_path = arg;
    }
  }
  if (arch.empty() || source_path.empty()) {
    std::fprintf(stderr, "usage: %s --arch=sm_100a [--header=path ...] [--ptx-out=f] src.cu\n",
                 argv[0]);
    return 2;
  }

  std::string source;
  if (!ReadFile(source_path, &source)) {
    std::fprintf(stderr, "cannot read %s\n", source_path.c_str());
    return 2;
  }
  // Headers are given to NVRTC by base name, as the worker does, so a submission's
  // #include "ptxbench_blackwell.cuh" resolves without any include path on disk.
  std::vector<std::string> header_names;
  std::vector<std::string> header_contents;
  for (const std::string& path : header_paths) {
    std::string content;
    if (!ReadFile(path, &content)) {
      std::fprintf(stderr, "cannot read header %s\n", path.c_str());
      return 2;
    }
    header_names.push_back(BaseName(path));
    header_contents.push_back(content);
  }
  std::vector<const char*> name_ptrs;
  std::vector<const char*> content_ptrs;
  for (size_t i = 0; i < header_names.size(); ++i) {
    name_ptrs.push_back(header_names[i].c_str());
    content_ptrs.push_back(header_contents[i].c_str());
  }

  nvrtcProgram program;
  if (nvrtcCreateProgram(&program, source.c_str(), BaseName(source_path).c_str(),
                         static_cast<int>(header_names.size()), content_ptrs.data(),
                         name_ptrs.data()) != NVRTC_SUCCESS) {
    std::fprintf(stderr, "nvrtcCreateProgram failed\n");
    return 2;
  }
  const std::string arch_option = "-arch=" + arch;
  const char* nvrtc_options[] = {arch_option.c_str(), "-std=c++17", "-lineinfo"};
  const nvrtcResult compiled = nvrtcCompileProgram(program, 3, nvrtc_options);
  size_t log_size = 0;
  nvrtcGetProgramLogSize(program, &log_size);
  std::string nvrtc_log(log_size, '\0');
  nvrtcGetProgramLog(program, nvrtc_log.data());
  std::printf("== NVRTC %s: %s\n", arch.c_str(), nvrtcGetErrorString(compiled));
  if (nvrtc_log.size() > 1) std::printf("%s\n", nvrtc_log.c_str());
  if (compiled != NVRTC_SUCCESS) return 1;

  size_t ptx_size = 0;
  nvrtcGetPTXSize(program, &ptx_size);
  std::string ptx(ptx_size, '\0');
  nvrtcGetPTX(program, ptx.data());
  nvrtcDestroyProgram(&program);
  if (!ptx_out.empty()) std::ofstream(ptx_out, std::ios::binary) << ptx.c_str();

  // The families PTXBench's target-instruction check cares about, by PTX opcode prefix.
  const std::vector<std::string> opcodes = {
      "tcgen05.alloc",     "tcgen05.dealloc", "tcgen05.relinquish_alloc_permit",
      "tcgen05.mma",       "tcgen05.commit",  "tcgen05.ld",
      "tcgen05.st",        "tcgen05.wait",    "tcgen05.fence",
      "tcgen05.cp",        "wgmma.",          "cp.async.bulk.tensor",
      "mbarrier.",         "elect.sync",      "setmaxnreg",
      "fence.proxy.async", "stmatrix",        "prefetch.tensormap"};
  std::printf("== PTX instructions (count of static occurrences)\n");
  for (const std::string& opcode : opcodes) {
    const int count = CountOpcode(ptx, opcode);
    if (count > 0) std::printf("  %-34s %d\n", opcode.c_str(), count);
  }

  nvJitLinkHandle linker;
  const char* link_options[] = {arch_option.c_str(), "-verbose", "-Xptxas=-v"};
  if (nvJitLinkCreate(&linker, 3, link_options) != NVJITLINK_SUCCESS) {
    std::fprintf(stderr, "nvJitLinkCreate failed for %s\n", arch.c_str());
    return 1;
  }
  const nvJitLinkResult added =
      nvJitLinkAddData(linker, NVJITLINK_INPUT_PTX, ptx.c_str(), ptx.size(), "submission.ptx");
  const nvJitLinkResult linked = added == NVJITLINK_SUCCESS ? nvJitLinkComplete(linker) : added;
  size_t info_size = 0;
  size_t error_size = 0;
  nvJitLinkGetInfoLogSize(linker, &info_size);
  nvJitLinkGetErrorLogSize(linker, &error_size);
  std::string info(info_size, '\0');
  std::string error(error_size, '\0');
  if (info_size > 0) nvJitLinkGetInfoLog(linker, info.data());
  if (error_size > 0) nvJitLinkGetErrorLog(linker, error.data());
  std::printf("== nvJitLink %s: %s\n", arch.c_str(),
              linked == NVJITLINK_SUCCESS ? "success" : "FAILED");
  if (info_size > 1) std::printf("%s\n", info.c_str());
  if (error_size > 1) std::printf("%s\n", error.c_str());
  size_t cubin_size = 0;
  if (linked == NVJITLINK_SUCCESS) nvJitLinkGetLinkedCubinSize(linker, &cubin_size);
  nvJitLinkDestroy(&linker);
  if (linked != NVJITLINK_SUCCESS) return 1;
  std::printf("== cubin: %zu bytes\n", cubin_size);
  return 0;
}
