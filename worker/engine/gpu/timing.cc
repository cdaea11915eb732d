#include "worker/engine/gpu/timing.h"

#include <algorithm>
#include <chrono>

#include "common/status.h"
#include "worker/engine/gpu/cuda_check.h"
#include "worker/engine/gpu/philox.h"

namespace ptxbench::gpu {
namespace {

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Launch latency of an idle stream, which a counted launch has (the host waited for the GPU
// before the counters' Begin) and a timed launch has not (queued behind the delay kernel).
// A typical figure for cuLaunchKernel to kernel start on Hopper; the GPU test prints the gaps
// the kernel sees on both kinds.
constexpr double kIdleLaunchUs = 8;

}  // namespace

TimingMeasurement ToMeasurement(const TimingResult& r) {
  TimingMeasurement m;
  m.candidate = ToStats(r.candidate);
  m.baseline = ToStats(r.baseline);
  m.speedup = r.speedup;
  m.stop_reason = r.stop_reason;
  m.warmup_pairs = r.warmup_pairs;
  m.warmup_seconds = r.warmup_seconds;
  m.sampling_seconds = r.sampling_seconds;
  m.kernel_ms_total = r.kernel_ms_total;
  m.candidate_ms = r.candidate_ms;
  m.baseline_ms = r.baseline_ms;
  for (const ClockSample& c : r.clocks) m.clocks.push_back(ToJson(c));
  for (const auto& [index, seed] : r.checked) m.checked_samples.push_back({index, seed});
  m.counters.samples = r.counted;
  m.counted_ms = r.counted_ms;
  m.counted_seconds = r.counted_seconds;
  m.pairs = r.pairs;
  m.sketch_seconds = r.hook_seconds;
  m.jitter_us_mean = r.launches > 0 ? r.jitter_us_total / static_cast<double>(r.launches) : 0;
  return m;
}

absl::StatusOr<TimingResult> TimeInterleaved(const TimedSide& candidate, const TimedSide& baseline,
                                             Builtins& builtins, cudaStream_t stream,
                                             const NvmlMonitor* nvml, const TimingConfig& config,
                                             const SampleHooks& hooks) {
  TimingResult result;
  ASSIGN_OR_RETURN(Event start, Event::Create());
  ASSIGN_OR_RETURN(Event end, Event::Create());
  auto sample_clock = [&]() {
    if (nvml == nullptr) return;
    auto s = nvml->Sample();
    if (s.ok()) result.clocks.push_back(*s);
  };
  // One launch of one side: prepare, flush, the drawn delay, then the timed region. The delay
  // runs on the GPU (Builtins::Delay), queued behind the flush, so the launch is queued before
  // it ends and the event time holds no launch latency, as without a delay. A counted launch
  // (`counted_config` >= 0) waits for the GPU, runs the counters' Begin on the host (the range
  // must hold the candidate's launches only) and launches: its GPU delay is shortened by the
  // running estimate of that host path, so the gap the kernel sees before it is drawn like the
  // gap before a timed launch (docs/measurement.md).
  double begin_estimate_us = 0;
  size_t begin_observations = 0;
  auto measure = [&](const TimedSide& side, uint64_t seed, int counted_config,
                     double* begin_us) -> absl::StatusOr<double> {
    RETURN_IF_ERROR(side.prepare(seed));
    RETURN_IF_ERROR(builtins.FlushL2(stream));
    const double delay_us =
        JitterMicros(config.counter_seed, result.launches++, config.jitter_us_max);
    result.jitter_us_total += delay_us;
    if (counted_config >= 0) {
      const double gpu_delay_us = std::max(0.0, delay_us - begin_estimate_us);
      RETURN_IF_ERROR(builtins.Delay(static_cast<uint64_t>(gpu_delay_us * 1e3), stream));
      PTXBENCH_CUDA_TRY(cudaStreamSynchronize(stream));
      const double b0 = Seconds();
      RETURN_IF_ERROR(hooks.counting->begin(static_cast<size_t>(counted_config)));
      const double observed_us = (Seconds() - b0) * 1e6;
      if (begin_us != nullptr) *begin_us = observed_us;
      // Running mean, plus the launch latency of an idle stream (~5-10 us) the timed launches
      // do not have.
      ++begin_observations;
      begin_estimate_us += (observed_us + kIdleLaunchUs - begin_estimate_us) /
                           static_cast<double>(begin_observations);
    } else {
      RETURN_IF_ERROR(builtins.Delay(static_cast<uint64_t>(delay_us * 1e3), stream));
    }
    if (cudaEventRecord(start.get(), stream) != cudaSuccess) {
      return absl::InternalError("cudaEventRecord(start) failed");
    }
    RETURN_IF_ERROR(side.run());
    if (cudaEventRecord(end.get(), stream) != cudaSuccess) {
      return absl::InternalError("cudaEventRecord(end) failed");
    }
    ASSIGN_OR_RETURN(double ms, ElapsedMs(start, end));
    RETURN_IF_ERROR(SynchronizeDevice());
    result.kernel_ms_total += ms;
    return ms;
  };
  auto after_candidate = [&](size_t index, uint64_t seed, bool counted) -> absl::Status {
    if (!hooks.on_candidate) return absl::OkStatus();
    const double h0 = Seconds();
    RETURN_IF_ERROR(hooks.on_candidate(index, seed, counted));
    result.hook_seconds += Seconds() - h0;
    return absl::OkStatus();
  };

  // Shared warm-up: clocks ramp from idle (345 MHz seen on the H200) and module code is first
  // touched here. Seeds from the far end of the sample range, never reused by samples.
  sample_clock();
  double t0 = Seconds();
  size_t warm = 0;
  const bool counting = hooks.counting.has_value() && config.counted.needed > 0;
  while (warm < config.warmup_min_pairs || Seconds() - t0 < config.warmup_seconds) {
    // The first warm-up launch is counted (values dropped): it calibrates the host cost of the
    // counters' Begin before the first counted launch of the loop needs it.
    const bool calibrate = counting && warm == 0;
    double begin_us = 0;
    ASSIGN_OR_RETURN(double c, measure(candidate, SampleSeed(~config.candidate_seed_base, warm),
                                       calibrate ? 0 : -1, &begin_us));
    if (calibrate) {
      ASSIGN_OR_RETURN(auto dropped, hooks.counting->end());
      (void)dropped;
    }
    ASSIGN_OR_RETURN(double b,
                     measure(baseline, SampleSeed(~config.baseline_seed_base, warm), -1, nullptr));
    (void)c;
    (void)b;
    ++warm;
    if (warm > 10000) break;
  }
  result.warmup_pairs = warm;
  result.warmup_seconds = Seconds() - t0;
  sample_clock();

  // A bound on the pairs the loop may add for counted launches once the statistics would stop:
  // 8x the expected need (the chance of reaching it is far below 1e-9 at rate >= 0.02); then
  // the loop stops with fewer, and the event says how many.
  const size_t extra_pairs_cap =
      counting ? static_cast<size_t>(8.0 * static_cast<double>(config.counted.needed) /
                                     config.counted.rate) +
                     64
               : 0;
  // The checked sample of block k sits at k*check_every + (Mix64(secret + k) % check_every).
  auto check_index_of_block = [&](size_t block) {
    return static_cast<size_t>(
        CheckedSampleOfBlock(config.check_position_seed, block, config.check_every));
  };
  size_t next_block = 0;
  size_t stop_pending_since = 0;  // Pairs run after the statistics said stop (counted need).
  double t1 = Seconds();
  for (size_t pair = 0;; ++pair) {
    const bool candidate_first = (pair % 2) == 0;
    const bool counted_pair =
        counting && IsCountedPair(config.counter_seed, pair, config.counted.rate);
    const size_t i = result.candidate_ms.size();  // Timed sample index.
    if (counted_pair) {
      const size_t j = result.counted.size();
      const uint64_t cseed = SampleSeed(config.candidate_seed_base, kCountedSeedOffset + j);
      const uint64_t bseed = SampleSeed(config.baseline_seed_base, kCountedSeedOffset + j);
      const size_t cfg = CountedConfig(config.counted, j);
      double begin_us = 0;
      const double k0 = Seconds();
      if (!candidate_first) {
        ASSIGN_OR_RETURN(double b, measure(baseline, bseed, -1, nullptr));
        (void)b;
      }
      ASSIGN_OR_RETURN(double c, measure(candidate, cseed, static_cast<int>(cfg), &begin_us));
      ASSIGN_OR_RETURN(auto metrics, hooks.counting->end());
      result.counted_seconds += Seconds() - k0;
      result.counted_ms.push_back(c);
      result.counted.push_back({pair, i, cseed, cfg, begin_us, std::move(metrics)});
      RETURN_IF_ERROR(after_candidate(pair, cseed, true));
      if (candidate_first) {
        ASSIGN_OR_RETURN(double b, measure(baseline, bseed, -1, nullptr));
        (void)b;
      }
      ++result.pairs;
      continue;
    }
    uint64_t cseed = SampleSeed(config.candidate_seed_base, i);
    uint64_t bseed = SampleSeed(config.baseline_seed_base, i);
    double c = 0, b = 0;
    if (!candidate_first) {
      ASSIGN_OR_RETURN(b, measure(baseline, bseed, -1, nullptr));
    }
    ASSIGN_OR_RETURN(c, measure(candidate, cseed, -1, nullptr));
    RETURN_IF_ERROR(after_candidate(i, cseed, false));
    if (next_block < config.max_checks && config.check_every > 0 &&
        i == check_index_of_block(next_block)) {
      RETURN_IF_ERROR(hooks.on_check(i, cseed));
      result.checked.push_back({i, cseed});
      ++next_block;
    }
    if (candidate_first) {
      ASSIGN_OR_RETURN(b, measure(baseline, bseed, -1, nullptr));
    }
    ++result.pairs;
    result.candidate_ms.push_back(c);
    result.baseline_ms.push_back(b);
    if (config.clock_sample_every > 0 && i % config.clock_sample_every == 0) sample_clock();
    result.candidate = Summarize(result.candidate_ms);
    result.baseline = Summarize(result.baseline_ms);
    const char* stop = ShouldStop(config.rule, result.candidate, result.baseline, Seconds() - t1);
    if (*stop) {
      // Not before the counted launches are in (they are decided per pair at the same rate,
      // so the loop goes on with pairs of both kinds), unless that takes absurdly long.
      const bool counted_short = counting && result.counted.size() < config.counted.needed;
      if (counted_short && stop_pending_since++ < extra_pairs_cap) continue;
      result.stop_reason = stop;
      // The last candidate sample's outputs are still on the device (the baseline writes its
      // own buffers): check it too, so the samples after the last secret position are covered
      // by a check whose position the kernel cannot predict either (the stop is adaptive).
      if (result.checked.empty() || result.checked.back().first != i) {
        RETURN_IF_ERROR(hooks.on_check(i, cseed));
        result.checked.push_back({i, cseed});
      }
      break;
    }
  }
  result.sampling_seconds = Seconds() - t1;
  sample_clock();
  if (result.candidate.median > 0)
    result.speedup = result.baseline.median / result.candidate.median;
  return result;
}

}  // namespace ptxbench::gpu
