#include "worker/engine/ptxas_info.h"

#include <cctype>
#include <cstdlib>
#include <set>

namespace ptxbench {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// The number right before `unit` in `line` ("30 registers" -> 30); -1 when absent.
int64_t NumberBefore(std::string_view line, std::string_view unit) {
  size_t at = line.find(unit);
  while (at != std::string_view::npos) {
    size_t end = at;
    while (end > 0 && line[end - 1] == ' ') --end;
    size_t begin = end;
    while (begin > 0 && std::isdigit(static_cast<unsigned char>(line[begin - 1]))) --begin;
    if (begin < end)
      return std::strtoll(std::string(line.substr(begin, end - begin)).c_str(), nullptr, 10);
    at = line.find(unit, at + 1);
  }
  return -1;
}

// The text between the first pair of single quotes after `marker`, or the next word.
std::string NameAfter(std::string_view line, std::string_view marker) {
  const size_t at = line.find(marker);
  if (at == std::string_view::npos) return "";
  std::string_view rest = Trim(line.substr(at + marker.size()));
  if (!rest.empty() && rest.front() == '\'') {
    const size_t close = rest.find('\'', 1);
    return std::string(
        rest.substr(1, close == std::string_view::npos ? std::string_view::npos : close - 1));
  }
  size_t n = 0;
  while (n < rest.size() && !std::isspace(static_cast<unsigned char>(rest[n])) && rest[n] != ':')
    ++n;
  return std::string(rest.substr(0, n));
}

// "ptxas info    : text" -> "text"; "info    : text" -> "text".
std::string_view Message(std::string_view line) {
  const size_t colon = line.find(" : ");
  if (colon == std::string_view::npos) return Trim(line);
  return Trim(line.substr(colon + 3));
}

}  // namespace

PtxasInfo ParsePtxasInfo(std::string_view log) {
  PtxasInfo info;
  std::string entry;       // Set by "Compiling entry function 'x'".
  std::string properties;  // Set by "Function properties for x".
  std::string summary;     // Set by the linker's "Function properties for 'x':".
  std::set<std::string> described_by_ptxas;
  size_t start = 0;
  while (start < log.size()) {
    size_t end = log.find('\n', start);
    if (end == std::string_view::npos) end = log.size();
    const std::string_view line = Trim(log.substr(start, end - start));
    start = end + 1;
    if (line.empty()) continue;
    const bool from_ptxas = line.rfind("ptxas", 0) == 0;
    const std::string_view message = Message(line);

    if (message.rfind("Compiling entry function", 0) == 0) {
      entry = NameAfter(message, "Compiling entry function");
      described_by_ptxas.insert(entry);
      info.resources[entry];
      continue;
    }
    if (message.rfind("Function properties for", 0) == 0) {
      if (from_ptxas) {
        properties = NameAfter(message, "Function properties for");
      } else {
        summary = NameAfter(message, "Function properties for");
      }
      continue;
    }
    // The ptxas binary prints this line bare ("    0 bytes stack frame, ..."); inside nvJitLink
    // it carries a "ptxas         ." prefix.
    if (line.find("bytes stack frame") != std::string_view::npos) {
      if (properties.empty()) continue;
      KernelResources& r = info.resources[properties];
      r.stack_frame_bytes = std::max<int64_t>(0, NumberBefore(line, "bytes stack frame"));
      r.spill_store_bytes = std::max<int64_t>(0, NumberBefore(line, "bytes spill stores"));
      r.spill_load_bytes = std::max<int64_t>(0, NumberBefore(line, "bytes spill loads"));
      continue;
    }
    if (from_ptxas && message.rfind("Used ", 0) == 0 && !entry.empty()) {
      KernelResources& r = info.resources[entry];
      r.registers = static_cast<int>(std::max<int64_t>(0, NumberBefore(message, "registers")));
      r.barriers = static_cast<int>(std::max<int64_t>(0, NumberBefore(message, "barriers")));
      r.shared_bytes = std::max<int64_t>(0, NumberBefore(message, "bytes smem"));
      if (const int64_t cmem = NumberBefore(message, "bytes cmem[0]"); cmem >= 0)
        r.constant_bytes = cmem;
      continue;
    }
    if (!from_ptxas && message.rfind("used ", 0) == 0 && !summary.empty()) {
      KernelResources& r = info.resources[summary];
      if (const int64_t cmem = NumberBefore(message, "bytes cmem[0]"); cmem >= 0)
        r.constant_bytes = cmem;
      if (described_by_ptxas.count(summary) == 0) {
        r.registers = static_cast<int>(std::max<int64_t>(0, NumberBefore(message, "registers")));
        r.barriers = static_cast<int>(std::max<int64_t>(0, NumberBefore(message, "barriers")));
        r.stack_frame_bytes = std::max<int64_t>(0, NumberBefore(message, "stack"));
        r.shared_bytes = std::max<int64_t>(0, NumberBefore(message, "bytes smem"));
      }
      continue;
    }
    // Advisories carry a code "(C7511)"; warnings say so.
    const bool coded = message.size() > 7 && message[0] == '(' && message[1] == 'C' &&
                       message.find(')') != std::string_view::npos;
    if (coded || line.find("warning") != std::string_view::npos) {
      info.diagnostics.emplace_back(message);
    }
  }
  return info;
}

}  // namespace ptxbench
