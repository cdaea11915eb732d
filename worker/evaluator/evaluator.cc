#include "worker/evaluator/evaluator.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "common/target_families.h"
#include "common/task.h"
#include "nlohmann/json.hpp"
#include "worker/engine/compile.h"
#include "worker/engine/gpu/baseline.h"
#include "worker/engine/gpu/cuda_check.h"
#include "worker/engine/gpu/cupti_sass.h"
#include "worker/engine/gpu/nvml_monitor.h"
#include "worker/engine/gpu/philox.h"
#include "worker/engine/gpu/plan_runner.h"
#include "worker/engine/gpu/protocol.h"
#include "worker/engine/gpu/runtime.h"
#include "worker/engine/gpu/sass_listing.h"
#include "worker/engine/gpu/timing.h"
#include "worker/engine/plan.h"
#include "worker/engine/ptx_scan.h"

namespace ptxbench::evaluator {
namespace {

using json = nlohmann::json;
using gpu::ParseU64;
using gpu::U64;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Events go to fd 3 when the supervisor opened it, else to stdout (manual runs).
int EventFd() {
  static const int fd = fcntl(gpu::kEventFd, F_GETFD) != -1 ? gpu::kEventFd : STDOUT_FILENO;
  return fd;
}

void Emit(const json& event) { (void)gpu::WriteJsonLine(EventFd(), event); }

int Fail(int exit_code, const std::string& kind, const absl::Status& status) {
  Emit({{"event", "error"},
        {"kind", kind},
        {"message", std::string(status.message())},
        {"code", absl::StatusCodeToString(status.code())}});
  return exit_code;
}

// What a model should read of a fault: the CUDA error without our call site
// ("cudaErrorIllegalAddress (an illegal memory access was encountered)"); the call site stays in
// the event's "detail" for the audit record.
std::string CleanFault(const std::string& message) {
  size_t at = message.find(" at ");
  if (at == std::string::npos) return message;
  size_t colon = message.find(": ", at);
  return colon == std::string::npos ? message : message.substr(colon + 2);
}

// A kernel fault (kAborted from cuda_check.h) or a refused launch is the kernel's; anything
// else is ours.
int FailFromStatus(const absl::Status& status, const std::string& during) {
  if (status.code() == absl::StatusCode::kAborted ||
      status.code() == absl::StatusCode::kFailedPrecondition) {
    std::string message(status.message());
    Emit({{"event", "fault"},
          {"during", during},
          {"message", CleanFault(message)},
          {"detail", message}});
    return kExitKernelFault;
  }
  if (status.code() == absl::StatusCode::kInvalidArgument) {
    Emit({{"event", "plan_invalid"}, {"message", std::string(status.message())}});
    return kExitPlanInvalid;
  }
  return Fail(kExitInfrastructure, "infrastructure", status);
}

absl::StatusOr<json> ReadRequest(int argc, char** argv) {
  std::string path;
  for (int i = 2; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--request") path = argv[i + 1];
  }
  if (path.empty())
    return absl::InvalidArgumentError("usage: ptxbench-evaluator MODE --request FILE");
  ASSIGN_OR_RETURN(std::string text, gpu::ReadFileBytes(path));
  json request = json::parse(text, nullptr, false);
  if (request.is_discarded() || !request.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat("request ", path, " is not a JSON object"));
  }
  return request;
}

std::string Str(const json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

absl::StatusOr<Task> LoadCheckedTask(const json& request) {
  ASSIGN_OR_RETURN(Task task, LoadTask(Str(request, "task_dir")));
  if (task.version_hash != Str(request, "task_version_hash")) {
    return absl::FailedPreconditionError(
        absl::StrCat("task version changed under the evaluation: supervisor has ",
                     Str(request, "task_version_hash"), ", evaluator read ", task.version_hash));
  }
  return task;
}

absl::StatusOr<const Workload*> FindWorkload(const Task& task, const std::string& name) {
  for (const Workload& w : task.workloads) {
    if (w.name == name) return &w;
  }
  return absl::InvalidArgumentError(absl::StrCat("no workload '", name, "'"));
}

// The launch plan for every workload, resolved against the PTX's kernel signatures. The
// compile mode validated it with ptxas resources too; this repeats the checks that do not need
// them so the GPU modes never trust a file written by another process blindly.
absl::StatusOr<std::map<std::string, ResolvedPlan>> ResolvePlans(
    const Task& task, const json& request, const std::string& ptx,
    const std::vector<KernelSignature>* kernels_in) {
  std::optional<LaunchPlan> from_request;
  std::string plan_json = Str(request, "launch_plan_json");
  if (!plan_json.empty()) {
    PlanOr<LaunchPlan> parsed = ParseLaunchPlanJson(plan_json);
    if (!parsed.ok()) return absl::InvalidArgumentError(parsed.error().ToString());
    from_request = parsed.value();
  }
  PlanOr<LaunchPlan> plan = SelectLaunchPlan(from_request, Str(request, "source"));
  if (!plan.ok()) return absl::InvalidArgumentError(plan.error().ToString());
  ASSIGN_OR_RETURN(DeviceLimits limits, DeviceLimitsForArch(Str(request, "arch")));
  std::vector<KernelSignature> scanned;
  if (kernels_in == nullptr) scanned = ScanPtx(ptx).kernels;
  const std::vector<KernelSignature>& kernels = kernels_in ? *kernels_in : scanned;
  std::map<std::string, ResolvedPlan> out;
  for (const Workload& w : task.workloads) {
    PlanOr<ResolvedPlan> resolved = ValidatePlan(plan.value(), task, w, limits, kernels);
    if (!resolved.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(resolved.error().ToString(), " (workload '", w.name, "')"));
    }
    out[w.name] = resolved.value();
  }
  return out;
}

// ---------------------------------------------------------------- compile mode

// The instruction mnemonics on one PTX source line ("@%p1 mbarrier.try_wait.parity...",
// "{ .reg .pred p; setp.ne.b32 p, %r1, 0; wgmma.mma_async...}"): statements split at ';',
// braces, labels, predicates and directives dropped. Line-local on purpose: the -gp listing
// gives one PTX line per SASS instruction.
std::vector<std::string> LineMnemonics(const std::string& line) {
  std::string text = line.substr(0, line.find("//"));
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(text, ';')) {
    std::string s(part);
    for (char& c : s) {
      if (c == '{' || c == '}' || c == '\t') c = ' ';
    }
    size_t i = s.find_first_not_of(' ');
    while (i != std::string::npos) {
      size_t end = s.find(' ', i);
      std::string token = s.substr(i, end == std::string::npos ? std::string::npos : end - i);
      bool label = !token.empty() && token.back() == ':';
      bool predicate = !token.empty() && token[0] == '@';
      bool directive = !token.empty() && token[0] == '.';
      if (!label && !predicate && !token.empty()) {
        if (!directive && std::isalpha(static_cast<unsigned char>(token[0]))) out.push_back(token);
        break;
      }
      i = end == std::string::npos ? end : s.find_first_not_of(' ', end);
    }
  }
  return out;
}

// The destination operand of a SASS instruction text ("RZ" in "HGMMA.64x8x16.F16 RZ, ...").
std::string FirstOperand(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && text[i] == ' ') ++i;
  if (i < text.size() && text[i] == '@') {
    while (i < text.size() && text[i] != ' ') ++i;
  }
  while (i < text.size() && text[i] == ' ') ++i;
  while (i < text.size() && text[i] != ' ') ++i;  // opcode with modifiers
  while (i < text.size() && text[i] == ' ') ++i;
  size_t end = text.find_first_of(", ", i);
  return text.substr(i, end == std::string::npos ? std::string::npos : end - i);
}

// ptxas 13.0 implements an empty wgmma commit group, and the else-path of a guarded
// '@p wgmma', with 'HGMMA.64x8x16.F16 RZ, gdesc[URZ], RZ, !UPT' (tools/kernel-dev/NOTES.md):
// it runs predicate-on but does no matrix work, so it is never a wgmma site.
bool IsNoOpMatrixInstruction(const std::string& opcode, const std::string& text) {
  bool gmma = opcode == "HGMMA" || opcode == "QGMMA" || opcode == "IGMMA" || opcode == "BGMMA";
  return gmma && FirstOperand(text) == "RZ";
}

// PTX source-line families: the .loc in force before each PTX instruction names the source
// (file, line) it came from; nvdisasm -g names the source (file, line) of each SASS instruction.
// Keyed by the file's base name (NVRTC names the submission "submission.cu").
using SourceKey = std::pair<std::string, int>;

std::string BaseName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::map<SourceKey, std::set<std::string>> SourceLineFamilies(
    const std::string& ptx, const std::vector<const TargetFamily*>& families) {
  // .file directives come at the end of the module (NVRTC, nvcc): collect them first.
  std::map<int, std::string> files;
  std::vector<std::string> lines = absl::StrSplit(ptx, '\n');
  for (const std::string& line : lines) {
    size_t i = line.find_first_not_of(" \t");
    if (i == std::string::npos || line.compare(i, 5, ".file") != 0) continue;
    int index = std::atoi(line.c_str() + i + 5);
    size_t q1 = line.find('"', i), q2 = q1 == std::string::npos ? q1 : line.find('"', q1 + 1);
    if (q2 != std::string::npos) files[index] = BaseName(line.substr(q1 + 1, q2 - q1 - 1));
  }
  std::map<SourceKey, std::set<std::string>> out;
  SourceKey current{"", 0};
  for (const std::string& line : lines) {
    size_t i = line.find_first_not_of(" \t");
    if (i == std::string::npos || line.compare(i, 5, ".file") == 0) continue;
    if (line.compare(i, 4, ".loc") == 0) {
      int file = 0, number = 0;
      if (std::sscanf(line.c_str() + i + 4, "%d %d", &file, &number) == 2) {
        current = {files.count(file) ? files[file] : "", number};
      }
      continue;
    }
    if (current.second == 0) continue;
    for (const std::string& mnemonic : LineMnemonics(line)) {
      for (const TargetFamily* f : families) {
        if (PtxMnemonicInFamily(*f, mnemonic)) out[current].insert(f->name);
      }
    }
  }
  return out;
}

// Where each target family sits in the SASS: by opcode for families with SASS opcodes (exact);
// for every family also by line correlation, either the PTX line of each SASS instruction
// (nvdisasm -gp with the PTX embedded by -lineinfo) or the source line both the PTX (.loc) and
// the SASS (-g) carry, whichever agrees better with the opcode classification on this module.
json StaticFamilyMap(const std::string& arch, const std::string& cubin_path,
                     const std::string& cubin, const std::string& ptx_fallback) {
  std::optional<std::string> tool = gpu::FindNvdisasm();
  if (!tool) {
    return {{"available", false},
            {"reason",
             "nvdisasm not found (set PTXBENCH_NVDISASM or install the CUDA toolkit's "
             "cuda-nvdisasm); the target-instruction stage cannot run without it"}};
  }
  // The two listings in parallel: each takes ~0.6 s on the reference GEMM's cubin (H200 host).
  auto gp_future = std::async(std::launch::async, [&] {
    return gpu::RunNvdisasm(*tool, {"-c", "-gp"}, cubin_path, 60);
  });
  auto listing_text = gpu::RunNvdisasm(*tool, {"-c", "-g"}, cubin_path, 60);
  auto ptx_listing_text = gp_future.get();
  if (!listing_text.ok()) {
    return {{"available", false}, {"reason", std::string(listing_text.status().message())}};
  }
  gpu::SassListing listing = gpu::ParseNvdisasm(*listing_text);
  gpu::SassListing ptx_listing;
  if (ptx_listing_text.ok()) ptx_listing = gpu::ParseNvdisasm(*ptx_listing_text);
  std::optional<std::string> embedded_ptx = gpu::ElfSection(cubin, ".nv_debug_ptx_txt");
  std::string ptx = embedded_ptx ? *embedded_ptx : ptx_fallback;
  std::vector<std::string> ptx_lines = absl::StrSplit(ptx, '\n');

  std::vector<const TargetFamily*> families;
  for (const TargetFamily& f : TargetFamilies()) {
    if (FamilyExistsOn(f, arch)) families.push_back(&f);
  }
  // The source-line view uses the compile stage's PTX, whose .file/.loc match the -g lines.
  std::map<SourceKey, std::set<std::string>> by_source_line =
      SourceLineFamilies(ptx_fallback, families);

  struct Classified {
    std::set<std::string> by_opcode, by_ptx_line, by_source_line;
    bool no_op = false;
    int ptx_line = 0;
    std::string ptx_text;
  };
  std::map<std::string, std::vector<Classified>> classified;
  int no_op_sites = 0;
  int ptx_checked = 0, ptx_consistent = 0, source_checked = 0, source_consistent = 0;
  json gp_sample = json::array();
  for (const auto& [name, function] : listing) {
    const gpu::SassFunction* with_ptx = nullptr;
    if (auto it = ptx_listing.find(name); it != ptx_listing.end()) with_ptx = &it->second;
    std::vector<Classified>& rows = classified[name];
    for (const gpu::SassInstruction& ins : function.instructions) {
      Classified c;
      c.no_op = IsNoOpMatrixInstruction(ins.opcode, ins.text);
      if (c.no_op) ++no_op_sites;
      for (const std::string& fam : FamiliesOfSassOpcode(arch, ins.text)) {
        if (!c.no_op) c.by_opcode.insert(fam);
      }
      if (with_ptx != nullptr) {
        if (const gpu::SassInstruction* p = with_ptx->AtPc(ins.pc); p && p->line > 0) {
          c.ptx_line = p->line;
          if (c.ptx_line <= static_cast<int>(ptx_lines.size())) {
            c.ptx_text = ptx_lines[c.ptx_line - 1];
            for (const std::string& mnemonic : LineMnemonics(c.ptx_text)) {
              for (const TargetFamily* f : families) {
                if (PtxMnemonicInFamily(*f, mnemonic)) c.by_ptx_line.insert(f->name);
              }
            }
          }
          if (!c.by_opcode.empty() && gp_sample.size() < 6) {
            gp_sample.push_back({{"function", name},
                                 {"pc", ins.pc},
                                 {"sass", ins.text},
                                 {"gp_file", p->file},
                                 {"gp_line", p->line},
                                 {"ptx_at_line", c.ptx_text.substr(0, 120)}});
          }
        }
      }
      if (ins.line > 0) {
        auto it = by_source_line.find({BaseName(ins.file), ins.line});
        if (it != by_source_line.end()) c.by_source_line = it->second;
      }
      for (const std::string& fam : c.by_opcode) {
        if (c.ptx_line > 0) {
          ++ptx_checked;
          if (c.by_ptx_line.count(fam)) ++ptx_consistent;
        }
        if (ins.line > 0) {
          ++source_checked;
          if (c.by_source_line.count(fam)) ++source_consistent;
        }
      }
      rows.push_back(std::move(c));
    }
  }
  auto ratio = [](int consistent, int checked) {
    return checked > 0 ? static_cast<double>(consistent) / checked : 0.0;
  };
  const bool use_ptx_lines =
      ratio(ptx_consistent, ptx_checked) > ratio(source_consistent, source_checked);
  const char* line_method = use_ptx_lines ? "ptx_line" : "source_line";

  json functions = json::object();
  for (const auto& [name, function] : listing) {
    json sites = json::object();
    const std::vector<Classified>& rows = classified[name];
    for (size_t k = 0; k < function.instructions.size(); ++k) {
      const gpu::SassInstruction& ins = function.instructions[k];
      const Classified& c = rows[k];
      auto add = [&](const std::string& fam, const char* by) {
        json site = {{"pc", ins.pc}, {"sass", ins.text}, {"by", by}};
        if (c.ptx_line > 0) site["ptx_line"] = c.ptx_line;
        if (ins.line > 0) site["source"] = absl::StrCat(BaseName(ins.file), ":", ins.line);
        sites[fam].push_back(site);
      };
      for (const std::string& fam : c.by_opcode) add(fam, "sass_opcode");
      // A no-op HGMMA may carry the line of a real wgmma; it never stands for one.
      if (c.no_op) continue;
      for (const std::string& fam : use_ptx_lines ? c.by_ptx_line : c.by_source_line) {
        if (!c.by_opcode.count(fam)) add(fam, line_method);
      }
    }
    functions[name] = {{"instructions", function.instructions.size()}, {"sites", sites}};
  }
  return {
      {"available", true},
      {"tool", *tool},
      {"line_method", line_method},
      {"ptx_lines_available", ptx_listing_text.ok() && !ptx_listing.empty()},
      {"ptx_source", embedded_ptx ? ".nv_debug_ptx_txt" : "compile stage PTX"},
      {"ptx_line_consistency", {{"checked", ptx_checked}, {"consistent", ptx_consistent}}},
      {"source_line_consistency", {{"checked", source_checked}, {"consistent", source_consistent}}},
      {"gp_sample", gp_sample},
      {"no_op_matrix_instructions_ignored", no_op_sites},
      {"functions", functions}};
}

int CompileMode(const json& request) {
  double t0 = Now();
  auto task = LoadCheckedTask(request);
  if (!task.ok()) return Fail(kExitInfrastructure, "infrastructure", task.status());
  const std::string arch = Str(request, "arch");
  auto headers = TemplateHeaders(*task, arch);
  if (!headers.ok()) return Fail(kExitInfrastructure, "infrastructure", headers.status());
  CompileRequest compile;
  compile.source = Str(request, "source");
  compile.language =
      Str(request, "language") == "ptx" ? SourceLanguage::kPtx : SourceLanguage::kCuda;
  compile.arch = arch;
  compile.headers = *headers;
  auto result = Compile(compile);
  if (!result.ok()) return Fail(kExitInfrastructure, "infrastructure", result.status());
  json report = ToJson(*result);
  if (!result->ok) {
    Emit({{"event", "compile"}, {"ok", false}, {"report", report}, {"seconds", Now() - t0}});
    return kExitOk;
  }
  const std::string dir = Str(request, "work_dir");
  const std::string cubin_path = dir + "/module.cubin";
  const std::string ptx_path = dir + "/module.ptx";
  if (auto s = gpu::WriteFileBytes(cubin_path, result->cubin); !s.ok()) {
    return Fail(kExitInfrastructure, "infrastructure", s);
  }
  if (auto s = gpu::WriteFileBytes(ptx_path, result->ptx); !s.ok()) {
    return Fail(kExitInfrastructure, "infrastructure", s);
  }
  auto plans = ResolvePlans(*task, request, result->ptx, &result->kernels);
  if (!plans.ok()) {
    Emit({{"event", "compile"},
          {"ok", true},
          {"plan_ok", false},
          {"plan_error", std::string(plans.status().message())},
          {"report", report},
          {"seconds", Now() - t0}});
    return kExitOk;
  }
  json resolved = json::object();
  std::vector<std::string> launch_kernels;
  for (const auto& [name, plan] : *plans) resolved[name] = ToJson(plan);
  const ResolvedPlan& timed = plans->at(task->TimedWorkload().name);
  for (const ResolvedLaunch& l : timed.launches) launch_kernels.push_back(l.kernel);
  Emit({{"event", "compile"},
        {"ok", true},
        {"plan_ok", true},
        {"report", report},
        {"cubin_path", cubin_path},
        {"ptx_path", ptx_path},
        {"cubin_bytes", result->cubin.size()},
        {"launch_kernels", launch_kernels},
        {"resolved_plans", resolved},
        {"seconds", Now() - t0}});
  return kExitOk;
}

// The static SASS family map, in its own process (sandboxed like compile: nvdisasm reads a
// cubin built from untrusted source), started beside the correctness stage.
int SassMapMode(const json& request) {
  double t0 = Now();
  auto cubin = gpu::ReadFileBytes(Str(request, "cubin_path"));
  auto ptx = gpu::ReadFileBytes(Str(request, "ptx_path"));
  if (!cubin.ok()) return Fail(kExitInfrastructure, "infrastructure", cubin.status());
  if (!ptx.ok()) return Fail(kExitInfrastructure, "infrastructure", ptx.status());
  json sass = StaticFamilyMap(Str(request, "arch"), Str(request, "cubin_path"), *cubin, *ptx);
  sass["seconds"] = Now() - t0;
  Emit({{"event", "sassmap"}, {"sass", sass}});
  return kExitOk;
}

// ---------------------------------------------------------------- GPU modes: shared pieces

struct Gpu {
  gpu::DeviceInfo device;
  std::unique_ptr<gpu::Builtins> builtins;
  gpu::Stream stream;
};

absl::StatusOr<Gpu> OpenGpu(const json& request) {
  Gpu g;
  int ordinal = request.value("gpu", 0);
  ASSIGN_OR_RETURN(g.device, gpu::InitDevice(ordinal));
  ASSIGN_OR_RETURN(g.builtins, gpu::Builtins::Load(g.device));
  ASSIGN_OR_RETURN(g.stream, gpu::Stream::Create());
  return g;
}

// Writes every output tensor of `set` to "<prefix>.<tensor>.bin"; returns their descriptions.
absl::StatusOr<json> SaveOutputs(const gpu::TensorSet& set, const std::string& prefix,
                                 cudaStream_t stream) {
  json files = json::array();
  size_t ordinal = 0;
  for (const gpu::WorkloadTensor& t : set.tensors()) {
    if (!t.output) continue;
    ASSIGN_OR_RETURN(std::string bytes, set.DownloadOutput(ordinal++, stream));
    std::string path = absl::StrCat(prefix, ".", t.name, ".bin");
    RETURN_IF_ERROR(gpu::WriteFileBytes(path, bytes));
    files.push_back({{"tensor", t.name}, {"path", path}, {"bytes", bytes.size()}});
  }
  return files;
}

// Exports every output tensor of `set` to the reference process (CUDA IPC, runtime.h); the
// buffers must stay untouched until the supervisor's next command.
absl::StatusOr<json> ExportOutputs(const gpu::TensorSet& set) {
  json outputs = json::array();
  std::vector<void*> pointers = set.OutputPointers();
  size_t ordinal = 0;
  for (const gpu::WorkloadTensor& t : set.tensors()) {
    if (!t.output) continue;
    ASSIGN_OR_RETURN(std::string handle, gpu::ExportIpcHandle(pointers.at(ordinal++)));
    outputs.push_back({{"tensor", t.name}, {"ipc", handle}, {"bytes", t.bytes}});
  }
  return outputs;
}

// The outputs of a run, as the supervisor asked: "ipc" (mapped by the reference process) or
// files under `prefix`.
absl::StatusOr<json> HandOverOutputs(const gpu::TensorSet& set, const std::string& transfer,
                                     const std::string& prefix, cudaStream_t stream) {
  if (transfer == "ipc") return ExportOutputs(set);
  return SaveOutputs(set, prefix, stream);
}

gpu::ElementType ElementTypeOf(gpu::BuiltinDType d) {
  switch (d) {
    case gpu::BuiltinDType::kBF16:
      return gpu::ElementType::kBF16;
    case gpu::BuiltinDType::kFP16:
      return gpu::ElementType::kFP16;
    case gpu::BuiltinDType::kFP32:
      return gpu::ElementType::kFP32;
    case gpu::BuiltinDType::kFP8E4M3:
      return gpu::ElementType::kFP8E4M3;
    case gpu::BuiltinDType::kInt32:
      return gpu::ElementType::kInt32;
  }
  return gpu::ElementType::kFP32;
}

gpu::ToleranceRule RuleOf(const Tolerance& t) {
  gpu::ToleranceRule r;
  r.kind = t.rule == Tolerance::Rule::kRelativeNorm ? gpu::ToleranceRule::Kind::kRelativeNorm
                                                    : gpu::ToleranceRule::Kind::kAllClose;
  r.atol = t.atol;
  r.rtol = t.rtol;
  r.matched_ratio = t.matched_ratio;
  r.max_relative_norm = t.max_relative_norm;
  return r;
}

// Reference outputs of one (workload, seed), kept on the device until compared.
struct StoredReference {
  std::vector<gpu::WorkloadTensor> outputs;
  std::vector<gpu::DeviceBuffer> buffers;
};

// Compares the candidate's outputs named in `cmd` with a stored reference, on the GPU. A
// candidate buffer that cannot be mapped is reported ("ipc_failed"), not an error: the
// supervisor then asks for files.
absl::StatusOr<json> CompareCommand(const Task& task, const json& cmd, const StoredReference& ref,
                                    gpu::Builtins& builtins, gpu::DeviceBuffer& upload,
                                    cudaStream_t stream) {
  json tensors = json::object();
  const gpu::ToleranceRule rule = RuleOf(task.tolerance);
  for (size_t k = 0; k < ref.outputs.size(); ++k) {
    const gpu::WorkloadTensor& t = ref.outputs[k];
    json entry;
    for (const json& o : cmd.value("outputs", json::array())) {
      if (Str(o, "tensor") == t.name) entry = o;
    }
    if (entry.is_null()) return absl::InternalError("the candidate handed over no " + t.name);
    gpu::ImportedBuffer imported;
    const void* got = nullptr;
    if (entry.contains("ipc")) {
      auto opened = gpu::ImportedBuffer::Open(Str(entry, "ipc"));
      if (!opened.ok()) return json{{"ipc_failed", std::string(opened.status().message())}};
      imported = std::move(*opened);
      got = imported.get();
    } else {
      ASSIGN_OR_RETURN(std::string bytes, gpu::ReadFileBytes(Str(entry, "path")));
      if (bytes.size() != t.bytes) {
        return absl::InternalError(
            absl::StrCat("output ", t.name, ": ", bytes.size(), " bytes, expected ", t.bytes));
      }
      if (upload.bytes() < t.bytes) {
        upload.Reset();
        ASSIGN_OR_RETURN(upload, gpu::DeviceBuffer::Allocate(t.bytes));
      }
      PTXBENCH_CUDA_TRY(
          cudaMemcpyAsync(upload.get(), bytes.data(), t.bytes, cudaMemcpyHostToDevice, stream));
      got = upload.get();
    }
    ASSIGN_OR_RETURN(gpu::CompareReport report,
                     builtins.Compare(got, ref.buffers[k].get(), t.elements, ElementTypeOf(t.dtype),
                                      t.shape, rule, gpu::PoisonPattern(t.dtype), stream));
    tensors[t.name] = gpu::ToJson(report);
  }
  return json{{"tensors", tensors}};
}

// ---------------------------------------------------------------- reference mode

int ReferenceMode(const json& request) {
  auto task = LoadCheckedTask(request);
  if (!task.ok()) return Fail(kExitInfrastructure, "infrastructure", task.status());
  auto g = OpenGpu(request);
  if (!g.ok()) return Fail(kExitInfrastructure, "unavailable", g.status());
  auto first_key = ParseU64(request.value("hash_key", json("0")));
  if (!first_key.ok()) return Fail(kExitInfrastructure, "infrastructure", first_key.status());
  uint64_t hash_key = *first_key;
  json device = gpu::ToJson(g->device);
  device["library_versions"] = gpu::BaselineLibraryVersions();
  if (auto nvml = gpu::NvmlMonitor::Open(g->device.uuid); nvml.ok()) {
    device["nvml_driver_version"] = (*nvml)->driver_version();
    device["nvml_max_sm_mhz"] = (*nvml)->max_sm_mhz();
  }
  Emit({{"event", "ready"}, {"device", device}});

  std::string current;
  gpu::TensorSet set;
  std::unique_ptr<gpu::Baseline> baseline;
  std::map<std::pair<std::string, uint64_t>, StoredReference> references;
  gpu::DeviceBuffer upload;  // Candidate outputs read from files, for the compare kernel.
  gpu::LineReader commands(STDIN_FILENO);
  while (true) {
    auto line = commands.ReadLine(-1);
    if (!line.ok()) return Fail(kExitInfrastructure, "infrastructure", line.status());
    if (!line->has_value()) return kExitOk;
    json cmd = json::parse(**line, nullptr, false);
    if (cmd.is_discarded() || Str(cmd, "cmd") == "quit") return kExitOk;
    // Kept warm between evaluations (evaluate.cc, ReferencePool): "reset" ends one (no
    // reference survives it), "begin" starts the next with its own hash key and is answered
    // like a fresh start. The context, buffers and library handles stay.
    if (Str(cmd, "cmd") == "reset") {
      references.clear();
      Emit({{"event", "reset"}});
      continue;
    }
    if (Str(cmd, "cmd") == "begin") {
      auto key = ParseU64(cmd.value("hash_key", json("0")));
      if (!key.ok()) return Fail(kExitInfrastructure, "infrastructure", key.status());
      hash_key = *key;
      references.clear();
      Emit({{"event", "ready"}, {"device", device}, {"reused", true}});
      continue;
    }
    double t0 = Now();
    const std::string workload_name = Str(cmd, "workload");
    auto workload = FindWorkload(*task, workload_name);
    auto seed = ParseU64(cmd.value("seed", json("0")));
    if (!workload.ok() || !seed.ok()) {
      return Fail(kExitInfrastructure, "infrastructure",
                  workload.ok() ? seed.status() : workload.status());
    }
    if (Str(cmd, "cmd") == "compare") {
      auto stored = references.find({workload_name, *seed});
      if (stored == references.end()) {
        return Fail(kExitInfrastructure, "infrastructure",
                    absl::InternalError(absl::StrCat("no reference for ", workload_name, "/",
                                                     U64(*seed), " to compare with")));
      }
      auto result =
          CompareCommand(*task, cmd, stored->second, *g->builtins, upload, g->stream.get());
      if (!result.ok()) return Fail(kExitInfrastructure, "infrastructure", result.status());
      json event = std::move(*result);
      event["event"] = "compare";
      event["workload"] = workload_name;
      event["seed"] = U64(*seed);
      event["seconds"] = Now() - t0;
      // Each (workload, seed) is compared once; a failed mapping is retried with files.
      if (!event.contains("ipc_failed") && !cmd.value("keep", false)) references.erase(stored);
      Emit(event);
      continue;
    }
    absl::Status status = [&]() -> absl::Status {
      double setup_seconds = 0;  // Buffers and the library's handle for a new workload.
      if (current != workload_name) {
        set = gpu::TensorSet();
        baseline.reset();
        ASSIGN_OR_RETURN(auto tensors, gpu::ResolveTensors(*task, **workload));
        ASSIGN_OR_RETURN(set, gpu::TensorSet::Allocate(std::move(tensors)));
        ASSIGN_OR_RETURN(baseline,
                         gpu::CreateBaseline(task->baseline_library, task->baseline_operation,
                                             (*workload)->axes));
        current = workload_name;
        setup_seconds = Now() - t0;
      }
      RETURN_IF_ERROR(set.GenerateInputs(*g->builtins, *seed, g->stream.get()));
      ASSIGN_OR_RETURN(uint64_t input_hash,
                       set.HashInputs(*g->builtins, hash_key, g->stream.get()));
      json event = {{"event", "reference"},
                    {"workload", workload_name},
                    {"seed", U64(*seed)},
                    {"input_hash", U64(input_hash)}};
      RETURN_IF_ERROR(set.PoisonOutputs(*g->builtins, g->stream.get()));
      RETURN_IF_ERROR(baseline->Run(set.InputPointers(), set.OutputPointers(), g->stream.get()));
      // The reference stays on the device until the supervisor's "compare" (no copy to the host:
      // ~0.13 s per 117 MB output on the H200 before, 2026-11-30-h200-gpu-test-3.json).
      StoredReference stored;
      std::vector<void*> pointers = set.OutputPointers();
      size_t ordinal = 0;
      for (const gpu::WorkloadTensor& t : set.tensors()) {
        if (!t.output) continue;
        ASSIGN_OR_RETURN(gpu::DeviceBuffer copy, gpu::DeviceBuffer::Allocate(t.bytes));
        PTXBENCH_CUDA_TRY(cudaMemcpyAsync(copy.get(), pointers.at(ordinal++), t.bytes,
                                          cudaMemcpyDeviceToDevice, g->stream.get()));
        stored.outputs.push_back(t);
        stored.buffers.push_back(std::move(copy));
      }
      RETURN_IF_ERROR(gpu::SynchronizeDevice());
      references[{workload_name, *seed}] = std::move(stored);
      event["baseline"] = baseline->Describe();
      event["setup_seconds"] = setup_seconds;
      event["seconds"] = Now() - t0;
      Emit(event);
      return absl::OkStatus();
    }();
    if (!status.ok()) return Fail(kExitInfrastructure, "infrastructure", status);
  }
}

// ---------------------------------------------------------------- candidate mode

struct Candidate {
  Task task;
  Gpu gpu;
  std::string cubin;
  std::map<std::string, ResolvedPlan> plans;
  uint64_t hash_key = 0;
  gpu::Module module;
  // Buffers of the workload in use (freed when another workload starts).
  std::string workload;
  gpu::TensorSet set;
  gpu::PlanLauncher launcher;
  // What the timing loop needs besides the candidate, prepared ahead ("prepare_timing", on its
  // own thread) while the trials run.
  std::string timing_workload;
  gpu::TensorSet baseline_set;
  std::unique_ptr<gpu::Baseline> baseline;
  std::unique_ptr<gpu::NvmlMonitor> nvml;
  std::string nvml_note;
  double prepare_seconds = 0;
  // Copies of the checked timing samples' outputs, exported to the reference process.
  std::vector<gpu::DeviceBuffer> check_copies;
  // PrepareTiming running on its own thread beside the trials. Last member: destroyed first,
  // so the thread ends before the members it writes go.
  std::future<absl::Status> preparing;
};

absl::Status PrepareTiming(Candidate& c, const std::string& workload) {
  if (c.timing_workload == workload && c.baseline) return absl::OkStatus();
  double t0 = Now();
  ASSIGN_OR_RETURN(const Workload* w, FindWorkload(c.task, workload));
  // The baseline gets its own buffers and its own seeds: its outputs never hold the answer to
  // the inputs the candidate is given, and they are zeroed before they are freed.
  ASSIGN_OR_RETURN(auto tensors, gpu::ResolveTensors(c.task, *w));
  ASSIGN_OR_RETURN(c.baseline_set, gpu::TensorSet::Allocate(std::move(tensors)));
  ASSIGN_OR_RETURN(
      c.baseline, gpu::CreateBaseline(c.task.baseline_library, c.task.baseline_operation, w->axes));
  if (auto m = gpu::NvmlMonitor::Open(c.gpu.device.uuid); m.ok()) {
    c.nvml = std::move(*m);
  } else {
    c.nvml_note = std::string(m.status().message());
  }
  c.timing_workload = workload;
  c.prepare_seconds = Now() - t0;
  return absl::OkStatus();
}

// The task, the device and the hash key: what needs no compiled module.
absl::Status OpenCandidateDevice(const json& request, Candidate& c) {
  ASSIGN_OR_RETURN(c.task, LoadCheckedTask(request));
  ASSIGN_OR_RETURN(c.gpu, OpenGpu(request));
  ASSIGN_OR_RETURN(c.hash_key, ParseU64(request.value("hash_key", json("0"))));
  return absl::OkStatus();
}

// The compiled module and the resolved plans (InvalidArgument: PLAN_INVALID).
absl::Status OpenCandidateModule(const json& request, Candidate& c) {
  ASSIGN_OR_RETURN(c.cubin, gpu::ReadFileBytes(Str(request, "cubin_path")));
  ASSIGN_OR_RETURN(std::string ptx, gpu::ReadFileBytes(Str(request, "ptx_path")));
  ASSIGN_OR_RETURN(c.plans, ResolvePlans(c.task, request, ptx, nullptr));
  return absl::OkStatus();
}

absl::Status OpenCandidate(const json& request, Candidate& c) {
  RETURN_IF_ERROR(OpenCandidateDevice(request, c));
  return OpenCandidateModule(request, c);
}

void StartPreparingTiming(Candidate& c, const std::string& workload) {
  if (c.preparing.valid() || workload.empty()) return;
  // On its own thread: the baseline library's first handle costs ~1.4 s (reference process,
  // H200), which the compile and the trials then hide. Errors surface at "time".
  c.preparing = std::async(std::launch::async, [&c, workload]() {
    PTXBENCH_CUDA_TRY(cudaSetDevice(c.gpu.device.ordinal));  // Per thread.
    return PrepareTiming(c, workload);
  });
}

// (Re)loads the module: every trial starts from fresh module globals.
absl::Status ReloadModule(Candidate& c) {
  RETURN_IF_ERROR(c.module.Unload());
  ASSIGN_OR_RETURN(c.module, gpu::Module::Load(c.cubin.data()));
  return absl::OkStatus();
}

absl::Status UseWorkload(Candidate& c, const std::string& name) {
  if (c.workload == name) return absl::OkStatus();
  c.launcher = gpu::PlanLauncher();
  c.set = gpu::TensorSet();
  ASSIGN_OR_RETURN(const Workload* w, FindWorkload(c.task, name));
  ASSIGN_OR_RETURN(auto tensors, gpu::ResolveTensors(c.task, *w));
  ASSIGN_OR_RETURN(c.set, gpu::TensorSet::Allocate(std::move(tensors)));
  auto plan = c.plans.find(name);
  if (plan == c.plans.end()) return absl::InternalError("no resolved plan for " + name);
  ASSIGN_OR_RETURN(c.launcher, gpu::PlanLauncher::Create(plan->second, c.set));
  c.workload = name;
  return absl::OkStatus();
}

// One correctness trial. Kernel faults come back as kAborted / kFailedPrecondition.
absl::StatusOr<json> RunTrial(Candidate& c, const std::string& workload, uint64_t seed,
                              const std::string& prefix, const std::string& transfer = "file") {
  double t0 = Now();
  RETURN_IF_ERROR(UseWorkload(c, workload));
  RETURN_IF_ERROR(ReloadModule(c));
  RETURN_IF_ERROR(c.launcher.Bind(c.module));
  cudaStream_t s = c.gpu.stream.get();
  RETURN_IF_ERROR(c.set.GenerateInputs(*c.gpu.builtins, seed, s));
  ASSIGN_OR_RETURN(uint64_t before, c.set.HashInputs(*c.gpu.builtins, c.hash_key, s));
  RETURN_IF_ERROR(c.set.PoisonOutputs(*c.gpu.builtins, s));
  RETURN_IF_ERROR(c.launcher.ZeroScratch(s));
  RETURN_IF_ERROR(c.gpu.builtins->FlushL2(s));
  ASSIGN_OR_RETURN(gpu::Event start, gpu::Event::Create());
  ASSIGN_OR_RETURN(gpu::Event end, gpu::Event::Create());
  if (cudaEventRecord(start.get(), s) != cudaSuccess) return absl::InternalError("event record");
  RETURN_IF_ERROR(c.launcher.LaunchAll(s));
  if (cudaEventRecord(end.get(), s) != cudaSuccess) return absl::InternalError("event record");
  RETURN_IF_ERROR(gpu::SynchronizeDevice());
  ASSIGN_OR_RETURN(double kernel_ms, gpu::ElapsedMs(start, end));
  ASSIGN_OR_RETURN(uint64_t after, c.set.HashInputs(*c.gpu.builtins, c.hash_key, s));
  ASSIGN_OR_RETURN(json outputs, HandOverOutputs(c.set, transfer, prefix, s));
  return json{{"event", "trial"},
              {"workload", workload},
              {"seed", U64(seed)},
              {"input_hash_before", U64(before)},
              {"input_hash_after", U64(after)},
              {"outputs", outputs},
              {"kernel_ms", kernel_ms},
              {"seconds", Now() - t0}};
}

absl::StatusOr<json> RunTiming(Candidate& c, const json& cmd) {
  double t0 = Now();
  const std::string workload = Str(cmd, "workload");
  if (c.preparing.valid()) RETURN_IF_ERROR(c.preparing.get());
  ASSIGN_OR_RETURN(const Workload* w, FindWorkload(c.task, workload));
  RETURN_IF_ERROR(UseWorkload(c, workload));
  // A fresh module: nothing a correctness trial left in module globals reaches the timing.
  RETURN_IF_ERROR(ReloadModule(c));
  RETURN_IF_ERROR(c.launcher.Bind(c.module));
  RETURN_IF_ERROR(PrepareTiming(c, workload));
  (void)w;
  gpu::TensorSet& baseline_set = c.baseline_set;
  gpu::Baseline* baseline = c.baseline.get();
  gpu::NvmlMonitor* nvml = c.nvml.get();
  json nvml_note;
  if (!c.nvml_note.empty()) nvml_note = c.nvml_note;
  cudaStream_t s = c.gpu.stream.get();
  const double setup_seconds = Now() - t0;
  double check_seconds = 0;
  gpu::TimedSide candidate_side{[&](uint64_t seed) -> absl::Status {
                                  RETURN_IF_ERROR(c.set.GenerateInputs(*c.gpu.builtins, seed, s));
                                  RETURN_IF_ERROR(c.set.PoisonOutputs(*c.gpu.builtins, s));
                                  return c.launcher.ZeroScratch(s);
                                },
                                [&]() { return c.launcher.LaunchAll(s); }};
  gpu::TimedSide baseline_side{
      [&](uint64_t seed) -> absl::Status {
        RETURN_IF_ERROR(baseline_set.GenerateInputs(*c.gpu.builtins, seed, s));
        return baseline_set.PoisonOutputs(*c.gpu.builtins, s);
      },
      [&]() {
        return baseline->Run(baseline_set.InputPointers(), baseline_set.OutputPointers(), s);
      }};
  gpu::TimingConfig config;
  config.rule.min_samples = cmd.value("min_samples", 20);
  config.rule.max_samples = cmd.value("max_samples", 400);
  config.rule.max_seconds = cmd.value("max_seconds", 2.0);
  config.rule.target_rse = cmd.value("target_rse", 0.005);
  config.warmup_seconds = cmd.value("warmup_seconds", 0.3);
  config.check_every = cmd.value("check_every", 16);
  config.max_checks = cmd.value("max_checks", 4);
  ASSIGN_OR_RETURN(config.candidate_seed_base,
                   ParseU64(cmd.value("candidate_seed_base", json("1"))));
  ASSIGN_OR_RETURN(config.baseline_seed_base, ParseU64(cmd.value("baseline_seed_base", json("2"))));
  ASSIGN_OR_RETURN(config.check_position_seed,
                   ParseU64(cmd.value("check_position_seed", json("3"))));
  const std::string check_prefix = Str(cmd, "check_prefix");
  const bool check_by_ipc = Str(cmd, "transfer") == "ipc";
  json checks = json::array();
  c.check_copies.clear();
  auto on_check = [&](size_t index, uint64_t seed) -> absl::Status {
    double c0 = Now();
    json outputs = json::array();
    if (check_by_ipc) {
      // A device-to-device copy the reference process maps after the loop (~0.1 ms for 117 MB,
      // against ~0.13 s through a host file).
      std::vector<void*> pointers = c.set.OutputPointers();
      size_t ordinal = 0;
      for (const gpu::WorkloadTensor& t : c.set.tensors()) {
        if (!t.output) continue;
        ASSIGN_OR_RETURN(gpu::DeviceBuffer copy, gpu::DeviceBuffer::Allocate(t.bytes));
        PTXBENCH_CUDA_TRY(cudaMemcpyAsync(copy.get(), pointers.at(ordinal++), t.bytes,
                                          cudaMemcpyDeviceToDevice, s));
        ASSIGN_OR_RETURN(std::string handle, gpu::ExportIpcHandle(copy.get()));
        outputs.push_back({{"tensor", t.name}, {"ipc", handle}, {"bytes", t.bytes}});
        c.check_copies.push_back(std::move(copy));
      }
      PTXBENCH_CUDA_TRY(cudaStreamSynchronize(s));
    } else {
      ASSIGN_OR_RETURN(outputs, SaveOutputs(c.set, absl::StrCat(check_prefix, ".", index), s));
    }
    checks.push_back({{"sample", index}, {"seed", U64(seed)}, {"outputs", outputs}});
    check_seconds += Now() - c0;
    return absl::OkStatus();
  };
  ASSIGN_OR_RETURN(gpu::TimingResult timing,
                   gpu::TimeInterleaved(candidate_side, baseline_side, *c.gpu.builtins, s, nvml,
                                        config, on_check));
  RETURN_IF_ERROR(baseline_set.ZeroAll(s));
  json event = {{"event", "timing"},
                {"workload", workload},
                {"result", gpu::ToJson(timing)},
                {"checks", checks},
                {"baseline", baseline->Describe()},
                {"device", gpu::ToJson(c.gpu.device)},
                {"flush_bytes", c.gpu.builtins->flush_bytes()},
                {"setup_seconds", setup_seconds},
                {"prepare_seconds", c.prepare_seconds},
                {"check_seconds", check_seconds},
                {"seconds", Now() - t0}};
  if (!nvml_note.is_null()) event["nvml_unavailable"] = nvml_note;
  return event;
}

int CandidateMode(const json& request) {
  Candidate c;
  gpu::LineReader commands(STDIN_FILENO);
  absl::Status opened;
  if (request.value("wait_for_module", false)) {
    // Started beside the compiler: the device and the timing baseline are set up while the
    // source compiles; the module's paths come with "module" (end of input: it did not compile).
    opened = OpenCandidateDevice(request, c);
    if (opened.ok()) {
      StartPreparingTiming(c, Str(request, "timing_workload"));
      auto line = commands.ReadLine(-1);
      if (!line.ok()) return Fail(kExitInfrastructure, "infrastructure", line.status());
      if (!line->has_value()) return kExitOk;
      json cmd = json::parse(**line, nullptr, false);
      if (cmd.is_discarded() || Str(cmd, "cmd") != "module") return kExitOk;
      json with_module = request;
      with_module["cubin_path"] = Str(cmd, "cubin_path");
      with_module["ptx_path"] = Str(cmd, "ptx_path");
      opened = OpenCandidateModule(with_module, c);
    }
  } else {
    opened = OpenCandidate(request, c);
  }
  if (!opened.ok()) {
    if (opened.code() == absl::StatusCode::kInvalidArgument) return FailFromStatus(opened, "setup");
    return Fail(kExitInfrastructure, "infrastructure", opened);
  }
  Emit({{"event", "ready"}, {"device", gpu::ToJson(c.gpu.device)}});
  while (true) {
    auto line = commands.ReadLine(-1);
    if (!line.ok()) return Fail(kExitInfrastructure, "infrastructure", line.status());
    if (!line->has_value()) return kExitOk;
    json cmd = json::parse(**line, nullptr, false);
    if (cmd.is_discarded())
      return Fail(kExitInfrastructure, "infrastructure",
                  absl::InvalidArgumentError("bad command line"));
    const std::string name = Str(cmd, "cmd");
    if (name == "quit") return kExitOk;
    if (name == "trial") {
      auto seed = ParseU64(cmd.value("seed", json("0")));
      if (!seed.ok()) return Fail(kExitInfrastructure, "infrastructure", seed.status());
      auto event =
          RunTrial(c, Str(cmd, "workload"), *seed, Str(cmd, "prefix"), Str(cmd, "transfer"));
      if (!event.ok()) return FailFromStatus(event.status(), "trial");
      Emit(*event);
    } else if (name == "save_outputs") {
      // The last trial's outputs again, as files (the reference process could not map them).
      auto files = SaveOutputs(c.set, Str(cmd, "prefix"), c.gpu.stream.get());
      if (!files.ok()) return FailFromStatus(files.status(), "saving outputs");
      Emit({{"event", "outputs"}, {"outputs", *files}});
    } else if (name == "prepare_timing") {
      StartPreparingTiming(c, Str(cmd, "workload"));
    } else if (name == "time") {
      auto event = RunTiming(c, cmd);
      if (!event.ok()) return FailFromStatus(event.status(), "timing");
      Emit(*event);
    } else {
      return Fail(kExitInfrastructure, "infrastructure",
                  absl::InvalidArgumentError("unknown command " + name));
    }
  }
}

// ---------------------------------------------------------------- instrument mode

// Runs the plan once on the timed workload with CUPTI SASS metrics enabled from the first launch
// of ONE kernel (request "launch_index") to the end of the plan: the earlier launches run
// uninstrumented first, so the instrumented kernel sees the inputs the real plan gives it.
// The profiler is initialized before any kernel runs; the metrics are configured and enabled
// only after the harness's own kernels and the earlier launches ran.
// "host_inputs": the fallback for a CUPTI that instruments only the first kernel a process
// executes: inputs generated on the CPU and copied, poison and scratch by copies, no earlier
// launches, so the submission's kernel is the first kernel of the process. Its outputs are then
// not compared (host and device generation differ in the last bits) and the report says so.
int InstrumentMode(const json& request) {
  double t0 = Now();
  Candidate c;
  if (auto s = OpenCandidate(request, c); !s.ok()) {
    if (s.code() == absl::StatusCode::kInvalidArgument) return FailFromStatus(s, "setup");
    return Fail(kExitInfrastructure, "infrastructure", s);
  }
  auto session = gpu::SassMetricsSession::Create(c.gpu.device.ordinal);
  if (!session.ok()) return Fail(kExitInfrastructure, "profiler_unavailable", session.status());
  auto crc = gpu::SassMetricsSession::CubinCrc(c.cubin);
  if (!crc.ok()) return Fail(kExitInfrastructure, "profiler_unavailable", crc.status());
  auto seed = ParseU64(request.value("seed", json("0")));
  if (!seed.ok()) return Fail(kExitInfrastructure, "infrastructure", seed.status());
  const std::string workload = Str(request, "workload");
  const size_t launch_index = request.value("launch_index", 0);
  const bool host_inputs = request.value("host_inputs", false);
  std::string transfer = Str(request, "transfer");
  gpu::LineReader commands(STDIN_FILENO);
  absl::StatusOr<json> result = [&]() -> absl::StatusOr<json> {
    RETURN_IF_ERROR(UseWorkload(c, workload));
    RETURN_IF_ERROR(ReloadModule(c));
    RETURN_IF_ERROR(c.launcher.Bind(c.module));
    if (launch_index >= c.launcher.launch_count()) {
      return absl::InternalError("launch_index past the plan");
    }
    if (request.value("wait_for_go", false)) {
      // Started beside the correctness stage: CUDA, CUPTI, the module and the buffers are set
      // up; nothing of the submission runs before the supervisor's "go" (~0.5 s of start-up
      // off the critical path). End of input: the evaluation ended before this stage.
      ASSIGN_OR_RETURN(auto line, commands.ReadLine(-1));
      if (!line.has_value()) return json();
      json go = json::parse(*line, nullptr, false);
      if (go.is_discarded() || Str(go, "cmd") != "go") return json();
      if (go.contains("transfer")) transfer = Str(go, "transfer");
      t0 = Now();
    }
    cudaStream_t s = c.gpu.stream.get();
    uint64_t before = 0;
    if (host_inputs) {
      RETURN_IF_ERROR(c.set.UploadInputsFromHost(*seed, s));
      RETURN_IF_ERROR(c.set.PoisonOutputsByCopy(s));
      RETURN_IF_ERROR(c.launcher.ZeroScratchByCopy(s));
    } else {
      RETURN_IF_ERROR(c.set.GenerateInputs(*c.gpu.builtins, *seed, s));
      ASSIGN_OR_RETURN(before, c.set.HashInputs(*c.gpu.builtins, c.hash_key, s));
      RETURN_IF_ERROR(c.set.PoisonOutputs(*c.gpu.builtins, s));
      RETURN_IF_ERROR(c.launcher.ZeroScratch(s));
      RETURN_IF_ERROR(c.launcher.Launch(s, 0, launch_index));
    }
    RETURN_IF_ERROR(gpu::SynchronizeDevice());
    RETURN_IF_ERROR((*session)->Enable());
    double k0 = Now();
    RETURN_IF_ERROR(c.launcher.Launch(s, launch_index, c.launcher.launch_count()));
    RETURN_IF_ERROR(gpu::SynchronizeDevice());
    double instrumented_seconds = Now() - k0;
    ASSIGN_OR_RETURN(std::vector<gpu::SassPcCounts> records, (*session)->FlushAndDisable());
    json event = {{"event", "instrument"},        {"workload", workload},
                  {"seed", U64(*seed)},           {"kernel", c.launcher.kernel(launch_index)},
                  {"launch_index", launch_index}, {"host_inputs", host_inputs},
                  {"cubin_crc", U64(*crc)},       {"cupti_version", (*session)->cupti_version()},
                  {"chip", (*session)->chip()},   {"instrumented_seconds", instrumented_seconds}};
    if (!host_inputs) {
      ASSIGN_OR_RETURN(uint64_t after, c.set.HashInputs(*c.gpu.builtins, c.hash_key, s));
      ASSIGN_OR_RETURN(event["outputs"],
                       HandOverOutputs(c.set, transfer, Str(request, "output_prefix"), s));
      event["input_hash_before"] = U64(before);
      event["input_hash_after"] = U64(after);
    }
    json own = json::array();
    std::map<std::string, size_t> other;
    for (const gpu::SassPcCounts& r : records) {
      if (r.cubin_crc != *crc) {
        ++other[r.function];
        continue;
      }
      own.push_back({r.function, r.pc_offset, r.warp_inst_executed, r.thread_inst_pred_on,
                     r.gmma_warp_inst_executed, r.tma_warp_inst_executed});
    }
    event["record_fields"] = {"function",           "pc",
                              "warp_inst_executed", "thread_inst_pred_on",
                              "gmma_warp_inst",     "tma_warp_inst"};
    event["records"] = own;
    event["other_module_records"] = other;
    event["seconds"] = Now() - t0;
    return event;
  }();
  if (!result.ok()) return FailFromStatus(result.status(), "instrumented run");
  if (result->is_null()) return kExitOk;  // Never told to go.
  Emit(*result);
  if (transfer == "ipc" && !host_inputs) {
    // The exported outputs live as long as this process: wait until the supervisor has had
    // them compared ("quit" or end of input); "save_outputs" writes them as files instead.
    while (true) {
      auto line = commands.ReadLine(-1);
      if (!line.ok() || !line->has_value()) return kExitOk;
      json cmd = json::parse(**line, nullptr, false);
      if (cmd.is_discarded() || Str(cmd, "cmd") != "save_outputs") return kExitOk;
      auto files = SaveOutputs(c.set, Str(cmd, "prefix"), c.gpu.stream.get());
      if (!files.ok()) return FailFromStatus(files.status(), "saving outputs");
      Emit({{"event", "outputs"}, {"outputs", *files}});
    }
  }
  return kExitOk;
}

// ---------------------------------------------------------------- replay and health

int ReplayMode(const json& request) {
  Candidate c;
  if (auto s = OpenCandidate(request, c); !s.ok()) return FailFromStatus(s, "setup");
  auto seed = ParseU64(request.value("seed", json("0")));
  if (!seed.ok()) return Fail(kExitInfrastructure, "infrastructure", seed.status());
  auto event = RunTrial(c, Str(request, "workload"), *seed, Str(request, "output_prefix"));
  if (!event.ok()) return FailFromStatus(event.status(), "replay");
  Emit(*event);
  return kExitOk;
}

int HealthMode(const json& request) {
  double t0 = Now();
  auto g = OpenGpu(request);
  if (!g.ok()) return Fail(kExitInfrastructure, "unavailable", g.status());
  if (auto s = g->builtins->HealthCheck(); !s.ok())
    return Fail(kExitInfrastructure, "unhealthy", s);
  Emit({{"event", "health"},
        {"ok", true},
        {"device", gpu::ToJson(g->device)},
        {"seconds", Now() - t0}});
  return kExitOk;
}

}  // namespace

int Main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: ptxbench-evaluator compile|sassmap|reference|candidate|instrument|"
                 "replay|health --request FILE\n");
    return kExitInfrastructure;
  }
  const std::string mode = argv[1];
  json request = json::object();
  if (mode != "health" || argc > 2) {
    auto r = ReadRequest(argc, argv);
    if (!r.ok()) return Fail(kExitInfrastructure, "infrastructure", r.status());
    request = *r;
  }
  if (mode == "compile") return CompileMode(request);
  if (mode == "sassmap") return SassMapMode(request);
  if (mode == "reference") return ReferenceMode(request);
  if (mode == "candidate") return CandidateMode(request);
  if (mode == "instrument") return InstrumentMode(request);
  if (mode == "replay") return ReplayMode(request);
  if (mode == "health") return HealthMode(request);
  return Fail(kExitInfrastructure, "infrastructure",
              absl::InvalidArgumentError("unknown mode " + mode));
}

}  // namespace ptxbench::evaluator
