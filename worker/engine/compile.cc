#include "worker/engine/compile.h"

#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/sha256.h"
#include "common/status.h"
#include "worker/engine/nvjitlink_linker.h"
#include "worker/engine/nvrtc_program.h"
#include "worker/engine/ptx_scan.h"
#include "worker/engine/ptxas_info.h"
#include "worker/engine/source_guard.h"

namespace ptxbench {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

bool IsIdentifier(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

// Sorts the caller's options into NVRTC and nvJitLink options. Only options that cannot make a
// compiler read or write host files are accepted (no -I, -include, --pch-dir, -time=...).
absl::Status AddCallerOptions(const std::vector<std::string>& options,
                              std::vector<std::string>& nvrtc, std::vector<std::string>& link) {
  for (const std::string& option : options) {
    if (option.rfind("-maxrregcount=", 0) == 0) {
      const std::string value = option.substr(14);
      char* end = nullptr;
      const long registers = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || registers < 16 || registers > 255) {
        return absl::InvalidArgumentError(
            absl::StrCat("compile option '", option, "': the register count must be 16..255"));
      }
      nvrtc.push_back(option);
      link.push_back(option);
    } else if (option == "--use_fast_math" || option == "-use_fast_math") {
      nvrtc.push_back("--use_fast_math");
    } else if (option.rfind("-D", 0) == 0) {
      const std::string definition = option.substr(2);
      const std::string name = definition.substr(0, definition.find('='));
      if (!IsIdentifier(name) || definition.find('\n') != std::string::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("compile option '", option, "': expected -DNAME or -DNAME=VALUE"));
      }
      nvrtc.push_back(option);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "compile option '", option,
          "' is not allowed (allowed: -maxrregcount=N, --use_fast_math, -DNAME[=VALUE])"));
    }
  }
  return absl::OkStatus();
}

// ptxas prints "Compile time = 1.974 ms" per function; dropping those lines keeps the log of
// the same source byte-identical from run to run.
std::string WithoutTimingLines(const std::string& log) {
  std::string out;
  size_t start = 0;
  while (start < log.size()) {
    size_t end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    const std::string_view line(log.data() + start, end - start);
    if (line.find("Compile time =") == std::string_view::npos) {
      out.append(line);
      out.push_back('\n');
    }
    start = end + 1;
  }
  return out;
}

void AppendSection(std::string& log, const std::string& text) {
  if (text.empty()) return;
  if (!log.empty() && log.back() != '\n') log.push_back('\n');
  log.append(text);
}

bool IsPathChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ||
         c == '+' || c == '@' || c == '~' || c == '%';
}

std::string Hex(const std::string& bytes) { return Sha256Hex(bytes); }

}  // namespace

std::string CompileFailureName(CompileFailure failure) {
  switch (failure) {
    case CompileFailure::kNone:
      return "none";
    case CompileFailure::kSourceRejected:
      return "source_rejected";
    case CompileFailure::kFrontend:
      return "frontend";
    case CompileFailure::kAssembler:
      return "assembler";
    case CompileFailure::kTimeout:
      return "timeout";
    case CompileFailure::kOutputTooLarge:
      return "output_too_large";
  }
  return "unknown";
}

std::string ScrubHostPaths(const std::string& log) {
  std::string text = log;
  // Directories of this process that could appear even as a single component ("/root").
  for (const char* variable : {"HOME", "TMPDIR", "PWD"}) {
    const char* value = std::getenv(variable);
    if (value == nullptr || std::string_view(value).size() < 2 || value[0] != '/') continue;
    const std::string needle(value);
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at)) {
      text.replace(at, needle.size(), "<path>");
      at += 6;
    }
  }
  // Absolute paths of two or more components ("/usr/local/cuda/include/x.h"). A '/' right
  // after a word character or a closing bracket is a division in echoed code ("M/128/2").
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const bool may_start =
        text[i] == '/' &&
        (i == 0 || !(std::isalnum(static_cast<unsigned char>(text[i - 1])) || text[i - 1] == '_' ||
                     text[i - 1] == ')' || text[i - 1] == ']' || text[i - 1] == '.'));
    if (may_start) {
      size_t j = i;
      int components = 0;
      while (j < text.size() && text[j] == '/') {
        size_t k = j + 1;
        while (k < text.size() && IsPathChar(text[k])) ++k;
        if (k == j + 1) break;
        ++components;
        j = k;
      }
      if (components >= 2) {
        out.append("<path>");
        i = j;
        continue;
      }
    }
    out.push_back(text[i++]);
  }
  return out;
}

std::string TrimLog(const std::string& log, size_t max_bytes) {
  if (log.size() <= max_bytes) return log;
  size_t cut = log.rfind('\n', max_bytes);
  cut = cut == std::string::npos ? max_bytes : cut + 1;
  return absl::StrCat(log.substr(0, cut), "[log truncated: ", log.size() - cut, " more bytes]\n");
}

absl::StatusOr<CompileResult> Compile(const CompileRequest& request) {
  const Clock::time_point start = Clock::now();
  if (request.arch != "sm_90a" && request.arch != "sm_100a") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown arch '", request.arch, "' (known: sm_90a, sm_100a)"));
  }
  for (const auto& [name, content] : request.headers) RETURN_IF_ERROR(CheckHeaderName(name));

  CompileResult result;
  result.nvrtc_version = NvrtcVersion();
  result.nvjitlink_version = NvJitLinkVersion();
  // compute_90a asks NVRTC for PTX only (measured: NVRTC 13.0 accepts compute_90a and
  // compute_100a); nvJitLink then assembles it with the same path a raw PTX source takes.
  // -no-source-include: otherwise NVRTC also searches the process's working directory for
  // quoted includes (measured). Line info maps SASS back to source lines for CUPTI.
  result.nvrtc_options = {absl::StrCat("-arch=compute_", request.arch.substr(3)), "-std=c++17",
                          "--generate-line-info", "-default-device", "-no-source-include"};
  result.link_options = {"-lineinfo", "-verbose"};
  RETURN_IF_ERROR(AddCallerOptions(request.options, result.nvrtc_options, result.link_options));

  const bool is_cuda = request.language == SourceLanguage::kCuda;
  const std::string program_name = is_cuda ? "submission.cu" : "submission.ptx";
  auto reject = [&](CompileFailure failure, const std::string& message) {
    result.ok = false;
    result.failure = failure;
    result.log = TrimLog(message + "\n", request.limits.max_log_bytes);
    result.timings.total_seconds = SecondsSince(start);
    return result;
  };
  if (request.source.size() > request.limits.max_source_bytes) {
    return reject(CompileFailure::kSourceRejected,
                  absl::StrCat(program_name, ": the source is ", request.source.size(),
                               " bytes; the limit is ", request.limits.max_source_bytes));
  }
  if (const size_t nul = request.source.find('\0'); nul != std::string::npos) {
    return reject(CompileFailure::kSourceRejected,
                  absl::StrCat(program_name, ": the source contains a NUL byte at offset ", nul));
  }

  std::string log;
  if (is_cuda) {
    if (auto refusal = CheckIncludes(request.source, program_name, request.headers)) {
      return reject(CompileFailure::kSourceRejected, *refusal);
    }
    const Clock::time_point frontend_start = Clock::now();
    ASSIGN_OR_RETURN(NvrtcOutput nvrtc,
                     CompileToPtx(request.source, program_name, request.headers,
                                  result.nvrtc_options, request.limits.max_seconds));
    result.timings.frontend_seconds = SecondsSince(frontend_start);
    AppendSection(log, nvrtc.log);
    if (!nvrtc.ok) {
      if (nvrtc.timed_out) {
        AppendSection(log, absl::StrCat("compilation cancelled: it ran past the limit of ",
                                        request.limits.max_seconds, " s\n"));
      }
      result = reject(nvrtc.timed_out ? CompileFailure::kTimeout : CompileFailure::kFrontend, "");
      result.log = TrimLog(ScrubHostPaths(log), request.limits.max_log_bytes);
      result.timings.frontend_seconds = SecondsSince(frontend_start);
      return result;
    }
    result.ptx = std::move(nvrtc.ptx);
  } else {
    result.ptx = request.source;
  }

  const PtxScan scan = ScanPtx(result.ptx);
  result.kernels = scan.kernels;
  result.ptx_families = scan.family_counts;

  const Clock::time_point link_start = Clock::now();
  const std::string module_name = is_cuda ? "submission.ptx" : program_name;
  ASSIGN_OR_RETURN(LinkOutput link,
                   LinkPtx(result.ptx, module_name, request.arch, result.link_options));
  result.timings.link_seconds = SecondsSince(link_start);
  AppendSection(log, link.error_log);
  AppendSection(log, WithoutTimingLines(link.info_log));
  result.log = TrimLog(ScrubHostPaths(log), request.limits.max_log_bytes);
  result.timings.total_seconds = SecondsSince(start);

  const PtxasInfo info = ParsePtxasInfo(link.info_log);
  result.ptxas_diagnostics = info.diagnostics;
  if (!link.ok) {
    result.failure = CompileFailure::kAssembler;
    return result;
  }
  for (KernelSignature& kernel : result.kernels) {
    if (auto it = info.resources.find(kernel.name); it != info.resources.end()) {
      kernel.resources = it->second;
      kernel.has_resources = true;
    }
  }
  if (result.timings.total_seconds > request.limits.max_seconds) {
    result.failure = CompileFailure::kTimeout;
    AppendSection(result.log,
                  absl::StrCat("compilation took ", result.timings.total_seconds,
                               " s; the limit is ", request.limits.max_seconds, " s\n"));
    return result;
  }
  if (link.cubin.size() > request.limits.max_cubin_bytes) {
    result.failure = CompileFailure::kOutputTooLarge;
    AppendSection(result.log,
                  absl::StrCat("the compiled module is ", link.cubin.size(),
                               " bytes; the limit is ", request.limits.max_cubin_bytes, "\n"));
    return result;
  }
  result.cubin = std::move(link.cubin);
  result.ok = true;
  return result;
}

nlohmann::json ToJson(const CompileResult& result) {
  nlohmann::json kernels = nlohmann::json::array();
  for (const KernelSignature& kernel : result.kernels) kernels.push_back(ToJson(kernel));
  return nlohmann::json{
      {"ok", result.ok},
      {"failure", CompileFailureName(result.failure)},
      {"log", result.log},
      {"ptx_bytes", result.ptx.size()},
      {"ptx_sha256", Hex(result.ptx)},
      {"cubin_bytes", result.cubin.size()},
      {"cubin_sha256", result.cubin.empty() ? "" : Hex(result.cubin)},
      {"kernels", std::move(kernels)},
      {"ptxas_diagnostics", result.ptxas_diagnostics},
      {"ptx_families", result.ptx_families},
      {"timings",
       {{"frontend_seconds", result.timings.frontend_seconds},
        {"link_seconds", result.timings.link_seconds},
        {"total_seconds", result.timings.total_seconds}}},
      {"nvrtc_version", result.nvrtc_version},
      {"nvjitlink_version", result.nvjitlink_version},
      {"nvrtc_options", result.nvrtc_options},
      {"link_options", result.link_options},
  };
}

}  // namespace ptxbench
