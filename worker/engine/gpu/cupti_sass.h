// Per-instruction execution counts of a submission's kernels through CUPTI's SASS-metrics API
// (cupti_sass_metrics.h). CUPTI's headers stay in cupti_sass.cc.
//
// Seen on the H200 (CUPTI 13.0.1, driver 580.159.04, 2026-11-30,
// docs/results/2026-11-30-h200-device-probe-1.log):
// - Within one process only the FIRST kernel function that executes under patching gets
//   records; later kernels (same or other module, after re-Enable, after a module reload) get
//   none, and SetConfig after UnsetConfig fails with CUPTI_ERROR_OUT_OF_MEMORY. So the engine
//   instruments ONE kernel function per process (a fresh evaluator process per distinct kernel
//   of the plan) and Creates/Enables exactly once per process.
// - Every metric comes back as its own record (records = patched PCs x metrics), one instance
//   at GPU granularity; instructions that never ran report explicit zeros.
// - Patched code ran 68x slower on an FMA loop (0.55 -> 37.7 ms) and normal again after
//   Disable: the engine never times in a process that instrumented anything.
#ifndef PTXBENCH_WORKER_ENGINE_GPU_CUPTI_SASS_H_
#define PTXBENCH_WORKER_ENGINE_GPU_CUPTI_SASS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ptxbench::gpu {

struct SassPcCounts {
  std::string function;
  uint64_t cubin_crc = 0;
  uint32_t function_index = 0;
  uint32_t pc_offset = 0;
  uint64_t warp_inst_executed = 0;       // smsp__sass_inst_executed
  uint64_t thread_inst_pred_on = 0;      // smsp__sass_thread_inst_executed_pred_on
  uint64_t gmma_warp_inst_executed = 0;  // smsp__sass_inst_executed_op_shared_gmma
  uint64_t tma_warp_inst_executed = 0;   // smsp__sass_inst_executed_op_tma
};

struct SourceLine {
  std::string file;
  std::string dir;
  uint32_t line = 0;
};

class SassMetricsSession {
 public:
  // Initializes the CUPTI profiler for the device and resolves the metrics; call it before the
  // first kernel of the process (CUPTI's profiler wants a clean context). The metrics are
  // configured (cuptiSassMetricsSetConfig) only in Enable(), after whatever must run
  // uninstrumented. kUnavailable (with CUPTI's reason) when SASS metrics cannot be collected
  // here: the engine then refuses the target-instruction stage instead of passing it.
  static absl::StatusOr<std::unique_ptr<SassMetricsSession>> Create(int device_ordinal);
  ~SassMetricsSession();

  // Configures the metrics and starts patching (lazy: each function is patched at its first
  // execution in the range). Once per process.
  absl::Status Enable();
  // Flushes every record collected since Enable and ends the range.
  absl::StatusOr<std::vector<SassPcCounts>> FlushAndDisable();

  std::string chip() const { return chip_; }
  uint32_t cupti_version() const { return version_; }

  // CUPTI's CRC of a cubin, as found in records' cubin_crc.
  static absl::StatusOr<uint64_t> CubinCrc(const std::string& cubin);
  // Source file and line of one PC (needs a cubin built with line info).
  static absl::StatusOr<SourceLine> Correlate(const std::string& cubin, const std::string& function,
                                              uint32_t pc_offset);

 private:
  SassMetricsSession() = default;
  struct Metric {
    uint64_t id;
    std::string name;
  };
  std::vector<Metric> metrics_;
  std::string chip_;
  uint32_t version_ = 0;
  int device_ = 0;
  bool configured_ = false;
  bool enabled_ = false;
};

}  // namespace ptxbench::gpu

#endif  // PTXBENCH_WORKER_ENGINE_GPU_CUPTI_SASS_H_
