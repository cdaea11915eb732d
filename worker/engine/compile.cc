#include "worker/engine/compile.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "common/status.h"
#include "worker/engine/nvrtc_program.h"
#include "worker/engine/ptx_scan.h"
#include "worker/engine/ptxas_info.h"
#include "worker/engine/ptxas_runner.h"
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

// Sorts the caller's options into NVRTC and ptxas options. Only options that cannot make a
// compiler read or write host files are accepted (no -I, -include, --pch-dir, -time=...).
absl::Status AddCallerOptions(const std::vector<std::string>& options,
                              std::vector<std::string>& nvrtc, std::vector<std::string>& ptxas) {
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
      ptxas.push_back(option);
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
  ASSIGN_OR_RETURN(result.ptxas_version, PtxasVersion());
  // compute_90a asks NVRTC for PTX only (measured: NVRTC 13.0 accepts compute_90a and
  // compute_100a); ptxas then assembles it exactly as it assembles a raw PTX source.
  // -no-source-include: otherwise NVRTC also searches the process's working directory for
  // quoted includes (measured). Line info maps SASS back to source lines for CUPTI.
  result.nvrtc_options = {absl::StrCat("-arch=compute_", request.arch.substr(3)), "-std=c++17",
                          "--generate-line-info", "-default-device", "-no-source-include"};
  result.ptxas_options = {"-lineinfo", "-v"};
  RETURN_IF_ERROR(AddCallerOptions(request.options, result.nvrtc_options, result.ptxas_options));

  const bool is_cuda = request.language == SourceLanguage::kCuda;
  const std::string program_name = is_cuda ? "submission.cu" : "submission.ptx";
  const size_t max_log = request.limits.max_log_bytes;
  // Compiler output is scrubbed of host paths; a refusal of the source is ours and quotes only
  // what the source says, so it stays verbatim ("#include </etc/passwd> is refused").
  auto finish = [&](CompileFailure failure, const std::string& log) {
    result.ok = failure == CompileFailure::kNone;
    result.failure = failure;
    result.log =
        TrimLog(failure == CompileFailure::kSourceRejected ? log : ScrubHostPaths(log), max_log);
    result.timings.total_seconds = SecondsSince(start);
    if (!result.ok) result.cubin.clear();
    return std::move(result);
  };
  if (request.source.size() > request.limits.max_source_bytes) {
    return finish(CompileFailure::kSourceRejected,
                  absl::StrCat(program_name, ": the source is ", request.source.size(),
                               " bytes; the limit is ", request.limits.max_source_bytes, "\n"));
  }
  if (const size_t nul = request.source.find('\0'); nul != std::string::npos) {
    return finish(
        CompileFailure::kSourceRejected,
        absl::StrCat(program_name, ": the source contains a NUL byte at offset ", nul, "\n"));
  }

  std::string log;
  if (is_cuda) {
    if (auto refusal = CheckIncludes(request.source, program_name, request.headers)) {
      return finish(CompileFailure::kSourceRejected, *refusal + "\n");
    }
    const Clock::time_point frontend_start = Clock::now();
    ASSIGN_OR_RETURN(NvrtcOutput nvrtc,
                     CompileToPtx(request.source, program_name, request.headers,
                                  result.nvrtc_options, request.limits.max_seconds));
    result.timings.frontend_seconds = SecondsSince(frontend_start);
    AppendSection(log, nvrtc.log);
    if (nvrtc.timed_out) {
      AppendSection(log, absl::StrCat("compilation cancelled: it ran past the limit of ",
                                      request.limits.max_seconds, " s\n"));
      return finish(CompileFailure::kTimeout, log);
    }
    if (!nvrtc.ok) return finish(CompileFailure::kFrontend, log);
    result.ptx = std::move(nvrtc.ptx);
  } else {
    result.ptx = request.source;
  }

  const PtxScan scan = ScanPtx(result.ptx);
  result.kernels = scan.kernels;
  result.ptx_families = scan.family_counts;
  if (!is_cuda && scan.target != request.arch) {
    return finish(CompileFailure::kSourceRejected,
                  absl::StrCat(program_name, ": the module's .target is '", scan.target,
                               "'; this task's arch needs '.target ", request.arch, "'\n"));
  }

  const double remaining = request.limits.max_seconds - SecondsSince(start);
  const Clock::time_point assembler_start = Clock::now();
  ASSIGN_OR_RETURN(PtxasOutput ptxas,
                   RunPtxas(result.ptx, request.arch, result.ptxas_options,
                            std::max(remaining, 0.0), request.limits.max_log_bytes * 4));
  result.timings.assembler_seconds = SecondsSince(assembler_start);
  AppendSection(log, WithoutTimingLines(ptxas.log));
  const PtxasInfo info = ParsePtxasInfo(ptxas.log);
  result.ptxas_diagnostics = info.diagnostics;
  if (ptxas.timed_out) {
    AppendSection(log, absl::StrCat("ptxas killed: compilation ran past the limit of ",
                                    request.limits.max_seconds, " s\n"));
    return finish(CompileFailure::kTimeout, log);
  }
  if (!ptxas.ok) return finish(CompileFailure::kAssembler, log);
  for (KernelSignature& kernel : result.kernels) {
    if (auto it = info.resources.find(kernel.name); it != info.resources.end()) {
      kernel.resources = it->second;
      kernel.has_resources = true;
    }
  }
  if (ptxas.cubin.size() > request.limits.max_cubin_bytes) {
    AppendSection(log, absl::StrCat("the compiled module is ", ptxas.cubin.size(),
                                    " bytes; the limit is ", request.limits.max_cubin_bytes, "\n"));
    return finish(CompileFailure::kOutputTooLarge, log);
  }
  result.cubin = std::move(ptxas.cubin);
  return finish(CompileFailure::kNone, log);
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
        {"assembler_seconds", result.timings.assembler_seconds},
        {"total_seconds", result.timings.total_seconds}}},
      {"nvrtc_version", result.nvrtc_version},
      {"ptxas_version", result.ptxas_version},
      {"nvrtc_options", result.nvrtc_options},
      {"ptxas_options", result.ptxas_options},
  };
}

}  // namespace ptxbench
