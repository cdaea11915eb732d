#include "worker/engine/sass_families.h"

#include <cstdio>
#include <cstdlib>
#include <future>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "worker/engine/gpu/sass_listing.h"
#include "worker/engine/ptx_scan.h"

namespace ptxbench {
namespace {

std::string BaseName(std::string_view path) {
  const size_t slash = path.find_last_of('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

// The destination operand of a SASS instruction text ("RZ" in "HGMMA.64x8x16.F16 RZ, ...").
std::string_view FirstOperand(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && text[i] == ' ') ++i;
  if (i < text.size() && text[i] == '@') {
    while (i < text.size() && text[i] != ' ') ++i;
  }
  while (i < text.size() && text[i] == ' ') ++i;
  while (i < text.size() && text[i] != ' ') ++i;  // The opcode with its modifiers.
  while (i < text.size() && text[i] == ' ') ++i;
  const size_t end = text.find_first_of(", ", i);
  return text.substr(i, end == std::string_view::npos ? std::string_view::npos : end - i);
}

// The families of the instructions on one piece of PTX (a line).
std::set<std::string> FamiliesOnPtxLine(std::string_view line,
                                        const std::vector<const TargetFamily*>& families) {
  std::set<std::string> out;
  for (const std::string& mnemonic : PtxFragmentMnemonics(line)) {
    for (const TargetFamily* f : families) {
      if (PtxMnemonicInFamily(*f, mnemonic)) out.insert(f->name);
    }
  }
  return out;
}

std::vector<const TargetFamily*> FamiliesOn(std::string_view arch) {
  std::vector<const TargetFamily*> families;
  for (const TargetFamily& f : TargetFamilies()) {
    if (FamilyExistsOn(f, arch)) families.push_back(&f);
  }
  return families;
}

// One SASS instruction and the families each view gives it.
struct Classified {
  std::set<std::string> by_opcode, by_ptx_line, by_source_line;
  bool no_op = false;
  int ptx_line = 0;
  std::string ptx_text;
};

double Agreement(const gpu::LineAgreement& a) {
  return a.checked > 0 ? static_cast<double>(a.consistent) / a.checked : 0.0;
}

// The families of every instruction by each view, and how the line views agree with the opcodes.
struct Classification {
  std::map<std::string, std::vector<Classified>> rows;  // Per function, per instruction.
  gpu::SassFamilyMap map;                               // Everything but `functions`.
};

Classification ClassifyInstructions(std::string_view arch, const gpu::SassListing& listing,
                                    const gpu::SassListing& ptx_listing,
                                    const std::vector<std::string>& ptx_lines,
                                    const std::map<SourceLine, std::set<std::string>>& by_source,
                                    const std::vector<const TargetFamily*>& families) {
  Classification out;
  gpu::SassFamilyMap& map = out.map;
  for (const auto& [name, function] : listing) {
    const gpu::SassFunction* with_ptx = nullptr;
    if (auto it = ptx_listing.find(name); it != ptx_listing.end()) with_ptx = &it->second;
    std::vector<Classified>& rows = out.rows[name];
    for (const gpu::SassInstruction& ins : function.instructions) {
      Classified c;
      c.no_op = IsNoOpMatrixInstruction(ins.opcode, ins.text);
      if (c.no_op) ++map.no_op_matrix_instructions_ignored;
      for (const std::string& family : FamiliesOfSassOpcode(arch, ins.text)) {
        if (!c.no_op) c.by_opcode.insert(family);
      }
      if (const gpu::SassInstruction* p = with_ptx ? with_ptx->AtPc(ins.pc) : nullptr;
          p != nullptr && p->line > 0) {
        c.ptx_line = p->line;
        if (c.ptx_line <= static_cast<int>(ptx_lines.size())) {
          c.ptx_text = ptx_lines[c.ptx_line - 1];
          c.by_ptx_line = FamiliesOnPtxLine(c.ptx_text, families);
        }
        if (!c.by_opcode.empty() && map.gp_sample.size() < 6) {
          map.gp_sample.push_back(
              {name, ins.pc, ins.text, p->file, p->line, c.ptx_text.substr(0, 120)});
        }
      }
      if (ins.line > 0) {
        auto it = by_source.find({BaseName(ins.file), ins.line});
        if (it != by_source.end()) c.by_source_line = it->second;
      }
      for (const std::string& family : c.by_opcode) {
        if (c.ptx_line > 0) {
          ++map.ptx_line_consistency.checked;
          if (c.by_ptx_line.count(family)) ++map.ptx_line_consistency.consistent;
        }
        if (ins.line > 0) {
          ++map.source_line_consistency.checked;
          if (c.by_source_line.count(family)) ++map.source_line_consistency.consistent;
        }
      }
      rows.push_back(std::move(c));
    }
  }
  map.line_method = Agreement(map.ptx_line_consistency) > Agreement(map.source_line_consistency)
                        ? gpu::SiteEvidence::kPtxLine
                        : gpu::SiteEvidence::kSourceLine;
  return out;
}

// The sites of one function: every opcode-classified instruction, then what the chosen line view
// adds for families the opcode did not name.
gpu::SassFunctionSites SitesOf(const gpu::SassFunction& function,
                               const std::vector<Classified>& rows, gpu::SiteEvidence line_method) {
  gpu::SassFunctionSites out;
  out.instructions = function.instructions.size();
  for (size_t k = 0; k < function.instructions.size(); ++k) {
    const gpu::SassInstruction& ins = function.instructions[k];
    const Classified& c = rows[k];
    auto add = [&](const std::string& family, gpu::SiteEvidence by) {
      gpu::SassSite site{ins.pc, ins.text, by, std::nullopt, std::nullopt};
      if (c.ptx_line > 0) site.ptx_line = c.ptx_line;
      if (ins.line > 0) site.source = absl::StrCat(BaseName(ins.file), ":", ins.line);
      out.sites[family].push_back(std::move(site));
    };
    for (const std::string& family : c.by_opcode) add(family, gpu::SiteEvidence::kSassOpcode);
    // A no-op HGMMA may carry the line of a real wgmma; it never stands for one.
    if (c.no_op) continue;
    const std::set<std::string>& by_line =
        line_method == gpu::SiteEvidence::kPtxLine ? c.by_ptx_line : c.by_source_line;
    for (const std::string& family : by_line) {
      if (!c.by_opcode.count(family)) add(family, line_method);
    }
  }
  return out;
}

}  // namespace

bool IsNoOpMatrixInstruction(std::string_view opcode, std::string_view text) {
  const bool gmma =
      opcode == "HGMMA" || opcode == "QGMMA" || opcode == "IGMMA" || opcode == "BGMMA";
  return gmma && FirstOperand(text) == "RZ";
}

std::map<SourceLine, std::set<std::string>> SourceLineFamilies(
    std::string_view ptx, const std::vector<const TargetFamily*>& families) {
  const std::vector<std::string> lines = absl::StrSplit(std::string(ptx), '\n');
  // .file directives come at the end of the module (NVRTC, nvcc): collect them first.
  std::map<int, std::string> files;
  for (const std::string& line : lines) {
    const size_t i = line.find_first_not_of(" \t");
    if (i == std::string::npos || line.compare(i, 5, ".file") != 0) continue;
    const int index = std::atoi(line.c_str() + i + 5);
    const size_t q1 = line.find('"', i);
    const size_t q2 = q1 == std::string::npos ? q1 : line.find('"', q1 + 1);
    if (q2 != std::string::npos) files[index] = BaseName(line.substr(q1 + 1, q2 - q1 - 1));
  }
  std::map<SourceLine, std::set<std::string>> out;
  SourceLine current{"", 0};
  for (const std::string& line : lines) {
    const size_t i = line.find_first_not_of(" \t");
    if (i == std::string::npos || line.compare(i, 5, ".file") == 0) continue;
    if (line.compare(i, 4, ".loc") == 0) {
      int file = 0, number = 0;
      if (std::sscanf(line.c_str() + i + 4, "%d %d", &file, &number) == 2) {
        current = {files.count(file) ? files[file] : "", number};
      }
      continue;
    }
    if (current.second == 0) continue;
    for (const std::string& family : FamiliesOnPtxLine(line, families)) {
      out[current].insert(family);
    }
  }
  return out;
}

gpu::SassFamilyMap ClassifySassFamilies(std::string_view arch, const SassListings& listings) {
  const gpu::SassListing listing = gpu::ParseNvdisasm(listings.with_source_lines);
  gpu::SassListing ptx_listing;
  if (listings.with_ptx_lines.has_value()) {
    ptx_listing = gpu::ParseNvdisasm(*listings.with_ptx_lines);
  }
  const std::string& ptx = listings.embedded_ptx ? *listings.embedded_ptx : listings.compile_ptx;
  const std::vector<std::string> ptx_lines = absl::StrSplit(ptx, '\n');
  const std::vector<const TargetFamily*> families = FamiliesOn(arch);
  // The source-line view uses the compile stage's PTX, whose .file/.loc match the -g lines.
  const std::map<SourceLine, std::set<std::string>> by_source =
      SourceLineFamilies(listings.compile_ptx, families);
  Classification c =
      ClassifyInstructions(arch, listing, ptx_listing, ptx_lines, by_source, families);
  gpu::SassFamilyMap map = std::move(c.map);
  map.available = true;
  map.tool = listings.tool;
  map.ptx_lines_available = listings.with_ptx_lines.has_value() && !ptx_listing.empty();
  map.ptx_source = listings.embedded_ptx ? ".nv_debug_ptx_txt" : "compile stage PTX";
  for (const auto& [name, function] : listing) {
    map.functions[name] = SitesOf(function, c.rows[name], map.line_method);
  }
  return map;
}

gpu::SassFamilyMap StaticFamilyMap(std::string_view arch, const std::string& cubin_path,
                                   const std::string& cubin, const std::string& compile_ptx) {
  std::optional<std::string> tool = gpu::FindNvdisasm();
  if (!tool) {
    return gpu::UnavailableSassMap(
        "nvdisasm not found (set PTXBENCH_NVDISASM or install the CUDA toolkit's "
        "cuda-nvdisasm); the target-instruction stage cannot run without it");
  }
  // The two listings in parallel: each takes ~0.6 s on the reference GEMM's cubin (H200 host).
  auto with_ptx_lines = std::async(std::launch::async, [&] {
    return gpu::RunNvdisasm(*tool, {"-c", "-gp"}, cubin_path, 60);
  });
  absl::StatusOr<std::string> with_source_lines =
      gpu::RunNvdisasm(*tool, {"-c", "-g"}, cubin_path, 60);
  absl::StatusOr<std::string> ptx_lines_text = with_ptx_lines.get();
  if (!with_source_lines.ok()) {
    return gpu::UnavailableSassMap(std::string(with_source_lines.status().message()));
  }
  SassListings listings;
  listings.with_source_lines = std::move(*with_source_lines);
  if (ptx_lines_text.ok()) listings.with_ptx_lines = std::move(*ptx_lines_text);
  listings.embedded_ptx = gpu::ElfSection(cubin, ".nv_debug_ptx_txt");
  listings.compile_ptx = compile_ptx;
  listings.tool = *tool;
  return ClassifySassFamilies(arch, listings);
}

}  // namespace ptxbench
