// A stand-in for ptxbench-evaluator's GPU modes, so that Evaluate()'s supervisor logic (stage
// order, reference bookkeeping, pipelined trials, comparisons, the SASS-map process, target
// analysis, timing checks, timeouts, faults, refusals) runs end to end on a machine without a
// GPU. compile mode is the real evaluator's (exec'd from the same directory); the GPU modes
// write deterministic outputs: output element i for seed s is a function of (s, i), in both the
// "reference" and the "candidate" process, unless the behaviour says otherwise. The reference
// process compares on the CPU (compare.h, the GPU kernel's oracle). Outputs handed over "by IPC"
// are files here too, their paths in the handle. It speaks the real protocol's structs
// (protocol_messages.h), so a renamed field fails to compile here as well.
//
// The behaviour comes from the program's own name, fake-evaluator-<behaviour> (sandboxes get a
// minimal environment): pass, wrong, wrong_timed, fault, hang, mutate, no_records, too_fast,
// no_ipc (the reference process cannot map outputs: the supervisor falls back to files),
// begin_dies (a warm reference process exits when the next evaluation begins), hang_timing
// (hangs in the timing loop only), hang_instrument (hangs under the profiler only), unstable
// (the timing loop ends at its sample cap with the candidate's samples scattering),
// no_counters (the timing process cannot collect hardware counters), token (one token wgmma
// next to a GEMM on other units: profiled and timed agree, the share is tiny),
// profiler_detect (the wgmma path only when profiled: the timed counters show none).
// Otherwise the counted samples show what the instrumented run's records and SASS map show.
// wrong_unchecked (the timed samples that are not checked element-wise are wrong: only their
// sketches show it).
//
// slow (a correct kernel whose GPU phases take a while: 30 ms per trial, 10 ms per reference or
// comparison, 50 ms instrumented, 200 ms timing loop, so that two evaluations' GPU phases would
// visibly overlap without the GPU gate).
//
// GPU phases: every command that launches kernels on a real GPU (trial, save_outputs,
// compute_reference, compare, sketch, go, time) appends "<pid> <mode> start|end <CLOCK_REALTIME
// ns> <hash key>" lines to gpu-trace.log beside this program when that file exists (the tests
// create it; the hash key tells the evaluations apart, a warm reference process serving several).
//
// Sketches: both processes sketch the fake's outputs with the real arithmetic (sketch.h
// SketchOnHost, the GPU kernel's oracle).
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include "common/expr.h"
#include "common/task.h"
#include "nlohmann/json.hpp"
#include "worker/engine/gpu/baseline_choice.h"
#include "worker/engine/gpu/compare.h"
#include "worker/engine/gpu/philox.h"
#include "worker/engine/gpu/poison.h"
#include "worker/engine/gpu/protocol.h"
#include "worker/engine/gpu/protocol_messages.h"
#include "worker/engine/gpu/sketch.h"
#include "worker/engine/gpu/stats.h"
#include "worker/engine/gpu/work_share.h"

namespace {

namespace gpu = ptxbench::gpu;
using gpu::Mix64;

std::string behaviour;
std::string trace_path;  // <this program's directory>/gpu-trace.log

int64_t RealtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void TraceLine(const char* mode, const char* edge, uint64_t key) {
  // O_APPEND without O_CREAT: only when a test asked for the trace; one write per line, so the
  // lines of concurrent processes do not interleave.
  int fd = open(trace_path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) return;
  char line[160];
  int n = std::snprintf(line, sizeof line, "%d %s %s %lld %llx\n", static_cast<int>(getpid()), mode,
                        edge, static_cast<long long>(RealtimeNs()),
                        static_cast<unsigned long long>(key));
  if (n > 0) (void)!write(fd, line, static_cast<size_t>(n));
  close(fd);
}

// One GPU phase: traced from construction to destruction, `slow_ms` long under "slow".
class GpuPhase {
 public:
  GpuPhase(const char* mode, uint64_t key, int slow_ms) : mode_(mode), key_(key) {
    TraceLine(mode_, "start", key_);
    if (behaviour == "slow") usleep(static_cast<useconds_t>(slow_ms) * 1000);
  }
  ~GpuPhase() { TraceLine(mode_, "end", key_); }
  GpuPhase(const GpuPhase&) = delete;
  GpuPhase& operator=(const GpuPhase&) = delete;

 private:
  const char* mode_;
  uint64_t key_;
};

template <typename Event>
void Emit(const Event& event) {
  (void)gpu::WriteJsonLine(3, gpu::ToJson(event));
}

// Reports a protocol error the way the real evaluator does and ends the process.
int Fail(const absl::Status& status) {
  Emit(gpu::ErrorEvent{gpu::ErrorKind::kInfrastructure, std::string(status.message()),
                       absl::StatusCodeToString(status.code())});
  return 2;
}

// The next command if it is one of Commands; nullopt at the end of input or on a protocol error
// (reported).
template <typename... Commands>
std::optional<std::variant<Commands...>> Next(gpu::LineReader& in) {
  auto line = in.ReadLine(-1);
  if (!line.ok() || !line->has_value()) return std::nullopt;
  auto command = gpu::FromJsonOneOf<Commands...>(nlohmann::json::parse(**line, nullptr, false));
  if (!command.ok()) {
    Fail(command.status());
    return std::nullopt;
  }
  return std::move(*command);
}

uint16_t Element(uint64_t seed, uint64_t i) {
  float f = std::sin(static_cast<float>((seed % 1000) + i % 977)) * 4.0f + 0.5f;
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<uint16_t>(bits >> 16);
}

const ptxbench::Workload& WorkloadOf(const ptxbench::Task& task, const std::string& name) {
  for (const auto& w : task.workloads) {
    if (w.name == name) return w;
  }
  return task.workloads.front();
}

// Writes every output tensor of `workload` for `seed` to "<prefix>.<tensor>.bin"; the handles
// say `transfer` (a file either way here).
std::vector<gpu::OutputHandle> WriteOutputs(const ptxbench::Task& task, const std::string& workload,
                                            uint64_t seed, const std::string& prefix, bool corrupt,
                                            gpu::OutputTransfer transfer) {
  std::vector<gpu::OutputHandle> files;
  const ptxbench::Workload& w = WorkloadOf(task, workload);
  for (const ptxbench::TensorSpec& t : task.tensors) {
    if (t.role != ptxbench::TensorRole::kOutput) continue;
    uint64_t n = 1;
    for (const std::string& d : t.shape) {
      n *= static_cast<uint64_t>(*ptxbench::EvalIntExpr(d, w.axes));
    }
    std::vector<uint16_t> data(n);
    for (uint64_t i = 0; i < n; ++i) data[i] = Element(seed, i);
    if (corrupt) data[n / 2] ^= 0x4000;
    std::string path = prefix + "." + t.name + ".bin";
    (void)gpu::WriteFileBytes(path, std::string(reinterpret_cast<const char*>(data.data()), n * 2));
    files.push_back({t.name, n * 2, transfer, path});
  }
  return files;
}

// The reference process's "compare": the reference regenerated, the candidate's files read back.
gpu::CompareEvent Compare(const ptxbench::Task& task, const gpu::CompareCommand& cmd) {
  gpu::CompareEvent event{cmd.workload, cmd.seed, {}, std::nullopt, 0.001};
  const ptxbench::Workload& w = WorkloadOf(task, cmd.workload);
  const gpu::ToleranceRule rule = gpu::RuleOf(task.tolerance);
  for (const ptxbench::TensorSpec& t : task.tensors) {
    if (t.role != ptxbench::TensorRole::kOutput) continue;
    std::vector<int64_t> shape;
    uint64_t n = 1;
    for (const std::string& d : t.shape) {
      shape.push_back(*ptxbench::EvalIntExpr(d, w.axes));
      n *= static_cast<uint64_t>(shape.back());
    }
    std::string path;
    for (const gpu::OutputHandle& o : cmd.outputs) {
      if (o.tensor != t.name) continue;
      if (o.transfer == gpu::OutputTransfer::kIpc && behaviour == "no_ipc") {
        event.ipc_failed = "fake: cudaErrorMapBufferObjectFailed";
        return event;
      }
      path = o.handle;
    }
    std::string got = *gpu::ReadFileBytes(path);
    std::vector<uint16_t> expected(n);
    for (uint64_t i = 0; i < n; ++i) expected[i] = Element(cmd.seed, i);
    event.tensors[t.name] = gpu::CompareOutputs(
        got.data(), expected.data(), n, gpu::ElementType::kBF16, shape, rule, gpu::kPoisonBF16, 1);
  }
  return event;
}

gpu::DeviceDescription Device() {
  gpu::DeviceDescription d;
  d.name = "Fake H200";
  d.arch = "sm_90a";
  d.compute_capability = "9.0";
  d.sm_count = 132;
  d.sm_clock_max_khz = 1980000;
  d.memory_clock_max_khz = 3201000;
  d.memory_bus_bits = 6144;
  d.runtime_version = 13000;
  d.driver_version = 13000;
  // One fake GPU per probe: a GPU worker locks its GPU's UUID (worker/daemon/gpu_lock.h), and
  // the CPU tests run fake GPU workers side by side, each on "its own" GPU.
  d.uuid = "GPU-fake-" + std::to_string(std::random_device()());
  return d;
}

uint64_t InputHash(uint64_t seed, uint64_t key) { return Mix64(seed ^ key); }

gpu::SassFamilyMap SassMap() {
  gpu::SassFamilyMap map;
  map.available = true;
  gpu::SassFunctionSites& gemm = map.functions["gemm_kernel"];
  gemm.instructions = 64;
  gemm.sites["wgmma"] = {{256, "HGMMA.64x256x16.F32.BF16 R24, gdesc[UR4], R24",
                          gpu::SiteEvidence::kSassOpcode, std::nullopt, std::nullopt}};
  gemm.sites["tma"] = {
      {512, "UTMALDG.2D [UR4], [UR8]", gpu::SiteEvidence::kSassOpcode, std::nullopt, std::nullopt}};
  return map;
}

int Instrument(const ptxbench::Task& task, const gpu::InstrumentRequest& request) {
  // Not a GPU phase (GpuTrace::Intervals skips it): when the supervisor started this process,
  // so a test can tell it was started before the evaluation's turn at the GPU gate.
  TraceLine("instrument", "spawned", request.hash_key);
  gpu::OutputTransfer transfer = request.transfer;
  gpu::LineReader in(0);  // One reader: it buffers past a line.
  gpu::InstrumentEvent event;
  if (request.wait_for_go) {
    auto go = Next<gpu::GoCommand, gpu::QuitCommand>(in);
    if (!go.has_value() || !std::holds_alternative<gpu::GoCommand>(*go)) return 0;
    transfer = std::get<gpu::GoCommand>(*go).transfer;
    event.waited_for_go = true;
  }
  // The instrumented run, up to its event; then the process only waits (outputs kept).
  std::optional<GpuPhase> phase;
  phase.emplace("instrument", request.hash_key, 50);
  if (behaviour == "hang_instrument") sleep(1000);
  if (behaviour == "token") {
    event.records = {{"gemm_kernel", 256, 4, 128, 4, 0},
                     {"gemm_kernel", 512, 8, 8, 0, 8},
                     {"gemm_kernel", 768, 100, 3200, 0, 0}};
  } else if (behaviour != "no_records") {
    event.records = {{"gemm_kernel", 256, 512, 4096, 512, 0},
                     {"gemm_kernel", 512, 8, 8, 0, 8},
                     {"gemm_kernel", 768, 100, 3200, 0, 0}};
  }
  event.workload = request.workload;
  event.seed = request.seed;
  event.kernel = "gemm_kernel";
  event.launch_index = request.launch_index;
  event.host_inputs = request.host_inputs;
  event.instrumented_seconds = 0.01;
  if (!request.host_inputs) {
    event.outputs =
        WriteOutputs(task, request.workload, request.seed, request.output_prefix, false, transfer);
    event.input_hash_before = event.input_hash_after = InputHash(request.seed, request.hash_key);
  }
  Emit(event);
  phase.reset();
  if (transfer != gpu::OutputTransfer::kIpc || request.host_inputs) return 0;
  // Like the real one: alive until the supervisor is done with the outputs.
  while (true) {
    auto cmd = Next<gpu::SaveOutputsCommand, gpu::QuitCommand>(in);
    if (!cmd.has_value() || !std::holds_alternative<gpu::SaveOutputsCommand>(*cmd)) return 0;
    GpuPhase save("instrument", request.hash_key, 0);
    Emit(gpu::OutputsEvent{WriteOutputs(task, request.workload, request.seed,
                                        std::get<gpu::SaveOutputsCommand>(*cmd).prefix, false,
                                        gpu::OutputTransfer::kFile)});
  }
}

std::vector<std::string> OutputNames(const ptxbench::Task& task) {
  std::vector<std::string> names;
  for (const ptxbench::TensorSpec& t : task.tensors) {
    if (t.role == ptxbench::TensorRole::kOutput) names.push_back(t.name);
  }
  return names;
}

// The fake's outputs of (workload, seed) as values, per output tensor (what WriteOutputs
// writes, decoded from bf16).
std::vector<std::vector<double>> OutputValues(const ptxbench::Task& task,
                                              const std::string& workload, uint64_t seed,
                                              bool corrupt) {
  std::vector<std::vector<double>> tensors;
  const ptxbench::Workload& w = WorkloadOf(task, workload);
  for (const ptxbench::TensorSpec& t : task.tensors) {
    if (t.role != ptxbench::TensorRole::kOutput) continue;
    uint64_t n = 1;
    for (const std::string& d : t.shape) {
      n *= static_cast<uint64_t>(*ptxbench::EvalIntExpr(d, w.axes));
    }
    std::vector<double> values(n);
    for (uint64_t i = 0; i < n; ++i) {
      uint16_t bits = Element(seed, i);
      if (corrupt && i == n / 2) bits ^= 0x4000;
      uint32_t word = static_cast<uint32_t>(bits) << 16;
      float f;
      std::memcpy(&f, &word, 4);
      values[i] = f;
    }
    tensors.push_back(std::move(values));
  }
  return tensors;
}

// The real sketch arithmetic (sketch.h) over the fake's outputs: the reference side with the
// task's tolerance sums, the candidate side without.
gpu::SampleSketch FakeSketch(const ptxbench::Task& task, const std::string& workload,
                             uint64_t sketch_seed, size_t index, uint64_t seed, bool counted,
                             size_t k, bool wrong, bool reference) {
  gpu::SampleSketch sketch{index, counted, seed, {}};
  const uint64_t key = gpu::SketchKey(sketch_seed, seed);
  uint32_t ordinal = 0;
  for (const std::vector<double>& values : OutputValues(task, workload, seed, wrong)) {
    sketch.tensors.push_back(gpu::SketchOnHost(values, key, ordinal++, k,
                                               reference ? task.tolerance.atol : 0,
                                               reference ? task.tolerance.rtol : 0));
  }
  return sketch;
}

gpu::ReferenceSketchesEvent SketchReferences(const ptxbench::Task& task,
                                             const gpu::SketchReferenceCommand& cmd) {
  gpu::ReferenceSketchesEvent event;
  event.workload = cmd.workload;
  event.sketches.projections = cmd.projections;
  event.sketches.tensors = OutputNames(task);
  for (const gpu::CheckedSample& sample : cmd.samples) {
    event.sketches.samples.push_back(FakeSketch(task, cmd.workload, cmd.sketch_seed, sample.sample,
                                                sample.seed, false, cmd.projections, false, true));
  }
  event.seconds = 0.001;
  return event;
}

int Reference(const ptxbench::Task& task, uint64_t key) {
  gpu::LineReader in(0);
  Emit(gpu::ReadyEvent{Device(), false});
  while (true) {
    auto cmd =
        Next<gpu::QuitCommand, gpu::ResetCommand, gpu::BeginCommand, gpu::ComputeReferenceCommand,
             gpu::CompareCommand, gpu::SketchReferenceCommand>(in);
    if (!cmd.has_value() || std::holds_alternative<gpu::QuitCommand>(*cmd)) return 0;
    if (std::holds_alternative<gpu::ResetCommand>(*cmd)) {
      gpu::ResetEvent reset;
      if (behaviour.rfind("pool_", 0) == 0) {  // Holds 1 GiB of a 16 GiB device (the pool test).
        reset.device_buffer_bytes = uint64_t{1} << 30;
        reset.device_total_bytes = uint64_t{16} << 30;
      }
      Emit(reset);
    } else if (const auto* begin = std::get_if<gpu::BeginCommand>(&*cmd)) {
      if (behaviour == "begin_dies") return 0;  // A warm process that died in between.
      key = begin->hash_key;
      Emit(gpu::ReadyEvent{Device(), true});
    } else if (const auto* ref = std::get_if<gpu::ComputeReferenceCommand>(&*cmd)) {
      GpuPhase phase("reference", key, 10);
      Emit(gpu::ReferenceEvent{ref->workload,
                               ref->seed,
                               InputHash(ref->seed, key),
                               nlohmann::json::object(),
                               0,
                               0,
                               2,
                               {}});
    } else if (const auto* compare = std::get_if<gpu::CompareCommand>(&*cmd)) {
      GpuPhase phase("reference", key, 10);
      Emit(Compare(task, *compare));
    } else if (const auto* sketch = std::get_if<gpu::SketchReferenceCommand>(&*cmd)) {
      GpuPhase phase("reference", key, 10);
      Emit(SketchReferences(task, *sketch));
    }
  }
}

// The counted samples of the timing loop: the work-share metrics (work_share.h) as the
// behaviour's kernel would show them, two samples.
gpu::CountedSamples Counters(const ptxbench::Task& task, const std::string& workload) {
  gpu::CountedSamples counters;
  if (behaviour == "no_counters") {
    counters.not_collected_reason =
        "fake: CUPTI profiler refused (CUPTI_ERROR_INSUFFICIENT_PRIVILEGES)";
    return counters;
  }
  auto set = gpu::WorkCountersFor("sm_90a", ptxbench::DType::kBF16);
  if (!set.ok()) return counters;
  const ptxbench::Workload& w = WorkloadOf(task, workload);
  const double task_flops = *ptxbench::EvalRealExpr(task.flops_expr, w.axes);
  // The instrumented run's records (Instrument above): pred-on warps at the HGMMA.64x256x16
  // site x 2*64*256*16/4 FLOPs, GMMA and TMA warp instructions.
  const double per_warp = 2.0 * 64 * 256 * 16 / 4;
  double target = 128 * per_warp, gmma = 512, tma = 8, other_bf16 = 0;
  if (behaviour == "token") {
    target = 4 * per_warp;
    gmma = 4;
    other_bf16 = task_flops;  // The real work on mma.sync.
  } else if (behaviour == "profiler_detect") {
    target = 0;
    gmma = 0;
    tma = 0;
    other_bf16 = task_flops;
  }
  std::map<std::string, double> metrics;
  for (const std::string& m : set->AllMetrics()) metrics[m] = 0;
  metrics[set->target_matrix_flops] = target;
  metrics["sm__ops_path_tensor_src_bf16_dst_fp32.sum"] = target + other_bf16;
  metrics[set->target_matrix_warp_insts] = gmma;
  metrics[set->tensor_warp_insts] = gmma;
  metrics[set->bulk_copy_insts] = tma;
  counters.collected = true;
  counters.chip = set->chip;
  counters.configs = {set->AllMetrics()};
  for (size_t i = 0; i < 2; ++i) {
    gpu::CountedSample sample;
    sample.position = 7 + 5 * i;
    sample.after_sample = 6 + 4 * i;
    sample.metrics = metrics;
    counters.samples.push_back(sample);
  }
  return counters;
}

// `prepared`: the worker's earlier choice the process was handed ahead (CandidateRequest::
// timing_cached_baseline or PrepareTimingCommand::cached_baseline), if any.
gpu::TimingEvent Time(const ptxbench::Task& task, const gpu::TimeCommand& cmd,
                      const std::optional<gpu::CachedBaselineChoice>& prepared) {
  gpu::TimingEvent event;
  event.workload = cmd.workload;
  const size_t n = 20;
  const bool corrupt = behaviour == "wrong_timed";
  for (size_t block = 0; block * cmd.loop.check_every < n; ++block) {
    size_t i = gpu::CheckedSampleOfBlock(cmd.check_position_seed, block, cmd.loop.check_every);
    if (i >= n) break;
    uint64_t seed = gpu::SampleSeed(cmd.candidate_seed_base, i);
    event.checks.push_back(
        {i, seed,
         WriteOutputs(task, cmd.workload, seed, cmd.check_prefix + "." + std::to_string(i), corrupt,
                      cmd.transfer)});
  }
  uint64_t last = gpu::SampleSeed(cmd.candidate_seed_base, n - 1);
  event.checks.push_back(
      {n - 1, last,
       WriteOutputs(task, cmd.workload, last, cmd.check_prefix + ".last", corrupt, cmd.transfer)});
  if (behaviour == "hang_timing") sleep(1000);
  // The fair baseline as the real timing process reports it: with kFastest, three library
  // candidates of which #1 is 4 % faster than the first choice and #2 is not eligible, measured
  // unless the supervisor sent a cached choice whose description still matches. The candidates
  // it "makes" count as the real process's do: up to a cached choice handed ahead and still
  // standing, else all three.
  event.baseline = {{"library", "fake"}};
  event.baseline_choice.selection = cmd.loop.baseline_selection;
  if (cmd.loop.baseline_selection == gpu::BaselineSelection::kFastest) {
    auto algorithm = [&](size_t k) {
      return nlohmann::json{{"library", task.baseline_library},
                            {"algorithm", "heuristic #" + std::to_string(k)}};
    };
    const bool prepared_stands = prepared.has_value() && prepared->index < 3 &&
                                 prepared->algorithm == algorithm(prepared->index);
    event.setup_split.baseline_candidates_made = prepared_stands ? prepared->index + 1 : 3;
    if (cmd.cached_baseline.has_value() &&
        cmd.cached_baseline->algorithm == algorithm(cmd.cached_baseline->index)) {
      event.baseline_choice.chosen = cmd.cached_baseline->index;
      const bool same_as_prepared =
          prepared_stands && prepared->index == cmd.cached_baseline->index;
      if (!same_as_prepared) event.setup_split.baseline_candidates_made += 3;
    } else {
      if (prepared_stands) event.setup_split.baseline_candidates_made += 3;
      event.baseline_choice.measured = true;
      event.baseline_choice.candidates = {{0, algorithm(0), 0.78, 15, true, ""},
                                          {1, algorithm(1), 0.75, 15, true, ""},
                                          {2, algorithm(2), 0.0, 0, false, "output C differs"}};
      auto chosen = gpu::ChooseFastestBaseline(event.baseline_choice.candidates);
      event.baseline_choice.chosen = chosen.ok() ? *chosen : 0;
      event.baseline_choice.first_ms = 0.78;
      event.baseline_choice.chosen_ms = 0.75;
    }
    event.baseline = algorithm(event.baseline_choice.chosen);
  }
  const double candidate_ms = behaviour == "too_fast" ? 1e-6 : 0.8;
  const bool unstable = behaviour == "unstable";
  event.result.candidate.n = n;
  event.result.candidate.median_ms = candidate_ms;
  event.result.candidate.mad_ms = unstable ? 0.12 : 0.001;
  event.result.candidate.rse_median = unstable ? 0.03 : 0.001;
  event.result.baseline.n = n;
  event.result.baseline.median_ms = 0.75;
  event.result.baseline.mad_ms = 0.001;
  event.result.baseline.rse_median = 0.001;
  event.result.speedup = 0.75 / candidate_ms;
  event.result.kernel_ms_total = 31.0;
  event.result.stop_reason = unstable ? "sample_cap" : "converged";
  event.result.counters = Counters(task, cmd.workload);
  gpu::CountedSamples& counters = event.result.counters;
  if (counters.collected) {
    // As many counted launches as the real loop's plan asks for, each with the behaviour's
    // metrics, after the timed samples.
    const gpu::CountedPlan plan = gpu::PlanCountedLaunches(
        counters.configs.size(), cmd.loop.counted_per_config, cmd.loop.counted_min_total,
        cmd.loop.min_samples, cmd.counter_seed);
    const std::map<std::string, double> metrics = counters.samples.front().metrics;
    counters.needed = plan.needed;
    counters.rate = plan.rate;
    counters.samples.clear();
    for (size_t j = 0; j < plan.needed; ++j) {
      gpu::CountedSample sample;
      sample.position = n + j;
      sample.after_sample = n;
      sample.seed = gpu::SampleSeed(cmd.candidate_seed_base, gpu::kCountedSeedOffset + j);
      sample.config = gpu::CountedConfig(plan, j);
      sample.metrics = metrics;
      counters.samples.push_back(sample);
    }
  }
  // Sketches of every timed sample and counted launch.
  gpu::SampleSketches& sketches = event.result.sketches;
  sketches.projections = cmd.loop.sketch_projections;
  sketches.tensors = OutputNames(task);
  if (cmd.loop.sketch_projections > 0) {
    std::vector<bool> checked(n, false);
    for (const gpu::TimedCheck& c : event.checks) checked.at(c.sample) = true;
    for (size_t i = 0; i < n; ++i) {
      const bool wrong = corrupt || (behaviour == "wrong_unchecked" && !checked[i]);
      sketches.samples.push_back(FakeSketch(task, cmd.workload, cmd.sketch_seed, i,
                                            gpu::SampleSeed(cmd.candidate_seed_base, i), false,
                                            cmd.loop.sketch_projections, wrong, false));
    }
    for (const gpu::CountedSample& c : counters.samples) {
      sketches.samples.push_back(FakeSketch(task, cmd.workload, cmd.sketch_seed, c.position, c.seed,
                                            true, cmd.loop.sketch_projections, false, false));
    }
  }
  event.result.pairs = n + counters.samples.size();
  event.result.jitter_us_max = cmd.loop.jitter_us_max;
  event.result.jitter_us_mean = cmd.loop.jitter_us_max / 2;
  event.device = Device();
  event.seconds = 0.1;
  return event;
}

int Candidate(const ptxbench::Task& task, const gpu::CandidateRequest& request) {
  gpu::LineReader in(0);
  if (!request.module.has_value()) {
    // Started beside the compiler, like the real one: the module comes with "module".
    auto cmd = Next<gpu::ModuleCommand, gpu::QuitCommand>(in);
    if (!cmd.has_value() || !std::holds_alternative<gpu::ModuleCommand>(*cmd) ||
        !gpu::ReadFileBytes(std::get<gpu::ModuleCommand>(*cmd).module.cubin_path).ok()) {
      return 0;
    }
  }
  Emit(gpu::ReadyEvent{Device(), false});
  gpu::TrialCommand last_trial;
  // The first preparation counts, as in the real process (StartPreparing runs once).
  std::optional<gpu::CachedBaselineChoice> prepared = request.timing_cached_baseline;
  bool prepare_started = request.timing_workload.has_value();
  while (true) {
    auto cmd = Next<gpu::QuitCommand, gpu::TrialCommand, gpu::SaveOutputsCommand,
                    gpu::PrepareTimingCommand, gpu::TimeCommand>(in);
    if (!cmd.has_value() || std::holds_alternative<gpu::QuitCommand>(*cmd)) return 0;
    if (const auto* save = std::get_if<gpu::SaveOutputsCommand>(&*cmd)) {
      GpuPhase phase("candidate", request.hash_key, 0);
      Emit(gpu::OutputsEvent{WriteOutputs(task, last_trial.workload, last_trial.seed, save->prefix,
                                          behaviour == "wrong", gpu::OutputTransfer::kFile)});
    } else if (const auto* trial = std::get_if<gpu::TrialCommand>(&*cmd)) {
      last_trial = *trial;
      GpuPhase phase("candidate", request.hash_key, 30);
      if (behaviour == "hang") sleep(1000);
      if (behaviour == "fault") {
        Emit(gpu::FaultEvent{gpu::FaultPhase::kTrial,
                             "cudaErrorIllegalAddress (an illegal memory access was encountered)",
                             "at fake_evaluator.cc: cudaErrorIllegalAddress"});
        return 3;
      }
      const uint64_t key = request.hash_key;
      gpu::TrialEvent event{
          trial->workload,
          trial->seed,
          InputHash(trial->seed, key),
          behaviour == "mutate" ? InputHash(trial->seed + 1, key) : InputHash(trial->seed, key),
          WriteOutputs(task, trial->workload, trial->seed, trial->prefix, behaviour == "wrong",
                       trial->transfer),
          0.5,
          0.01};
      Emit(event);
    } else if (const auto* prepare = std::get_if<gpu::PrepareTimingCommand>(&*cmd)) {
      if (!prepare_started) prepared = prepare->cached_baseline;
      prepare_started = true;
      // Configuring the hardware counters queries the GPU's profiler (CUPTI's counter
      // availability), which collides with another process's counted launches: a GPU phase.
      if (prepare->counter_session.has_value()) GpuPhase phase("counters", request.hash_key, 20);
    } else if (const auto* time = std::get_if<gpu::TimeCommand>(&*cmd)) {
      GpuPhase phase("candidate", request.hash_key, 200);
      Emit(Time(task, *time, prepared));
    }
  }
}

template <typename Request>
std::optional<Request> ReadRequest(int argc, char** argv) {
  if (argc <= 3) {
    Fail(absl::InvalidArgumentError("usage: fake-evaluator-<behaviour> MODE --request FILE"));
    return std::nullopt;
  }
  auto text = gpu::ReadFileBytes(argv[3]);
  if (!text.ok()) {
    Fail(text.status());
    return std::nullopt;
  }
  auto request = gpu::FromJson<Request>(nlohmann::json::parse(*text, nullptr, false));
  if (!request.ok()) {
    Fail(request.status());
    return std::nullopt;
  }
  return *request;
}

std::optional<ptxbench::Task> LoadTask(const gpu::TaskRef& ref) {
  auto task = ptxbench::LoadTask(ref.dir);
  if (!task.ok()) {
    Fail(task.status());
    return std::nullopt;
  }
  return *task;
}

}  // namespace

int main(int argc, char** argv) {
  std::string self = argv[0];
  std::string dir = self.substr(0, self.rfind('/'));
  behaviour = self.substr(self.rfind("fake-evaluator-") + 15);
  trace_path = dir + "/gpu-trace.log";
  auto mode = gpu::EnumFromName<gpu::EvaluatorMode>(argc > 1 ? argv[1] : "");
  if (!mode.has_value()) return Fail(absl::InvalidArgumentError("unknown mode"));
  switch (*mode) {
    case gpu::EvaluatorMode::kCompile: {
      std::string real = dir + "/ptxbench-evaluator";
      execv(real.c_str(), argv);
      return 2;
    }
    case gpu::EvaluatorMode::kHealth:
      Emit(gpu::HealthEvent{Device(), 0.001});
      return 0;
    case gpu::EvaluatorMode::kSassMap:
      Emit(gpu::SassMapEvent{SassMap()});
      return 0;
    case gpu::EvaluatorMode::kInstrument: {
      auto request = ReadRequest<gpu::InstrumentRequest>(argc, argv);
      if (!request) return 2;
      auto task = LoadTask(request->submission.task);
      return task ? Instrument(*task, *request) : 2;
    }
    case gpu::EvaluatorMode::kReference: {
      auto request = ReadRequest<gpu::ReferenceRequest>(argc, argv);
      if (!request) return 2;
      auto task = LoadTask(request->task);
      return task ? Reference(*task, request->hash_key) : 2;
    }
    case gpu::EvaluatorMode::kCandidate: {
      auto request = ReadRequest<gpu::CandidateRequest>(argc, argv);
      if (!request) return 2;
      auto task = LoadTask(request->submission.task);
      return task ? Candidate(*task, *request) : 2;
    }
    case gpu::EvaluatorMode::kReplay:
      return Fail(absl::UnimplementedError("the fake evaluator has no replay mode"));
  }
  return 2;
}
