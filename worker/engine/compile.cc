#include "worker/engine/compile.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/sha256.h"
#include "common/status.h"
#include "worker/engine/compile_jail.h"
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
      const int64_t registers = std::strtoll(value.c_str(), &end, 10);
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
    case CompileFailure::kOutOfMemory:
      return "out_of_memory";
    case CompileFailure::kCompilerCrashed:
      return "compiler_crashed";
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

namespace {

// The files ptxas needs in the jail, resolved once per ptxas path ($PTXBENCH_PTXAS may change
// between calls in tests).
absl::StatusOr<std::vector<std::string>> PtxasJailFiles() {
  static auto* const cache = new std::map<std::string, std::vector<std::string>>();
  const std::string path = PtxasPath();
  if (auto it = cache->find(path); it != cache->end()) return it->second;
  auto files = ExecutableFiles(path);
  if (!files.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot run ptxas at ", path, ": ", files.status().message()));
  }
  (*cache)[path] = *files;
  return *files;
}

std::string Gib(uint64_t bytes) {
  return absl::StrFormat("%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
}

uint64_t FieldU64(const std::map<std::string, std::string>& fields, const std::string& name) {
  uint64_t value = 0;
  if (auto it = fields.find(name); it != fields.end() && !absl::SimpleAtoi(it->second, &value)) {
    value = 0;
  }
  return value;
}

double FieldSeconds(const std::map<std::string, std::string>& fields, const std::string& name) {
  double value = 0;
  if (auto it = fields.find(name); it != fields.end() && !absl::SimpleAtod(it->second, &value)) {
    value = 0;
  }
  return value;
}

bool Field(const std::map<std::string, std::string>& fields, const std::string& name) {
  auto it = fields.find(name);
  return it != fields.end() && it->second == "1";
}

// An allocation failure shows as an "out of memory" message of the compiler, with the process
// near its limit: the source cannot fake the second.
bool RanOutOfMemory(const std::string& log, uint64_t peak_bytes, uint64_t limit) {
  if (limit == 0) return false;
  if (peak_bytes >= limit / 8 * 7) return true;
  const bool says_so = absl::StrContains(log, "out of memory") ||
                       absl::StrContains(log, "Memory allocation failure") ||
                       absl::StrContains(log, "bad_alloc");
  return says_so && peak_bytes >= limit / 2;
}

// What runs in the jail: NVRTC (for a CUDA source), then ptxas in /work. The answer's fields
// are read by Compile() below.
std::string CompileInJail(const CompileRequest& request, const std::string& program_name,
                          const std::vector<std::string>& nvrtc_options,
                          const std::vector<std::string>& ptxas_options,
                          const std::string& library_path, Clock::time_point deadline) {
  std::map<std::string, std::string> out;
  auto remaining = [&] { return std::max(0.0, -SecondsSince(deadline)); };
  std::string ptx = request.source;
  if (request.language == SourceLanguage::kCuda) {
    const Clock::time_point frontend_start = Clock::now();
    auto nvrtc =
        CompileToPtx(request.source, program_name, request.headers, nvrtc_options, remaining());
    out["frontend_seconds"] = absl::StrCat(SecondsSince(frontend_start));
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    out["frontend_peak_rss"] = absl::StrCat(static_cast<uint64_t>(usage.ru_maxrss) * 1024);
    if (!nvrtc.ok()) {
      out["nvrtc_error"] = std::string(nvrtc.status().message());
      return EncodeFields(out);
    }
    out["nvrtc_log"] = nvrtc->log;
    out["nvrtc_ok"] = nvrtc->ok ? "1" : "0";
    out["nvrtc_cancelled"] = nvrtc->timed_out ? "1" : "0";
    if (!nvrtc->ok) return EncodeFields(out);
    ptx = std::move(nvrtc->ptx);
    out["ptx"] = ptx;
  }
  // /work exists in the jail; run unjailed (allowed by the policy), ptxas gets a temp folder.
  const bool jailed = access(kJailWorkDir, W_OK) == 0;
  const Clock::time_point assembler_start = Clock::now();
  auto ptxas =
      RunPtxas({ptx, request.arch, ptxas_options, remaining(), request.limits.max_log_bytes * 4,
                jailed ? kJailWorkDir : "", jailed ? library_path : ""});
  out["assembler_seconds"] = absl::StrCat(SecondsSince(assembler_start));
  if (!ptxas.ok()) {
    out["ptxas_error"] = std::string(ptxas.status().message());
    return EncodeFields(out);
  }
  out["ptxas_ran"] = "1";
  out["ptxas_ok"] = ptxas->ok ? "1" : "0";
  out["ptxas_timed_out"] = ptxas->timed_out ? "1" : "0";
  out["ptxas_signal"] = absl::StrCat(ptxas->signal);
  out["ptxas_log"] = ptxas->log;
  out["ptxas_peak_rss"] = absl::StrCat(ptxas->peak_rss_bytes);
  if (ptxas->cubin.size() > request.limits.max_cubin_bytes) {
    out["cubin_bytes"] = absl::StrCat(ptxas->cubin.size());  // Too large to send back.
  } else {
    out["cubin"] = std::move(ptxas->cubin);
  }
  return EncodeFields(out);
}

}  // namespace

absl::StatusOr<CompileResult> Compile(const CompileRequest& request) {
  const Clock::time_point start = Clock::now();
  // The compilers' own wall limits (NVRTC's cancel callback, ptxas's runner) sit past the
  // jail's wall backstop, so that the jail, which counts CPU time, decides how a slow compile
  // ends.
  const Clock::time_point deadline =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                  std::max(request.limits.max_wall_seconds, request.limits.max_seconds) + 5));
  if (request.arch != "sm_90a" && request.arch != "sm_100a") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown arch '", request.arch, "' (known: sm_90a, sm_100a)"));
  }
  for (const auto& [name, content] : request.headers) RETURN_IF_ERROR(CheckHeaderName(name));
  ASSIGN_OR_RETURN(const JailPolicy policy, JailPolicyFromEnvironment());

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
  if (is_cuda) {
    if (auto refusal = CheckIncludes(request.source, program_name, request.headers)) {
      return finish(CompileFailure::kSourceRejected, *refusal + "\n");
    }
    RETURN_IF_ERROR(PreloadNvrtcBuiltins());
  } else {
    const PtxScan scan = ScanPtx(request.source);
    if (scan.target != request.arch) {
      return finish(CompileFailure::kSourceRejected,
                    absl::StrCat(program_name, ": the module's .target is '", scan.target,
                                 "'; this task's arch needs '.target ", request.arch, "'\n"));
    }
  }

  ASSIGN_OR_RETURN(const std::vector<std::string> ptxas_files, PtxasJailFiles());
  JailOptions jail;
  jail.max_seconds = request.limits.max_seconds;
  jail.max_wall_seconds = std::max(request.limits.max_wall_seconds - SecondsSince(start), 0.001);
  jail.max_memory_bytes = request.limits.max_memory_bytes;
  jail.max_output_bytes = request.limits.max_cubin_bytes + 2 * request.source.size() +
                          request.limits.max_log_bytes * 8 + (64 << 20);
  jail.work_bytes = request.limits.max_cubin_bytes + (96 << 20);
  jail.files = ptxas_files;
  jail.policy = policy;
  const std::string library_path = LibraryPath(ptxas_files);
  ASSIGN_OR_RETURN(JailedRun run, RunInCompileJail(
                                      [&] {
                                        return CompileInJail(
                                            request, program_name, result.nvrtc_options,
                                            result.ptxas_options, library_path, deadline);
                                      },
                                      jail));
  result.jail = run.jail;
  result.memory.frontend_peak_virtual_bytes = run.peak_virtual_bytes;
  const uint64_t limit = request.limits.max_memory_bytes;
  switch (run.end) {
    case JailedRun::End::kFinished:
      break;
    case JailedRun::End::kTimedOut:
      result.memory.frontend_peak_rss_bytes = run.peak_rss_bytes;
      return finish(CompileFailure::kTimeout,
                    absl::StrCat("compilation killed: it ran past the limit of ",
                                 request.limits.max_seconds, " s of CPU time\n"));
    case JailedRun::End::kOutOfMemory:
      result.memory.frontend_peak_rss_bytes = run.peak_rss_bytes;
      return finish(CompileFailure::kOutOfMemory,
                    absl::StrCat("compilation stopped: the compiler ran out of its memory limit ",
                                 "of ", Gib(limit), "\n"));
    case JailedRun::End::kCrashed:
      result.memory.frontend_peak_rss_bytes = run.peak_rss_bytes;
      if (RanOutOfMemory(run.diagnostics, run.peak_rss_bytes, limit)) {
        return finish(CompileFailure::kOutOfMemory,
                      absl::StrCat("compilation stopped: the compiler ran out of its memory "
                                   "limit of ",
                                   Gib(limit), "\n"));
      }
      return finish(
          CompileFailure::kCompilerCrashed,
          absl::StrCat("the compiler crashed on this source",
                       run.signal != 0 ? absl::StrCat(" (signal ", run.signal, ")") : "", "\n"));
  }
  using Fields = std::map<std::string, std::string>;
  ASSIGN_OR_RETURN(Fields fields, DecodeFields(run.output));
  if (fields.count("nvrtc_error") > 0) {
    return absl::InternalError(absl::StrCat("NVRTC: ", fields["nvrtc_error"]));
  }
  result.timings.frontend_seconds = FieldSeconds(fields, "frontend_seconds");
  result.timings.assembler_seconds = FieldSeconds(fields, "assembler_seconds");
  result.memory.frontend_peak_rss_bytes = FieldU64(fields, "frontend_peak_rss");
  result.memory.assembler_peak_rss_bytes = FieldU64(fields, "ptxas_peak_rss");
  if (!is_cuda) result.memory.frontend_peak_rss_bytes = 0;
  if (!is_cuda) result.memory.frontend_peak_virtual_bytes = 0;

  std::string log;
  if (is_cuda) {
    AppendSection(log, fields["nvrtc_log"]);
    if (Field(fields, "nvrtc_cancelled")) {
      AppendSection(log, absl::StrCat("compilation cancelled: it ran past the limit of ",
                                      request.limits.max_seconds, " s\n"));
      return finish(CompileFailure::kTimeout, log);
    }
    if (!Field(fields, "nvrtc_ok")) {
      if (RanOutOfMemory(log, run.peak_virtual_bytes, limit)) {
        AppendSection(
            log, absl::StrCat("the compiler ran out of its memory limit of ", Gib(limit), "\n"));
        return finish(CompileFailure::kOutOfMemory, log);
      }
      return finish(CompileFailure::kFrontend, log);
    }
    result.ptx = fields["ptx"];
  } else {
    result.ptx = request.source;
  }
  const PtxScan scan = ScanPtx(result.ptx);
  if (scan.kernels.size() > request.limits.max_kernels) {
    AppendSection(log, absl::StrCat("the module defines ", scan.kernels.size(),
                                    " kernels; the limit is ", request.limits.max_kernels, "\n"));
    result.ptx.clear();
    return finish(CompileFailure::kOutputTooLarge, log);
  }
  result.kernels = scan.kernels;
  result.ptx_families = scan.family_counts;

  if (fields.count("ptxas_error") > 0) return absl::InternalError(fields["ptxas_error"]);
  const std::string ptxas_log = fields["ptxas_log"];
  AppendSection(log, WithoutTimingLines(ptxas_log));
  const PtxasInfo info = ParsePtxasInfo(ptxas_log);
  result.ptxas_diagnostics = info.diagnostics;
  if (Field(fields, "ptxas_timed_out")) {
    AppendSection(log, absl::StrCat("ptxas killed: compilation ran past the limit of ",
                                    request.limits.max_seconds, " s\n"));
    return finish(CompileFailure::kTimeout, log);
  }
  if (!Field(fields, "ptxas_ok")) {
    const bool signalled = FieldU64(fields, "ptxas_signal") != 0;
    if (RanOutOfMemory(ptxas_log, result.memory.assembler_peak_rss_bytes, limit) ||
        (signalled && result.memory.assembler_peak_rss_bytes >= limit / 2)) {
      AppendSection(log, absl::StrCat("ptxas ran out of its memory limit of ", Gib(limit), "\n"));
      return finish(CompileFailure::kOutOfMemory, log);
    }
    return finish(signalled ? CompileFailure::kCompilerCrashed : CompileFailure::kAssembler, log);
  }
  for (KernelSignature& kernel : result.kernels) {
    if (auto it = info.resources.find(kernel.name); it != info.resources.end()) {
      kernel.resources = it->second;
      kernel.has_resources = true;
    }
  }
  if (fields.count("cubin_bytes") > 0) {
    AppendSection(log, absl::StrCat("the compiled module is ", fields["cubin_bytes"],
                                    " bytes; the limit is ", request.limits.max_cubin_bytes, "\n"));
    return finish(CompileFailure::kOutputTooLarge, log);
  }
  result.cubin = std::move(fields["cubin"]);
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
      {"memory",
       {{"frontend_peak_rss_bytes", result.memory.frontend_peak_rss_bytes},
        {"frontend_peak_virtual_bytes", result.memory.frontend_peak_virtual_bytes},
        {"assembler_peak_rss_bytes", result.memory.assembler_peak_rss_bytes}}},
      {"jail", ToJson(result.jail)},
      {"nvrtc_version", result.nvrtc_version},
      {"ptxas_version", result.ptxas_version},
      {"nvrtc_options", result.nvrtc_options},
      {"ptxas_options", result.ptxas_options},
  };
}

}  // namespace ptxbench
