// SM clock, memory clock, throttle ("clocks event") reasons, power and temperature through
// NVML, loaded with dlopen("libnvidia-ml.so.1") at run time: the library exists only where the
// driver is installed, and every binary must start without it. NVML's types stay in the .cc.
//
// Why clocks are recorded with every sample set: on the H200, back-to-back bf16 GEMMs fall
// from ~800 to ~680 TFLOP/s within a second as the software power cap (reason 0x4) pulls the
// SM clock from 1980 to ~1500 MHz (docs/results/2026-11-30-h200-device-probe-1.log); absolute times
// are only comparable with their clocks, ratios measured side by side are.
#ifndef PTXBENCH_WORKER_ENGINE_GPU_NVML_MONITOR_H_
#define PTXBENCH_WORKER_ENGINE_GPU_NVML_MONITOR_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace ptxbench::gpu {

struct ClockSample {
  double at_seconds = 0;  // Since the monitor was created.
  unsigned sm_mhz = 0;
  unsigned memory_mhz = 0;
  uint64_t event_reasons = 0;  // nvmlClocksEventReason* bit mask (0x4: software power cap).
  double power_watts = 0;
  unsigned temperature_c = 0;
};
nlohmann::json ToJson(const ClockSample& sample);
// Names of the set bits of an event-reason mask ("sw_power_cap", "hw_slowdown", ...).
std::string ClockEventReasonNames(uint64_t reasons);

class NvmlMonitor {
 public:
  // Finds the device by its UUID ("GPU-..."); Unavailable when NVML cannot be loaded.
  static absl::StatusOr<std::unique_ptr<NvmlMonitor>> Open(const std::string& gpu_uuid);
  ~NvmlMonitor();
  absl::StatusOr<ClockSample> Sample() const;
  std::string driver_version() const { return driver_version_; }
  unsigned max_sm_mhz() const { return max_sm_mhz_; }

 private:
  NvmlMonitor() = default;
  struct Api;
  std::unique_ptr<Api> api_;
  void* device_ = nullptr;
  std::string driver_version_;
  unsigned max_sm_mhz_ = 0;
  double start_ = 0;
};

}  // namespace ptxbench::gpu

#endif  // PTXBENCH_WORKER_ENGINE_GPU_NVML_MONITOR_H_
