#include "worker/engine/gpu/cupti_counters.h"

#include <cupti.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include <chrono>
#include <cmath>
#include <mutex>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "worker/engine/gpu/cuda_check.h"
#include "worker/engine/gpu/cupti_status.h"
#include "worker/engine/gpu/runtime.h"
#include "worker/engine/gpu/stats.h"

// CUPTI's documented idiom initializes its parameter structs as {STRUCT_SIZE}: the rest is
// value-initialized (zero), which is what CUPTI requires of unset fields.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace ptxbench::gpu {
namespace {

// Seconds since `t0` on the steady clock (Configure's split).
double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The range name every counted range gets; one range per collection.
constexpr char kRangeName[] = "ptxbench_counted_sample";

absl::Status InitializeProfilerOnce() {
  static std::once_flag once;
  static CUptiResult result = CUPTI_SUCCESS;
  std::call_once(once, [] {
    CUpti_Profiler_Initialize_Params init = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
    result = cuptiProfilerInitialize(&init);
  });
  PTXBENCH_CUPTI_TRY(result);
  return absl::OkStatus();
}

absl::StatusOr<CUcontext> CurrentContext() {
  ASSIGN_OR_RETURN(const DriverApi* api, Driver());
  CUcontext ctx = nullptr;
  if (api->CtxGetCurrent(&ctx) != CUDA_SUCCESS || ctx == nullptr) {
    return absl::FailedPreconditionError("no current CUDA context for the range profiler");
  }
  return ctx;
}

// The range profiler's calls on one object, each once (Begin, End and the session's prime use
// them).
absl::Status StartRanges(CUpti_RangeProfiler_Object* object) {
  CUpti_RangeProfiler_Start_Params start = {CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
  start.pRangeProfilerObject = object;
  PTXBENCH_CUPTI_TRY(cuptiRangeProfilerStart(&start));
  return absl::OkStatus();
}

absl::Status PushRange(CUpti_RangeProfiler_Object* object) {
  CUpti_RangeProfiler_PushRange_Params push = {CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE};
  push.pRangeProfilerObject = object;
  push.pRangeName = kRangeName;
  PTXBENCH_CUPTI_TRY(cuptiRangeProfilerPushRange(&push));
  return absl::OkStatus();
}

// Pops the range and stops; the Stop's results (whether every pass was submitted).
absl::StatusOr<CUpti_RangeProfiler_Stop_Params> PopAndStop(CUpti_RangeProfiler_Object* object) {
  CUpti_RangeProfiler_PopRange_Params pop = {CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE};
  pop.pRangeProfilerObject = object;
  PTXBENCH_CUPTI_TRY(cuptiRangeProfilerPopRange(&pop));
  CUpti_RangeProfiler_Stop_Params stop = {CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
  stop.pRangeProfilerObject = object;
  PTXBENCH_CUPTI_TRY(cuptiRangeProfilerStop(&stop));
  return stop;
}

// Decodes the collected data into the counter-data image; how many ranges were dropped.
absl::StatusOr<size_t> Decode(CUpti_RangeProfiler_Object* object) {
  CUpti_RangeProfiler_DecodeData_Params decode = {
      CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE};
  decode.pRangeProfilerObject = object;
  PTXBENCH_CUPTI_TRY(cuptiRangeProfilerDecodeData(&decode));
  return decode.numOfRangeDropped;
}

void DeinitializeHost(CUpti_Profiler_Host_Object* host) {
  if (host == nullptr) return;
  CUpti_Profiler_Host_Deinitialize_Params p = {CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
  p.pHostObject = host;
  cuptiProfilerHostDeinitialize(&p);
}

}  // namespace

// One configuration: metrics that the chip collects in a single pass, with the host object that
// evaluates them and the images CUPTI reads and writes.
struct HardwareCounters::Config {
  std::vector<std::string> metrics;
  std::vector<const char*> metric_pointers;  // Into `metrics`; stable once built.
  CUpti_Profiler_Host_Object* host = nullptr;
  std::vector<uint8_t> config_image;
  std::vector<uint8_t> counter_data;
  ~Config() { DeinitializeHost(host); }
};

// Builds the host object and configuration image of `config->metrics`; their pass count in
// `passes`.
absl::Status HardwareCounters::BuildConfig(const std::string& chip,
                                           const std::vector<uint8_t>& availability, Config* config,
                                           size_t* passes) {
  config->metric_pointers.clear();
  for (const std::string& m : config->metrics) config->metric_pointers.push_back(m.c_str());
  CUpti_Profiler_Host_Initialize_Params init = {CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
  init.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
  init.pChipName = chip.c_str();
  init.pCounterAvailabilityImage = availability.data();
  PTXBENCH_CUPTI_TRY(cuptiProfilerHostInitialize(&init));
  config->host = init.pHostObject;
  CUpti_Profiler_Host_ConfigAddMetrics_Params add = {
      CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
  add.pHostObject = config->host;
  add.ppMetricNames = config->metric_pointers.data();
  add.numMetrics = config->metric_pointers.size();
  if (CUptiResult r = cuptiProfilerHostConfigAddMetrics(&add); r != CUPTI_SUCCESS) {
    return absl::InvalidArgumentError(absl::StrCat("counter metrics {",
                                                   absl::StrJoin(config->metrics, ", "),
                                                   "} refused on ", chip, ": ", CuptiMessage(r)));
  }
  CUpti_Profiler_Host_GetConfigImageSize_Params size = {
      CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
  size.pHostObject = config->host;
  PTXBENCH_CUPTI_TRY(cuptiProfilerHostGetConfigImageSize(&size));
  config->config_image.assign(size.configImageSize, 0);
  CUpti_Profiler_Host_GetConfigImage_Params image = {
      CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
  image.pHostObject = config->host;
  image.configImageSize = config->config_image.size();
  image.pConfigImage = config->config_image.data();
  PTXBENCH_CUPTI_TRY(cuptiProfilerHostGetConfigImage(&image));
  CUpti_Profiler_Host_GetNumOfPasses_Params count = {
      CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE};
  count.configImageSize = config->config_image.size();
  count.pConfigImage = config->config_image.data();
  PTXBENCH_CUPTI_TRY(cuptiProfilerHostGetNumOfPasses(&count));
  *passes = count.numOfPasses;
  return absl::OkStatus();
}

absl::Status HardwareCounters::CheckMetricsKnown(const std::string& chip,
                                                 const std::vector<std::string>& metrics) {
  CUpti_Profiler_Host_Initialize_Params init = {CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
  init.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
  init.pChipName = chip.c_str();
  PTXBENCH_CUPTI_TRY(cuptiProfilerHostInitialize(&init));
  std::vector<std::string> unknown;
  for (const std::string& metric : metrics) {
    CUpti_Profiler_Host_GetMetricProperties_Params props = {
        CUpti_Profiler_Host_GetMetricProperties_Params_STRUCT_SIZE};
    props.pHostObject = init.pHostObject;
    props.pMetricName = metric.c_str();
    if (cuptiProfilerHostGetMetricProperties(&props) != CUPTI_SUCCESS) unknown.push_back(metric);
  }
  DeinitializeHost(init.pHostObject);
  if (!unknown.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics unknown to CUPTI on ", chip, ": ", absl::StrJoin(unknown, ", ")));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<size_t>> HardwareCounters::PassesOnChip(
    const std::string& chip, const std::vector<std::string>& metrics) {
  const std::vector<uint8_t> no_availability_image;
  std::vector<size_t> passes;
  for (const std::string& metric : metrics) {
    Config config;
    config.metrics = {metric};
    size_t n = 0;
    RETURN_IF_ERROR(BuildConfig(chip, no_availability_image, &config, &n));
    passes.push_back(n);
  }
  return passes;
}

absl::StatusOr<size_t> HardwareCounters::PassesTogetherOnChip(
    const std::string& chip, const std::vector<std::string>& metrics) {
  const std::vector<uint8_t> no_availability_image;
  Config config;
  config.metrics = metrics;
  size_t passes = 0;
  RETURN_IF_ERROR(BuildConfig(chip, no_availability_image, &config, &passes));
  return passes;
}

absl::StatusOr<std::unique_ptr<HardwareCounters>> HardwareCounters::Create(
    int device_ordinal, const std::vector<std::string>& metrics, CounterSession session) {
  ASSIGN_OR_RETURN(std::unique_ptr<HardwareCounters> c,
                   Configure(device_ordinal, metrics, session));
  // Enabled here once to learn at creation whether this process may profile; under
  // kPerCollection every collection then runs in a session of its own (End disables and enables
  // the next).
  RETURN_IF_ERROR(c->EnableProfiler());
  return c;
}

absl::Status HardwareCounters::InitializeProfiler() { return InitializeProfilerOnce(); }

absl::StatusOr<std::unique_ptr<HardwareCounters>> HardwareCounters::Configure(
    int device_ordinal, const std::vector<std::string>& metrics, CounterSession session) {
  if (metrics.empty()) return absl::InvalidArgumentError("no counter metrics asked for");
  ConfigureSeconds seconds;
  auto t0 = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(InitializeProfilerOnce());
  ASSIGN_OR_RETURN(CUcontext ctx, CurrentContext());
  CUpti_Profiler_DeviceSupported_Params supported = {
      CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE};
  supported.cuDevice = device_ordinal;
  supported.api = CUPTI_PROFILER_RANGE_PROFILING;
  PTXBENCH_CUPTI_TRY(cuptiProfilerDeviceSupported(&supported));
  if (supported.isSupported != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) {
    return absl::UnavailableError(
        absl::StrCat("CUPTI range profiling not supported on device ", device_ordinal,
                     " (architecture ", supported.architecture, ", vGPU ", supported.vGpu,
                     ", confidential compute ", supported.confidentialCompute, ")"));
  }
  std::unique_ptr<HardwareCounters> c(new HardwareCounters());
  seconds.initialize = SecondsSince(t0);
  t0 = std::chrono::steady_clock::now();
  CUpti_Device_GetChipName_Params chip = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};
  chip.deviceIndex = static_cast<size_t>(device_ordinal);
  PTXBENCH_CUPTI_TRY(cuptiDeviceGetChipName(&chip));
  c->chip_ = chip.pChipName;
  CUpti_Profiler_GetCounterAvailability_Params avail = {
      CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE};
  avail.ctx = ctx;
  PTXBENCH_CUPTI_TRY(cuptiProfilerGetCounterAvailability(&avail));
  c->availability_.assign(avail.counterAvailabilityImageSize, 0);
  avail.pCounterAvailabilityImage = c->availability_.data();
  PTXBENCH_CUPTI_TRY(cuptiProfilerGetCounterAvailability(&avail));
  seconds.availability = SecondsSince(t0);
  t0 = std::chrono::steady_clock::now();

  if (session == CounterSession::kOneSessionPassPerLaunch) {
    // CUPTI schedules the passes of one configuration of every metric itself, and Create skips
    // the greedy packing below: it builds a configuration image per trial, 60-odd of them for
    // the 16-17 metrics (up to ~7 ms each on the build machine: 90 of them took 0.69 s in
    // work_share_test), which sat in the timing process's set-up of every evaluation. That each
    // metric alone is one pass (a metric spanning passes would mix two launches' counters) is
    // checked on both chips in CI (work_share_test, PassesOnChip).
    c->replayed_ = std::make_unique<Config>();
    c->replayed_->metrics = metrics;
    RETURN_IF_ERROR(BuildConfig(c->chip_, c->availability_, c->replayed_.get(), &c->passes_));
    if (c->passes_ == 0) {
      return absl::InternalError(
          absl::StrCat("CUPTI reports 0 passes for the counter configuration on ", c->chip_));
    }
  } else {
    // Greedy packing: each metric joins the first configuration that stays one pass with it, or
    // starts a new one. Fewer configurations mean fewer counted launches per loop (each needs
    // TimingLoopOptions::counted_per_config of every configuration) and fewer session switches
    // (~147 ms each on the H200 under kPerConfiguration*). The engine once kept one metric per
    // configuration to attribute a NaN to one metric; the NaN's cause is now known (a session
    // delivers only its first configuration: cupti_counters.h) and every value is finite (run 6).
    for (const std::string& metric : metrics) {
      bool placed = false;
      for (auto& config : c->configs_) {
        auto trial = std::make_unique<Config>();
        trial->metrics = config->metrics;
        trial->metrics.push_back(metric);
        size_t passes = 0;
        RETURN_IF_ERROR(BuildConfig(c->chip_, c->availability_, trial.get(), &passes));
        if (passes == 1) {
          config = std::move(trial);
          placed = true;
          break;
        }
      }
      if (placed) continue;
      auto single = std::make_unique<Config>();
      single->metrics = {metric};
      size_t passes = 0;
      RETURN_IF_ERROR(BuildConfig(c->chip_, c->availability_, single.get(), &passes));
      if (passes != 1) {
        return absl::InvalidArgumentError(absl::StrCat("counter metric ", metric, " needs ", passes,
                                                       " passes on ", c->chip_,
                                                       "; only single-pass metrics are used"));
      }
      c->configs_.push_back(std::move(single));
    }
  }
  seconds.images = SecondsSince(t0);
  c->configure_seconds_ = seconds;
  c->context_ = ctx;
  c->session_ = session;
  return c;
}

HardwareCounters::~HardwareCounters() { DisableProfiler(); }

// kPerCollection: one range-profiler session per collection, as NVIDIA's range-profiling
// samples do (enable, set the configuration, start/push ... pop/stop until every pass is
// submitted, decode, disable). The engine first kept one session and set a new configuration
// per collection, re-arming in Begin; on the H200 one metric per evaluation then came back NaN,
// including metrics that cannot be 0 (run 3; docs/measurement.md, "Work share and the strong
// TIC"); the H200 showed why in run 6: a session delivers only the configuration it first
// started with (cupti_counters.h, CounterSession::kPerConfiguration).
absl::Status HardwareCounters::EnableProfiler() {
  if (range_profiler_ != nullptr) return absl::OkStatus();
  CUpti_RangeProfiler_Enable_Params enable = {CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE};
  enable.ctx = static_cast<CUcontext>(context_);
  PTXBENCH_CUPTI_TRY(cuptiRangeProfilerEnable(&enable));
  range_profiler_ = enable.pRangeProfilerObject;
  armed_ = nullptr;
  return absl::OkStatus();
}

void HardwareCounters::DisableProfiler() {
  if (range_profiler_ == nullptr) return;
  if (started_) {
    CUpti_RangeProfiler_Stop_Params stop = {CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
    stop.pRangeProfilerObject = static_cast<CUpti_RangeProfiler_Object*>(range_profiler_);
    cuptiRangeProfilerStop(&stop);
    started_ = false;
  }
  CUpti_RangeProfiler_Disable_Params p = {CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE};
  p.pRangeProfilerObject = static_cast<CUpti_RangeProfiler_Object*>(range_profiler_);
  cuptiRangeProfilerDisable(&p);
  range_profiler_ = nullptr;
  armed_ = nullptr;
  session_config_ = nullptr;
  next_pass_ = 0;
}

absl::Status HardwareCounters::EnsureSessionFor(Config& config) {
  if (session_ == CounterSession::kPerCollection || session_config_ == &config) {
    return absl::OkStatus();
  }
  // A fresh session has no configuration yet; one of another configuration ends here.
  if (session_config_ != nullptr) DisableProfiler();
  RETURN_IF_ERROR(EnableProfiler());
  RETURN_IF_ERROR(Arm(config));
  // The prime: the first Start of a session costs ~145 ms on the H200 and binds the session to
  // this configuration, so it is spent here, on an empty range, and not in the next Begin.
  auto* object = static_cast<CUpti_RangeProfiler_Object*>(range_profiler_);
  RETURN_IF_ERROR(StartRanges(object));
  RETURN_IF_ERROR(PushRange(object));
  RETURN_IF_ERROR(PopAndStop(object).status());
  RETURN_IF_ERROR(Decode(object).status());
  session_config_ = &config;
  armed_ = nullptr;  // The prime consumed the image: the collection arms a fresh one.
  return absl::OkStatus();
}

const std::vector<std::string>& HardwareCounters::config_metrics(size_t config) const {
  return configs_.at(config)->metrics;
}

std::vector<std::vector<std::string>> HardwareCounters::CollectedConfigurations() const {
  if (replayed_ != nullptr) return {replayed_->metrics};
  std::vector<std::vector<std::string>> out;
  for (const auto& config : configs_) out.push_back(config->metrics);
  return out;
}

CountedPlan HardwareCounters::PlanLaunches(size_t per_config, size_t min_total, size_t min_samples,
                                           uint64_t seed) const {
  if (session_ == CounterSession::kOneSessionPassPerLaunch) {
    return PlanCountedPasses(passes_, per_config, min_total, min_samples);
  }
  return PlanCountedLaunches(configs_.size(), per_config, min_total, min_samples, seed);
}

absl::Status HardwareCounters::Arm(Config& config) {
  auto* object = static_cast<CUpti_RangeProfiler_Object*>(range_profiler_);
  CUpti_RangeProfiler_GetCounterDataSize_Params size = {
      CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE};
  size.pRangeProfilerObject = object;
  size.pMetricNames = config.metric_pointers.data();
  size.numMetrics = config.metric_pointers.size();
  size.maxNumOfRanges = 1;
  size.maxNumRangeTreeNodes = 1;
  PTXBENCH_CUPTI_TRY(cuptiRangeProfilerGetCounterDataSize(&size));
  config.counter_data.assign(size.counterDataSize, 0);
  CUpti_RangeProfiler_CounterDataImage_Initialize_Params init = {
      CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE};
  init.pRangeProfilerObject = object;
  init.counterDataSize = config.counter_data.size();
  init.pCounterData = config.counter_data.data();
  PTXBENCH_CUPTI_TRY(cuptiRangeProfilerCounterDataImageInitialize(&init));
  // User ranges and user replay with one range per pass: the caller brackets exactly the
  // launches of one sample, and the single pass needs no replay.
  CUpti_RangeProfiler_SetConfig_Params set = {CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE};
  set.pRangeProfilerObject = object;
  set.configSize = config.config_image.size();
  set.pConfig = config.config_image.data();
  set.counterDataImageSize = config.counter_data.size();
  set.pCounterDataImage = config.counter_data.data();
  set.range = CUPTI_UserRange;
  set.replayMode = CUPTI_UserReplay;
  set.maxRangesPerPass = 1;
  set.numNestingLevels = 1;
  set.minNestingLevel = 1;
  set.passIndex = 0;
  set.targetNestingLevel = 1;
  PTXBENCH_CUPTI_TRY(cuptiRangeProfilerSetConfig(&set));
  armed_ = &config;
  return absl::OkStatus();
}

absl::Status HardwareCounters::Prepare(size_t config) {
  if (active_ != nullptr) return absl::FailedPreconditionError("a counted range is open");
  if (session_ == CounterSession::kOneSessionPassPerLaunch) return PrepareReplayedPass(config);
  if (config >= configs_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("counter configuration ", config, " of ", configs_.size()));
  }
  RETURN_IF_ERROR(EnableProfiler());
  RETURN_IF_ERROR(EnsureSessionFor(*configs_[config]));
  if (armed_ != configs_[config].get()) RETURN_IF_ERROR(Arm(*configs_[config]));
  if (session_ == CounterSession::kPerConfigurationStartedEarly && !started_) {
    RETURN_IF_ERROR(StartRanges(static_cast<CUpti_RangeProfiler_Object*>(range_profiler_)));
    started_ = true;
  }
  return absl::OkStatus();
}

absl::Status HardwareCounters::Begin(size_t config) {
  if (active_ != nullptr) return absl::FailedPreconditionError("a counted range is open");
  if (session_ == CounterSession::kOneSessionPassPerLaunch) return BeginReplayedPass(config);
  if (config >= configs_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("counter configuration ", config, " of ", configs_.size()));
  }
  Config& c = *configs_[config];
  RETURN_IF_ERROR(EnableProfiler());
  RETURN_IF_ERROR(EnsureSessionFor(c));
  if (armed_ != &c) RETURN_IF_ERROR(Arm(c));
  auto* object = static_cast<CUpti_RangeProfiler_Object*>(range_profiler_);
  if (!started_) RETURN_IF_ERROR(StartRanges(object));
  started_ = false;  // Stopped by End.
  RETURN_IF_ERROR(PushRange(object));
  active_ = &c;
  return absl::OkStatus();
}

// kOneSessionPassPerLaunch. The session is enabled once, armed with the configuration of every
// metric and primed with one round of empty ranges (the session's first Start, ~0.15 s, is spent
// there, before the loop's first counted launch is prepared). A round: the counter-data image is
// initialized and the configuration set at pass 0 (Arm), then each pass is Start (here, early,
// so that Begin is only the Push), Push, the counted launch, Pop and Stop; Stop names the next
// pass until every pass was submitted, and the last pass's End decodes the round.
absl::Status HardwareCounters::PrepareReplayedPass(size_t pass) {
  if (pass >= passes_) {
    return absl::InvalidArgumentError(absl::StrCat("counter pass ", pass, " of ", passes_));
  }
  RETURN_IF_ERROR(EnableProfiler());
  auto* object = static_cast<CUpti_RangeProfiler_Object*>(range_profiler_);
  if (session_config_ != replayed_.get()) {
    RETURN_IF_ERROR(Arm(*replayed_));
    bool submitted = false;
    for (size_t p = 0; p < passes_ && !submitted; ++p) {
      RETURN_IF_ERROR(StartRanges(object));
      RETURN_IF_ERROR(PushRange(object));
      ASSIGN_OR_RETURN(CUpti_RangeProfiler_Stop_Params stop, PopAndStop(object));
      submitted = stop.isAllPassSubmitted != 0;
    }
    if (!submitted) {
      return absl::InternalError(absl::StrCat("range profiler: the priming round of ", passes_,
                                              " passes was not complete"));
    }
    RETURN_IF_ERROR(Decode(object).status());
    session_config_ = replayed_.get();
    armed_ = nullptr;
    next_pass_ = 0;
  }
  if (pass != next_pass_) {
    // Passes are CUPTI's to order: a round cannot skip or repeat one.
    return absl::FailedPreconditionError(
        absl::StrCat("counter pass ", pass, " asked for; the round is at pass ", next_pass_));
  }
  if (pass == 0 && armed_ != replayed_.get()) RETURN_IF_ERROR(Arm(*replayed_));
  if (!started_) {
    RETURN_IF_ERROR(StartRanges(object));
    started_ = true;
  }
  return absl::OkStatus();
}

absl::Status HardwareCounters::BeginReplayedPass(size_t pass) {
  RETURN_IF_ERROR(PrepareReplayedPass(pass));
  RETURN_IF_ERROR(PushRange(static_cast<CUpti_RangeProfiler_Object*>(range_profiler_)));
  active_ = replayed_.get();
  active_pass_ = pass;
  return absl::OkStatus();
}

absl::StatusOr<CounterValues> HardwareCounters::EndReplayedPass(NonFinite non_finite) {
  active_ = nullptr;
  started_ = false;  // Stopped below.
  // Whatever fails, the round is lost: the next one starts at pass 0 on a fresh image.
  absl::Cleanup lose_round = [this] {
    next_pass_ = 0;
    armed_ = nullptr;
  };
  PTXBENCH_CUDA_TRY(cudaDeviceSynchronize());
  auto* object = static_cast<CUpti_RangeProfiler_Object*>(range_profiler_);
  ASSIGN_OR_RETURN(CUpti_RangeProfiler_Stop_Params stop, PopAndStop(object));
  const bool last = active_pass_ + 1 == passes_;
  if ((stop.isAllPassSubmitted != 0) != last || (!last && stop.passIndex != active_pass_ + 1)) {
    return absl::InternalError(absl::StrCat(
        "range profiler: after pass ", active_pass_, " of ", passes_, " CUPTI reports next pass ",
        stop.passIndex, " and all passes ", stop.isAllPassSubmitted ? "" : "not ", "submitted"));
  }
  if (!last) {
    std::move(lose_round).Cancel();
    next_pass_ = active_pass_ + 1;
    return CounterValues{};
  }
  return DecodeAndEvaluate(*replayed_, non_finite);
}

absl::StatusOr<CounterValues> HardwareCounters::End(NonFinite non_finite) {
  if (active_ == nullptr) return absl::FailedPreconditionError("no counted range is open");
  if (session_ == CounterSession::kOneSessionPassPerLaunch) return EndReplayedPass(non_finite);
  Config& c = *active_;
  active_ = nullptr;
  // Under kPerCollection the session ends with each collection, whatever happens below, and
  // the next one is enabled at once: here, after the counted launch, and not in Begin, whose
  // host time sits in the gap before a counted launch that the jitter must hide (timing.h).
  absl::Cleanup end_session = [this] {
    // The counter-data image is consumed either way: the next collection re-arms (Prepare).
    armed_ = nullptr;
    if (session_ != CounterSession::kPerCollection) return;
    DisableProfiler();
    (void)EnableProfiler();  // On failure the next Begin tries again and reports it.
  };
  // The range's launches must have finished before it closes.
  PTXBENCH_CUDA_TRY(cudaDeviceSynchronize());
  auto* object = static_cast<CUpti_RangeProfiler_Object*>(range_profiler_);
  ASSIGN_OR_RETURN(CUpti_RangeProfiler_Stop_Params stop, PopAndStop(object));
  if (stop.isAllPassSubmitted == 0) {
    // A one-pass configuration that wants another pass: the values would be partial.
    return absl::InternalError(
        absl::StrCat("range profiler: configuration ", absl::StrJoin(c.metrics, ", "),
                     " is not complete after one pass (next pass index ", stop.passIndex, ")"));
  }
  return DecodeAndEvaluate(c, non_finite);
}

absl::StatusOr<CounterValues> HardwareCounters::DecodeAndEvaluate(Config& c, NonFinite non_finite) {
  auto* object = static_cast<CUpti_RangeProfiler_Object*>(range_profiler_);
  ASSIGN_OR_RETURN(size_t dropped, Decode(object));
  if (dropped != 0) {
    return absl::InternalError(absl::StrCat("range profiler dropped ", dropped, " range(s)"));
  }
  CUpti_RangeProfiler_GetCounterDataInfo_Params info = {
      CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE};
  info.pCounterDataImage = c.counter_data.data();
  info.counterDataImageSize = c.counter_data.size();
  PTXBENCH_CUPTI_TRY(cuptiRangeProfilerGetCounterDataInfo(&info));
  if (info.numTotalRanges != 1) {
    return absl::InternalError(
        absl::StrCat("range profiler returned ", info.numTotalRanges, " ranges, expected 1"));
  }
  std::vector<double> values(c.metrics.size(), NAN);
  CUpti_Profiler_Host_EvaluateToGpuValues_Params eval = {
      CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
  eval.pHostObject = c.host;
  eval.pCounterDataImage = c.counter_data.data();
  eval.counterDataImageSize = c.counter_data.size();
  eval.rangeIndex = 0;
  eval.ppMetricNames = c.metric_pointers.data();
  eval.numMetrics = c.metric_pointers.size();
  eval.pMetricValues = values.data();
  PTXBENCH_CUPTI_TRY(cuptiProfilerHostEvaluateToGpuValues(&eval));
  CounterValues out;
  for (size_t i = 0; i < values.size(); ++i) {
    // The H200 returned NaN for one metric of a one-pass configuration in every evaluation of
    // 2026-12-02 run 3 (docs/results/2026-12-02-h200-gpu-test-3.log). Not only metrics whose
    // true value is 0 (fp64, fp8 FLOPs of a bf16 GEMM): also sm__inst_executed_pipe_tma.sum
    // of TMA kernels and sm__thread_inst_executed_pipe_fma_pred_on.sum, which cannot be 0. So a
    // NaN is not "no event" and is never read as 0; gpu_counters_test "counters: raw values of
    // every configuration, fresh and re-armed" prints what comes back to find the cause.
    if (!std::isfinite(values[i]) && non_finite == NonFinite::kError) {
      return absl::InternalError(
          absl::StrCat("counter ", c.metrics[i], " was not collected (", values[i], ")"));
    }
    out[c.metrics[i]] = values[i];
  }
  return out;
}

}  // namespace ptxbench::gpu
