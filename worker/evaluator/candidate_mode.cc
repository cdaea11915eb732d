// candidate: untrusted code. Correctness trials (module reloaded per trial, inputs hashed before
// and after, outputs poisoned, handed to the reference process), then the interleaved timing
// loop against the library baseline (timing.h). Started beside the compiler, it sets up the
// device and the timing baseline while the source compiles and waits for the module.
#include <algorithm>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "worker/engine/gpu/baseline.h"
#include "worker/engine/gpu/baseline_choice.h"
#include "worker/engine/gpu/cuda_check.h"
#include "worker/engine/gpu/cupti_counters.h"
#include "worker/engine/gpu/nvml_monitor.h"
#include "worker/engine/gpu/sketch.h"
#include "worker/engine/gpu/stats.h"
#include "worker/engine/gpu/timing.h"
#include "worker/engine/gpu/work_share.h"
#include "worker/evaluator/evaluator.h"
#include "worker/evaluator/modes.h"
#include "worker/evaluator/submission_runtime.h"
#include "worker/evaluator/support.h"

namespace ptxbench::evaluator {
namespace {

// What the timing loop needs besides the candidate, prepared ahead ("prepare_timing", on its own
// thread) while the trials run.
struct TimingBaseline {
  std::string workload;
  gpu::TensorSet set;
  std::unique_ptr<gpu::Baseline> baseline;
  // The library's candidates for the baseline choice, when asked for (baseline_candidates > 0):
  // their handles, plans and workspace cost as much as the first one's, and here they are made
  // before the GPU gate rather than inside the timing stage (ChooseBaseline).
  std::vector<std::unique_ptr<gpu::Baseline>> candidates;
  size_t candidates_asked = 0;
  size_t candidates_made = 0;  // By this process, for the choice (TimingSetupSplit).
  // Instead of `candidates`, when the worker sent its earlier choice and the library still
  // describes that candidate alike: that one alone. Making every candidate the choice may time
  // took the backward's preparing thread ~0.8 s beside the trials (H100 run 17), for one that is
  // then used; with the cached choice, run 18 made 2 for a first backward job and 1 after.
  std::unique_ptr<gpu::Baseline> cached_candidate;
  std::optional<gpu::CachedBaselineChoice> cached_choice;
  std::unique_ptr<gpu::NvmlMonitor> nvml;
  std::string nvml_note;
  // The hardware counters configured ahead (HardwareCounters::Configure, not enabled) for
  // `counter_session`, and what the verdict reports of them (`counted`: why not, when null).
  std::optional<gpu::CounterSession> counter_session;
  std::unique_ptr<gpu::HardwareCounters> counters;
  gpu::CountedSamples counted;
  double prepare_seconds = 0;
  // The preparing and counters' threads' own seconds (gpu::TimingSetupSplit).
  double preparing_thread_seconds = 0;
  double trial_sets_seconds = 0;  // The trials' sets, first on the preparing thread.
  double candidates_seconds = 0;  // The library's handles and plans, inside prepare_seconds.
  double counters_wait_for_preparing_seconds = 0;
  // CUPTI's start-up, done ahead on the preparing thread (HardwareCounters::InitializeProfiler).
  double profiler_initialize_seconds = 0;
};

class CandidateProcess {
 public:
  ~CandidateProcess() {
    // The preparing threads write timing_: they end before the members they write go.
    if (configuring_counters_.valid()) configuring_counters_.wait();
    if (preparing_.valid()) preparing_.wait();
  }

  SubmissionRuntime& runtime() { return runtime_; }

  // On its own thread, started with the process beside the compiler. With `trial_sets` (a
  // process started before any trial), every workload's buffers for the trials first, in their
  // order (SubmissionRuntime::PreparedSets); errors there surface at the trial that takes the
  // set. Then the timing's baseline (PrepareTiming) and CUPTI's start-up; errors surface at
  // "time". The library's candidates are what takes long: 1.84-2.47 s of the thread's
  // 1.93-2.60 s, the trials' sets 1-2 ms (H100, 2026-12-08, gpu-test run 20 part 2,
  // evaluation_overhead), so a warm GEMM job's timing stage still waits ~1 s for them after its
  // trials and target-instruction stage (docs/measurement.md).
  void StartPreparing(const std::optional<std::string>& timing_workload, size_t baseline_candidates,
                      std::optional<gpu::CachedBaselineChoice> cached_baseline, bool trial_sets) {
    if (preparing_.valid()) return;
    if (!trial_sets && (!timing_workload.has_value() || timing_workload->empty())) return;
    if (trial_sets) {
      std::vector<std::string> order;
      for (const Workload* w : runtime_.task.WorkloadsInTrialOrder()) order.push_back(w->name);
      runtime_.prepared_sets.Schedule(std::move(order));
    }
    preparing_ =
        std::async(std::launch::async,
                   [this, timing_workload, baseline_candidates,
                    cached_baseline = std::move(cached_baseline), trial_sets]() -> absl::Status {
                     const double t0 = Now();
                     absl::Cleanup timed = [&] { timing_.preparing_thread_seconds = Now() - t0; };
                     PTXBENCH_CUDA_TRY(cudaSetDevice(runtime_.gpu.device.ordinal));  // Per thread.
                     if (trial_sets) {
                       runtime_.prepared_sets.Make(runtime_.task);
                       timing_.trial_sets_seconds = Now() - t0;
                     }
                     if (!timing_workload.has_value() || timing_workload->empty())
                       return absl::OkStatus();
                     RETURN_IF_ERROR(
                         PrepareTiming(*timing_workload, baseline_candidates, cached_baseline));
                     // The counters' configuration waits for the gate; CUPTI's start-up need
                     // not. A failure here is not the timing's: Configure, which finds the same
                     // result (once per process), reports it as the counters' reason.
                     const double i0 = Now();
                     gpu::HardwareCounters::InitializeProfiler().IgnoreError();
                     timing_.profiler_initialize_seconds = Now() - i0;
                     return absl::OkStatus();
                   })
            .share();
  }

  // The hardware counters' configuration (HardwareCounters::Configure), on a thread of its own
  // after the preparing one, while the trials run. Only ever asked for by "prepare_timing",
  // which the supervisor sends once this evaluation holds the GPU: CUPTI's counter-availability
  // query fails with CUPTI_ERROR_HARDWARE_BUSY while another process's range profiler is
  // enabled, and another process's query made a running session's start fail the same way
  // (H100 run 17, pipelined: 14 of 36 verdicts lost their counted launches, and with them the
  // strong check). Errors become the verdict's reason the counters were not collected.
  void StartConfiguringCounters(const std::optional<gpu::CounterSession>& session) {
    if (configuring_counters_.valid() || !session.has_value()) return;
    std::shared_future<absl::Status> prepared = preparing_;
    configuring_counters_ = std::async(std::launch::async, [this, prepared, session]() {
      const double t0 = Now();
      if (prepared.valid()) prepared.wait();  // timing_ is the preparing thread's until then.
      timing_.counters_wait_for_preparing_seconds = Now() - t0;
      timing_.counter_session = session;
      if (cudaError_t e = cudaSetDevice(runtime_.gpu.device.ordinal); e != cudaSuccess) {
        timing_.counted.not_collected_reason =
            absl::StrCat("cudaSetDevice on the counters' thread: ", cudaGetErrorString(e));
        return;
      }
      timing_.counters = ConfigureCounters(*session, &timing_.counted);
    });
  }

  absl::StatusOr<gpu::TimingEvent> RunTiming(const gpu::TimeCommand& cmd);

 private:
  // The hardware counters of the work share (work_share.h) for the task's arch and operand
  // precision, configured and not yet enabled (HardwareCounters::Configure); nullptr with
  // `counters->not_collected_reason` when they cannot be read here (the timing then runs without
  // counted launches: never an abort).
  std::unique_ptr<gpu::HardwareCounters> ConfigureCounters(gpu::CounterSession session,
                                                           gpu::CountedSamples* counters);
  // The sketch of the current outputs (every output tensor, in order) under `seed`'s key.
  absl::StatusOr<gpu::SampleSketch> SketchOutputs(const gpu::TimeCommand& cmd, size_t index,
                                                  uint64_t seed, bool counted);
  // The timed workload's baseline buffers, NVML, and the library's first choice or, with
  // `baseline_candidates` > 0, that many of its candidates; with `cached` (the worker's earlier
  // choice among them), that candidate alone while the library still describes it alike.
  absl::Status PrepareTiming(const std::string& workload, size_t baseline_candidates,
                             const std::optional<gpu::CachedBaselineChoice>& cached);
  // The library algorithm the loop times against (TimingLoopOptions::baseline_selection): the
  // prepared first heuristic choice, the worker's cached choice, or the fastest candidate
  // measured now. Replaces timing_.baseline with the one chosen.
  absl::StatusOr<gpu::BaselineChoice> ChooseBaseline(const gpu::TimeCommand& cmd);
  // The outputs of one checked timed sample, kept on the device (IPC) or written to files.
  absl::StatusOr<std::vector<gpu::OutputHandle>> KeepCheckedOutputs(const gpu::TimeCommand& cmd,
                                                                    size_t index);

  SubmissionRuntime runtime_;
  TimingBaseline timing_;
  // Copies of the checked timing samples' outputs, exported to the reference process.
  std::vector<gpu::DeviceBuffer> check_copies_;
  // Shared: the counters' thread waits for it too (StartConfiguringCounters).
  std::shared_future<absl::Status> preparing_;
  std::future<void> configuring_counters_;
};

absl::Status CandidateProcess::PrepareTiming(
    const std::string& workload, size_t baseline_candidates,
    const std::optional<gpu::CachedBaselineChoice>& cached) {
  if (timing_.workload == workload &&
      (timing_.baseline || !timing_.candidates.empty() || timing_.cached_candidate)) {
    return absl::OkStatus();
  }
  double t0 = Now();
  ASSIGN_OR_RETURN(const Workload* w, FindWorkload(runtime_.task, workload));
  // The baseline gets its own buffers and its own seeds: its outputs never hold the answer to
  // the inputs the candidate is given, and they are zeroed before they are freed.
  ASSIGN_OR_RETURN(auto tensors, gpu::ResolveTensors(runtime_.task, *w));
  ASSIGN_OR_RETURN(timing_.set, gpu::TensorSet::Allocate(std::move(tensors)));
  const double c0 = Now();
  absl::Cleanup candidates_timed = [&] { timing_.candidates_seconds = Now() - c0; };
  if (baseline_candidates > 0 && cached.has_value() && cached->index < baseline_candidates) {
    // The library's list up to the cached position (a cuDNN candidate's position counts the
    // configurations before it that finalize), of which only that one is kept.
    ASSIGN_OR_RETURN(auto up_to_cached,
                     gpu::CreateBaselineCandidates(runtime_.task.baseline_library,
                                                   runtime_.task.baseline_operation, w->axes,
                                                   cached->index + 1));
    timing_.candidates_made += up_to_cached.size();
    if (up_to_cached.size() > cached->index &&
        up_to_cached[cached->index]->Describe() == cached->algorithm) {
      timing_.cached_candidate = std::move(up_to_cached[cached->index]);
      timing_.cached_choice = cached;
    }
  }
  if (timing_.cached_candidate) {
    // Prepared: the cached choice. Should it not stand at "time", ChooseBaseline makes the rest.
  } else if (baseline_candidates > 0) {
    ASSIGN_OR_RETURN(timing_.candidates,
                     gpu::CreateBaselineCandidates(runtime_.task.baseline_library,
                                                   runtime_.task.baseline_operation, w->axes,
                                                   baseline_candidates));
    timing_.candidates_asked = baseline_candidates;
    timing_.candidates_made += timing_.candidates.size();
  } else {
    ASSIGN_OR_RETURN(timing_.baseline,
                     gpu::CreateBaseline(runtime_.task.baseline_library,
                                         runtime_.task.baseline_operation, w->axes));
  }
  std::move(candidates_timed).Invoke();
  if (auto m = gpu::NvmlMonitor::Open(runtime_.gpu.device.uuid); m.ok()) {
    timing_.nvml = std::move(*m);
  } else {
    timing_.nvml_note = std::string(m.status().message());
  }
  timing_.workload = workload;
  timing_.prepare_seconds = Now() - t0;
  return absl::OkStatus();
}

absl::StatusOr<gpu::BaselineChoice> CandidateProcess::ChooseBaseline(const gpu::TimeCommand& cmd) {
  gpu::BaselineChoice choice;
  choice.selection = cmd.loop.baseline_selection;
  ASSIGN_OR_RETURN(const Workload* w, FindWorkload(runtime_.task, cmd.workload));
  if (cmd.loop.baseline_selection == gpu::BaselineSelection::kFirstHeuristic) {
    if (timing_.baseline) return choice;
    // Prepared for a choice that this command does not make: the library's first is rank 0.
    if (!timing_.candidates.empty()) {
      timing_.baseline = std::move(timing_.candidates.front());
    } else {
      ASSIGN_OR_RETURN(timing_.baseline,
                       gpu::CreateBaseline(runtime_.task.baseline_library,
                                           runtime_.task.baseline_operation, w->axes));
    }
    timing_.candidates.clear();
    timing_.candidates_asked = 0;
    timing_.cached_candidate.reset();
    timing_.cached_choice.reset();
    return choice;
  }
  // The worker's earlier choice, prepared alone (PrepareTiming) for the choice this command
  // sends: the same position and the same description.
  std::unique_ptr<gpu::Baseline> cached_candidate = std::move(timing_.cached_candidate);
  const std::optional<gpu::CachedBaselineChoice> prepared_choice =
      std::exchange(timing_.cached_choice, std::nullopt);
  if (cached_candidate && cmd.cached_baseline.has_value() &&
      cmd.cached_baseline->index == prepared_choice->index &&
      cmd.cached_baseline->algorithm == prepared_choice->algorithm) {
    choice.chosen = cmd.cached_baseline->index;
    timing_.baseline = std::move(cached_candidate);
    return choice;
  }
  cached_candidate.reset();
  const size_t asked = std::max<size_t>(cmd.loop.baseline_candidates, 1);
  std::vector<std::unique_ptr<gpu::Baseline>> candidates;
  if (timing_.candidates_asked == asked && !timing_.candidates.empty()) {
    candidates = std::move(timing_.candidates);  // Prepared before the gate (PrepareTiming).
  } else {
    ASSIGN_OR_RETURN(candidates, gpu::CreateBaselineCandidates(runtime_.task.baseline_library,
                                                               runtime_.task.baseline_operation,
                                                               w->axes, asked));
    timing_.candidates_made += candidates.size();
  }
  timing_.candidates.clear();
  timing_.candidates_asked = 0;
  if (candidates.empty()) return absl::InternalError("the library offered no baseline candidate");
  // The worker's earlier choice, if the library still describes that candidate alike.
  if (cmd.cached_baseline.has_value() && cmd.cached_baseline->index < candidates.size() &&
      candidates[cmd.cached_baseline->index]->Describe() == cmd.cached_baseline->algorithm) {
    choice.chosen = cmd.cached_baseline->index;
    timing_.baseline = std::move(candidates[choice.chosen]);
    return choice;
  }
  // Measured: each candidate's outputs against candidate 0's on the baseline's own inputs, then
  // its median time over `baseline_runs` runs, each after an L2 flush as in the loop.
  SubmissionRuntime& c = runtime_;
  cudaStream_t s = c.gpu.stream.get();
  gpu::TensorSet& set = timing_.set;
  RETURN_IF_ERROR(set.GenerateInputs(*c.gpu.builtins, cmd.baseline_seed_base, s));
  // Every run below starts from poisoned outputs and library scratch (Baseline::PoisonScratch),
  // so that a part a library run leaves unwritten shows as non-finite, not as an earlier run's.
  auto run_poisoned = [&](gpu::Baseline& baseline) -> absl::Status {
    RETURN_IF_ERROR(baseline.PoisonScratch(s));
    RETURN_IF_ERROR(set.PoisonOutputs(*c.gpu.builtins, s));
    return baseline.Run(set.InputPointers(), set.OutputPointers(), s);
  };
  RETURN_IF_ERROR(run_poisoned(*candidates[0]));
  std::vector<gpu::DeviceBuffer> first_outputs;
  std::vector<const gpu::WorkloadTensor*> outputs;
  {
    std::vector<void*> pointers = set.OutputPointers();
    size_t ordinal = 0;
    for (const gpu::WorkloadTensor& t : set.tensors()) {
      if (!t.output) continue;
      ASSIGN_OR_RETURN(gpu::DeviceBuffer copy, gpu::DeviceBuffer::Allocate(t.bytes));
      PTXBENCH_CUDA_TRY(cudaMemcpyAsync(copy.get(), pointers.at(ordinal++), t.bytes,
                                        cudaMemcpyDeviceToDevice, s));
      first_outputs.push_back(std::move(copy));
      outputs.push_back(&t);
    }
  }
  const gpu::ToleranceRule rule = gpu::RuleOf(c.task.tolerance);
  ASSIGN_OR_RETURN(gpu::Event start, gpu::Event::Create());
  ASSIGN_OR_RETURN(gpu::Event end, gpu::Event::Create());
  constexpr size_t kWarmupRounds = 3;
  for (size_t k = 0; k < candidates.size(); ++k) {
    gpu::BaselineCandidateFigure figure;
    figure.index = k;
    figure.algorithm = candidates[k]->Describe();
    absl::Status ran = run_poisoned(*candidates[k]);
    if (ran.ok()) {
      const cudaError_t synced = cudaStreamSynchronize(s);
      if (synced != cudaSuccess) {
        ran = gpu::CudaRuntimeStatus(synced, "cudaStreamSynchronize(s)", __FILE__, __LINE__);
        // A fault of the library's own kernel poisons the context: nothing after it can run.
        if (gpu::IsKernelFault(synced)) return ran;
      }
    }
    if (!ran.ok()) {
      figure.note = absl::StrCat("did not run: ", ran.message());
      choice.candidates.push_back(std::move(figure));
      continue;
    }
    figure.eligible = true;
    std::vector<void*> pointers = set.OutputPointers();
    for (size_t o = 0; o < outputs.size(); ++o) {
      const gpu::WorkloadTensor& t = *outputs[o];
      ASSIGN_OR_RETURN(gpu::CompareReport report,
                       c.gpu.builtins->Compare(pointers[o], first_outputs[o].get(), t.elements,
                                               gpu::ElementTypeOf(t.dtype), t.shape, rule,
                                               gpu::PoisonPattern(t.dtype), s));
      if (!report.pass) {
        figure.eligible = false;
        figure.note = absl::StrCat("output ", t.name,
                                   k == 0 ? " of a second run on the same inputs does not meet "
                                            "the task's rule against the first run's: "
                                          : " does not meet the task's rule against the first "
                                            "choice's: ",
                                   report.reason);
      }
    }
    choice.candidates.push_back(std::move(figure));
  }
  // Timed interleaved (gpu::InterleavedRunOrder says why), each run after an L2 flush as in the
  // loop. First a warm-up as long as the loop's (at least kWarmupRounds rounds and
  // cmd.loop.warmup_seconds), not kept: the choice runs before the loop's own warm-up, when the
  // clocks may still be ramping from idle: on an H100, three of four processes measured the
  // algorithm they chose at 0.82-0.85 ms without it, which the loop then timed at ~0.743 ms
  // (docs/results/2026-12-06-h100-baseline-choice-stability.txt and -gpu-test-15-references).
  // The algorithms should be compared at the clocks the loop runs them at.
  std::vector<size_t> eligible;  // Positions in choice.candidates (= library ranks).
  for (size_t k = 0; k < choice.candidates.size(); ++k) {
    if (choice.candidates[k].eligible) eligible.push_back(k);
  }
  auto run_flushed = [&](size_t k) -> absl::StatusOr<double> {
    RETURN_IF_ERROR(c.gpu.builtins->FlushL2(s));
    PTXBENCH_CUDA_TRY(cudaEventRecord(start.get(), s));
    RETURN_IF_ERROR(candidates[k]->Run(set.InputPointers(), set.OutputPointers(), s));
    PTXBENCH_CUDA_TRY(cudaEventRecord(end.get(), s));
    return gpu::ElapsedMs(start, end);
  };
  const double warm_from = Now();
  for (size_t round = 0;
       !eligible.empty() &&
       (round < kWarmupRounds || Now() - warm_from < cmd.loop.warmup_seconds) && round < 10000;
       ++round) {
    for (size_t k : eligible) RETURN_IF_ERROR(run_flushed(k).status());
  }
  std::vector<std::vector<double>> ms(eligible.size());
  const std::vector<size_t> order =
      gpu::InterleavedRunOrder(eligible.size(), cmd.loop.baseline_runs);
  for (size_t i = 0; i < order.size(); ++i) {
    ASSIGN_OR_RETURN(double elapsed, run_flushed(eligible[order[i]]));
    ms[order[i]].push_back(elapsed);
  }
  for (size_t e = 0; e < eligible.size(); ++e) {
    gpu::BaselineCandidateFigure& figure = choice.candidates[eligible[e]];
    figure.runs = ms[e].size();
    figure.median_ms = gpu::Summarize(ms[e]).median;
  }
  RETURN_IF_ERROR(set.ZeroAll(s));
  for (gpu::DeviceBuffer& b : first_outputs) {
    PTXBENCH_CUDA_TRY(cudaMemsetAsync(b.get(), 0, b.bytes(), s));
  }
  PTXBENCH_CUDA_TRY(cudaStreamSynchronize(s));
  ASSIGN_OR_RETURN(choice.chosen, gpu::ChooseFastestBaseline(choice.candidates));
  choice.measured = true;
  for (const gpu::BaselineCandidateFigure& f : choice.candidates) {
    if (f.index == 0) choice.first_ms = f.median_ms;
    if (f.index == choice.chosen) choice.chosen_ms = f.median_ms;
  }
  timing_.baseline = std::move(candidates[choice.chosen]);
  return choice;
}

absl::StatusOr<std::vector<gpu::OutputHandle>> CandidateProcess::KeepCheckedOutputs(
    const gpu::TimeCommand& cmd, size_t index) {
  cudaStream_t s = runtime_.gpu.stream.get();
  if (cmd.transfer == gpu::OutputTransfer::kFile) {
    return SaveOutputs(runtime_.set, absl::StrCat(cmd.check_prefix, ".", index), s);
  }
  // A device-to-device copy the reference process maps after the loop (~0.1 ms for 117 MB,
  // against ~0.13 s through a host file).
  std::vector<gpu::OutputHandle> outputs;
  std::vector<void*> pointers = runtime_.set.OutputPointers();
  size_t ordinal = 0;
  for (const gpu::WorkloadTensor& t : runtime_.set.tensors()) {
    if (!t.output) continue;
    ASSIGN_OR_RETURN(gpu::DeviceBuffer copy, gpu::DeviceBuffer::Allocate(t.bytes));
    PTXBENCH_CUDA_TRY(
        cudaMemcpyAsync(copy.get(), pointers.at(ordinal++), t.bytes, cudaMemcpyDeviceToDevice, s));
    ASSIGN_OR_RETURN(std::string handle, gpu::ExportIpcHandle(copy.get()));
    outputs.push_back({t.name, t.bytes, gpu::OutputTransfer::kIpc, handle});
    check_copies_.push_back(std::move(copy));
  }
  PTXBENCH_CUDA_TRY(cudaStreamSynchronize(s));
  return outputs;
}

std::unique_ptr<gpu::HardwareCounters> CandidateProcess::ConfigureCounters(
    gpu::CounterSession session, gpu::CountedSamples* counters) {
  std::optional<DType> operands;
  for (const TensorSpec& t : runtime_.task.tensors) {
    if (t.role == TensorRole::kInput) {
      operands = t.dtype;
      break;
    }
  }
  if (!operands.has_value()) {
    counters->not_collected_reason = "the task has no input tensor to take the precision from";
    return nullptr;
  }
  auto set = gpu::WorkCountersFor(runtime_.submission.arch, *operands);
  if (!set.ok()) {
    counters->not_collected_reason = std::string(set.status().message());
    return nullptr;
  }
  auto created =
      gpu::HardwareCounters::Configure(runtime_.gpu.device.ordinal, set->AllMetrics(), session);
  if (!created.ok()) {
    counters->not_collected_reason =
        absl::StrCat("hardware counters unavailable: ", created.status().ToString());
    return nullptr;
  }
  counters->collected = true;
  counters->chip = (*created)->chip();
  counters->configs = (*created)->CollectedConfigurations();
  counters->passes = (*created)->pass_count();
  return std::move(*created);
}

absl::StatusOr<gpu::SampleSketch> CandidateProcess::SketchOutputs(const gpu::TimeCommand& cmd,
                                                                  size_t index, uint64_t seed,
                                                                  bool counted) {
  gpu::SampleSketch sketch{index, counted, seed, {}};
  const uint64_t key = gpu::SketchKey(cmd.sketch_seed, seed);
  std::vector<void*> pointers = runtime_.set.OutputPointers();
  uint32_t ordinal = 0;
  for (const gpu::WorkloadTensor& t : runtime_.set.tensors()) {
    if (!t.output) continue;
    ASSIGN_OR_RETURN(gpu::TensorSketch tensor,
                     runtime_.gpu.builtins->Sketch(pointers.at(ordinal), t.elements, t.dtype, key,
                                                   ordinal, cmd.loop.sketch_projections, 0, 0,
                                                   runtime_.gpu.stream.get()));
    ++ordinal;
    sketch.tensors.push_back(std::move(tensor));
  }
  return sketch;
}

absl::StatusOr<gpu::TimingEvent> CandidateProcess::RunTiming(const gpu::TimeCommand& cmd) {
  double t0 = Now();
  gpu::TimingSetupSplit split;
  if (preparing_.valid()) RETURN_IF_ERROR(preparing_.get());
  if (configuring_counters_.valid()) configuring_counters_.get();
  split.prepare_wait_seconds = Now() - t0;
  split.preparing_thread_seconds = timing_.preparing_thread_seconds;
  split.trial_sets_seconds = timing_.trial_sets_seconds;
  split.baseline_prepare_seconds = timing_.prepare_seconds;
  split.baseline_candidates_seconds = timing_.candidates_seconds;
  split.counters_wait_for_preparing_seconds = timing_.counters_wait_for_preparing_seconds;
  split.profiler_initialize_seconds = timing_.profiler_initialize_seconds;
  if (timing_.counters != nullptr) {
    const gpu::HardwareCounters::ConfigureSeconds& configured =
        timing_.counters->configure_seconds();
    split.counters_configure_initialize_seconds = configured.initialize;
    split.counters_configure_availability_seconds = configured.availability;
    split.counters_configure_images_seconds = configured.images;
  }
  ASSIGN_OR_RETURN(const Workload* w, FindWorkload(runtime_.task, cmd.workload));
  (void)w;
  double s0 = Now();
  RETURN_IF_ERROR(runtime_.UseWorkload(cmd.workload));
  // A fresh module: nothing a correctness trial left in module globals reaches the timing.
  RETURN_IF_ERROR(runtime_.ReloadModule());
  split.module_seconds = Now() - s0;
  s0 = Now();
  RETURN_IF_ERROR(
      PrepareTiming(cmd.workload, gpu::PreparedBaselineCandidates(cmd.loop), cmd.cached_baseline));
  ASSIGN_OR_RETURN(gpu::BaselineChoice baseline_choice, ChooseBaseline(cmd));
  split.baseline_choice_seconds = Now() - s0;
  split.baseline_candidates_made = timing_.candidates_made;
  SubmissionRuntime& c = runtime_;
  gpu::TensorSet& baseline_set = timing_.set;
  gpu::Baseline* baseline = timing_.baseline.get();
  cudaStream_t s = c.gpu.stream.get();
  const double setup_seconds = Now() - t0;
  double check_seconds = 0;
  gpu::TimedSide candidate_side{[&](uint64_t seed) -> absl::Status {
                                  RETURN_IF_ERROR(c.set.GenerateInputs(*c.gpu.builtins, seed, s));
                                  RETURN_IF_ERROR(c.set.PoisonOutputs(*c.gpu.builtins, s));
                                  return c.launcher.ZeroScratch(s);
                                },
                                [&]() { return c.launcher.LaunchAll(s); }};
  gpu::TimedSide baseline_side{
      [&](uint64_t seed) -> absl::Status {
        RETURN_IF_ERROR(baseline_set.GenerateInputs(*c.gpu.builtins, seed, s));
        return baseline_set.PoisonOutputs(*c.gpu.builtins, s);
      },
      [&]() {
        return baseline->Run(baseline_set.InputPointers(), baseline_set.OutputPointers(), s);
      }};
  gpu::TimingConfig config;
  config.rule.min_samples = cmd.loop.min_samples;
  config.rule.max_samples = cmd.loop.max_samples;
  config.rule.max_seconds = cmd.loop.max_seconds;
  config.rule.target_rse = cmd.loop.target_rse;
  config.warmup_seconds = cmd.loop.warmup_seconds;
  config.check_every = cmd.loop.check_every;
  config.max_checks = cmd.loop.max_checks;
  config.candidate_seed_base = cmd.candidate_seed_base;
  config.baseline_seed_base = cmd.baseline_seed_base;
  config.check_position_seed = cmd.check_position_seed;
  config.counter_seed = cmd.counter_seed;
  config.jitter_us_max = cmd.loop.jitter_us_max;
  config.gap_pad_max_us = cmd.loop.gap_pad_max_us;
  if (cmd.loop.sketch_projections > gpu::kSketchMaxProjections) {
    return absl::InvalidArgumentError(absl::StrCat("time: ", cmd.loop.sketch_projections,
                                                   " sketch projections asked, at most ",
                                                   gpu::kSketchMaxProjections));
  }
  gpu::TimingEvent event;
  check_copies_.clear();
  gpu::SampleHooks hooks;
  hooks.on_check = [&](size_t index, uint64_t seed) -> absl::Status {
    double c0 = Now();
    ASSIGN_OR_RETURN(std::vector<gpu::OutputHandle> outputs, KeepCheckedOutputs(cmd, index));
    event.checks.push_back({index, seed, std::move(outputs)});
    check_seconds += Now() - c0;
    return absl::OkStatus();
  };
  gpu::SampleSketches sketches;
  sketches.projections = cmd.loop.sketch_projections;
  for (const gpu::WorkloadTensor& t : c.set.tensors()) {
    if (t.output) sketches.tensors.push_back(t.name);
  }
  if (cmd.loop.sketch_projections > 0) {
    hooks.on_candidate = [&](size_t index, uint64_t seed, bool counted) -> absl::Status {
      ASSIGN_OR_RETURN(gpu::SampleSketch sketch, SketchOutputs(cmd, index, seed, counted));
      sketches.samples.push_back(std::move(sketch));
      return absl::OkStatus();
    };
  }
  gpu::CountedSamples counters;
  std::string counting_failure;  // The first counter error of this loop ("": none).
  std::unique_ptr<gpu::HardwareCounters> hardware;
  if (cmd.loop.counted_per_config > 0 || cmd.loop.counted_min_total > 0) {
    s0 = Now();
    if (timing_.counter_session == cmd.loop.counter_session && timing_.counters) {
      hardware = std::move(timing_.counters);  // Configured during the trials.
      counters = std::move(timing_.counted);
    } else {
      // Not asked for ahead, or that attempt failed: once more, here (the reason reported is
      // this attempt's).
      hardware = ConfigureCounters(cmd.loop.counter_session, &counters);
    }
    timing_.counter_session.reset();
    timing_.counters.reset();
    if (hardware) {
      if (absl::Status enabled = hardware->Enable(); !enabled.ok()) {
        hardware.reset();
        counters.collected = false;
        counters.not_collected_reason =
            absl::StrCat("hardware counters unavailable: ", enabled.ToString());
      }
    }
    split.counters_seconds = Now() - s0;
  } else {
    counters.not_collected_reason = "counted samples were not asked for";
  }
  if (hardware) {
    config.counted = hardware->PlanLaunches(cmd.loop.counted_per_config, cmd.loop.counted_min_total,
                                            cmd.loop.min_samples, cmd.counter_seed);
    gpu::HardwareCounters* h = hardware.get();
    // A counter the hardware did not deliver (CUPTI's NaN) ends the counting for this loop and
    // the timing goes on: the verdict then says the strong check was not made, with the reason,
    // rather than losing the evaluation to an infrastructure error (seen on the H200,
    // 2026-12-02: docs/results/2026-12-02-h200-gpu-test-2.json).
    std::string* failure = &counting_failure;
    hooks.counting = gpu::CountingHooks{[h, failure](size_t config) -> absl::Status {
                                          if (!failure->empty()) return absl::OkStatus();
                                          absl::Status begun = h->Begin(config);
                                          if (!begun.ok()) *failure = std::string(begun.message());
                                          return absl::OkStatus();
                                        },
                                        [h, failure]() -> absl::StatusOr<gpu::CounterValues> {
                                          if (!failure->empty()) return gpu::CounterValues{};
                                          absl::StatusOr<gpu::CounterValues> values = h->End();
                                          if (!values.ok()) {
                                            *failure = std::string(values.status().message());
                                            return gpu::CounterValues{};
                                          }
                                          return values;
                                        },
                                        [h, failure](size_t config) -> absl::Status {
                                          if (!failure->empty()) return absl::OkStatus();
                                          absl::Status armed = h->Prepare(config);
                                          if (!armed.ok()) *failure = std::string(armed.message());
                                          return absl::OkStatus();
                                        }};
  }
  ASSIGN_OR_RETURN(gpu::TimingResult timing,
                   gpu::TimeInterleaved(candidate_side, baseline_side, *c.gpu.builtins, s,
                                        timing_.nvml.get(), config, hooks));
  RETURN_IF_ERROR(baseline_set.ZeroAll(s));
  event.workload = cmd.workload;
  event.result = gpu::ToMeasurement(timing);
  counters.samples = std::move(event.result.counters.samples);
  counters.needed = config.counted.needed;
  counters.rate = config.counted.rate;
  event.result.counters = std::move(counters);
  if (!counting_failure.empty()) {
    event.result.counters.collected = false;
    event.result.counters.not_collected_reason =
        absl::StrCat("the hardware counters failed during the timing loop: ", counting_failure);
  } else if (hardware && event.result.counters.samples.size() < config.counted.needed) {
    event.result.counters.not_collected_reason =
        absl::StrCat("only ", event.result.counters.samples.size(), " of ", config.counted.needed,
                     " counted launches were taken before the loop's bound on extra pairs");
  }
  event.result.sketches = std::move(sketches);
  event.result.jitter_us_max = cmd.loop.jitter_us_max;
  event.baseline = baseline->Describe();
  event.baseline_choice = std::move(baseline_choice);
  event.device = gpu::Describe(c.gpu.device);
  event.flush_bytes = c.gpu.builtins->flush_bytes();
  event.setup_seconds = setup_seconds;
  event.setup_split = split;
  event.prepare_seconds = timing_.prepare_seconds;
  event.check_seconds = check_seconds;
  event.seconds = Now() - t0;
  if (!timing_.nvml_note.empty()) event.nvml_unavailable = timing_.nvml_note;
  return event;
}

// Started beside the compiler: the device and the timing baseline are set up while the source
// compiles; the module's paths come with "module" (end of input or "quit": it did not compile).
// false: the process is to end with `exit_code`.
bool AwaitModule(CommandReader& commands, gpu::ModulePaths* module, int* exit_code) {
  auto next = commands.Next<gpu::ModuleCommand, gpu::QuitCommand>();
  if (!next.ok()) {
    *exit_code = Fail(kExitInfrastructure, gpu::ErrorKind::kInfrastructure, next.status());
    return false;
  }
  if (!next->has_value() || std::holds_alternative<gpu::QuitCommand>(**next)) {
    *exit_code = kExitOk;
    return false;
  }
  *module = std::get<gpu::ModuleCommand>(**next).module;
  return true;
}

}  // namespace

int CandidateMode(const gpu::CandidateRequest& request) {
  CandidateProcess process;
  SubmissionRuntime& runtime = process.runtime();
  CommandReader commands;
  absl::Status opened = runtime.OpenDevice(request.submission, request.gpu, request.hash_key);
  if (opened.ok()) {
    gpu::ModulePaths module;
    if (request.module.has_value()) {
      module = *request.module;
    } else {
      process.StartPreparing(request.timing_workload, request.timing_baseline_candidates,
                             request.timing_cached_baseline, /*trial_sets=*/true);
      int exit_code = kExitOk;
      if (!AwaitModule(commands, &module, &exit_code)) return exit_code;
    }
    opened = runtime.OpenModule(module);
  }
  if (!opened.ok()) {
    if (opened.code() == absl::StatusCode::kInvalidArgument) {
      return FailFromStatus(opened, gpu::FaultPhase::kSetup);
    }
    return Fail(kExitInfrastructure, gpu::ErrorKind::kInfrastructure, opened);
  }
  Emit(gpu::ReadyEvent{gpu::Describe(runtime.gpu.device), false});
  while (true) {
    auto next = commands.Next<gpu::QuitCommand, gpu::TrialCommand, gpu::SaveOutputsCommand,
                              gpu::PrepareTimingCommand, gpu::TimeCommand>();
    if (!next.ok())
      return Fail(kExitInfrastructure, gpu::ErrorKind::kInfrastructure, next.status());
    if (!next->has_value() || std::holds_alternative<gpu::QuitCommand>(**next)) return kExitOk;
    const auto& command = **next;
    if (const auto* trial = std::get_if<gpu::TrialCommand>(&command)) {
      auto event = RunTrial(runtime, trial->workload, trial->seed, trial->prefix, trial->transfer);
      if (!event.ok()) return FailFromStatus(event.status(), gpu::FaultPhase::kTrial);
      Emit(*event);
    } else if (const auto* save = std::get_if<gpu::SaveOutputsCommand>(&command)) {
      // The last trial's outputs again, as files (the reference process could not map them).
      auto files = SaveOutputs(runtime.set, save->prefix, runtime.gpu.stream.get());
      if (!files.ok()) return FailFromStatus(files.status(), gpu::FaultPhase::kSavingOutputs);
      Emit(gpu::OutputsEvent{*files});
    } else if (const auto* prepare = std::get_if<gpu::PrepareTimingCommand>(&command)) {
      process.StartPreparing(prepare->workload, prepare->baseline_candidates,
                             prepare->cached_baseline, /*trial_sets=*/false);
      process.StartConfiguringCounters(prepare->counter_session);
    } else if (const auto* time = std::get_if<gpu::TimeCommand>(&command)) {
      auto event = process.RunTiming(*time);
      if (!event.ok()) return FailFromStatus(event.status(), gpu::FaultPhase::kTiming);
      Emit(*event);
    }
  }
}

}  // namespace ptxbench::evaluator
