// Hardware performance counters of a range of launches, through CUPTI's range profiler
// (cupti_range_profiler.h) and profiler host API (cupti_profiler_host.h). CUPTI's headers stay
// in cupti_counters.cc.
//
// Why counters, next to the SASS-metrics run (cupti_sass.h): SASS metrics patch the code, which
// then runs ~68x slower, so a kernel can tell that it is watched and behave differently. The
// counters are read by the hardware while the code runs at full speed, so the timing process
// can count launches that the kernel cannot tell apart from its timed samples.
//
// Seen on the H200 (CUPTI 13.0, driver 580.159.04, chip "GH100", 2026-12-01, lead's counter
// probe; docs/results/2026-12-01-h200-counter-probe.txt), as root and as uid 65534 with a second
// CUDA context alive in another process:
// - The values are exact: sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32.sum was 2*M*N*K
//   FLOPs for a cuBLASLt 8192x7168x5120 GEMM and for a hand-counted wgmma loop;
//   sm__inst_executed_pipe_tma.sum and l1tex__m_xbar2l1tex_read_bytes_mem_global_op_tma_ld.sum
//   matched 132,000 tensor loads of 8,192 B each.
// - With the profiler enabled but outside a range, launches ran as fast as before it was
//   enabled (cuBLASLt 0.679 ms either way); a counted launch's event time grows by 0.02-0.05 ms,
//   so counted launches are never timing samples.
// - Inside a counted launch nothing changes for the kernel: a clock64()-timed dependent FFMA
//   loop took 444,019 cycles counted and uncounted alike.
// - Metrics needing different counter domains need separate passes (hgmma+bf16 tensor FLOPs: 1
//   pass; adding fp16, fp8, tf32 and int8 tensor FLOPs: 6). One Start/Stop collects one pass;
//   the other passes' metrics come back NaN. Hence metrics are grouped into configurations of
//   one pass each, and each counted range collects one configuration.
// - Host cost of one collection: ~5 ms for a one-pass configuration.
#ifndef PTXBENCH_WORKER_ENGINE_GPU_CUPTI_COUNTERS_H_
#define PTXBENCH_WORKER_ENGINE_GPU_CUPTI_COUNTERS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ptxbench::gpu {

struct CountedPlan;  // stats.h, which needs this header's CounterSession through
                     // protocol_messages.h.

// Metric values of one counted range, by metric name ("sm__...sum").
using CounterValues = std::map<std::string, double>;

// How the collections of one HardwareCounters use CUPTI range-profiler sessions
// (TimingLoopOptions::counter_session; names in protocol_messages.h).
enum class CounterSession {
  // Enable ... Disable around every collection, as NVIDIA's range-profiling samples do. Every
  // value was finite in the H200 runs since (2026-12-02 runs 4 and 5), but Start in a fresh
  // session costs 134-163 ms of idle GPU (run 5, gpu_counters_test "the gap before a counted
  // launch"), a gap a kernel can see before every counted launch.
  kPerCollection,
  // One session per configuration: collections of the session's configuration follow one
  // another in it (the counter-data image initialized and the same configuration set again
  // after each End); a collection of another configuration first ends the session and starts
  // one for it, primed with an empty range (Prepare, after the previous End: outside the gap
  // before the next counted launch). Why both halves, on the H200 (2026-12-02 run 6,
  // gpu_counters_test "the cost and values of a collection, per session policy"): in one session
  // Start and Push cost 1.8-2.3 ms, against 142-172 ms for the first Start of a fresh session;
  // but a session delivers only the configuration of its first Start: after setting another,
  // every value came back NaN (90 of 96 collections; run 3's NaN had this cause).
  kPerConfiguration,
  // kPerConfiguration with Start moved from Begin to Prepare: Begin only pushes the range, and
  // the timed launches between a Prepare and the next counted launch run in a started session,
  // outside any range (whether that costs them anything is measured by the counted-over-timed
  // medians; docs/measurement.md).
  kPerConfigurationStartedEarly,
  // One session for the whole loop and one configuration holding every metric, collected over
  // several passes with CUPTI's user replay: each counted launch is one pass of a round (Start
  // in Prepare, as kPerConfigurationStartedEarly does; Push in Begin; Pop and Stop in End), the
  // passes in order, and the round's last End decodes and returns every metric of the round
  // while the others return nothing. Why: under kPerConfiguration* a change of configuration
  // ends the session and the next one's first Start costs ~0.17 s; the task's metrics need 8
  // single-pass configurations on GH100, so a GEMM evaluation spent 1.3-2.0 s of its ~4.3 s in
  // session changes (issue 16; docs/results/2026-12-06-h100-service-bench). With user replay
  // CUPTI itself splits one configuration into passes and keeps the session (its range
  // profiler's SetConfig takes a pass index; Stop reports the next pass and whether all were
  // submitted), so the session starts once per loop.
  kOneSessionPassPerLaunch,
};

class HardwareCounters {
 public:
  // Sets up the range profiler on the current CUDA context of `device_ordinal` and groups
  // `metrics` into configurations of one pass each, in order. kUnavailable with CUPTI's reason
  // when counters cannot be read here (the caller then reports that the cross-check was not
  // made — never that it passed). A metric unknown to the chip is kInvalidArgument.
  static absl::StatusOr<std::unique_ptr<HardwareCounters>> Create(
      int device_ordinal, const std::vector<std::string>& metrics,
      CounterSession session = CounterSession::kPerCollection);
  // Create without its last step, enabling the profiler on the context: CUPTI's profiler
  // start-up, the chip's counter availability and the configuration images, host work that took
  // 0.23-0.69 s of every GEMM job's timing stage (H100, service bench run 16,
  // `counters_seconds`), which a candidate process now does on its preparing thread, before the
  // GPU gate. Enable() before the first Prepare or Begin; nothing is counted before it.
  static absl::StatusOr<std::unique_ptr<HardwareCounters>> Configure(
      int device_ordinal, const std::vector<std::string>& metrics,
      CounterSession session = CounterSession::kPerCollection);
  // CUPTI's profiler start-up alone (Configure's first step; once per process). Host work that
  // touches no other process's counters (an instrumented process does the same before the GPU
  // gate: cupti_sass.cc), so a candidate process does it on its preparing thread, before the
  // gate, and Configure, under it, finds it done.
  static absl::Status InitializeProfiler();
  // Enables the range profiler on the context Configure found current (Create's last step).
  absl::Status Enable() { return EnableProfiler(); }
  ~HardwareCounters();
  HardwareCounters(const HardwareCounters&) = delete;
  HardwareCounters& operator=(const HardwareCounters&) = delete;

  // Whether CUPTI's metric catalogue of `chip` ("GH100", "GB100") knows every one of `metrics`;
  // needs no GPU (the profiler host API runs on any machine), so CI checks the names the engine
  // asks for on both chips. InvalidArgument naming the unknown metrics.
  static absl::Status CheckMetricsKnown(const std::string& chip,
                                        const std::vector<std::string>& metrics);

  // How many passes each of `metrics` needs alone on `chip`, from CUPTI's host API without a
  // GPU (no counter-availability image: the chip's full counter set). The engine uses only
  // single-pass metrics, so CI checks every metric it asks for here: a metric needing two
  // passes on a chip makes Create fail on that GPU (sm__ops_path_tensor_src_fp16.sum did on
  // the H200, 2026-12-02, docs/results/2026-12-02-h200-gpu-test-1.json).
  static absl::StatusOr<std::vector<size_t>> PassesOnChip(const std::string& chip,
                                                          const std::vector<std::string>& metrics);

  // How many passes `metrics` need together, as one configuration, on `chip` (no GPU: the
  // chip's full counter set): the counted launches of a round under kOneSessionPassPerLaunch.
  static absl::StatusOr<size_t> PassesTogetherOnChip(const std::string& chip,
                                                     const std::vector<std::string>& metrics);

  // The metrics grouped into configurations of one pass each (Create's greedy packing; none
  // under kOneSessionPassPerLaunch, which collects one configuration in passes).
  size_t config_count() const { return configs_.size(); }
  const std::vector<std::string>& config_metrics(size_t config) const;
  // kOneSessionPassPerLaunch: the passes CUPTI needs for the one configuration of every metric
  // (a counted launch each); 0 under the other policies.
  size_t pass_count() const { return passes_; }
  // What each collection round collects, as the audit reports it: the single-pass
  // configurations, or under kOneSessionPassPerLaunch the one configuration of every metric.
  std::vector<std::vector<std::string>> CollectedConfigurations() const;
  // The counted launches' plan for this object's policy (stats.h): configurations in blocks,
  // or under kOneSessionPassPerLaunch whole rounds of passes in order. The configuration index
  // the plan gives a counted launch is what its Prepare and Begin take.
  CountedPlan PlanLaunches(size_t per_config, size_t min_total, size_t min_samples,
                           uint64_t seed) const;
  const std::string& chip() const { return chip_; }
  CounterSession session() const { return session_; }
  // Where Configure's seconds went, for the timing stage's set-up split (issue 16: the timing
  // stage of a warm GEMM job waited 1.2 s for the counters' thread, H100 run 19).
  struct ConfigureSeconds {
    double initialize = 0;    // cuptiProfilerInitialize (once per process) and device support.
    double availability = 0;  // The chip's name and counter-availability image (needs the GPU).
    double images = 0;        // The configuration images (host work).
  };
  const ConfigureSeconds& configure_seconds() const { return configure_seconds_; }

  // Arms configuration `config` (under kOneSessionPassPerLaunch: pass `config` of the round,
  // which must be the round's next) for the next Begin (its counter-data image and the profiler's
  // configuration): host work that the timing loop does right after a counted launch, so that
  // the GPU-idle time before the next counted launch holds only Begin's Start and Push
  // (timing.h, the gap equalizer). Begin arms whatever is not armed yet itself.
  absl::Status Prepare(size_t config);
  // Starts counting configuration `config`; the launches to count follow on any stream.
  absl::Status Begin(size_t config);
  // What End does with a metric that came back NaN or infinite.
  enum class NonFinite {
    kError,  // An internal error naming the metric, never a zero (what the engine uses).
    kKeep,   // Returned as it came (the GPU diagnostics of gpu_counters_test only).
  };
  // Synchronizes the device, ends the range and returns its values; under
  // kOneSessionPassPerLaunch nothing (an empty map) until the round's last pass, whose End
  // returns every metric of the round.
  absl::StatusOr<CounterValues> End(NonFinite non_finite = NonFinite::kError);

 private:
  struct Config;
  HardwareCounters() = default;
  static absl::Status BuildConfig(const std::string& chip, const std::vector<uint8_t>& availability,
                                  Config* config, size_t* passes);
  absl::Status Arm(Config& config);
  absl::Status EnableProfiler();
  void DisableProfiler();
  // kPerConfiguration: ends the session unless it belongs to `config`, then starts and primes
  // one for it.
  absl::Status EnsureSessionFor(Config& config);
  // kOneSessionPassPerLaunch: the same three steps, pass by pass.
  absl::Status PrepareReplayedPass(size_t pass);
  absl::Status BeginReplayedPass(size_t pass);
  absl::StatusOr<CounterValues> EndReplayedPass(NonFinite non_finite);
  // The decoded values of the one range of `config`'s counter-data image.
  absl::StatusOr<CounterValues> DecodeAndEvaluate(Config& config, NonFinite non_finite);

  std::string chip_;
  CounterSession session_ = CounterSession::kPerCollection;
  ConfigureSeconds configure_seconds_;
  std::vector<uint8_t> availability_;
  std::vector<std::unique_ptr<Config>> configs_;
  void* context_ = nullptr;         // CUcontext the profiler is enabled on.
  void* range_profiler_ = nullptr;  // CUpti_RangeProfiler_Object*, while enabled.
  Config* active_ = nullptr;
  Config* armed_ = nullptr;
  Config* session_config_ = nullptr;  // kPerConfiguration*: whose session is enabled.
  bool started_ = false;              // kPerConfigurationStartedEarly: Start done in Prepare.
  // kOneSessionPassPerLaunch: the configuration of every metric, its passes, the round's next
  // pass and the pass of the open range.
  std::unique_ptr<Config> replayed_;
  size_t passes_ = 0;
  size_t next_pass_ = 0;
  size_t active_pass_ = 0;
};

}  // namespace ptxbench::gpu

#endif  // PTXBENCH_WORKER_ENGINE_GPU_CUPTI_COUNTERS_H_
