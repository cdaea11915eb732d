// The parts of `ptxbench run` that need no server: reply extraction, prompts under each
// context policy, feedback from verdicts, progress lines, the providers against local HTTP
// stubs shaped like the real APIs, and the embedded stack's GPU probe (a fake nvidia-smi).
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/run/embedded_stack.h"
#include "client/run/extract.h"
#include "client/run/feedback.h"
#include "client/run/progress.h"
#include "client/run/prompt.h"
#include "client/run/provider.h"
#include "nlohmann/json.hpp"
#include "tests/client/run/stub_http_server.h"
#include "tests/support/process.h"
#include "tests/support/temp_files.h"

namespace ptxbench::client::run {
namespace {

using ::ptxbench::testing::ScopedEnv;
using ::ptxbench::testing::StubHttpServer;
using ::ptxbench::testing::StubRequest;
using ::ptxbench::testing::StubResponse;

const char kKernel[] =
    "/* PTXBENCH_PLAN\n{\"launches\": [{\"kernel\": \"k\", \"grid\": [1], \"block\": [32], "
    "\"args\": []}]}\n*/\nextern \"C\" __global__ void k() {}\n";

TEST_CASE("extract: the last block with a plan wins, prose and drafts around it are ignored") {
  const std::string reply = absl::StrCat(
      "Here is a draft:\n```cuda\n__global__ void draft() {}\n```\nand the final version:\n\n"
      "```cuda\n",
      kKernel, "```\nThat should work.");
  ExtractedSource got = ExtractSource(reply);
  REQUIRE(got.ok);
  CHECK(got.source == kKernel);
  CHECK(got.language == "cuda");
  CHECK(got.launch_plan_json.empty());
}

TEST_CASE("extract: reasoning in <think> is skipped, ~~~ fences and ptx modules are found") {
  const std::string ptx =
      "/* PTXBENCH_PLAN {\"launches\": []} */\n.version 8.8\n.target sm_90a\n.address_size "
      "64\n.visible .entry k() { ret; }\n";
  ExtractedSource got =
      ExtractSource(absl::StrCat("<think>```cuda\n", kKernel, "```</think>\n~~~\n", ptx, "~~~\n"));
  REQUIRE(got.ok);
  CHECK(got.source == ptx);
  CHECK(got.language == "ptx");
}

TEST_CASE("extract: a kernel without a plan block takes the plan from a json block") {
  ExtractedSource got = ExtractSource(
      "```json\n{\"launches\": [{\"kernel\": \"k\", \"grid\": [1], \"block\": [32]}]}\n```\n"
      "```cpp\nextern \"C\" __global__ void k() {}\n```\n");
  REQUIRE(got.ok);
  CHECK(absl::StrContains(got.source, "__global__"));
  CHECK(absl::StrContains(got.launch_plan_json, "\"launches\""));
}

TEST_CASE("extract: no code, no kernel, or a cut-off block -> a problem for the model") {
  ExtractedSource none = ExtractSource("I am sorry, I cannot write this kernel.");
  CHECK_FALSE(none.ok);
  CHECK(absl::StrContains(none.problem, "no fenced code block"));
  ExtractedSource prose = ExtractSource("```bash\nnvcc -o k k.cu\n```\n");
  CHECK_FALSE(prose.ok);
  CHECK(absl::StrContains(prose.problem, "None of the code blocks"));
  ExtractedSource cut = ExtractSource(absl::StrCat("```cuda\n", kKernel));
  CHECK_FALSE(cut.ok);
  CHECK(absl::StrContains(cut.problem, "cut off"));
}

TEST_CASE("prompt: full keeps the conversation, latest the last pair, single one message") {
  const std::vector<PastTurn> past = {{"reply one", "source one", "feedback one"},
                                      {"reply two", "source two", "feedback two"}};
  auto full = BuildMessages("TASK", past, ContextPolicy::kFull, "sm_90a");
  REQUIRE(full.size() == 6);
  CHECK(full[0].role == "system");
  CHECK(absl::StrContains(full[0].content, "sm_90a"));
  CHECK(full[1].content == "TASK");
  CHECK(full[2].role == "assistant");
  CHECK(full[2].content == "reply one");
  CHECK(absl::StartsWith(full[3].content, "Feedback on attempt 1:"));
  CHECK(absl::StrContains(full[5].content, "feedback two"));

  auto latest = BuildMessages("TASK", past, ContextPolicy::kLatest, "sm_90a");
  REQUIRE(latest.size() == 4);
  CHECK(latest[2].content == "reply two");
  CHECK(absl::StartsWith(latest[3].content, "Feedback on attempt 2:"));

  auto single = BuildMessages("TASK", past, ContextPolicy::kSingle, "sm_90a");
  REQUIRE(single.size() == 2);
  CHECK(absl::StartsWith(single[1].content, "TASK"));
  CHECK(absl::StrContains(single[1].content, "source two"));
  CHECK(absl::StrContains(single[1].content, "feedback two"));
  CHECK_FALSE(absl::StrContains(single[1].content, "reply one"));

  auto first = BuildMessages("TASK", {}, ContextPolicy::kSingle, "sm_100a");
  REQUIRE(first.size() == 2);
  CHECK(first[1].content == "TASK");
  CHECK_FALSE(ParseContextPolicy("everything").ok());
}

v1::StageResult Stage(v1::Stage stage, bool ok, const std::string& summary,
                      const nlohmann::json& detail) {
  v1::StageResult result;
  result.set_stage(stage);
  result.set_ok(ok);
  result.set_summary(summary);
  result.set_detail_json(detail.dump());
  return result;
}

TEST_CASE("feedback: compile log with resources -> correctness -> target evidence -> speedup") {
  v1::Verdict verdict;
  verdict.set_verdict_class(v1::VERDICT_CLASS_TARGET_NOT_EXECUTED);
  verdict.set_compiled(true);
  verdict.set_correct(true);
  verdict.set_speedup(0.035);
  verdict.set_message("correct, but target family not executed: wgmma");
  *verdict.add_stages() = Stage(
      v1::STAGE_COMPILE, true, "compiled (4096-byte cubin)",
      {{"log", "ptxas info    : Used 90 registers, 8 bytes spill stores, 8 bytes spill loads\n"},
       {"kernels",
        {{{"name", "gemm"},
          {"resources",
           {{"registers", 90},
            {"shared_bytes", 49152},
            {"spill_store_bytes", 8},
            {"spill_load_bytes", 8},
            {"stack_frame_bytes", 16}}}}}},
       {"launches",
        {{{"kernel", "gemm"},
          {"grid", {28, 64, 1}},
          {"block", {384, 1, 1}},
          {"dynamic_shared_bytes", 197696}}}}});
  *verdict.add_stages() =
      Stage(v1::STAGE_CORRECTNESS, true, "2 trials on 1 workloads within tolerance",
            {{"trials",
              {{{"workload", "small"},
                {"seed_kind", "public"},
                {"pass", true},
                {"compare",
                 {{"tensors",
                   {{"C",
                     {{"pass", true},
                      {"max_abs_error", 0.0078},
                      {"max_rel_error", 0.002},
                      {"matched_ratio", 1.0}}}}}}}}}}});
  *verdict.add_stages() = Stage(v1::STAGE_TARGET_INSTRUCTIONS, false, "wgmma not executed",
                                {{"families",
                                  {{{"family", "wgmma"},
                                    {"required", true},
                                    {"executed", false},
                                    {"ptx_instructions", 1},
                                    {"sass_sites", 1},
                                    {"warp_executions", 0},
                                    {"thread_pred_on", 0},
                                    {"examples", {"gemm+0x0260 HGMMA.64x8x16.F32.BF16"}},
                                    {"explanation", "predicated off"}}}}});
  *verdict.add_stages() =
      Stage(v1::STAGE_TIMING, true, "candidate 22.1 ms, cublaslt 0.77 ms", nlohmann::json{});
  FeedbackOptions options;
  options.target_speedup = 1.2;
  const std::string text = VerdictFeedback(verdict, options);
  INFO(text);
  const size_t compile = text.find("## 1. Compile");
  const size_t spill = text.find("8 bytes spill stores");
  const size_t correctness = text.find("## 3. Correctness");
  const size_t target = text.find("## 4. Target instructions");
  const size_t speedup = text.find("## 5. Speedup");
  REQUIRE(compile != std::string::npos);
  CHECK(spill != std::string::npos);
  CHECK(absl::StrContains(text, "kernel gemm: 90 registers, 49152 bytes static shared memory"));
  // Per launch: the plan's dynamic shared memory beside ptxas's static figure.
  CHECK(absl::StrContains(text,
                          "launch 0 (gemm, timed workload): grid [28,64,1], block [384,1,1], "
                          "shared memory per block 246848 bytes (197696 dynamic from the plan "
                          "+ 49152 static)"));
  CHECK(compile < correctness);
  CHECK(correctness < target);
  CHECK(target < speedup);
  CHECK(absl::StrContains(text, "workload small (public seed): pass; C: max abs error 0.0078"));
  CHECK(absl::StrContains(text, "wgmma (required): NOT executed"));
  CHECK(absl::StrContains(text, "HGMMA.64x8x16"));
  CHECK(absl::StrContains(text,
                          "speedup 0.035 over the library; the target is 1.20 (not "
                          "reached)"));
  CHECK_FALSE(absl::StrContains(text, "## 2. Runtime error"));
}

TEST_CASE("feedback: an unstable speedup never reaches the target, a stable one does") {
  v1::Verdict verdict;
  verdict.set_verdict_class(v1::VERDICT_CLASS_PASS);
  verdict.set_compiled(true);
  verdict.set_correct(true);
  verdict.set_tic(true);
  verdict.set_speedup(1.5);
  *verdict.add_stages() =
      Stage(v1::STAGE_TIMING, true, "candidate 0.5 ms, cublaslt 0.75 ms", nlohmann::json{});
  FeedbackOptions options;
  options.target_speedup = 1.2;
  // No sampling record (an older verdict): the figure stands.
  CHECK(SpeedupReachesTarget(verdict, 1.2));
  verdict.mutable_sampling()->set_speedup_stable(true);
  CHECK(SpeedupReachesTarget(verdict, 1.2));
  CHECK_FALSE(SpeedupReachesTarget(verdict, 1.6));
  CHECK(absl::StrContains(VerdictFeedback(verdict, options), "the target is 1.20 (reached)"));
  // The samples scattered > 4x the library's: the verdict stays TIC, its speedup counts nowhere.
  verdict.mutable_sampling()->set_speedup_stable(false);
  CHECK_FALSE(SpeedupReachesTarget(verdict, 1.2));
  const std::string text = VerdictFeedback(verdict, options);
  INFO(text);
  CHECK(absl::StrContains(text, "the target is 1.20 (not counted: the kernel's samples scattered"));
  CHECK_FALSE(absl::StrContains(text, "(reached)"));
}

TEST_CASE("feedback: a runtime error shows the sanitizer report before correctness") {
  v1::Verdict verdict;
  verdict.set_verdict_class(v1::VERDICT_CLASS_RUNTIME_ERROR);
  verdict.set_compiled(true);
  verdict.set_message("runtime error on workload 'small': cudaErrorIllegalAddress");
  *verdict.add_stages() = Stage(v1::STAGE_COMPILE, true, "compiled", {{"log", ""}});
  *verdict.add_stages() =
      Stage(v1::STAGE_CORRECTNESS, false, "runtime error",
            {{"workload", "small"},
             {"compute_sanitizer", "========= Invalid __global__ write of size 2 bytes"}});
  const std::string text = VerdictFeedback(verdict, FeedbackOptions{});
  INFO(text);
  const size_t runtime = text.find("## 2. Runtime error");
  REQUIRE(runtime != std::string::npos);
  CHECK(runtime < text.find("## 3. Correctness"));
  CHECK(absl::StrContains(text, "cudaErrorIllegalAddress"));
  CHECK(absl::StrContains(text, "Invalid __global__ write"));
}

TEST_CASE("feedback: a compile error carries the whole compiler log once") {
  v1::Verdict verdict;
  verdict.set_verdict_class(v1::VERDICT_CLASS_COMPILE_ERROR);
  verdict.set_message("compile error (frontend): submission.cu(3): error: x is undefined");
  *verdict.add_stages() =
      Stage(v1::STAGE_COMPILE, false, "compile error (frontend)",
            {{"failure", "frontend"}, {"log", "submission.cu(3): error: x is undefined\n"}});
  const std::string text = VerdictFeedback(verdict, FeedbackOptions{});
  INFO(text);
  CHECK(absl::StrContains(text, "FAILED: compile error (frontend)"));
  const size_t first = text.find("x is undefined");
  REQUIRE(first != std::string::npos);
  CHECK(text.find("x is undefined", first + 1) == std::string::npos);
}

TEST_CASE("progress: the bar line counts TIC, correct, failed, running and infra stops") {
  TaskCounts counts;
  counts.total = 4;
  counts.tic = 1;
  counts.correct = 1;
  counts.failed = 0;
  counts.running = 2;
  counts.infrastructure = 1;
  counts.turns_done = 7;
  const std::string line = Progress::Line("gemm", counts);
  CHECK(absl::StrContains(line, "[######......] 2/4 TIC 1 correct 1 failed 0 run 2 infra 1"));
  CHECK(line.size() <= 80);
  // A task id longer than the room left is cut, never the figures.
  const std::string long_line =
      Progress::Line("mha_with_lse_d128_causal_and_an_unusually_long_suffix_for_testing", counts);
  CHECK(long_line.size() <= 80);
  CHECK(
      absl::StrContains(long_line, "~ [######......] 2/4 TIC 1 correct 1 failed 0 run 2 infra 1"));
}

TEST_CASE("progress: without a terminal, one line per finished turn with elapsed, ETA, retries") {
  std::ostringstream log;
  Progress progress({"gemm"}, /*trajectories_per_task=*/2, /*turns_per_trajectory=*/4,
                    /*live=*/false, log);
  const auto start = std::chrono::steady_clock::now();
  progress.set_now_for_testing(start);
  progress.Started("gemm");
  progress.Started("gemm");
  CHECK(log.str().empty());  // Nothing is drawn: no escape codes in a log file.
  progress.Retried("gemm");
  progress.set_now_for_testing(start + std::chrono::seconds(60));
  progress.TurnDone("gemm", TurnNote{0, 1, "compile_error"});
  const std::string first = log.str();
  CHECK(absl::StrContains(first, "gemm traj-00 turn 1/4: compile_error"));
  CHECK(absl::StrContains(first, "turns 1  retries 1"));
  // 8 turns of budget, 1 done in 60 s (elapsed, measured from construction, is >= 60 s): at
  // most 7 more at that rate.
  CHECK(absl::StrContains(first, "ETA <= 07:0"));
  CHECK(first.find('\x1b') == std::string::npos);
  // A trajectory that reaches TIC at turn 2 gives its last 2 turns back to the estimate.
  progress.TurnDone("gemm", TurnNote{0, 2, "pass"});
  progress.Finished("gemm", TrajectoryOutcome::kTic, 2);
  CHECK(absl::StrContains(progress.StatusLine(), "turns 2  retries 1  ETA <= 02:0"));
  const std::string lines = log.str();
  CHECK(std::count(lines.begin(), lines.end(), '\n') == 2);
}

TEST_CASE("progress: on a terminal, bars and the status line fit 80 columns") {
  std::ostringstream terminal;
  Progress progress({"gemm_n7168_k5120", "mha_with_lse_d128_causal"}, 12, 8, /*live=*/true,
                    terminal);
  progress.Started("gemm_n7168_k5120");
  progress.TurnDone("gemm_n7168_k5120", TurnNote{0, 1, "pass"});
  const std::string screen = terminal.str();
  CHECK(absl::StrContains(screen, "\x1b[2K"));
  for (absl::string_view line : absl::StrSplit(screen, '\n')) {
    // Escape sequences aside, every line fits.
    std::string text(line);
    size_t at;
    while ((at = text.find('\x1b')) != std::string::npos) {
      const size_t end = text.find_first_of("FK", at);
      text.erase(at, end == std::string::npos ? std::string::npos : end - at + 1);
    }
    CHECK(text.size() <= 80);
  }
  CHECK(absl::StrContains(screen, "elapsed "));
}

TEST_CASE("progress: compile-only trajectories are compiled or not compiled, never failed") {
  TaskCounts counts;
  counts.total = 4;
  counts.compiled = 3;
  counts.not_compiled = 1;
  const std::string line = Progress::Line("gemm", counts);
  CHECK(absl::StrContains(line, "] 4/4 compiled 3 not compiled 1"));
  CHECK(line.size() <= 80);
  CHECK_FALSE(absl::StrContains(line, "failed"));
  CHECK_FALSE(absl::StrContains(line, "TIC"));
}

TEST_CASE("openai provider: request shape, reply, usage with reasoning tokens") {
  StubHttpServer stub([](const StubRequest&) {
    return StubResponse{200, testing::OpenAiChatBody("hello", 1200, 300, 120), {}, 0};
  });
  ProviderOptions options;
  options.spec = "openai:stub-model";
  options.base_url = stub.url() + "/v1/";
  options.api_key = "sk-test";
  options.temperature = 0.5;
  options.max_tokens = 2048;
  auto provider = MakeProvider(options);
  REQUIRE(provider.ok());
  auto reply = (*provider)->Complete({{"system", "S"}, {"user", "U"}}, CallContext{});
  REQUIRE(reply.ok());
  CHECK(reply->text == "hello");
  CHECK(reply->usage.input_tokens == 1200);
  CHECK(reply->usage.output_tokens == 300);
  CHECK(reply->usage.reasoning_tokens == 120);
  REQUIRE(stub.requests().size() == 1);
  const StubRequest request = stub.requests()[0];
  CHECK(request.path == "/v1/chat/completions");
  CHECK(request.headers.at("authorization") == "Bearer sk-test");
  auto body = nlohmann::json::parse(request.body);
  CHECK(body["model"] == "stub-model");
  CHECK(body["messages"].size() == 2);
  CHECK(body["messages"][0]["role"] == "system");
  CHECK(body["temperature"] == 0.5);
  CHECK(body["max_tokens"] == 2048);
}

TEST_CASE("providers: 429 and 5xx are transient (Retry-After kept), 401 and 400 are not") {
  int status = 429;
  StubHttpServer stub([&](const StubRequest&) {
    return StubResponse{status, R"({"error": {"message": "slow down"}})", {"Retry-After: 7"}, 0};
  });
  ProviderOptions options;
  options.spec = "openai:m";
  options.base_url = stub.url();
  auto provider = MakeProvider(options);
  REQUIRE(provider.ok());
  auto limited = (*provider)->Complete({{"user", "U"}}, CallContext{});
  REQUIRE_FALSE(limited.ok());
  CHECK(IsTransient(limited.status()));
  CHECK(absl::StrContains(limited.status().message(), "slow down"));
  REQUIRE(RetryAfterSeconds(limited.status()).has_value());
  CHECK(*RetryAfterSeconds(limited.status()) == 7);
  for (int code : {500, 502, 503, 529}) {
    status = code;
    CHECK(IsTransient((*provider)->Complete({{"user", "U"}}, CallContext{}).status()));
  }
  for (int code : {400, 401, 403, 404}) {
    status = code;
    CHECK_FALSE(IsTransient((*provider)->Complete({{"user", "U"}}, CallContext{}).status()));
  }
}

TEST_CASE("providers: an unreachable server or a slow one is transient, bad specs are refused") {
  ProviderOptions options;
  options.spec = "openai:m";
  {
    StubHttpServer closed([](const StubRequest&) { return StubResponse{}; });
    options.base_url = closed.url();
  }  // The port is closed now.
  auto unreachable = MakeProvider(options).value()->Complete({{"user", "U"}}, CallContext{});
  REQUIRE_FALSE(unreachable.ok());
  CHECK(IsTransient(unreachable.status()));

  StubHttpServer slow([](const StubRequest&) {
    return StubResponse{200, testing::OpenAiChatBody("late", 1, 1, 0), {}, 5};
  });
  options.base_url = slow.url();
  options.timeout_seconds = 0.3;
  auto timed_out = MakeProvider(options).value()->Complete({{"user", "U"}}, CallContext{});
  REQUIRE_FALSE(timed_out.ok());
  CHECK(absl::IsDeadlineExceeded(timed_out.status()));

  options.spec = "gpt-5";
  CHECK(absl::StrContains(MakeProvider(options).status().message(), "PROVIDER:MODEL"));
  options.spec = "mistral:large";
  CHECK(absl::StrContains(MakeProvider(options).status().message(), "unknown provider"));
}

TEST_CASE("providers: at most --provider-concurrency requests in flight") {
  std::atomic<int> in_flight{0};
  std::atomic<int> most{0};
  StubHttpServer stub([&](const StubRequest&) {
    const int now = ++in_flight;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    --in_flight;
    return StubResponse{200, testing::OpenAiChatBody("ok", 1, 1, 0), {}, 0};
  });
  ProviderOptions options;
  options.spec = "openai:m";
  options.base_url = stub.url();
  options.concurrency = 2;
  auto provider = MakeProvider(options);
  REQUIRE(provider.ok());
  std::vector<std::thread> callers;
  std::atomic<int> ok{0};
  for (int i = 0; i < 6; ++i) {
    callers.emplace_back([&] {
      if ((*provider)->Complete({{"user", "U"}}, CallContext{}).ok()) ++ok;
    });
  }
  for (std::thread& caller : callers) caller.join();
  CHECK(ok == 6);
  CHECK(most == 2);
}

TEST_CASE("anthropic provider: system apart, version header, thinking and text blocks") {
  StubHttpServer stub([](const StubRequest&) {
    return StubResponse{
        200, testing::AnthropicMessageBody("the answer", "let me think", 900, 400), {}, 0};
  });
  ProviderOptions options;
  options.spec = "anthropic:claude-stub";
  options.base_url = stub.url();
  options.api_key = "ak-test";
  options.thinking_budget = 4096;
  auto provider = MakeProvider(options);
  REQUIRE(provider.ok());
  auto reply = (*provider)->Complete(
      {{"system", "S"}, {"user", "U1"}, {"assistant", "A1"}, {"user", "U2"}}, CallContext{});
  REQUIRE(reply.ok());
  CHECK(reply->text == "the answer");
  CHECK(reply->reasoning == "let me think");
  CHECK(reply->usage.input_tokens == 900);
  CHECK(reply->usage.output_tokens == 400);
  REQUIRE(stub.requests().size() == 1);
  const StubRequest request = stub.requests()[0];
  CHECK(request.path == "/v1/messages");
  CHECK(request.headers.at("x-api-key") == "ak-test");
  CHECK(request.headers.at("anthropic-version") == "2023-06-01");
  auto body = nlohmann::json::parse(request.body);
  CHECK(body["system"] == "S");
  REQUIRE(body["messages"].size() == 3);
  CHECK(body["messages"][0]["role"] == "user");
  CHECK(body["thinking"]["budget_tokens"] == 4096);
  CHECK(body["max_tokens"].get<int64_t>() > 4096);
}

TEST_CASE("extract: <think> sections are split from the answer, however the server sends them") {
  ThinkingSplit both = SplitThinking("<think>plan A\nthen B</think>\nHere:\n```cuda\nx\n```");
  CHECK(both.reasoning == "plan A\nthen B");
  CHECK(both.answer == "\nHere:\n```cuda\nx\n```");
  // Two sections; an unclosed last one runs to the end.
  ThinkingSplit two = SplitThinking("<think>a</think>mid<think>b</think>end<think>c");
  CHECK(two.reasoning == "a\n\nb\n\nc");
  CHECK(two.answer == "midend");
  // The opening tag stripped by the server (DeepSeek-R1 chat templates): up to "</think>".
  ThinkingSplit stray = SplitThinking("thinking first</think>the answer");
  CHECK(stray.reasoning == "thinking first");
  CHECK(stray.answer == "the answer");
  ThinkingSplit none = SplitThinking("just an answer");
  CHECK(none.reasoning.empty());
  CHECK(none.answer == "just an answer");
}

// The reasoning and its token count as five kinds of servers return them. The figure is
// "not reported" (absent), never 0, where the server sends none.
TEST_CASE("providers: reasoning text, finish reason and reasoning tokens from each server kind") {
  struct Case {
    const char* name;
    std::string spec;
    std::string body;
    std::string text;
    std::string reasoning;
    std::string stop_reason;
    std::optional<int64_t> reasoning_tokens;
  };
  using nlohmann::json;
  const std::vector<Case> cases = {
      // OpenAI's reasoning models: the count in completion_tokens_details, no reasoning text.
      {"openai", "openai:o-stub",
       testing::ChatCompletionBody({{"role", "assistant"}, {"content", "answer"}},
                                   {{"prompt_tokens", 10},
                                    {"completion_tokens", 500},
                                    {"completion_tokens_details", {{"reasoning_tokens", 448}}}},
                                   "stop"),
       "answer", "", "stop", 448},
      // vLLM with a reasoning parser: reasoning_content, and no count at all.
      {"vllm", "openai:qwen3",
       testing::ChatCompletionBody(
           {{"role", "assistant"}, {"content", "answer"}, {"reasoning_content", "vllm thinks"}},
           {{"prompt_tokens", 10},
            {"completion_tokens", 90},
            {"total_tokens", 100},
            {"prompt_tokens_details", nullptr}},
           "length"),
       "answer", "vllm thinks", "length", std::nullopt},
      // SGLang: reasoning_content, and usage.reasoning_tokens at the top of usage.
      {"sglang", "openai:qwen3",
       testing::ChatCompletionBody(
           {{"role", "assistant"}, {"content", "answer"}, {"reasoning_content", "sglang thinks"}},
           {{"prompt_tokens", 29},
            {"completion_tokens", 105},
            {"total_tokens", 134},
            {"prompt_tokens_details", nullptr},
            {"reasoning_tokens", 61}},
           "stop"),
       "answer", "sglang thinks", "stop", 61},
      // DeepSeek-R1 style through a server without a reasoning parser: <think> in the content.
      {"deepseek-think", "openai:deepseek-r1",
       testing::ChatCompletionBody(
           {{"role", "assistant"}, {"content", "<think>inline thoughts</think>\nanswer"}},
           {{"prompt_tokens", 10},
            {"completion_tokens", 40},
            {"completion_tokens_details", {{"reasoning_tokens", 25}}}},
           "stop"),
       "<think>inline thoughts</think>\nanswer", "", "stop", 25},
      // Anthropic with extended thinking: thinking blocks, output_tokens includes them.
      {"anthropic", "anthropic:claude-stub",
       testing::AnthropicMessageBody("answer", "claude thinks", 900, 400), "answer",
       "claude thinks", "end_turn", std::nullopt},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    StubHttpServer stub([&](const StubRequest&) { return StubResponse{200, c.body, {}, 0}; });
    ProviderOptions options;
    options.spec = c.spec;
    options.base_url = stub.url();
    options.api_key = "key";
    auto provider = MakeProvider(options);
    REQUIRE(provider.ok());
    auto reply = (*provider)->Complete({{"user", "U"}}, CallContext{});
    REQUIRE(reply.ok());
    CHECK(reply->text == c.text);
    CHECK(reply->reasoning == c.reasoning);
    CHECK(reply->stop_reason == c.stop_reason);
    CHECK(reply->usage.reasoning_tokens == c.reasoning_tokens);
  }
}

TEST_CASE("providers: a missing key for a public endpoint is caught before anything starts") {
  unsetenv("OPENAI_API_KEY");
  unsetenv("OPENAI_BASE_URL");
  unsetenv("ANTHROPIC_API_KEY");
  unsetenv("ANTHROPIC_BASE_URL");
  ProviderOptions options;
  options.spec = "openai:gpt-5";
  absl::Status missing = CheckProviderCredentials(options);
  CHECK(absl::IsInvalidArgument(missing));
  CHECK(absl::StrContains(missing.message(), "OPENAI_API_KEY is not set"));
  CHECK(absl::StrContains(missing.message(), "https://api.openai.com/v1"));
  options.spec = "anthropic:claude";
  CHECK(absl::StrContains(CheckProviderCredentials(options).message(), "ANTHROPIC_API_KEY"));
  // A local server needs no key; a key set is enough for the public endpoint.
  options.spec = "openai:local";
  options.base_url = "http://127.0.0.1:8000/v1";
  CHECK(CheckProviderCredentials(options).ok());
  options.base_url.clear();
  setenv("OPENAI_API_KEY", "sk-x", 1);
  CHECK(CheckProviderCredentials(options).ok());
  unsetenv("OPENAI_API_KEY");
  options.spec = "replay:/nowhere";
  CHECK(CheckProviderCredentials(options).ok());
}

TEST_CASE("replay provider: files by task, arch, trajectory and turn, then exhausted") {
  const std::string dir = testing::MakeTempDir("ptxbench-replay-");
  const std::string traj = dir + "/gemm/sm_90a/traj-03";
  std::filesystem::create_directories(traj);
  std::ofstream(traj + "/turn-01.cu") << kKernel;
  std::ofstream(traj + "/turn-02.md") << "prose\n```cuda\n" << kKernel << "```\n";
  ProviderOptions options;
  options.spec = "replay:" + dir;
  auto provider = MakeProvider(options);
  REQUIRE(provider.ok());
  CallContext context{"gemm", "sm_90a", "none", 3, 1};
  auto first = (*provider)->Complete({}, context);
  REQUIRE(first.ok());
  ExtractedSource extracted = ExtractSource(first->text);
  REQUIRE(extracted.ok);
  CHECK(extracted.source == kKernel);
  context.turn = 2;
  auto second = (*provider)->Complete({}, context);
  REQUIRE(second.ok());
  CHECK(absl::StartsWith(second->text, "prose\n"));
  context.turn = 3;
  auto third = (*provider)->Complete({}, context);
  REQUIRE_FALSE(third.ok());
  CHECK(absl::IsOutOfRange(third.status()));
  CHECK(absl::StartsWith(third.status().message(), kReplayExhausted));
  options.spec = "replay:" + dir + "/missing";
  CHECK_FALSE(MakeProvider(options).ok());
  std::filesystem::remove_all(dir);
}

TEST_CASE("embedded stack: a GPU is present when nvidia-smi -L, found in PATH, succeeds") {
  const testing::ScopedTempDir dir;
  const std::string bin = dir.path() + "/bin";
  std::filesystem::create_directories(bin);
  const std::string seen_env = dir.path() + "/env.txt";
  auto fake_nvidia_smi = [&](int exit_code) {
    const std::string path = bin + "/nvidia-smi";
    std::ofstream(path) << "#!/bin/sh\n/usr/bin/env > '" << seen_env << "'\necho \"$@\" >> '"
                        << seen_env << "'\nexit " << exit_code << "\n";
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  };
  const ScopedEnv secret("PTXBENCH_TOKEN", "ptxb_secret_of_the_parent");
  const ScopedEnv api_key("ANTHROPIC_API_KEY", "sk-secret-key");

  SECTION("it lists a GPU") {
    fake_nvidia_smi(0);
    const ScopedEnv path("PATH", bin + ":/usr/bin:/bin");
    CHECK(GpuPresent());
    const std::string env = testing::ReadWholeFile(seen_env);
    CHECK(absl::StrContains(env, "PATH=" + bin + ":/usr/bin:/bin\n"));
    CHECK(absl::StrContains(env, "\n-L\n"));        // Its argument, without a shell in between.
    CHECK_FALSE(absl::StrContains(env, "secret"));  // Neither the token nor the API key.
  }
  SECTION("it fails: no GPU") {
    fake_nvidia_smi(9);
    const ScopedEnv path("PATH", bin + ":/usr/bin:/bin");
    CHECK_FALSE(GpuPresent());
    CHECK(absl::StrContains(testing::ReadWholeFile(seen_env), "-L"));  // It did run.
  }
  SECTION("none in PATH: no GPU") {
    const ScopedEnv path("PATH", bin);
    CHECK_FALSE(GpuPresent());
  }
}

}  // namespace
}  // namespace ptxbench::client::run
