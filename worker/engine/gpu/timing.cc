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

// The gap equalizer's pad (timing.h): kGapPadFactor x the largest idle excess a counted launch
// showed over a timed one, plus kGapPadMarginUs, so that the excess's spread from one
// collection to the next stays inside the pad (only a counted launch whose excess outgrows its
// wait and the pad is visible, and is counted in gap_pad_exceeded). Bounded by
// TimingConfig::gap_pad_max_us, which the timing watchdog allows per launch.
constexpr double kGapPadFactor = 2;
constexpr double kGapPadMarginUs = 100;

class RunningMean {
 public:
  void Add(double x) {
    ++n_;
    mean_ += (x - mean_) / static_cast<double>(n_);
  }
  double mean() const { return mean_; }

 private:
  size_t n_ = 0;
  double mean_ = 0;
};

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
  m.counted_end_seconds = r.counted_end_seconds;
  m.counted_prepare_seconds = r.counted_prepare_seconds;
  m.pairs = r.pairs;
  m.sketch_seconds = r.hook_seconds;
  m.jitter_us_mean = r.launches > 0 ? r.jitter_us_total / static_cast<double>(r.launches) : 0;
  m.gap_pad_us = r.gap_pad_us;
  m.gap_pad_seconds = r.gap_pad_seconds;
  m.timed_idle_us_mean = r.timed_idle_us_mean;
  m.counted_idle_us_mean = r.counted_idle_us_mean;
  m.gap_pad_exceeded = r.gap_pad_exceeded;
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
  ASSIGN_OR_RETURN(Event wait_end, Event::Create());
  const bool counting = hooks.counting.has_value() && config.counted.needed > 0;
  // One launch of one side: prepare, flush, the wait, then the timed region. The wait runs on
  // the GPU (Builtins::Delay), queued behind the flush, so the launch is queued before it ends
  // and the event time holds no launch latency, as without a wait. The wait is the drawn
  // jitter, plus the gap equalizer's pad while counting. A counted launch (`counted_config` >=
  // 0) waits for the GPU, runs the counters' Begin on the host (the range must hold the
  // candidate's launches only) and launches: the GPU is idle meanwhile, so its wait is
  // shortened by the running mean of the idle time counted launches showed beyond a timed
  // launch's, and the gap the kernel sees before it is drawn like the gap before a timed
  // launch as long as that excess stays below wait + pad (docs/measurement.md). While
  // counting, the idle time before every launch is measured between the events `wait_end`
  // (after the wait) and `start`, so the estimate is what the GPU saw: host scheduling and an
  // idle stream's launch latency included.
  struct Launch {
    double ms = 0;             // The timed region.
    double idle_us = 0;        // Idle GPU between the wait and the launch (counting only).
    double begin_us = 0;       // Host time of the counters' Begin (counted only).
    double given_back_us = 0;  // How much shorter the counted launch's wait was.
  };
  RunningMean timed_idle_us;
  RunningMean counted_idle_us;
  RunningMean counted_excess_us;
  double excess_max_us = 0;
  auto measure = [&](const TimedSide& side, uint64_t seed,
                     int counted_config) -> absl::StatusOr<Launch> {
    Launch launch;
    RETURN_IF_ERROR(side.prepare(seed));
    RETURN_IF_ERROR(builtins.FlushL2(stream));
    const double delay_us =
        JitterMicros(config.counter_seed, result.launches++, config.jitter_us_max);
    result.jitter_us_total += delay_us;
    const double wait_us = delay_us + result.gap_pad_us;
    result.gap_pad_seconds += result.gap_pad_us * 1e-6;
    if (counted_config >= 0) {
      launch.given_back_us = std::min(wait_us, std::max(0.0, counted_excess_us.mean()));
      RETURN_IF_ERROR(
          builtins.Delay(static_cast<uint64_t>((wait_us - launch.given_back_us) * 1e3), stream));
      PTXBENCH_CUDA_TRY(cudaEventRecord(wait_end.get(), stream));
      PTXBENCH_CUDA_TRY(cudaStreamSynchronize(stream));
      const double b0 = Seconds();
      RETURN_IF_ERROR(hooks.counting->begin(static_cast<size_t>(counted_config)));
      launch.begin_us = (Seconds() - b0) * 1e6;
    } else {
      RETURN_IF_ERROR(builtins.Delay(static_cast<uint64_t>(wait_us * 1e3), stream));
      if (counting) PTXBENCH_CUDA_TRY(cudaEventRecord(wait_end.get(), stream));
    }
    PTXBENCH_CUDA_TRY(cudaEventRecord(start.get(), stream));
    RETURN_IF_ERROR(side.run());
    PTXBENCH_CUDA_TRY(cudaEventRecord(end.get(), stream));
    ASSIGN_OR_RETURN(launch.ms, ElapsedMs(start, end));
    RETURN_IF_ERROR(SynchronizeDevice());
    result.kernel_ms_total += launch.ms;
    if (counting) {
      ASSIGN_OR_RETURN(double idle_ms, ElapsedMs(wait_end, start));
      launch.idle_us = idle_ms * 1e3;
      if (counted_config < 0) timed_idle_us.Add(launch.idle_us);
    }
    return launch;
  };
  // A counted launch's idle time enters the estimate and the pad. The pad only grows, and
  // only right after a counted launch, so its changes tell a kernel no more than that the
  // launch before was counted, which is past.
  auto account_counted = [&](const Launch& launch) {
    const double excess_us = launch.idle_us - timed_idle_us.mean();
    // Visible: beyond what the shortened wait gave back plus the pad.
    if (excess_us > launch.given_back_us + result.gap_pad_us) ++result.gap_pad_exceeded;
    counted_idle_us.Add(launch.idle_us);
    counted_excess_us.Add(excess_us);
    excess_max_us = std::max(excess_max_us, excess_us);
    result.gap_pad_us =
        std::min(config.gap_pad_max_us,
                 std::max(result.gap_pad_us, kGapPadFactor * excess_max_us + kGapPadMarginUs));
  };
  auto prepare_counted = [&](size_t config_index) -> absl::Status {
    if (!hooks.counting->prepare) return absl::OkStatus();
    return hooks.counting->prepare(config_index);
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
  // Under a plan of passes (stats.h PlanCountedPasses) the calibration is a whole round, the
  // passes in order, so that the loop's first counted launch starts a round of its own; its
  // values are dropped like the others'.
  const size_t calibration_launches = std::max<size_t>(2, config.counted.passes_per_round);
  while (warm < config.warmup_min_pairs || Seconds() - t0 < config.warmup_seconds ||
         (counting && warm <= calibration_launches)) {
    // Warm-up candidate launches 1 and 2 (under a plan of passes, 1 to the round's end) are
    // counted (values dropped) to calibrate the gap equalizer before the loop's first counted
    // launch: launch 0 gives the idle time before a timed launch; launch 1 is the process's
    // first collection, whose cold start (CUPTI's first range) is not what later ones cost, so
    // only the launches from 2 on enter the estimate and the pad. All are prepared like the
    // loop's counted launches.
    // They use the first counted launch's configuration, so that the session they start is
    // the one the loop's first block needs (a change of configuration costs a new session:
    // stats.cc PlanCountedLaunches).
    const bool calibrate = counting && warm >= 1 && warm <= calibration_launches;
    size_t calibration_config = 0;
    if (calibrate) {
      calibration_config =
          CountedConfig(config.counted, config.counted.passes_per_round > 0 ? warm - 1 : 0);
    }
    if (calibrate) RETURN_IF_ERROR(prepare_counted(calibration_config));
    ASSIGN_OR_RETURN(Launch c, measure(candidate, SampleSeed(~config.candidate_seed_base, warm),
                                       calibrate ? static_cast<int>(calibration_config) : -1));
    if (calibrate) {
      ASSIGN_OR_RETURN(auto dropped, hooks.counting->end());
      (void)dropped;
      if (warm >= 2) account_counted(c);
    }
    ASSIGN_OR_RETURN(Launch b, measure(baseline, SampleSeed(~config.baseline_seed_base, warm), -1));
    (void)b;
    ++warm;
    if (warm > 10000) break;
  }
  if (counting) RETURN_IF_ERROR(prepare_counted(CountedConfig(config.counted, 0)));
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
      const double k0 = Seconds();
      if (!candidate_first) {
        ASSIGN_OR_RETURN(Launch b, measure(baseline, bseed, -1));
        (void)b;
      }
      ASSIGN_OR_RETURN(Launch c, measure(candidate, cseed, static_cast<int>(cfg)));
      const double e0 = Seconds();
      ASSIGN_OR_RETURN(auto metrics, hooks.counting->end());
      const double p0 = Seconds();
      // Arming the next configuration here puts its host time after a counted launch.
      RETURN_IF_ERROR(prepare_counted(CountedConfig(config.counted, j + 1)));
      result.counted_end_seconds += p0 - e0;
      result.counted_prepare_seconds += Seconds() - p0;
      account_counted(c);
      result.counted_seconds += Seconds() - k0;
      result.counted_ms.push_back(c.ms);
      result.counted.push_back({pair, i, cseed, cfg, c.begin_us, c.idle_us, std::move(metrics)});
      RETURN_IF_ERROR(after_candidate(pair, cseed, true));
      if (candidate_first) {
        ASSIGN_OR_RETURN(Launch b, measure(baseline, bseed, -1));
        (void)b;
      }
      ++result.pairs;
      continue;
    }
    uint64_t cseed = SampleSeed(config.candidate_seed_base, i);
    uint64_t bseed = SampleSeed(config.baseline_seed_base, i);
    Launch c, b;
    if (!candidate_first) {
      ASSIGN_OR_RETURN(b, measure(baseline, bseed, -1));
    }
    ASSIGN_OR_RETURN(c, measure(candidate, cseed, -1));
    RETURN_IF_ERROR(after_candidate(i, cseed, false));
    if (next_block < config.max_checks && config.check_every > 0 &&
        i == check_index_of_block(next_block)) {
      RETURN_IF_ERROR(hooks.on_check(i, cseed));
      result.checked.push_back({i, cseed});
      ++next_block;
    }
    if (candidate_first) {
      ASSIGN_OR_RETURN(b, measure(baseline, bseed, -1));
    }
    ++result.pairs;
    result.candidate_ms.push_back(c.ms);
    result.baseline_ms.push_back(b.ms);
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
  result.timed_idle_us_mean = timed_idle_us.mean();
  result.counted_idle_us_mean = counted_idle_us.mean();
  sample_clock();
  if (result.candidate.median > 0)
    result.speedup = result.baseline.median / result.candidate.median;
  return result;
}

}  // namespace ptxbench::gpu
