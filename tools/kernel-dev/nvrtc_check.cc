// nvrtc_check: compiles one PTXBench submission the way the engine will (NVRTC, no host include
// directories, the task's template header handed to NVRTC as a named header), prints the
// compile log with ptxas's resource lines, and writes the cubin.
//
// usage: nvrtc_check [--arch sm_90a] [--header NAME=PATH]... [-DNAME=VALUE]... [--out X.cubin]
//                    SOURCE.cu
// Exit status: 0 compiled, 1 refused by NVRTC or ptxas, 2 usage or I/O error.
//
// A developer tool for tools/kernel-dev only; the engine's compile stage is worker/engine.
#include <nvrtc.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream text;
  text << in.rdbuf();
  *out = text.str();
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string arch = "sm_90a";
  std::string out_path;
  std::string source_path;
  std::vector<std::string> header_names;
  std::vector<std::string> header_texts;
  std::vector<std::string> defines;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--arch" && i + 1 < argc) {
      arch = argv[++i];
    } else if (arg == "--out" && i + 1 < argc) {
      out_path = argv[++i];
    } else if (arg == "--header" && i + 1 < argc) {
      const std::string spec = argv[++i];
      const size_t eq = spec.find('=');
      if (eq == std::string::npos) {
        std::fprintf(stderr, "--header wants NAME=PATH\n");
        return 2;
      }
      std::string text;
      if (!ReadFile(spec.substr(eq + 1), &text)) {
        std::fprintf(stderr, "cannot read %s\n", spec.substr(eq + 1).c_str());
        return 2;
      }
      header_names.push_back(spec.substr(0, eq));
      header_texts.push_back(text);
    } else if (arg.rfind("-D", 0) == 0) {
      defines.push_back(arg);
    } else {
      source_path = arg;
    }
  }
  std::string source;
  if (source_path.empty() || !ReadFile(source_path, &source)) {
    std::fprintf(stderr, "usage: nvrtc_check [--header NAME=PATH] [--out X.cubin] SOURCE.cu\n");
    return 2;
  }
  std::vector<const char*> names;
  std::vector<const char*> texts;
  for (size_t i = 0; i < header_names.size(); ++i) {
    names.push_back(header_names[i].c_str());
    texts.push_back(header_texts[i].c_str());
  }
  nvrtcProgram program;
  if (nvrtcCreateProgram(&program, source.c_str(), "submission.cu", static_cast<int>(names.size()),
                         texts.data(), names.data()) != NVRTC_SUCCESS) {
    std::fprintf(stderr, "nvrtcCreateProgram failed\n");
    return 2;
  }
  std::vector<std::string> options = {"-arch=" + arch, "-std=c++17", "-lineinfo",
                                      "--ptxas-options=-v"};
  for (const std::string& d : defines) options.push_back(d);
  std::vector<const char*> option_ptrs;
  for (const std::string& o : options) option_ptrs.push_back(o.c_str());
  const nvrtcResult result =
      nvrtcCompileProgram(program, static_cast<int>(option_ptrs.size()), option_ptrs.data());
  size_t log_size = 0;
  nvrtcGetProgramLogSize(program, &log_size);
  std::string log(log_size, '\0');
  nvrtcGetProgramLog(program, log.data());
  std::printf("%s: %s\n%s\n", source_path.c_str(), nvrtcGetErrorString(result), log.c_str());
  if (result != NVRTC_SUCCESS) {
    nvrtcDestroyProgram(&program);
    return 1;
  }
  size_t cubin_size = 0;
  if (nvrtcGetCUBINSize(program, &cubin_size) != NVRTC_SUCCESS || cubin_size == 0) {
    std::fprintf(stderr, "no cubin (is --arch a real sm_ target?)\n");
    nvrtcDestroyProgram(&program);
    return 1;
  }
  std::string cubin(cubin_size, '\0');
  nvrtcGetCUBIN(program, cubin.data());
  nvrtcDestroyProgram(&program);
  if (!out_path.empty()) {
    std::ofstream out(out_path, std::ios::binary);
    out.write(cubin.data(), static_cast<std::streamsize>(cubin.size()));
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", out_path.c_str());
      return 2;
    }
  }
  std::printf("cubin %zu bytes%s%s\n", cubin_size, out_path.empty() ? "" : " -> ",
              out_path.c_str());
  return 0;
}
