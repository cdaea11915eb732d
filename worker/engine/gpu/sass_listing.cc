#include "worker/engine/gpu/sass_listing.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <regex>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/subprocess.h"

namespace ptxbench::gpu {

const SassInstruction* SassFunction::AtPc(uint32_t pc) const {
  // Instructions are in PC order.
  size_t lo = 0, hi = instructions.size();
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (instructions[mid].pc < pc) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo < instructions.size() && instructions[lo].pc == pc) return &instructions[lo];
  return nullptr;
}

std::string SassOpcode(const std::string& instruction) {
  size_t i = 0;
  auto skip_space = [&] {
    while (i < instruction.size() && (instruction[i] == ' ' || instruction[i] == '\t')) ++i;
  };
  skip_space();
  if (i < instruction.size() && instruction[i] == '@') {
    while (i < instruction.size() && instruction[i] != ' ' && instruction[i] != '\t') ++i;
    skip_space();
  }
  size_t start = i;
  while (i < instruction.size() &&
         (std::isalnum(static_cast<unsigned char>(instruction[i])) || instruction[i] == '_')) {
    ++i;
  }
  return instruction.substr(start, i - start);
}

SassListing ParseNvdisasm(const std::string& text) {
  static const std::regex kFunctionLabel(R"(^\.text\.([A-Za-z_$][\w$.]*):\s*$)");
  static const std::regex kFileLine(R"re(//## File "([^"]*)", line ([0-9]+))re");
  static const std::regex kInstruction(R"(^\s*/\*([0-9a-fA-F]+)\*/\s+(.*?)\s*;)");
  SassListing listing;
  SassFunction* current = nullptr;
  std::string file;
  int line = 0;
  std::istringstream in(text);
  std::string row;
  std::smatch m;
  while (std::getline(in, row)) {
    if (std::regex_match(row, m, kFunctionLabel)) {
      current = &listing[m[1].str()];
      current->name = m[1].str();
      file.clear();
      line = 0;
      continue;
    }
    if (current == nullptr) continue;
    if (std::regex_search(row, m, kFileLine)) {
      file = m[1].str();
      line = std::atoi(m[2].str().c_str());
      continue;
    }
    if (std::regex_search(row, m, kInstruction)) {
      SassInstruction ins;
      ins.pc = static_cast<uint32_t>(std::strtoul(m[1].str().c_str(), nullptr, 16));
      ins.text = m[2].str();
      ins.opcode = SassOpcode(ins.text);
      ins.file = file;
      ins.line = line;
      current->instructions.push_back(std::move(ins));
    }
  }
  return listing;
}

std::optional<std::string> FindNvdisasm() {
  auto executable = [](const std::string& path) {
    struct stat st;
    return !path.empty() && stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
           access(path.c_str(), X_OK) == 0;
  };
  if (const char* env = std::getenv("PTXBENCH_NVDISASM"); env && executable(env)) return env;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    if (const char* root = std::getenv(var)) {
      std::string p = absl::StrCat(root, "/bin/nvdisasm");
      if (executable(p)) return p;
    }
  }
  if (executable("/usr/local/cuda/bin/nvdisasm"))
    return std::string("/usr/local/cuda/bin/nvdisasm");
  if (const char* path = std::getenv("PATH")) return FindInPath("nvdisasm", path);
  return std::nullopt;
}

absl::StatusOr<std::string> RunNvdisasm(const std::string& nvdisasm,
                                        const std::vector<std::string>& flags,
                                        const std::string& cubin_path, double timeout_seconds) {
  SubprocessOptions command;
  command.argv = {nvdisasm};
  command.argv.insert(command.argv.end(), flags.begin(), flags.end());
  command.argv.push_back(cubin_path);
  // nvdisasm parses a cubin built from a submission: it gets what it needs to start and
  // nothing of the worker's environment (its token). Before, it inherited all of it.
  command.environment.inherit = {"PATH", "LD_LIBRARY_PATH"};
  command.environment.set = {{"LC_ALL", "C"}};
  // The listing of a large kernel is tens of MiB; past this it is absurd output, stopped like
  // a hang.
  command.max_stdout_bytes = size_t{512} << 20;
  command.max_stderr_bytes = 0;  // its messages were never read
  command.deadline = absl::Milliseconds(static_cast<int64_t>(timeout_seconds * 1000));
  absl::StatusOr<SubprocessResult> ran = RunSubprocess(command);
  if (!ran.ok()) return absl::InternalError(ran.status().message());  // as posix_spawn's was
  SubprocessResult& run = *ran;
  if (run.timed_out || run.stdout_dropped_bytes > 0) {
    return absl::DeadlineExceededError(absl::StrCat(nvdisasm, " timed out"));
  }
  if (run.exit_code != 0) {
    return absl::InternalError(
        run.term_signal != 0 ? absl::StrCat(nvdisasm, " was killed by signal ", run.term_signal)
                             : absl::StrCat(nvdisasm, " failed with exit code ", run.exit_code));
  }
  return std::move(run.stdout_bytes);
}

std::optional<std::string> ElfSection(const std::string& elf, const std::string& section) {
  // ELF64 little-endian layout (System V gABI): e_shoff at 0x28, e_shentsize 0x3A, e_shnum
  // 0x3C, e_shstrndx 0x3E; section header: sh_name 0x0, sh_offset 0x18, sh_size 0x20.
  auto u16 = [&](size_t off) -> uint64_t {
    uint16_t v;
    std::memcpy(&v, elf.data() + off, 2);
    return v;
  };
  auto u32 = [&](size_t off) -> uint64_t {
    uint32_t v;
    std::memcpy(&v, elf.data() + off, 4);
    return v;
  };
  auto u64 = [&](size_t off) -> uint64_t {
    uint64_t v;
    std::memcpy(&v, elf.data() + off, 8);
    return v;
  };
  if (elf.size() < 64 ||
      elf.compare(0, 4,
                  "\x7f"
                  "ELF") != 0 ||
      elf[4] != 2)
    return std::nullopt;
  uint64_t shoff = u64(0x28), shentsize = u16(0x3A), shnum = u16(0x3C), shstrndx = u16(0x3E);
  if (shentsize < 0x40 || shoff > elf.size() || shnum * shentsize > elf.size() - shoff ||
      shstrndx >= shnum) {
    return std::nullopt;
  }
  auto header = [&](uint64_t i) { return static_cast<size_t>(shoff + i * shentsize); };
  uint64_t strtab_off = u64(header(shstrndx) + 0x18), strtab_size = u64(header(shstrndx) + 0x20);
  if (strtab_off > elf.size() || strtab_size > elf.size() - strtab_off) return std::nullopt;
  for (uint64_t i = 0; i < shnum; ++i) {
    uint64_t name = u32(header(i));
    if (name >= strtab_size) continue;
    const char* n = elf.data() + strtab_off + name;
    size_t max_len = static_cast<size_t>(strtab_size - name);
    if (strnlen(n, max_len) != section.size() ||
        section.compare(0, section.size(), n, section.size()) != 0) {
      continue;
    }
    uint64_t off = u64(header(i) + 0x18), size = u64(header(i) + 0x20);
    if (off > elf.size() || size > elf.size() - off) return std::nullopt;
    return elf.substr(static_cast<size_t>(off), static_cast<size_t>(size));
  }
  return std::nullopt;
}

}  // namespace ptxbench::gpu
