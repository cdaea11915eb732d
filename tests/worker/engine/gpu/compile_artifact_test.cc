// Compile artifacts (worker/engine/compile_artifact.h): the GPU worker's accept / refuse /
// verify decision as functions, then through Evaluate() with real evaluator processes (CPU
// only: the compile stage runs NVRTC and ptxas without a GPU). First of all, what the sampled
// verification rests on: two compiles of the same source in separate processes and directories
// give the same cubin, PTX and compile event, for every kind of task.
#include "worker/engine/compile_artifact.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/build_info.h"
#include "common/sha256.h"
#include "common/task.h"
#include "tests/support/temp_files.h"
#include "worker/engine/compile_cache.h"
#include "worker/engine/evaluate.h"
#include "worker/engine/gpu/protocol_codec.h"
#include "worker/engine/gpu/protocol_messages.h"

namespace ptxbench::engine {
namespace {

using nlohmann::json;

// ------------------------------------------------------------------ the decision, as functions

constexpr char kNvrtc[] = "13.0.48";
constexpr char kPtxas[] = "Cuda compilation tools, release 13.0, V13.0.48";

// A compile event as the compile process sends it for these bytes and this toolchain.
gpu::CompileEvent EventFor(const std::string& cubin, const std::string& ptx) {
  gpu::CompileEvent event;
  event.outcome = gpu::CompileOutcome::kCompiled;
  event.failure = "none";
  event.log = "";
  event.report = {{"nvrtc_version", kNvrtc},
                  {"ptxas_version", kPtxas},
                  {"kernels", json::array({{{"name", "gemm"}, {"registers", 168}}})},
                  {"timings", {{"total_seconds", 0.61}}},
                  {"memory", {{"frontend_peak_rss_bytes", 123456}}},
                  {"jail", {{"namespaces", true}}}};
  event.seconds = 0.62;
  gpu::CompiledModule module;
  module.module = {"/tmp/ptxbench-eval-a/compile-1/module.cubin",
                   "/tmp/ptxbench-eval-a/compile-1/module.ptx"};
  module.cubin_bytes = cubin.size();
  module.launch_kernels = {"gemm"};
  module.identity = {Sha256Hex(cubin), Sha256Hex(ptx), kNvrtc, kPtxas};
  event.compiled = module;
  return event;
}

CompileArtifact ArtifactFor(const std::string& cubin, const std::string& ptx) {
  gpu::CompileEvent event = EventFor(cubin, ptx);
  event.compiled->module = {};
  CompileArtifact artifact;
  artifact.cubin = cubin;
  artifact.ptx = ptx;
  artifact.cubin_sha256 = Sha256Hex(cubin);
  artifact.ptx_sha256 = Sha256Hex(ptx);
  artifact.compile_event_json = gpu::ToJson(event).dump();
  artifact.nvrtc_version = kNvrtc;
  artifact.ptxas_version = kPtxas;
  artifact.harness_version = kHarnessVersion;
  artifact.producer_job_id = "job-1";
  artifact.producer_worker_id = "worker-1";
  return artifact;
}

Toolchain Own() { return {kNvrtc, kPtxas, kHarnessVersion}; }

void RequireRefused(const CompileArtifact& artifact, const Toolchain& own, const std::string& why) {
  const absl::Status status = CheckArtifact(artifact, own);
  INFO(status.message());
  REQUIRE(status.code() == absl::StatusCode::kFailedPrecondition);
  REQUIRE(std::string(status.message()).find(why) != std::string::npos);
}

TEST_CASE("an artifact made by this worker's toolchain, with honest bytes, is accepted",
          "[artifact]") {
  REQUIRE(CheckArtifact(ArtifactFor("CUBIN", "PTX"), Own()).ok());
}

TEST_CASE("an artifact is refused for its bytes, its event or its toolchain", "[artifact]") {
  const CompileArtifact honest = ArtifactFor("CUBIN", "PTX");
  CompileArtifact altered = honest;
  altered.cubin[0] = 'X';
  RequireRefused(altered, Own(), "does not hash to its cubin_sha256");
  altered = honest;
  altered.ptx += "\n";
  RequireRefused(altered, Own(), "does not hash to its ptx_sha256");
  // Bytes and digests replaced together, the event still the original's.
  altered = honest;
  altered.cubin = "OTHER";
  altered.cubin_sha256 = Sha256Hex("OTHER");
  RequireRefused(altered, Own(), "describes another module");
  altered = honest;
  altered.compile_event_json = "{\"outcome\": \"compiled\"}";
  RequireRefused(altered, Own(), "compile event is not one");
  altered = honest;
  altered.nvrtc_version = "12.9";
  RequireRefused(altered, Own(), "names another toolchain");
  altered = honest;
  altered.harness_version = "0.0.1";
  RequireRefused(altered, Own(), "made by harness 0.0.1");
  RequireRefused(honest, {kNvrtc, "Cuda compilation tools, release 13.1", kHarnessVersion},
                 "this worker compiles with");
  // The first artifact of a fresh worker: its own toolchain is not known yet.
  RequireRefused(honest, {"", "", kHarnessVersion}, "has compiled nothing yet");
}

TEST_CASE("verification is drawn with the configured probability", "[artifact]") {
  constexpr uint64_t kMax = ~uint64_t{0};
  for (uint64_t draw : {uint64_t{0}, uint64_t{1} << 63, kMax}) {
    CHECK_FALSE(ShouldVerify(0, draw));
    CHECK(ShouldVerify(1, draw));
  }
  // 1/8 of the 64-bit range: below 2^61 verifies.
  CHECK(ShouldVerify(0.125, (uint64_t{1} << 61) - 4096));
  CHECK_FALSE(ShouldVerify(0.125, (uint64_t{1} << 61) + 4096));
  int verified = 0;
  constexpr int kDraws = 4096;
  constexpr uint64_t kStep = kMax / kDraws;
  for (int i = 0; i < kDraws; ++i) {  // The middle of each of kDraws equal parts of the range.
    verified += ShouldVerify(0.125, static_cast<uint64_t>(i) * kStep + kStep / 2) ? 1 : 0;
  }
  CHECK(verified == kDraws / 8);
}

TEST_CASE("an artifact compared with this worker's own compile: match, mismatch, not comparable",
          "[artifact]") {
  const CompileArtifact artifact = ArtifactFor("CUBIN", "PTX");
  // Another run of the same compile: other times, memory, jail and directory.
  gpu::CompileEvent same = EventFor("CUBIN", "PTX");
  same.seconds = 1.7;
  same.report["timings"]["total_seconds"] = 1.69;
  same.report["memory"]["frontend_peak_rss_bytes"] = 654321;
  same.report["jail"] = {{"namespaces", false}};
  same.compiled->module = {"/tmp/ptxbench-eval-b/compile-7/module.cubin",
                           "/tmp/ptxbench-eval-b/compile-7/module.ptx"};
  ArtifactUse use = CompareWithOwnCompile(artifact, same);
  INFO(use.detail);
  CHECK(use.outcome == ArtifactOutcome::kVerifiedMatch);

  use = CompareWithOwnCompile(artifact, EventFor("FORGED", "PTX"));
  CHECK(use.outcome == ArtifactOutcome::kMismatch);
  CHECK(use.detail.find("compiled.identity") != std::string::npos);

  // The same module, but the launches the later processes rely on were changed.
  gpu::CompileEvent other_launches = EventFor("CUBIN", "PTX");
  other_launches.compiled->launch_kernels = {"gemm", "gemm"};
  use = CompareWithOwnCompile(artifact, other_launches);
  CHECK(use.outcome == ArtifactOutcome::kMismatch);
  CHECK(use.detail.find("compiled.launch_kernels") != std::string::npos);

  // The source does not compile here: the artifact's claim that it does is false.
  gpu::CompileEvent error;
  error.outcome = gpu::CompileOutcome::kCompileError;
  error.failure = "frontend";
  error.report = {{"nvrtc_version", kNvrtc}, {"ptxas_version", kPtxas}};
  use = CompareWithOwnCompile(artifact, error);
  CHECK(use.outcome == ArtifactOutcome::kMismatch);
  CHECK(use.detail.find("compile error, frontend") != std::string::npos);

  // This machine's limits stopped its compiler: nothing is known about the artifact.
  error.failure = "timeout";
  CHECK(CompareWithOwnCompile(artifact, error).outcome == ArtifactOutcome::kNone);

  // The toolchain changed on this worker between the check and its compile.
  gpu::CompileEvent upgraded = EventFor("CUBIN", "PTX");
  upgraded.compiled->identity.ptxas_version = "Cuda compilation tools, release 13.1";
  CHECK(CompareWithOwnCompile(artifact, upgraded).outcome == ArtifactOutcome::kRefused);
}

// ------------------------------------------------------------------ through Evaluate()

std::string SourceDir() {
  const char* env = std::getenv("PTXBENCH_SOURCE_DIR");
  return env ? env : PTXBENCH_SOURCE_DIR_DEFAULT;
}

const Task& LoadedTask(const std::string& task_id) {
  static auto* tasks = new std::map<std::string, Task>();
  auto it = tasks->find(task_id);
  if (it == tasks->end()) {
    auto task = LoadTask(SourceDir() + "/tasks/" + task_id);
    REQUIRE(task.ok());
    it = tasks->emplace(task_id, *std::move(task)).first;
  }
  return it->second;
}

// One worker: its own compile cache, the real evaluator.
struct TestWorker {
  std::shared_ptr<CompileCache> cache = std::make_shared<CompileCache>();

  Verdict Compile(const std::string& task_id, const std::string& arch, const std::string& source,
                  ArtifactExchange* exchange) const {
    EvaluationRequest request;
    request.task = &LoadedTask(task_id);
    request.arch = arch;
    request.source = testing::ReadWholeFile(request.task->dir + "/" + source);
    REQUIRE(!request.source.empty());
    request.compile_only = true;
    request.artifacts = exchange;
    EngineOptions options;
    const char* env = std::getenv("PTXBENCH_EVALUATOR");
    options.evaluator_path = env && *env ? env : PTXBENCH_EVALUATOR_PATH;
    options.compile_cache = cache;
    absl::StatusOr<Verdict> verdict = Evaluate(request, options, [](const StageReport&) {});
    INFO(verdict.status().message());
    REQUIRE(verdict.ok());
    return *verdict;
  }

  // A compile of something else first, as a worker that has been running a while: its
  // toolchain is then known (CompileCache::Toolchain).
  void WarmUp() const {
    ArtifactExchange none;
    Compile("gemm_n7168_k5120", "sm_90a", "solutions/sm90a_wgmma_rs_ldmatrix.cu", &none);
    REQUIRE_FALSE(cache->Toolchain().second.empty());
  }
};

constexpr char kGemm[] = "gemm_n7168_k5120";
constexpr char kGemmSource[] = "solutions/sm90a_wgmma_tma.cu";

// The reference GEMM's module, as a compile-only worker produces it.
CompileArtifact ProducedGemm() {
  ArtifactExchange exchange;
  TestWorker().Compile(kGemm, "sm_90a", kGemmSource, &exchange);
  REQUIRE(exchange.produced.has_value());
  return *exchange.produced;
}

// What the compile stage recorded about its compile process (the audit record).
json CompileProcess(const Verdict& verdict) {
  for (const json& process : verdict.report.value("processes", json::array())) {
    if (process.value("mode", "") == "compile") return process;
  }
  return json();
}

struct SourceCase {
  std::string task;
  std::string arch;
  std::string source;
};

TEST_CASE("two compiles of one source in separate processes give the same module and event",
          "[artifact][compile]") {
  // A GEMM per arch, a block-scaled fp8 GEMM, attention forward and backward, paged decode.
  const std::vector<SourceCase> cases = {
      {"gemm_n7168_k5120", "sm_90a", "solutions/sm90a_wgmma_tma.cu"},
      {"gemm_n7168_k5120", "sm_100a", "solutions/sm100a_tcgen05_tma.cu"},
      {"gemm_fp8bs_n7168_k16384", "sm_90a", "solutions/sm90a_qgmma_tma.cu"},
      {"mha_with_lse_d128", "sm_90a", "solutions/sm90a_fa_wgmma_tma.cu"},
      {"mha_bwd_d128", "sm_90a", "solutions/sm90a_wgmma_tma.cu"},
      {"gqa_paged_decode_hq64_hk8_d128", "sm_100a", "solutions/sm100a_tcgen05_tma.cu"},
  };
  for (const SourceCase& c : cases) {
    INFO(c.task << " " << c.arch << " " << c.source);
    // Two workers with caches of their own: each compile runs in a fresh evaluator process, in
    // a directory of its own.
    ArtifactExchange first;
    ArtifactExchange second;
    TestWorker().Compile(c.task, c.arch, c.source, &first);
    TestWorker().Compile(c.task, c.arch, c.source, &second);
    REQUIRE(first.produced.has_value());
    REQUIRE(second.produced.has_value());
    CHECK(first.produced->cubin == second.produced->cubin);
    CHECK(first.produced->ptx == second.produced->ptx);
    auto event = gpu::FromJson<gpu::CompileEvent>(json::parse(second.produced->compile_event_json));
    REQUIRE(event.ok());
    const ArtifactUse use = CompareWithOwnCompile(*first.produced, *event);
    INFO(use.detail);
    CHECK(use.outcome == ArtifactOutcome::kVerifiedMatch);
  }
}

TEST_CASE("the compile stage uses an accepted artifact instead of compiling", "[artifact]") {
  CompileArtifact produced = ProducedGemm();
  produced.producer_job_id = "compile-job";
  produced.producer_worker_id = "compile-worker";

  TestWorker gpu_worker;
  gpu_worker.WarmUp();
  const int64_t misses = gpu_worker.cache->stats().misses;
  ArtifactExchange exchange;
  exchange.offered = produced;
  const Verdict verdict = gpu_worker.Compile(kGemm, "sm_90a", kGemmSource, &exchange);
  CHECK(verdict.verdict_class == VerdictClass::kCompiled);
  INFO(exchange.use.detail);
  CHECK(exchange.use.outcome == ArtifactOutcome::kUsed);
  // No compiler ran, and the audit record names where the module came from.
  const json process = CompileProcess(verdict);
  CHECK(process.value("compile_cache", "") == "artifact");
  CHECK(process.value("producer_job_id", "") == "compile-job");
  CHECK(process.value("producer_worker_id", "") == "compile-worker");
  CHECK_FALSE(process.contains("seconds"));
  CHECK(verdict.report["compile_artifact"]["outcome"] == "used");
  // Another worker's module is not this worker's: it is neither cached nor handed on.
  CHECK_FALSE(exchange.produced.has_value());
  CHECK(gpu_worker.cache->stats().entries == 1);
  CHECK(gpu_worker.cache->stats().misses == misses + 1);
}

TEST_CASE("a verified artifact is compiled again and compared; a forged one is a mismatch",
          "[artifact]") {
  const CompileArtifact produced = ProducedGemm();
  TestWorker gpu_worker;
  gpu_worker.WarmUp();

  ArtifactExchange verify;
  verify.offered = produced;
  verify.verify = true;
  Verdict verdict = gpu_worker.Compile(kGemm, "sm_90a", kGemmSource, &verify);
  INFO(verify.use.detail);
  CHECK(verify.use.outcome == ArtifactOutcome::kVerifiedMatch);
  CHECK(CompileProcess(verdict).contains("seconds"));  // A real compile ran.
  CHECK(verdict.verdict_class == VerdictClass::kCompiled);

  // A forged module whose digests and event were made to agree with it passes every check but
  // the comparison; the verdict is this worker's own compile's.
  CompileArtifact forged = produced;
  forged.cubin.back() ^= 0x1;
  forged.cubin_sha256 = Sha256Hex(forged.cubin);
  auto event = gpu::FromJson<gpu::CompileEvent>(json::parse(forged.compile_event_json));
  REQUIRE(event.ok());
  event->compiled->identity.cubin_sha256 = forged.cubin_sha256;
  forged.compile_event_json = gpu::ToJson(*event).dump();
  REQUIRE(CheckArtifact(forged, {gpu_worker.cache->Toolchain().first,
                                 gpu_worker.cache->Toolchain().second, kHarnessVersion})
              .ok());
  ArtifactExchange caught;
  caught.offered = forged;
  caught.verify = true;
  // This worker's compile of the source is cached by now: it is what the artifact is compared
  // with, at no cost.
  verdict = gpu_worker.Compile(kGemm, "sm_90a", kGemmSource, &caught);
  INFO(caught.use.detail);
  CHECK(caught.use.outcome == ArtifactOutcome::kMismatch);
  CHECK(verdict.verdict_class == VerdictClass::kCompiled);
  CHECK(CompileProcess(verdict).value("compile_cache", "") == "hit");
}

TEST_CASE("an artifact with altered bytes, or offered to a fresh worker, is refused and compiled",
          "[artifact]") {
  const CompileArtifact produced = ProducedGemm();

  TestWorker fresh;
  ArtifactExchange first;
  first.offered = produced;
  Verdict verdict = fresh.Compile(kGemm, "sm_90a", kGemmSource, &first);
  CHECK(first.use.outcome == ArtifactOutcome::kRefused);
  CHECK(first.use.detail.find("compiled nothing yet") != std::string::npos);
  CHECK(CompileProcess(verdict).contains("seconds"));

  TestWorker gpu_worker;
  gpu_worker.WarmUp();
  ArtifactExchange altered;
  altered.offered = produced;
  altered.offered->cubin[100] ^= 0x40;
  verdict = gpu_worker.Compile(kGemm, "sm_90a", kGemmSource, &altered);
  INFO(altered.use.detail);
  CHECK(altered.use.outcome == ArtifactOutcome::kRefused);
  CHECK(altered.use.detail.find("cubin_sha256") != std::string::npos);
  CHECK(verdict.verdict_class == VerdictClass::kCompiled);
  CHECK(CompileProcess(verdict).contains("seconds"));
  // The verdict rests on this worker's own module, which it hands on as its own.
  REQUIRE(altered.produced.has_value());
  CHECK(altered.produced->cubin == produced.cubin);
}

}  // namespace
}  // namespace ptxbench::engine
