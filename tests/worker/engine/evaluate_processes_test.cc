// The derived watchdogs (worker/engine/evaluate_processes.h DeriveWatchdogs): deadlines that
// follow from what the submission showed in its correctness trials, so that a kernel that hangs
// only in the timing loop or only under the profiler costs seconds of GPU, not the 300 s caps.
#include "worker/engine/evaluate_processes.h"

#include <algorithm>
#include <catch2/catch.hpp>

namespace ptxbench::engine::evaluation {
namespace {

// The GEMM task on the H200: reference solution ~0.8 ms warm (a cold trial launch ~1.5 ms),
// cuBLASLt ~0.77 ms; the reference process's command for the timed workload (inputs + library)
// ~60 ms.
WatchdogInputs Gemm() {
  WatchdogInputs in;
  in.trial_kernel_ms = 1.5;
  in.reference_ms = 60;
  in.counted_samples = 0;
  return in;
}

TEST_CASE("watchdogs: the GEMM's timing and instrument deadlines are well under 30 s",
          "[watchdog]") {
  EngineOptions options;
  Watchdogs w = DeriveWatchdogs(Gemm(), options);
  // floor 10 + 2 x (warm-up 0.3 + pair, time cap 2.0 + pair): ~15 s.
  CHECK(w.timing_seconds > 10);
  CHECK(w.timing_seconds < 20);
  // floor 12 + 2 x 68 x 1.5 ms.
  CHECK(w.instrument_seconds == Approx(12 + 2 * 68 * 0.0015));
  CHECK(w.instrument_fresh_seconds == Approx(25 + 2 * 68 * 0.0015));
  CHECK(w.basis["pair_seconds"].get<double>() == Approx((1.5 + 60 + 10) / 1000));
  // Counted samples add their kernel and CUPTI's host work (200 ms at worst), and every launch of both sides may
  // then wait the gap equalizer's pad (at most 20 ms).
  WatchdogInputs counted = Gemm();
  counted.counted_samples = 16;
  counted.loop.gap_pad_max_us = 20000;
  const Watchdogs c = DeriveWatchdogs(counted, options);
  CHECK(c.basis["pair_seconds"].get<double>() == Approx((1.5 + 60 + 10 + 2 * 20) / 1000));
  CHECK(c.basis["counted_seconds"].get<double>() == Approx(16 * (1.5 + 200 + 2 * 20) / 1000));
  CHECK(c.timing_seconds == Approx(10 + 2 * (c.basis["warmup_seconds"].get<double>() +
                                             c.basis["sampling_seconds"].get<double>() +
                                             c.basis["counted_seconds"].get<double>())));
  CHECK(c.timing_seconds > w.timing_seconds + 2 * 16 * (1.5 + 20) / 1000);
  // Still well under 30 s.
  CHECK(c.timing_seconds < 25);
}

TEST_CASE("watchdogs: a slow honest kernel gets the time its own loop needs", "[watchdog]") {
  EngineOptions options;
  WatchdogInputs slow;
  slow.trial_kernel_ms = 181;  // The slowest reference-like kernel in the H200 runs.
  slow.reference_ms = 20;
  Watchdogs w = DeriveWatchdogs(slow, options);
  // The loop stops at its time cap only after 5 pairs: 5 x 0.211 s > 2 s.
  const double pair = (181.0 + 20 + 10) / 1000;
  const double expected =
      10 + 2 * ((std::max(0.3, 3 * pair) + pair) + (std::max(2.0, 5 * pair) + pair));
  CHECK(w.timing_seconds == Approx(expected));
  // The 181 ms kernel took 2.88 s of timing stage on the H200: the deadline leaves room.
  CHECK(w.timing_seconds > 3 * 2.88);
  CHECK(w.instrument_seconds == Approx(12 + 2 * 68 * 0.181));
}

TEST_CASE("watchdogs: never beyond the configured caps, never below the floors", "[watchdog]") {
  EngineOptions options;
  options.timing_timeout_seconds = 60;
  options.instrument_timeout_seconds = 40;
  WatchdogInputs huge;
  huge.trial_kernel_ms = 50000;  // A trial of 50 s (the trial watchdog is 60 s).
  Watchdogs w = DeriveWatchdogs(huge, options);
  CHECK(w.timing_seconds == 60);
  CHECK(w.instrument_seconds == 40);
  WatchdogInputs none;  // Nothing measured (negative or zero figures): the floors alone.
  none.trial_kernel_ms = -1;
  Watchdogs floor = DeriveWatchdogs(none, options);
  CHECK(floor.instrument_seconds == options.instrument_setup_floor_seconds);
  CHECK(floor.timing_seconds > options.timing_setup_floor_seconds);
  // The loop ends at whichever cap comes first: 400 pairs of 71.5 ms exceed the 2 s time cap,
  // so the time cap decides; with a 20-sample cap (1.43 s) the sample cap does.
  WatchdogInputs capped = Gemm();
  CHECK(DeriveWatchdogs(capped, options).basis["sampling_seconds"].get<double>() ==
        Approx(2.0 + (1.5 + 60 + 10) / 1000));
  capped.loop.max_samples = 20;
  CHECK(DeriveWatchdogs(capped, options).basis["sampling_seconds"].get<double>() ==
        Approx(20 * (1.5 + 60 + 10) / 1000));
}

}  // namespace
}  // namespace ptxbench::engine::evaluation
