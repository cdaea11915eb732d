#include "worker/engine/gpu/timing.h"

#include <chrono>

#include "common/status.h"
#include "worker/engine/gpu/philox.h"

namespace ptxbench::gpu {
namespace {

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

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
  return m;
}

absl::StatusOr<TimingResult> TimeInterleaved(
    const TimedSide& candidate, const TimedSide& baseline, Builtins& builtins, cudaStream_t stream,
    const NvmlMonitor* nvml, const TimingConfig& config,
    const std::function<absl::Status(size_t, uint64_t)>& on_check) {
  TimingResult result;
  ASSIGN_OR_RETURN(Event start, Event::Create());
  ASSIGN_OR_RETURN(Event end, Event::Create());
  auto sample_clock = [&]() {
    if (nvml == nullptr) return;
    auto s = nvml->Sample();
    if (s.ok()) result.clocks.push_back(*s);
  };
  // One timed sample of one side.
  auto measure = [&](const TimedSide& side, uint64_t seed) -> absl::StatusOr<double> {
    RETURN_IF_ERROR(side.prepare(seed));
    RETURN_IF_ERROR(builtins.FlushL2(stream));
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

  // Shared warm-up: clocks ramp from idle (345 MHz seen on the H200) and module code is first
  // touched here. Seeds from the far end of the sample range, never reused by samples.
  sample_clock();
  double t0 = Seconds();
  size_t warm = 0;
  while (warm < config.warmup_min_pairs || Seconds() - t0 < config.warmup_seconds) {
    ASSIGN_OR_RETURN(double c, measure(candidate, SampleSeed(~config.candidate_seed_base, warm)));
    ASSIGN_OR_RETURN(double b, measure(baseline, SampleSeed(~config.baseline_seed_base, warm)));
    (void)c;
    (void)b;
    ++warm;
    if (warm > 10000) break;
  }
  result.warmup_pairs = warm;
  result.warmup_seconds = Seconds() - t0;
  sample_clock();

  // The checked sample of block k sits at k*check_every + (Mix64(secret + k) % check_every).
  auto check_index_of_block = [&](size_t block) {
    return static_cast<size_t>(
        CheckedSampleOfBlock(config.check_position_seed, block, config.check_every));
  };
  size_t next_block = 0;
  double t1 = Seconds();
  for (size_t i = 0;; ++i) {
    uint64_t cseed = SampleSeed(config.candidate_seed_base, i);
    uint64_t bseed = SampleSeed(config.baseline_seed_base, i);
    bool candidate_first = (i % 2) == 0;
    double c = 0, b = 0;
    if (!candidate_first) {
      ASSIGN_OR_RETURN(b, measure(baseline, bseed));
    }
    ASSIGN_OR_RETURN(c, measure(candidate, cseed));
    if (next_block < config.max_checks && config.check_every > 0 &&
        i == check_index_of_block(next_block)) {
      RETURN_IF_ERROR(on_check(i, cseed));
      result.checked.push_back({i, cseed});
      ++next_block;
    }
    if (candidate_first) {
      ASSIGN_OR_RETURN(b, measure(baseline, bseed));
    }
    result.candidate_ms.push_back(c);
    result.baseline_ms.push_back(b);
    if (config.clock_sample_every > 0 && i % config.clock_sample_every == 0) sample_clock();
    result.candidate = Summarize(result.candidate_ms);
    result.baseline = Summarize(result.baseline_ms);
    const char* stop = ShouldStop(config.rule, result.candidate, result.baseline, Seconds() - t1);
    if (*stop) {
      result.stop_reason = stop;
      // The last candidate sample's outputs are still on the device (the baseline writes its
      // own buffers): check it too, so the samples after the last secret position are covered
      // by a check whose position the kernel cannot predict either (the stop is adaptive).
      if (result.checked.empty() || result.checked.back().first != i) {
        RETURN_IF_ERROR(on_check(i, cseed));
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
