// Finding the one source file in a model's reply.
//
// Rules (docs/client.md, "Reply format"): reasoning inside <think>...</think> is ignored; the
// source is a fenced code block (``` or ~~~). Among the blocks, the LAST one carrying a
// `PTXBENCH_PLAN` block comment wins (a model often shows a draft before its final version);
// without one, the last block that declares a kernel (`__global__` or `.entry`), with the
// launch plan taken from the last ```json block that has "launches". The language is PTX
// when the fence says ptx or the text is a PTX module (.target and .entry, no __global__),
// else CUDA C++. A reply with no such block is not an error of the run: `problem` says what
// was missing, and it becomes the model's feedback.
#ifndef PTXBENCH_CLIENT_RUN_EXTRACT_H_
#define PTXBENCH_CLIENT_RUN_EXTRACT_H_

#include <string>

namespace ptxbench::client::run {

struct ExtractedSource {
  bool ok = false;
  std::string source;
  std::string language;          // "cuda" or "ptx".
  std::string launch_plan_json;  // Set only when the plan came from a separate JSON block.
  std::string problem;           // When !ok: what the reply lacked, addressed to the model.
};

ExtractedSource ExtractSource(const std::string& reply);

// A reply cut into what the model said and the reasoning it wrote inline, DeepSeek-R1 style
// (<think>...</think>; an unclosed one runs to the end, a stray "</think>" ends reasoning that
// lost its opening tag).
struct ThinkingSplit {
  std::string answer;
  std::string reasoning;  // The <think> sections' text, joined by blank lines.
};
ThinkingSplit SplitThinking(const std::string& reply);

}  // namespace ptxbench::client::run

#endif  // PTXBENCH_CLIENT_RUN_EXTRACT_H_
