#include "worker/engine/gpu/nvml_monitor.h"

#include <dlfcn.h>

#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ptxbench::gpu {
namespace {

// The few NVML declarations used, from NVML's public API (nvml.h is not installed on the
// build machines): return codes are ints (0 = NVML_SUCCESS), devices opaque pointers.
using NvmlInit = int (*)();
using NvmlShutdown = int (*)();
using NvmlHandleByUuid = int (*)(const char*, void**);
using NvmlClockInfo = int (*)(void*, int, unsigned*);
using NvmlReasons = int (*)(void*, unsigned long long*);
using NvmlUnsigned = int (*)(void*, unsigned*);
using NvmlTemperature = int (*)(void*, int, unsigned*);
using NvmlDriverVersion = int (*)(char*, unsigned);
using NvmlErrorString = const char* (*)(int);
constexpr int kClockSm = 1;   // NVML_CLOCK_SM
constexpr int kClockMem = 2;  // NVML_CLOCK_MEM
constexpr int kTemperatureGpu = 0;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

struct NvmlMonitor::Api {
  void* library = nullptr;
  NvmlShutdown shutdown = nullptr;
  NvmlClockInfo clock = nullptr;
  NvmlClockInfo max_clock = nullptr;
  NvmlReasons reasons = nullptr;
  NvmlUnsigned power = nullptr;
  NvmlTemperature temperature = nullptr;
  NvmlErrorString error_string = nullptr;
};

nlohmann::json ToJson(const ClockSample& s) {
  return nlohmann::json{{"t", s.at_seconds},
                        {"sm_mhz", s.sm_mhz},
                        {"memory_mhz", s.memory_mhz},
                        {"event_reasons", s.event_reasons},
                        {"event_reason_names", ClockEventReasonNames(s.event_reasons)},
                        {"power_w", s.power_watts},
                        {"temperature_c", s.temperature_c}};
}

std::string ClockEventReasonNames(uint64_t reasons) {
  static const std::pair<uint64_t, const char*> kNames[] = {
      {0x1, "gpu_idle"},    {0x2, "applications_clocks"}, {0x4, "sw_power_cap"},
      {0x8, "hw_slowdown"}, {0x10, "sync_boost"},         {0x20, "sw_thermal"},
      {0x40, "hw_thermal"}, {0x80, "hw_power_brake"},     {0x100, "display_clocks"}};
  std::vector<std::string> names;
  for (const auto& [bit, name] : kNames) {
    if (reasons & bit) names.push_back(name);
  }
  return names.empty() ? "none" : absl::StrJoin(names, ",");
}

absl::StatusOr<std::unique_ptr<NvmlMonitor>> NvmlMonitor::Open(const std::string& gpu_uuid) {
  std::unique_ptr<NvmlMonitor> m(new NvmlMonitor());
  m->api_ = std::make_unique<Api>();
  Api& api = *m->api_;
  api.library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (api.library == nullptr) {
    return absl::UnavailableError(absl::StrCat("NVML unavailable: ", dlerror()));
  }
  auto sym = [&](const char* name) { return dlsym(api.library, name); };
  auto init = reinterpret_cast<NvmlInit>(sym("nvmlInit_v2"));
  auto by_uuid = reinterpret_cast<NvmlHandleByUuid>(sym("nvmlDeviceGetHandleByUUID"));
  api.shutdown = reinterpret_cast<NvmlShutdown>(sym("nvmlShutdown"));
  api.clock = reinterpret_cast<NvmlClockInfo>(sym("nvmlDeviceGetClockInfo"));
  api.max_clock = reinterpret_cast<NvmlClockInfo>(sym("nvmlDeviceGetMaxClockInfo"));
  api.reasons = reinterpret_cast<NvmlReasons>(sym("nvmlDeviceGetCurrentClocksEventReasons"));
  if (api.reasons == nullptr) {
    api.reasons = reinterpret_cast<NvmlReasons>(sym("nvmlDeviceGetCurrentClocksThrottleReasons"));
  }
  api.power = reinterpret_cast<NvmlUnsigned>(sym("nvmlDeviceGetPowerUsage"));
  api.temperature = reinterpret_cast<NvmlTemperature>(sym("nvmlDeviceGetTemperature"));
  api.error_string = reinterpret_cast<NvmlErrorString>(sym("nvmlErrorString"));
  auto driver = reinterpret_cast<NvmlDriverVersion>(sym("nvmlSystemGetDriverVersion"));
  if (!init || !by_uuid || !api.clock) {
    return absl::UnavailableError("NVML library lacks nvmlInit_v2/GetHandleByUUID/GetClockInfo");
  }
  if (int r = init(); r != 0) {
    return absl::UnavailableError(
        absl::StrCat("nvmlInit_v2 failed: ", api.error_string ? api.error_string(r) : "?"));
  }
  if (int r = by_uuid(gpu_uuid.c_str(), &m->device_); r != 0) {
    return absl::UnavailableError(absl::StrCat("NVML has no device ", gpu_uuid, ": ",
                                               api.error_string ? api.error_string(r) : "?"));
  }
  char version[96] = {0};
  if (driver && driver(version, sizeof version) == 0) m->driver_version_ = version;
  if (api.max_clock) api.max_clock(m->device_, kClockSm, &m->max_sm_mhz_);
  m->start_ = Now();
  return m;
}

NvmlMonitor::~NvmlMonitor() {
  if (api_ && api_->library) {
    if (api_->shutdown) api_->shutdown();
    dlclose(api_->library);
  }
}

absl::StatusOr<ClockSample> NvmlMonitor::Sample() const {
  ClockSample s;
  s.at_seconds = Now() - start_;
  if (int r = api_->clock(device_, kClockSm, &s.sm_mhz); r != 0) {
    return absl::InternalError(absl::StrCat("nvmlDeviceGetClockInfo: ", r));
  }
  api_->clock(device_, kClockMem, &s.memory_mhz);
  unsigned long long reasons = 0;
  if (api_->reasons && api_->reasons(device_, &reasons) == 0) s.event_reasons = reasons;
  unsigned milliwatts = 0;
  if (api_->power && api_->power(device_, &milliwatts) == 0) s.power_watts = milliwatts / 1000.0;
  if (api_->temperature) api_->temperature(device_, kTemperatureGpu, &s.temperature_c);
  return s;
}

}  // namespace ptxbench::gpu
