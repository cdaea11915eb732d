#include "client/run/extract.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

namespace ptxbench::client::run {
namespace {

struct Block {
  std::string info;  // The fence's first word, lowercase ("cuda", "ptx", "json", "").
  std::string text;
  bool closed = false;
};

std::string WithoutThinking(const std::string& reply) { return SplitThinking(reply).answer; }

// A fence line: up to three spaces, then at least three backticks or tildes.
bool IsFence(const std::string& line, char* fence_char, size_t* fence_length, std::string* info) {
  size_t i = 0;
  while (i < line.size() && i < 3 && line[i] == ' ') ++i;
  if (i >= line.size() || (line[i] != '`' && line[i] != '~')) return false;
  const char c = line[i];
  size_t n = 0;
  while (i + n < line.size() && line[i + n] == c) ++n;
  if (n < 3) return false;
  *fence_char = c;
  *fence_length = n;
  std::string rest = std::string(absl::StripAsciiWhitespace(line.substr(i + n)));
  const size_t space = rest.find_first_of(" \t{");
  *info = absl::AsciiStrToLower(rest.substr(0, space));
  return true;
}

std::vector<Block> FencedBlocks(const std::string& text) {
  std::vector<Block> blocks;
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  Block current;
  bool inside = false;
  char open_char = 0;
  size_t open_length = 0;
  for (std::string line : lines) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    char c = 0;
    size_t n = 0;
    std::string info;
    const bool fence = IsFence(line, &c, &n, &info);
    if (!inside) {
      if (fence) {
        inside = true;
        open_char = c;
        open_length = n;
        current = Block{info, "", false};
      }
      continue;
    }
    if (fence && c == open_char && n >= open_length && info.empty()) {
      current.closed = true;
      blocks.push_back(current);
      inside = false;
      continue;
    }
    current.text += line;
    current.text += '\n';
  }
  if (inside) blocks.push_back(current);  // Unclosed: the reply was cut off.
  return blocks;
}

bool HasPlanMarker(const std::string& text) { return absl::StrContains(text, "PTXBENCH_PLAN"); }

bool DeclaresKernel(const std::string& text) {
  return absl::StrContains(text, "__global__") || absl::StrContains(text, ".entry");
}

bool IsPlanJson(const Block& block) {
  if (block.info != "json" && block.info != "jsonc") return false;
  auto json = nlohmann::json::parse(block.text, nullptr, /*allow_exceptions=*/false);
  return json.is_object() && json.contains("launches");
}

std::string LanguageOf(const Block& block) {
  if (block.info == "ptx") return "ptx";
  const bool ptx_module = absl::StrContains(block.text, ".target") &&
                          absl::StrContains(block.text, ".entry") &&
                          !absl::StrContains(block.text, "__global__");
  return ptx_module ? "ptx" : "cuda";
}

}  // namespace

ThinkingSplit SplitThinking(const std::string& reply) {
  ThinkingSplit split;
  auto add_reasoning = [&](absl::string_view text) {
    text = absl::StripAsciiWhitespace(text);
    if (text.empty()) return;
    absl::StrAppend(&split.reasoning, split.reasoning.empty() ? "" : "\n\n", text);
  };
  size_t at = 0;
  for (;;) {
    const size_t open = reply.find("<think>", at);
    if (open == std::string::npos) break;
    split.answer.append(reply, at, open - at);
    const size_t close = reply.find("</think>", open);
    if (close == std::string::npos) {
      add_reasoning(absl::string_view(reply).substr(open + 7));
      return split;
    }
    add_reasoning(absl::string_view(reply).substr(open + 7, close - open - 7));
    at = close + 8;
  }
  // Some servers strip the opening tag but leave "</think>" after the reasoning.
  std::string rest = reply.substr(at);
  const size_t stray = rest.find("</think>");
  if (stray != std::string::npos) {
    // Everything before it was reasoning.
    const std::string before = split.answer + rest.substr(0, stray);
    split.answer.clear();
    add_reasoning(before);
    rest = rest.substr(stray + 8);
  }
  split.answer += rest;
  return split;
}

ExtractedSource ExtractSource(const std::string& reply) {
  ExtractedSource out;
  const std::vector<Block> blocks = FencedBlocks(WithoutThinking(reply));
  const Block* chosen = nullptr;
  const Block* plan = nullptr;
  for (const Block& block : blocks) {
    if (IsPlanJson(block)) {
      plan = &block;
      continue;
    }
    if (HasPlanMarker(block.text)) chosen = &block;
  }
  if (chosen == nullptr) {
    for (const Block& block : blocks) {
      if (!IsPlanJson(block) && DeclaresKernel(block.text)) chosen = &block;
    }
    if (chosen != nullptr && plan != nullptr) out.launch_plan_json = plan->text;
  }
  if (chosen == nullptr) {
    out.problem = blocks.empty()
                      ? "Your reply contains no fenced code block, so nothing was submitted."
                      : "None of the code blocks in your reply is a kernel source (no "
                        "PTXBENCH_PLAN block, no __global__ or .entry), so nothing was "
                        "submitted.";
    out.problem +=
        " Reply with exactly one fenced code block (```cuda or ```ptx) that holds the whole "
        "source file, including its /* PTXBENCH_PLAN {...} */ launch plan.";
    return out;
  }
  if (!chosen->closed) {
    out.problem =
        "Your reply ended inside an unclosed code block: it was cut off before the source was "
        "complete, so nothing was submitted. Write a shorter reply: the whole source file in "
        "one fenced code block, with little prose around it.";
    return out;
  }
  out.ok = true;
  out.source = chosen->text;
  out.language = LanguageOf(*chosen);
  return out;
}

}  // namespace ptxbench::client::run
