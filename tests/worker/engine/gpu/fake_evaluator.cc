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
// begin_dies (a warm reference process exits when the next evaluation begins), wrong_unchecked
// (the timed samples that are not checked element-wise are wrong: only their sketches show it),
// no_counters (the timing process could not read hardware counters).
//
// Sketches and counters: both processes sketch the fake's outputs with the real arithmetic
// (sketch.h SketchOnHost, the GPU kernel's oracle); counted launches report the counters of an
// honest wgmma GEMM (target FLOPs = the task's FLOPs).
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "common/expr.h"
#include "common/task.h"
#include "nlohmann/json.hpp"
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
  gpu::ToleranceRule rule;
  rule.atol = task.tolerance.atol;
  rule.rtol = task.tolerance.rtol;
  rule.matched_ratio = task.tolerance.matched_ratio;
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
  d.uuid = "GPU-fake";
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
  gpu::OutputTransfer transfer = request.transfer;
  gpu::LineReader in(0);  // One reader: it buffers past a line.
  gpu::InstrumentEvent event;
  if (request.wait_for_go) {
    auto go = Next<gpu::GoCommand, gpu::QuitCommand>(in);
    if (!go.has_value() || !std::holds_alternative<gpu::GoCommand>(*go)) return 0;
    transfer = std::get<gpu::GoCommand>(*go).transfer;
    event.waited_for_go = true;
  }
  if (behaviour != "no_records") {
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
  if (transfer != gpu::OutputTransfer::kIpc || request.host_inputs) return 0;
  // Like the real one: alive until the supervisor is done with the outputs.
  while (true) {
    auto cmd = Next<gpu::SaveOutputsCommand, gpu::QuitCommand>(in);
    if (!cmd.has_value() || !std::holds_alternative<gpu::SaveOutputsCommand>(*cmd)) return 0;
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

// Counters of an honest wgmma GEMM: every FLOP of the task on the target family.
std::map<std::string, double> HonestCounters(const gpu::WorkCounterSet& set, double flops) {
  std::map<std::string, double> m;
  for (const std::string& name : set.AllMetrics()) m[name] = 0;
  m[set.target_matrix_flops] = flops;
  if (!set.tensor_flops.empty()) m[set.tensor_flops.front()] = flops;
  for (const std::string& name : set.scalar_thread_insts) m[name] = 1e6;
  m[set.target_matrix_warp_insts] = flops / (2.0 * 64 * 256 * 16 / 4);
  m[set.tensor_warp_insts] = flops / (2.0 * 64 * 256 * 16 / 4);
  m[set.bulk_copy_insts] = 516096;
  m[set.bulk_copy_load_bytes] = 7.05e9;
  m[set.l2_read_bytes] = 7.5e9;
  return m;
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
      Emit(gpu::ResetEvent{});
    } else if (const auto* begin = std::get_if<gpu::BeginCommand>(&*cmd)) {
      if (behaviour == "begin_dies") return 0;  // A warm process that died in between.
      key = begin->hash_key;
      Emit(gpu::ReadyEvent{Device(), true});
    } else if (const auto* ref = std::get_if<gpu::ComputeReferenceCommand>(&*cmd)) {
      Emit(gpu::ReferenceEvent{ref->workload, ref->seed, InputHash(ref->seed, key),
                               nlohmann::json::object(), 0, 0});
    } else if (const auto* compare = std::get_if<gpu::CompareCommand>(&*cmd)) {
      Emit(Compare(task, *compare));
    } else if (const auto* sketch = std::get_if<gpu::SketchReferenceCommand>(&*cmd)) {
      Emit(SketchReferences(task, *sketch));
    }
  }
}

gpu::TimingEvent Time(const ptxbench::Task& task, const gpu::TimeCommand& cmd) {
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
  const double candidate_ms = behaviour == "too_fast" ? 1e-6 : 0.8;
  event.result.candidate.n = n;
  event.result.candidate.median_ms = candidate_ms;
  event.result.baseline.n = n;
  event.result.baseline.median_ms = 0.75;
  event.result.speedup = 0.75 / candidate_ms;
  event.result.kernel_ms_total = 31.0;
  event.result.stop_reason = "converged";
  // Counted launches at the plan's positions (one per metric configuration here).
  const ptxbench::Workload& w = WorkloadOf(task, cmd.workload);
  auto set = gpu::WorkCountersFor("sm_90a", ptxbench::DType::kBF16);
  auto flops = ptxbench::EvalRealExpr(task.flops_expr, w.axes);
  gpu::CountedSamples& counters = event.result.counters;
  std::vector<std::string> metrics = set.ok() ? set->AllMetrics() : std::vector<std::string>{};
  gpu::CountedPlan plan =
      gpu::PlanCountedLaunches(metrics.size(), cmd.loop.counted_per_config,
                               cmd.loop.counted_min_total, cmd.loop.min_samples, cmd.counter_seed);
  if (behaviour == "no_counters" || !set.ok() || !flops.ok()) {
    counters.not_collected_reason = "fake: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES";
  } else if (plan.needed > 0) {
    counters.collected = true;
    counters.chip = "GH100";
    counters.needed = plan.needed;
    counters.rate = plan.rate;
    for (const std::string& m : metrics) counters.configs.push_back({m});
    std::map<std::string, double> honest = HonestCounters(*set, *flops);
    for (size_t j = 0; j < plan.needed; ++j) {
      size_t config = gpu::CountedConfig(plan, j);
      const std::string& metric = metrics.at(config);
      counters.samples.push_back(
          {n + j,
           n,
           gpu::SampleSeed(cmd.candidate_seed_base, gpu::kCountedSeedOffset + j),
           config,
           50,
           {{metric, honest.at(metric)}}});
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
  event.baseline = {{"library", "fake"}};
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
  while (true) {
    auto cmd = Next<gpu::QuitCommand, gpu::TrialCommand, gpu::SaveOutputsCommand,
                    gpu::PrepareTimingCommand, gpu::TimeCommand>(in);
    if (!cmd.has_value() || std::holds_alternative<gpu::QuitCommand>(*cmd)) return 0;
    if (const auto* save = std::get_if<gpu::SaveOutputsCommand>(&*cmd)) {
      Emit(gpu::OutputsEvent{WriteOutputs(task, last_trial.workload, last_trial.seed, save->prefix,
                                          behaviour == "wrong", gpu::OutputTransfer::kFile)});
    } else if (const auto* trial = std::get_if<gpu::TrialCommand>(&*cmd)) {
      last_trial = *trial;
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
    } else if (const auto* time = std::get_if<gpu::TimeCommand>(&*cmd)) {
      Emit(Time(task, *time));
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
