// Evaluate() end to end on a machine without a GPU, with real evaluator processes: compile-only
// scope, the runtime stages skipped with the reason, and the verdicts the compile stage decides
// (compile errors, invalid plans) for the task's own decoys.
#include "worker/engine/evaluate.h"

#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/build_info.h"
#include "common/task.h"
#include "tests/support/temp_files.h"
#include "worker/engine/evaluate_processes.h"
#include "worker/engine/gpu/baseline_choice.h"
#include "worker/engine/gpu/protocol_messages.h"
#include "worker/engine/gpu_gate.h"

namespace ptxbench::engine {
namespace {

std::string SourceDir() {
  const char* env = std::getenv("PTXBENCH_SOURCE_DIR");
  return env ? env : PTXBENCH_SOURCE_DIR_DEFAULT;
}

const Task& Gemm() {
  static const Task task = [] {
    auto t = LoadTask(SourceDir() + "/tasks/gemm_n7168_k5120");
    REQUIRE(t.ok());
    return *t;
  }();
  return task;
}

EngineOptions Options() {
  EngineOptions o;
  const char* env = std::getenv("PTXBENCH_EVALUATOR");
  o.evaluator_path = env && *env ? env : PTXBENCH_EVALUATOR_PATH;
  o.secret = 12345;
  return o;
}

Verdict Run(const std::string& relative_source, bool compile_only,
            std::vector<StageReport>* stages) {
  EvaluationRequest r;
  r.task = &Gemm();
  r.arch = "sm_90a";
  r.source = testing::ReadWholeFile(Gemm().dir + "/" + relative_source);
  REQUIRE(!r.source.empty());
  r.compile_only = compile_only;
  auto verdict = Evaluate(r, Options(), [&](const StageReport& s) { stages->push_back(s); });
  INFO(verdict.status().message());
  REQUIRE(verdict.ok());
  return *verdict;
}

TEST_CASE("compile-only scope compiles the reference solution", "[evaluate]") {
  std::vector<StageReport> stages;
  Verdict v = Run("solutions/sm90a_wgmma_tma.cu", true, &stages);
  CHECK(v.verdict_class == VerdictClass::kCompiled);
  CHECK(v.compiled);
  REQUIRE(stages.size() == 1);
  CHECK(stages[0].stage == Stage::kCompile);
  CHECK(stages[0].ok);
  CHECK(stages[0].detail["launch_kernels"].size() >= 1);
  CHECK(stages[0].detail["isolation"]["limits"].get<std::string>().find("wall") !=
        std::string::npos);
}

TEST_CASE("without a GPU the runtime stages are skipped and the verdict says why", "[evaluate]") {
  std::vector<StageReport> stages;
  Verdict v = Run("solutions/sm90a_wgmma_tma.cu", false, &stages);
  if (v.report.contains("device")) {
    WARN("a usable GPU is present: this test checks the no-GPU path only");
    return;
  }
  CHECK(v.verdict_class == VerdictClass::kCompiled);
  CHECK(v.runtime_unverified);
  CHECK_FALSE(v.tic);
  CHECK(v.message.find("SKIPPED") != std::string::npos);
  CHECK(v.report["runtime_skipped"].get<std::string>().size() > 5);
}

TEST_CASE(
    "without a GPU a pipelined worker's job is decided before the GPU gate and starts no "
    "instrumented process",
    "[evaluate][gpu_gate]") {
  EvaluationRequest r;
  r.task = &Gemm();
  r.arch = "sm_90a";
  r.source = testing::ReadWholeFile(Gemm().dir + "/solutions/sm90a_wgmma_tma.cu");
  EngineOptions o = Options();
  o.gpu_gate = std::make_shared<GpuGate>();
  // Held by someone else for the whole evaluation: a job that asked for it would wait for ever.
  auto held = o.gpu_gate->Acquire();
  REQUIRE(held.ok());
  // Except where a usable GPU is present: there the job does ask for the gate (and waited for
  // ever in scripts/gpu-test on an H100, 2026-12-07), so the watcher lets it through once it
  // waits, and the test ends as a warning below.
  std::atomic<bool> evaluated{false};
  std::atomic<bool> let_through{false};
  std::thread watcher([&] {
    while (!evaluated.load() && o.gpu_gate->waiting() == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!evaluated.load()) {
      let_through = true;
      held->Release();
    }
  });
  std::vector<StageReport> stages;
  auto verdict = Evaluate(r, o, [&](const StageReport& s) { stages.push_back(s); });
  evaluated = true;
  watcher.join();
  INFO(verdict.status().message());
  REQUIRE(verdict.ok());
  if (verdict->report.contains("device")) {
    CHECK(let_through.load());
    WARN("a usable GPU is present: this test checks the no-GPU path only");
    return;
  }
  CHECK_FALSE(let_through.load());
  CHECK(verdict->verdict_class == VerdictClass::kCompiled);
  CHECK(verdict->runtime_unverified);
  CHECK_FALSE(verdict->report.contains("gpu_gate"));
  CHECK(o.gpu_gate->waiting() == 0);
  // The instrumented processes draw their seed when they start (StartInstrumentedProcesses).
  CHECK_FALSE(verdict->report["seeds"].contains("instrument"));
}

TEST_CASE("decoys decided by the compile stage get their expected verdicts", "[evaluate]") {
  for (const SourceRef& decoy : Gemm().decoys) {
    if (decoy.expect != "compile_error" && decoy.expect != "plan_invalid") continue;
    std::vector<StageReport> stages;
    Verdict v = Run(decoy.path, false, &stages);
    INFO(decoy.path << ": " << v.message);
    CHECK(VerdictClassName(v.verdict_class) == decoy.expect);
    REQUIRE_FALSE(stages.empty());
    CHECK_FALSE(stages.back().ok);
  }
}

TEST_CASE("a missing evaluator is an infrastructure error, not a verdict", "[evaluate]") {
  EvaluationRequest r;
  r.task = &Gemm();
  r.arch = "sm_90a";
  r.source = "extern \"C\" __global__ void k() {}";
  EngineOptions o = Options();
  o.evaluator_path = "/nonexistent/ptxbench-evaluator";
  auto verdict = Evaluate(r, o, nullptr);
  CHECK_FALSE(verdict.ok());
}

TEST_CASE("the roofline floor uses the device's peak rates", "[evaluate]") {
  gpu::DeviceDescription h200;
  h200.compute_capability = "9.0";
  h200.sm_count = 132;
  h200.sm_clock_max_khz = 1980000;
  h200.memory_clock_max_khz = 3201000;
  h200.memory_bus_bits = 6144;
  double flops = 2.0 * 8192 * 7168 * 5120,
         bytes = 2.0 * (8192.0 * 5120 + 7168.0 * 5120 + 8192.0 * 7168);
  double floor_ms = RooflineFloorMs(h200, flops, bytes);
  // 601.3 GFLOP at 132 x 4096 x 1.98 GHz = 1070 TFLOP/s -> 0.562 ms (compute-bound).
  CHECK(floor_ms == Approx(0.5618).epsilon(0.01));
  // NVML's maximum SM clock raises the peak when it is higher than the CUDA attribute.
  h200.nvml_max_sm_mhz = 2 * 1980;
  CHECK(RooflineFloorMs(h200, flops, bytes) == Approx(0.5618 / 2).epsilon(0.01));
  // fp8 operands: twice the tensor rate (the fp8 GEMM ran at 1,314 TFLOP/s on the H200).
  h200.nvml_max_sm_mhz.reset();
  CHECK(RooflineFloorMs(h200, flops, bytes, DType::kFP8E4M3) == Approx(0.5618 / 2).epsilon(0.01));
  gpu::DeviceDescription turing;
  turing.compute_capability = "7.5";
  CHECK(RooflineFloorMs(turing, flops, bytes) == 0);
}

}  // namespace
}  // namespace ptxbench::engine

// ---------------------------------------------------------------------------------------------
// The supervisor end to end with fake GPU modes (fake_evaluator.cc): stage order, references,
// comparisons, SASS map, target analysis, timing checks and every failure path, without a GPU.
namespace ptxbench::engine {
namespace {

struct FakeSetup {
  std::string dir;    // Holds ptxbench-evaluator (the real one) and fake-evaluator-<behaviour>.
  std::string tasks;  // A copy of tasks/ with gemm_n7168_k5120's workloads made small.
  FakeSetup() {
    char templ[] = "/tmp/ptxbench-fake-XXXXXX";
    REQUIRE(mkdtemp(templ) != nullptr);
    dir = templ;
    chmod(dir.c_str(), 0755);
    const char* env = std::getenv("PTXBENCH_EVALUATOR");
    std::string real = env && *env ? env : PTXBENCH_EVALUATOR_PATH;
    const char* fake_env = std::getenv("PTXBENCH_FAKE_EVALUATOR");
    std::string fake = fake_env && *fake_env ? fake_env : PTXBENCH_FAKE_EVALUATOR_PATH;
    REQUIRE(symlink(real.c_str(), (dir + "/ptxbench-evaluator").c_str()) == 0);
    for (const char* b : {"pass",
                          "wrong",
                          "wrong_timed",
                          "fault",
                          "hang",
                          "mutate",
                          "no_records",
                          "too_fast",
                          "no_ipc",
                          "begin_dies",
                          "wrong_unchecked",
                          "hang_timing",
                          "hang_instrument",
                          "unstable",
                          "no_counters",
                          "token",
                          "profiler_detect",
                          "slow",
                          "pool_a",
                          "pool_b",
                          "pool_c"}) {
      REQUIRE(symlink(fake.c_str(), (dir + "/fake-evaluator-" + b).c_str()) == 0);
    }
    tasks = dir + "/tasks";
    std::string copy =
        "cp -r '" + SourceDir() + "/tasks' '" + tasks + "' && chmod -R a+rX '" + dir + "'";
    REQUIRE(std::system(copy.c_str()) == 0);
    std::string path = tasks + "/gemm_n7168_k5120/task.json";
    auto j = nlohmann::json::parse(testing::ReadWholeFile(path));
    for (auto& w : j["workloads"]) {
      w["axes"] = {{"M", w.value("timed", false) ? 256 : 128}, {"N", 192}, {"K", 64}};
    }
    std::ofstream(path) << j.dump(2);
  }
  ~FakeSetup() { std::system(("rm -rf '" + dir + "'").c_str()); }
};

FakeSetup& Fake() {
  static FakeSetup setup;
  return setup;
}

absl::StatusOr<Verdict> RunFake(const std::string& behaviour, std::vector<StageReport>* stages,
                                uint64_t secret = 777, bool reuse_reference = true,
                                const std::string& source = "solutions/sm90a_wgmma_tma.cu",
                                const std::function<void(EngineOptions&)>& adjust = nullptr) {
  auto task = LoadTask(Fake().tasks + "/gemm_n7168_k5120");
  REQUIRE(task.ok());
  EvaluationRequest r;
  r.task = &*task;
  r.arch = "sm_90a";
  r.source = testing::ReadWholeFile(task->dir + "/" + source);
  EngineOptions o;
  o.evaluator_path = Fake().dir + "/fake-evaluator-" + behaviour;
  o.secret = secret;
  o.reuse_reference_process = reuse_reference;
  o.trial_timeout_seconds = 2;
  o.sanitizer_on_runtime_error = false;
  if (adjust) adjust(o);
  return Evaluate(r, o, [&](const StageReport& s) { stages->push_back(s); });
}

// The worker-local compile cache (compile_cache.h) through Evaluate(): the second evaluation of
// the same source runs no compiler and gets the same verdict; a cache entry whose cubin bytes
// were changed is refused (counted), the source compiled again and the real module used; a
// different source misses.
TEST_CASE("fake GPU: the compile cache serves the same source once verified", "[evaluate][fake]") {
  auto cache = std::make_shared<CompileCache>();
  const auto with_cache = [&](EngineOptions& o) { o.compile_cache = cache; };
  const std::string source = "solutions/sm90a_wgmma_tma.cu";
  std::vector<StageReport> first, second, third, other;
  auto v1 = RunFake("pass", &first, 777, true, source, with_cache);
  REQUIRE(v1.ok());
  CHECK(v1->verdict_class == VerdictClass::kPass);
  REQUIRE(!first.empty());
  CHECK(first[0].detail["compile_cache"]["hit"] == false);
  CHECK(cache->stats().entries == 1);
  CHECK(!cache->Toolchain().second.empty());  // ptxas's version, from the compile report.

  auto v2 = RunFake("pass", &second, 777, true, source, with_cache);
  REQUIRE(v2.ok());
  CHECK(v2->verdict_class == VerdictClass::kPass);
  CHECK(v2->speedup == v1->speedup);
  REQUIRE(second.size() == first.size());
  CHECK(second[0].detail["compile_cache"]["hit"] == true);
  CHECK(second[0].detail["cubin_sha256"] == first[0].detail["cubin_sha256"]);
  CHECK(cache->stats().hits == 1);
  // No compiler process ran: the audit record says the module came from the cache.
  bool compiled_from_cache = false;
  for (const auto& process : v2->report["processes"]) {
    if (process.value("mode", "") == "compile") {
      compiled_from_cache = process.value("compile_cache", "") == "hit";
    }
  }
  CHECK(compiled_from_cache);

  // Tamper with the stored cubin: refused, compiled again, the real module evaluated.
  const std::string key = second[0].detail["compile_cache"]["key"].get<std::string>();
  std::string* cubin = cache->MutableCubinForTesting(key);
  REQUIRE(cubin != nullptr);
  REQUIRE(cubin->size() > 64);
  (*cubin)[cubin->size() / 2] ^= 0x5a;
  auto v3 = RunFake("pass", &third, 777, true, source, with_cache);
  REQUIRE(v3.ok());
  CHECK(v3->verdict_class == VerdictClass::kPass);
  CHECK(third[0].detail["compile_cache"]["hit"] == false);
  CHECK(third[0].detail["cubin_sha256"] == first[0].detail["cubin_sha256"]);
  CHECK(cache->stats().tampered == 1);
  CHECK(cache->stats().entries == 1);  // The fresh compile is stored again.

  // Another source is another key.
  auto v4 = RunFake("pass", &other, 777, true, "solutions/sm90a_wgmma_rs_ldmatrix.cu", with_cache);
  REQUIRE(v4.ok());
  REQUIRE(!other.empty());
  CHECK(other[0].detail["compile_cache"]["hit"] == false);
  CHECK(cache->stats().entries == 2);
}

TEST_CASE("fake GPU: a correct kernel passes every stage in order", "[evaluate][fake]") {
  std::vector<StageReport> stages;
  auto v = RunFake("pass", &stages);
  INFO(v.status().message());
  REQUIRE(v.ok());
  INFO(v->message);
  CHECK(v->verdict_class == VerdictClass::kPass);
  CHECK(v->tic_paper);
  // The counted samples agree with the instrumented run and the share is met: the strong TIC.
  CHECK(v->tic);
  CHECK(v->target_work.strong_check == StrongCheck::kMade);
  CHECK(v->target_work.path_checked);
  CHECK(v->target_work.path_agrees);
  CHECK(v->target_work.share_of_executed == Approx(1.0));
  CHECK(v->target_work.share_of_task > 1);  // 128 HGMMA warps on a 256x192x64 workload.
  CHECK(v->target_work.min_share_of_task == 0.9);
  // The harness: one engine version, the task's judging hash.
  CHECK(v->harness.engine == kHarnessVersion);
  CHECK(v->harness.task_hash.size() == 64);
  REQUIRE(v->sampling.has_value());
  CHECK(v->sampling->converged);
  CHECK(v->sampling->speedup_stable);
  // The profiled side of the path check, from the fake's per-PC records and SASS map:
  // 512 warp executions at the HGMMA.64x256x16 site, 4096 pred-on threads -> 128 warps.
  CHECK(stages.size() == 4);
  CHECK(stages[2].detail["profiled_work"]["target_flops"] == Approx(128 * 2.0 * 64 * 256 * 16 / 4));
  CHECK(v->report["watchdogs"]["timing_seconds"].get<double>() < 30);
  CHECK(v->report["watchdogs"]["instrument_seconds"].get<double>() < 30);
  CHECK(v->speedup == Approx(0.75 / 0.8));
  REQUIRE(stages.size() == 4);
  CHECK(stages[0].stage == Stage::kCompile);
  CHECK(stages[1].stage == Stage::kCorrectness);
  CHECK(stages[2].stage == Stage::kTargetInstructions);
  CHECK(stages[3].stage == Stage::kTiming);
  for (const StageReport& s : stages) CHECK(s.ok);
  // 4 workloads: 1 public + `trials` secret seeds each (3+3+3+1) = 14 trials.
  CHECK(stages[1].detail["trials"].size() == 14);
  CHECK(stages[3].detail["checks"].size() >= 2);
  CHECK(stages[2].detail["sass"]["available"] == true);
  bool sassmap_seen = false;
  for (const auto& p : v->report["processes"]) sassmap_seen |= p.value("mode", "") == "sassmap";
  CHECK(sassmap_seen);
  CHECK(v->report["seeds"].contains("instrument"));
  // Outputs went to the reference process by (stand-in) CUDA IPC, one trial at a time, and every
  // comparison came back from it.
  for (const auto& t : stages[1].detail["trials"]) {
    CHECK(t.value("transfer", "") == "ipc");
    CHECK(t["compare"]["tensors"]["C"]["pass"] == true);
    CHECK(t["compare"]["tensors"]["C"]["elements"] == (t["workload"] == "timed" ? 256 : 128) * 192);
  }
  CHECK_FALSE(v->report.contains("output_transfer"));
  // The candidate process was started beside the compiler and given the module.
  bool candidate_early = false;
  for (const auto& p : v->report["processes"]) {
    if (p.value("mode", "") == "candidate") candidate_early = p.value("started_early", false);
  }
  CHECK(candidate_early);
  // The instrumented process was started beside the correctness stage and told to go.
  REQUIRE(stages[2].detail["runs"].size() == 1);
  CHECK(stages[2].detail["runs"][0]["waited_for_go"] == true);
  CHECK(stages[2].detail["runs"][0]["compare"]["tensors"]["C"]["pass"] == true);
  // Public seeds are the same in every evaluation; secret ones are not.
  std::vector<StageReport> again;
  auto v2 = RunFake("pass", &again);
  REQUIRE(v2.ok());
  CHECK(v2->verdict_class == VerdictClass::kPass);
  CHECK(again[1].detail["trials"][0]["seed_kind"] == "public");
  CHECK(again[1].detail["trials"][0]["seed"] == stages[1].detail["trials"][0]["seed"]);
}

bool ReferenceReused(const Verdict& v) {
  for (const auto& p : v.report["processes"]) {
    if (p.value("mode", "") == "reference") return p.value("reused", false);
  }
  return false;
}

TEST_CASE("fake GPU: the reference process stays warm for the next evaluation of the task",
          "[evaluate][fake]") {
  std::vector<StageReport> a, b, c, d;
  auto first = RunFake("pass", &a, 101);
  REQUIRE(first.ok());
  CHECK(first->verdict_class == VerdictClass::kPass);
  // Another secret, so another hash key: the warm process must hash with the new one, or the
  // candidate's and the reference's input hashes differ (an infrastructure error).
  auto second = RunFake("pass", &b, 202);
  INFO(second.status().message());
  REQUIRE(second.ok());
  CHECK(second->verdict_class == VerdictClass::kPass);
  CHECK(ReferenceReused(*second));
  // A failed evaluation hands it back too (the verdict is the kernel's, not the process's).
  auto wrong = RunFake("wrong", &c, 303);
  REQUIRE(wrong.ok());
  auto wrong_again = RunFake("wrong", &d, 304);
  REQUIRE(wrong_again.ok());
  CHECK(wrong_again->verdict_class == VerdictClass::kWrongResult);
  CHECK(ReferenceReused(*wrong_again));
  // A compile error ends the processes started beside the compiler (the waiting candidate) and
  // hands the warm reference process back untouched.
  std::vector<StageReport> f, g;
  auto broken = RunFake("pass", &f, 505, true, "decoys/compile_error_syntax.cu");
  REQUIRE(broken.ok());
  CHECK(broken->verdict_class == VerdictClass::kCompileError);
  auto after = RunFake("pass", &g, 606);
  REQUIRE(after.ok());
  CHECK(after->verdict_class == VerdictClass::kPass);
  CHECK(ReferenceReused(*after));
  // A warm process that does not answer "begin" is replaced by a fresh one.
  std::vector<StageReport> h, i;
  REQUIRE(RunFake("begin_dies", &h, 707).ok());
  auto replaced = RunFake("begin_dies", &i, 708);
  INFO(replaced.status().message());
  REQUIRE(replaced.ok());
  CHECK(replaced->verdict_class == VerdictClass::kPass);
  CHECK_FALSE(ReferenceReused(*replaced));
  // Off: a fresh process every time.
  std::vector<StageReport> e;
  auto fresh = RunFake("pass", &e, 404, false);
  REQUIRE(fresh.ok());
  CHECK(fresh->verdict_class == VerdictClass::kPass);
  CHECK_FALSE(ReferenceReused(*fresh));
}

// The pool of warm reference processes (evaluate_processes.cc ReferencePool) under a mix of
// tasks: each fake behaviour is its own evaluator, so its own pool key, as each task is. The
// fake's "pool_" processes report 1 GiB of buffers on a 16 GiB device at "reset"; each is
// charged that plus the context allowance (0.75 GiB).
TEST_CASE("fake GPU: the warm reference pool keeps the most recently used, within count and memory",
          "[evaluate][fake]") {
  auto run = [](const std::string& behaviour, uint64_t secret, int capacity, double fraction) {
    std::vector<StageReport> stages;
    auto v = RunFake(behaviour, &stages, secret, true, "solutions/sm90a_wgmma_tma.cu",
                     [&](EngineOptions& o) {
                       o.warm_reference_capacity = capacity;
                       o.warm_reference_memory_fraction = fraction;
                     });
    REQUIRE(v.ok());
    CHECK(v->verdict_class == VerdictClass::kPass);
    return ReferenceReused(*v);
  };
  // By count, 2 kept: a, b, a (warm), c ends b (used least recently), a (warm), b (fresh).
  run("pool_a", 1001, 2, 1.0);
  CHECK_FALSE(run("pool_b", 1002, 2, 1.0));
  CHECK(run("pool_a", 1003, 2, 1.0));
  CHECK_FALSE(run("pool_c", 1004, 2, 1.0));
  CHECK(run("pool_a", 1005, 2, 1.0));
  CHECK_FALSE(run("pool_b", 1006, 2, 1.0));
  // A mix of three tasks with room for three: every one warm from its second evaluation on
  // (with the former fixed 4 and five tasks in turn, none ever was).
  for (uint64_t round = 0; round < 2; ++round) {
    for (const char* b : {"pool_a", "pool_b", "pool_c"}) {
      const bool warm = run(b, 1100 + round * 10 + b[5], 3, 1.0);
      if (round == 1) CHECK(warm);
    }
  }
  // By memory: 20 % of 16 GiB (3.2 GiB) holds one process of 1.75 GiB, not two.
  run("pool_a", 1201, 16, 0.2);
  CHECK(run("pool_a", 1202, 16, 0.2));
  run("pool_b", 1203, 16, 0.2);
  CHECK_FALSE(run("pool_a", 1204, 16, 0.2));
  // 5 % (0.8 GiB): none is kept.
  run("pool_c", 1205, 16, 0.05);
  CHECK_FALSE(run("pool_c", 1206, 16, 0.05));
}

// The worker daemon runs every job on a thread of its own that ends with the job. Until
// 2026-12-03 the warm process died with that thread (its parent-death signal followed the
// forking thread, sandbox.cc ForkThread), so no job through the service ever found it warm.
TEST_CASE("fake GPU: the reference process stays warm when each evaluation runs on its own thread",
          "[evaluate][fake]") {
  std::vector<bool> reused;
  for (uint64_t secret : {811, 812, 813}) {
    std::thread job([&] {
      std::vector<StageReport> stages;
      auto v = RunFake("pass", &stages, secret);
      REQUIRE(v.ok());
      CHECK(v->verdict_class == VerdictClass::kPass);
      reused.push_back(ReferenceReused(*v));
    });
    job.join();
  }
  REQUIRE(reused.size() == 3);
  CHECK(reused[1]);
  CHECK(reused[2]);
}

// The defence against cheating only where no sample is checked element-wise: the reference
// sketches the launches chosen after the loop, and one wrong sketch fails the verdict.
TEST_CASE("fake GPU: a kernel wrong only on unchecked timed samples fails on their sketches",
          "[evaluate][fake]") {
  std::vector<StageReport> stages;
  auto honest = RunFake("pass", &stages, 931);
  REQUIRE(honest.ok());
  CHECK(honest->verdict_class == VerdictClass::kPass);
  REQUIRE(stages.size() == 4);
  const nlohmann::json& verified = stages[3].detail["sketches"];
  CHECK(verified["verified"] == true);
  CHECK(verified["pass"] == true);
  CHECK(verified["launches_verified"] == verified["launches_sketched"]);
  CHECK(verified["samples_failed"] == 0);

  stages.clear();
  auto cheat = RunFake("wrong_unchecked", &stages, 932);
  REQUIRE(cheat.ok());
  INFO(cheat->message);
  CHECK(cheat->verdict_class == VerdictClass::kWrongResult);
  CHECK(cheat->message.find("timed launches are wrong") != std::string::npos);
  CHECK(cheat->message.find("sketch") != std::string::npos);
  REQUIRE(stages.size() == 4);
  CHECK(stages[3].detail["sketches"]["samples_failed"].get<int>() > 0);
}

TEST_CASE("fake GPU: the timing event carries counted launches and a sketch of every launch",
          "[evaluate][fake]") {
  std::vector<StageReport> stages;
  auto v = RunFake("pass", &stages, 919);
  REQUIRE(v.ok());
  REQUIRE(stages.size() == 4);
  auto measurement = gpu::FromJson<gpu::TimingMeasurement>(stages[3].detail["timing"]["result"]);
  INFO(measurement.status().message());
  REQUIRE(measurement.ok());
  const gpu::CountedSamples& counters = measurement->counters;
  CHECK(counters.collected);
  CHECK(counters.needed >= 20);
  CHECK(counters.samples.size() == counters.needed);
  CHECK(measurement->pairs == measurement->candidate.n + counters.samples.size());
  const gpu::SampleSketches& sketches = measurement->sketches;
  CHECK(sketches.projections == 4);
  CHECK(sketches.tensors == std::vector<std::string>{"C"});
  CHECK(sketches.samples.size() == measurement->candidate.n + counters.samples.size());
  for (const gpu::SampleSketch& s : sketches.samples) {
    REQUIRE(s.tensors.size() == 1);
    CHECK(s.tensors[0].projections.size() == 4);
    CHECK(s.tensors[0].nonfinite == 0);
  }
  // Secrets: another evaluation draws other positions' seeds and other sketch keys.
  std::vector<StageReport> other;
  REQUIRE(RunFake("pass", &other, 920).ok());
  auto second = gpu::FromJson<gpu::TimingMeasurement>(other[3].detail["timing"]["result"]);
  REQUIRE(second.ok());
  CHECK(second->sketches.samples.at(0).tensors.at(0).projections !=
        sketches.samples.at(0).tensors.at(0).projections);
  // Without counters the timing still runs, and says why none were collected.
  std::vector<StageReport> uncounted;
  auto u = RunFake("no_counters", &uncounted, 921);
  REQUIRE(u.ok());
  REQUIRE(uncounted.size() == 4);
  auto bare = gpu::FromJson<gpu::TimingMeasurement>(uncounted[3].detail["timing"]["result"]);
  REQUIRE(bare.ok());
  CHECK_FALSE(bare->counters.collected);
  CHECK(bare->counters.not_collected_reason.find("PRIVILEGES") != std::string::npos);
  CHECK(bare->counters.samples.empty());
}

TEST_CASE("fake GPU: the fair baseline is measured once per key, then the worker's choice",
          "[evaluate][fake]") {
  gpu::BaselineChoiceCache::Process().Clear();
  auto fastest = [](EngineOptions& o) {
    o.timing.baseline_selection = gpu::BaselineSelection::kFastest;
  };
  auto choice_of = [](const std::vector<StageReport>& stages) {
    REQUIRE(stages.size() == 4);
    auto choice = gpu::FromJson<gpu::BaselineChoice>(stages[3].detail["timing"]["baseline_choice"]);
    INFO(choice.status().message());
    REQUIRE(choice.ok());
    return *choice;
  };
  std::vector<StageReport> first;
  auto v = RunFake("pass", &first, 931, true, "solutions/sm90a_wgmma_tma.cu", fastest);
  INFO((v.ok() ? v->message : std::string(v.status().message())));
  REQUIRE(v.ok());
  CHECK(v->verdict_class == VerdictClass::kPass);
  const gpu::BaselineChoice measured = choice_of(first);
  CHECK(measured.selection == gpu::BaselineSelection::kFastest);
  CHECK(measured.measured);
  CHECK(measured.chosen == 1);  // 0.75 ms against the first choice's 0.78; #2 not eligible.
  CHECK(measured.candidates.size() == 3);
  CHECK(first[3].summary.find("fastest of 3") != std::string::npos);
  CHECK(first[3].detail["timing"]["baseline"]["algorithm"] == "heuristic #1");
  CHECK(first[3].detail["timing"]["setup_split"]["baseline_candidates_made"] == 3);
  // The next evaluation of the same task on this worker times against the cached choice.
  std::vector<StageReport> second;
  REQUIRE(RunFake("pass", &second, 932, true, "solutions/sm90a_wgmma_tma.cu", fastest).ok());
  const gpu::BaselineChoice cached = choice_of(second);
  CHECK_FALSE(cached.measured);
  CHECK(cached.chosen == 1);
  CHECK(second[3].summary.find("earlier choice") != std::string::npos);
  // ...and the candidate process was handed that choice ahead, so it made the library's
  // candidates up to it (#0 and #1) and not the third.
  CHECK(second[3].detail["timing"]["setup_split"]["baseline_candidates_made"] == 2);
  // first_heuristic: the library heuristic's first choice, with nothing measured.
  std::vector<StageReport> plain;
  const auto first_only = [](EngineOptions& o) {
    o.timing.baseline_selection = gpu::BaselineSelection::kFirstHeuristic;
  };
  REQUIRE(RunFake("pass", &plain, 933, true, "solutions/sm90a_wgmma_tma.cu", first_only).ok());
  const gpu::BaselineChoice first_heuristic = choice_of(plain);
  CHECK(first_heuristic.selection == gpu::BaselineSelection::kFirstHeuristic);
  CHECK_FALSE(first_heuristic.measured);
  CHECK(first_heuristic.chosen == 0);
  // The default is the fastest (here the worker's cached choice of the same key).
  std::vector<StageReport> by_default;
  REQUIRE(RunFake("pass", &by_default, 934).ok());
  CHECK(choice_of(by_default).selection == gpu::BaselineSelection::kFastest);
  CHECK(choice_of(by_default).chosen == 1);
  gpu::BaselineChoiceCache::Process().Clear();
}

TEST_CASE("fake GPU: when the reference process cannot map outputs, files take over",
          "[evaluate][fake]") {
  std::vector<StageReport> stages;
  auto v = RunFake("no_ipc", &stages);
  INFO(v.status().message());
  REQUIRE(v.ok());
  INFO(v->message);
  CHECK(v->verdict_class == VerdictClass::kPass);
  REQUIRE(stages.size() == 4);
  CHECK(v->report["output_transfer"]["mode"] == "file");
  CHECK(v->report["output_transfer"]["ipc_refused"].get<std::string>().find("fake") !=
        std::string::npos);
  const auto& trials = stages[1].detail["trials"];
  REQUIRE(trials.size() == 14);
  for (const auto& t : trials) {
    CHECK(t.value("transfer", "") == "file");
    CHECK(t["pass"] == true);
  }
  CHECK(stages[3].detail["checks"].size() >= 2);
  for (const auto& c : stages[3].detail["checks"]) CHECK(c["pass"] == true);
}

TEST_CASE("fake GPU: every failure path gives its verdict or an infrastructure error",
          "[evaluate][fake]") {
  struct Case {
    const char* behaviour;
    VerdictClass expected;
    const char* message_part;
  };
  for (const Case& c : {Case{"wrong", VerdictClass::kWrongResult, "wrong result on workload"},
                        Case{"wrong_timed", VerdictClass::kWrongResult, "timed launches"},
                        Case{"fault", VerdictClass::kRuntimeError, "illegal memory access"},
                        Case{"hang", VerdictClass::kTimeout, "did not finish"},
                        Case{"mutate", VerdictClass::kInputMutated, "changed its inputs"},
                        Case{"too_fast", VerdictClass::kImpossibleTime, "roofline"}}) {
    std::vector<StageReport> stages;
    auto v = RunFake(c.behaviour, &stages);
    INFO(c.behaviour << ": " << v.status().message());
    REQUIRE(v.ok());
    INFO(v->message);
    CHECK(v->verdict_class == c.expected);
    CHECK(v->message.find(c.message_part) != std::string::npos);
    CHECK_FALSE(v->tic);
  }
  // No CUPTI records, even for the kernel as the first of a fresh process: refused, not passed.
  std::vector<StageReport> stages;
  auto v = RunFake("no_records", &stages);
  REQUIRE_FALSE(v.ok());
  CHECK(std::string(v.status().message()).find("refused") != std::string::npos);
}

TEST_CASE(
    "fake GPU: hangs only in the timing loop or only under the profiler end at the derived "
    "watchdog, and the next evaluation is normal",
    "[evaluate][fake][watchdog]") {
  // Small floors and a short loop so the derived deadlines are about a second here; the same
  // formula gives ~15 s for the GEMM on the H200 (docs/measurement.md, "Watchdogs").
  auto fast = [](EngineOptions& o) {
    o.timing_setup_floor_seconds = 0.5;
    o.instrument_setup_floor_seconds = 0.5;
    o.instrument_fresh_setup_floor_seconds = 1;
    o.timing.warmup_seconds = 0.05;
    o.timing.max_seconds = 0.2;
    o.timing.gap_pad_max_us = 1000;  // The fake's launches are instant: a 1 ms pad bound.
    o.counted_sample_host_ms = 20;   // Nor does the fake's counting cost CUPTI's host work.
  };
  for (const char* behaviour : {"hang_timing", "hang_instrument"}) {
    std::vector<StageReport> stages;
    const double t0 = evaluation::Now();
    auto v = RunFake(behaviour, &stages, 4242, true, "solutions/sm90a_wgmma_tma.cu", fast);
    const double took = evaluation::Now() - t0;
    INFO(behaviour << ": " << v.status().message());
    REQUIRE(v.ok());
    INFO(v->message);
    CHECK(v->verdict_class == VerdictClass::kTimeout);
    CHECK_FALSE(v->tic);
    const std::string deadline_key =
        std::string(behaviour) == "hang_timing" ? "timing_seconds" : "instrument_seconds";
    const double deadline = v->report["watchdogs"][deadline_key].get<double>();
    CHECK(deadline < 3);
    CHECK(deadline > 0.5);
    // Ended at the derived deadline, not at the 300 s cap (compile and trials take a few s).
    CHECK(took < deadline + 20);
    CHECK(stages.back().stage ==
          (std::string(behaviour) == "hang_timing" ? Stage::kTiming : Stage::kTargetInstructions));
    // The next submission is evaluated normally.
    std::vector<StageReport> next;
    auto ok = RunFake("pass", &next, 4243, true, "solutions/sm90a_wgmma_tma.cu", fast);
    REQUIRE(ok.ok());
    CHECK(ok->verdict_class == VerdictClass::kPass);
  }
  // Behind a GPU gate (--gpu-pipeline 2) the health probe after the kill runs inside the
  // evaluation's own turn: it must not ask the gate again (that would wait for ever), and the
  // gate is free once the evaluation returns.
  auto gate = std::make_shared<GpuGate>();
  auto gated = [&](EngineOptions& o) {
    fast(o);
    o.gpu_gate = gate;
  };
  std::vector<StageReport> stages;
  auto v = RunFake("hang_timing", &stages, 4244, true, "solutions/sm90a_wgmma_tma.cu", gated);
  INFO(v.status().message());
  REQUIRE(v.ok());
  CHECK(v->verdict_class == VerdictClass::kTimeout);
  REQUIRE(stages.back().detail.contains("health_after_kill"));
  CHECK(stages.back().detail["health_after_kill"] == "ok");
  CHECK(v->report["gpu_gate"]["held"] == true);
  CHECK(gate->waiting() == 0);
  auto again = gate->Acquire();
  CHECK(again.ok());
}

TEST_CASE("fake GPU: a loop at its sample cap with scattering samples is reported",
          "[evaluate][fake]") {
  std::vector<StageReport> stages;
  auto v = RunFake("unstable", &stages);
  REQUIRE(v.ok());
  INFO(v->message);
  CHECK(v->verdict_class == VerdictClass::kPass);
  REQUIRE(v->sampling.has_value());
  CHECK_FALSE(v->sampling->converged);
  CHECK(v->sampling->stop_reason == "sample_cap");
  CHECK_FALSE(v->sampling->speedup_stable);
  CHECK(v->sampling->candidate_scatter == Approx(0.15));
  CHECK(v->message.find("without converging") != std::string::npos);
  CHECK(v->message.find("not a stable figure") != std::string::npos);
  CHECK(stages.back().detail["sampling"]["speedup_stable"] == false);
}

TEST_CASE("fake GPU: the strong check decides token use, profiling detection and missing counters",
          "[evaluate][fake]") {
  struct Case {
    const char* behaviour;
    VerdictClass expected;
    StrongCheck check;
    const char* message_part;
  };
  for (const Case& c : {Case{"token", VerdictClass::kTargetWorkInsufficient, StrongCheck::kMade,
                             "of the task's FLOPs (threshold 90.0 %)"},
                        Case{"profiler_detect", VerdictClass::kProfiledPathDiffers,
                             StrongCheck::kMade, "different work when profiled than when timed"},
                        Case{"no_counters", VerdictClass::kPass, StrongCheck::kNotMade,
                             "INSUFFICIENT_PRIVILEGES"}}) {
    std::vector<StageReport> stages;
    auto v = RunFake(c.behaviour, &stages);
    INFO(c.behaviour << ": " << v.status().message());
    REQUIRE(v.ok());
    INFO(v->message);
    CHECK(v->verdict_class == c.expected);
    CHECK(v->target_work.strong_check == c.check);
    CHECK(v->message.find(c.message_part) != std::string::npos);
    // The paper's definition holds for all three (families executed predicate-on); the strong
    // one for none, and a check not made never passes as made.
    CHECK(v->tic_paper);
    CHECK_FALSE(v->tic);
  }
}

// ---------------------------------------------------------------------------------------------
// The GPU gate (gpu_gate.h) through Evaluate(): two evaluations on two threads, as a GPU worker
// with --gpu-pipeline 2 runs them. The fake's "slow" GPU phases are traced (fake_evaluator.cc:
// "<pid> <mode> start|end <CLOCK_REALTIME ns> <hash key>" in gpu-trace.log beside it).

int64_t RealtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

struct GpuInterval {
  int64_t start = 0;
  int64_t end = 0;
  std::string mode;
  std::string key;  // The evaluation's hash key.
};

bool Intersect(int64_t a0, int64_t a1, int64_t b0, int64_t b1) { return a0 < b1 && b0 < a1; }

// Asks the fake processes for their GPU phases for as long as it lives.
class GpuTrace {
 public:
  GpuTrace() : path_(Fake().dir + "/gpu-trace.log") {
    std::ofstream(path_).flush();
    // Sandboxed candidates and instrumented processes run as nobody when the test runs as root.
    REQUIRE(chmod(path_.c_str(), 0666) == 0);
  }
  ~GpuTrace() { unlink(path_.c_str()); }

  // Every phase, start and end paired per process (one command at a time in each); a phase
  // that never ended lasts for ever.
  std::vector<GpuInterval> Intervals() const {
    std::vector<GpuInterval> out;
    std::map<std::string, GpuInterval> open;
    std::istringstream in(testing::ReadWholeFile(path_));
    std::string pid, mode, edge, key;
    int64_t ns = 0;
    while (in >> pid >> mode >> edge >> ns >> key) {
      if (edge == "start") {
        open[pid] = {ns, 0, mode, key};
      } else if (auto it = open.find(pid); it != open.end()) {
        it->second.end = ns;
        out.push_back(it->second);
        open.erase(it);
      }
    }
    for (auto& [pid_key, interval] : open) {
      interval.end = INT64_MAX;
      out.push_back(interval);
    }
    return out;
  }

  // When each instrumented process was started (its "spawned" line, outside any phase), by
  // evaluation key: the earliest.
  std::map<std::string, int64_t> InstrumentSpawns() const {
    std::map<std::string, int64_t> out;
    std::istringstream in(testing::ReadWholeFile(path_));
    std::string pid, mode, edge, key;
    int64_t ns = 0;
    while (in >> pid >> mode >> edge >> ns >> key) {
      if (edge != "spawned") continue;
      auto [it, inserted] = out.emplace(key, ns);
      if (!inserted) it->second = std::min(it->second, ns);
    }
    return out;
  }

 private:
  std::string path_;
};

// Pairs of GPU phases of different evaluations that overlap in time.
size_t CrossOverlaps(const std::vector<GpuInterval>& intervals) {
  size_t n = 0;
  for (size_t i = 0; i < intervals.size(); ++i) {
    for (size_t j = i + 1; j < intervals.size(); ++j) {
      const GpuInterval& a = intervals[i];
      const GpuInterval& b = intervals[j];
      if (a.key != b.key && Intersect(a.start, a.end, b.start, b.end)) ++n;
    }
  }
  return n;
}

struct TimedRun {
  absl::StatusOr<Verdict> verdict = absl::UnknownError("not run");
  int64_t compile_start = 0;  // The compile stage, from its report (CLOCK_REALTIME ns).
  int64_t compile_end = 0;
};

// RunFake's evaluation, recording the compile stage's interval and calling `after_compile`
// when it is reported.
void RunTimedFake(const std::string& behaviour, uint64_t secret,
                  const std::function<void(EngineOptions&)>& adjust, TimedRun* out,
                  const std::function<void()>& after_compile = nullptr,
                  const std::atomic<bool>* cancel = nullptr) {
  auto task = LoadTask(Fake().tasks + "/gemm_n7168_k5120");
  REQUIRE(task.ok());
  EvaluationRequest r;
  r.task = &*task;
  r.arch = "sm_90a";
  r.source = testing::ReadWholeFile(task->dir + "/solutions/sm90a_wgmma_tma.cu");
  EngineOptions o;
  o.evaluator_path = Fake().dir + "/fake-evaluator-" + behaviour;
  o.secret = secret;
  o.trial_timeout_seconds = 2;
  o.sanitizer_on_runtime_error = false;
  if (adjust) adjust(o);
  out->verdict = Evaluate(
      r, o,
      [&](const StageReport& s) {
        if (s.stage != Stage::kCompile) return;
        out->compile_end = RealtimeNs();
        out->compile_start = out->compile_end - static_cast<int64_t>(s.seconds * 1e9);
        if (after_compile) after_compile();
      },
      cancel);
}

// Runs A, and B once A's compile stage has been reported (B then compiles while A is on the GPU).
void RunStaggered(const std::function<void(EngineOptions&)>& adjust, TimedRun* a, TimedRun* b) {
  std::promise<void> a_compiled;
  std::thread first([&] { RunTimedFake("slow", 901, adjust, a, [&] { a_compiled.set_value(); }); });
  std::future<void> compiled = a_compiled.get_future();
  // A that fails before its compile report would leave the promise unset: bounded wait.
  const bool reported = compiled.wait_for(std::chrono::seconds(120)) == std::future_status::ready;
  std::thread second([&] {
    if (reported) RunTimedFake("slow", 902, adjust, b);
  });
  first.join();
  second.join();
  REQUIRE(reported);
}

TEST_CASE(
    "fake GPU: with a shared GPU gate two evaluations' GPU phases never overlap, while the "
    "second one compiles during the first one's",
    "[evaluate][fake][gpu_gate]") {
  GpuTrace trace;
  auto gate = std::make_shared<GpuGate>();
  const auto gated = [&](EngineOptions& o) { o.gpu_gate = gate; };
  TimedRun a, b;
  RunStaggered(gated, &a, &b);
  INFO(a.verdict.status().message() << " / " << b.verdict.status().message());
  REQUIRE(a.verdict.ok());
  REQUIRE(b.verdict.ok());
  CHECK(a.verdict->verdict_class == VerdictClass::kPass);
  CHECK(b.verdict->verdict_class == VerdictClass::kPass);

  const std::vector<GpuInterval> intervals = trace.Intervals();
  std::map<std::string, size_t> per_key;
  for (const GpuInterval& i : intervals) ++per_key[i.key];
  REQUIRE(per_key.size() == 2);  // Both evaluations ran GPU phases (trials, compare, time...).
  for (const auto& [key, n] : per_key) CHECK(n >= 5);
  // Among them each configured its hardware counters, which queries the GPU's profiler: H100 run
  // 17 did it before the gate and lost the counted launches of 14 of 36 verdicts.
  std::map<std::string, size_t> counter_phases;
  for (const GpuInterval& i : intervals) {
    if (i.mode == "counters") ++counter_phases[i.key];
  }
  CHECK(counter_phases.size() == 2);
  // (a) No GPU phase of one evaluation inside one of the other.
  std::ostringstream listing;
  for (const GpuInterval& i : intervals) {
    listing << i.key << " " << i.mode << " " << i.start << " " << i.end << "\n";
  }
  INFO(listing.str());
  CHECK(CrossOverlaps(intervals) == 0);
  // (b) The pipelining happened: B's compile ran while A was on the GPU. A got the gate first
  // (it asked first), so A's phases are those of the key that started first.
  const GpuInterval* earliest = &intervals.front();
  for (const GpuInterval& i : intervals) {
    if (i.start < earliest->start) earliest = &i;
  }
  size_t a_phases_in_b_compile = 0;
  for (const GpuInterval& i : intervals) {
    if (i.key == earliest->key && Intersect(i.start, i.end, b.compile_start, b.compile_end)) {
      ++a_phases_in_b_compile;
    }
  }
  INFO("B compiled from " << b.compile_start << " to " << b.compile_end);
  CHECK(a_phases_in_b_compile >= 1);
  // The audit record: each held the gate; B waited for A.
  for (const TimedRun* run : {&a, &b}) {
    REQUIRE(run->verdict->report.contains("gpu_gate"));
    CHECK(run->verdict->report["gpu_gate"]["held"] == true);
  }
  // B waits when it reaches the gate while A still holds it. On a loaded machine (ctest -j2 on
  // two cores) B's compile can outlast A's GPU phases (2026-12-06: 1.40 s against 1.36 s), and
  // then B rightly finds the gate open; what must hold is that B never ran while A held it.
  int64_t a_last_end = 0;
  for (const GpuInterval& i : intervals) {
    if (i.key == earliest->key) a_last_end = std::max(a_last_end, i.end);
  }
  const double b_wait = b.verdict->report["gpu_gate"]["wait_seconds"].get<double>();
  // Each evaluation's instrumented process is started before its turn at the gate, so B's sets
  // up while A is still on the GPU (its "spawned" line is written once the process runs, a few
  // tens of milliseconds after the supervisor started it).
  const std::map<std::string, int64_t> spawns = trace.InstrumentSpawns();
  REQUIRE(spawns.size() == 2);
  std::string b_key;
  for (const auto& [key, n] : per_key) {
    if (key != earliest->key) b_key = key;
  }
  if (b.compile_end + 50'000'000 < a_last_end) {
    CHECK(b_wait > 0.05);
    CHECK(spawns.at(b_key) < a_last_end);
  } else {
    WARN("B's compile ended within 50 ms of A's last GPU phase: its gate wait was " << b_wait);
  }
  CHECK(gate->waiting() == 0);
}

TEST_CASE(
    "fake GPU: without a gate the same two evaluations' GPU phases overlap (the check can "
    "fail)",
    "[evaluate][fake][gpu_gate]") {
  // Both compile from the cache, so they reach their GPU stages together.
  auto cache = std::make_shared<CompileCache>();
  const auto cached = [&](EngineOptions& o) { o.compile_cache = cache; };
  {
    TimedRun warm;
    RunTimedFake("slow", 900, cached, &warm);
    REQUIRE(warm.verdict.ok());
    CHECK_FALSE(warm.verdict->report.contains("gpu_gate"));  // No gate: no audit entry.
  }
  GpuTrace trace;
  TimedRun a, b;
  std::thread first([&] { RunTimedFake("slow", 901, cached, &a); });
  std::thread second([&] { RunTimedFake("slow", 902, cached, &b); });
  first.join();
  second.join();
  REQUIRE(a.verdict.ok());
  REQUIRE(b.verdict.ok());
  const std::vector<GpuInterval> intervals = trace.Intervals();
  std::set<std::string> keys;
  for (const GpuInterval& i : intervals) keys.insert(i.key);
  REQUIRE(keys.size() == 2);
  CHECK(CrossOverlaps(intervals) > 0);
}

TEST_CASE("fake GPU: an evaluation cancelled while it waits for the GPU gate ends promptly",
          "[evaluate][fake][gpu_gate]") {
  auto gate = std::make_shared<GpuGate>();
  absl::StatusOr<GpuGate::Hold> busy = gate->Acquire();  // Another job is on the GPU.
  REQUIRE(busy.ok());
  std::atomic<bool> cancel{false};
  TimedRun run;
  std::atomic<int64_t> returned{0};
  std::thread job([&] {
    RunTimedFake(
        "slow", 903, [&](EngineOptions& o) { o.gpu_gate = gate; }, &run, nullptr, &cancel);
    returned = RealtimeNs();
  });
  // Wait until it is queued behind the holder (its compile done).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (gate->waiting() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const bool queued = gate->waiting() == 1;
  const int64_t cancelled_at = RealtimeNs();
  cancel = true;
  job.join();
  REQUIRE(queued);
  REQUIRE_FALSE(run.verdict.ok());
  CHECK(run.verdict.status().code() == absl::StatusCode::kCancelled);
  const double seconds = static_cast<double>(returned - cancelled_at) / 1e9;
  INFO("returned " << seconds << " s after the cancel");
  CHECK(seconds < 2);
  // Its turn was given up: the gate is free as soon as the holder lets go.
  CHECK(gate->waiting() == 0);
  busy->Release();
  absl::StatusOr<GpuGate::Hold> next = gate->Acquire();
  REQUIRE(next.ok());
  CHECK(next->wait_seconds() < 0.5);
}

}  // namespace
}  // namespace ptxbench::engine
