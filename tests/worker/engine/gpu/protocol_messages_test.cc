// Every protocol message round-trips through its one ToJson/FromJson pair, and every way a line
// can be wrong (missing key, wrong type, unknown enum name, extra key, wrong or unknown command
// or event name) is an error that names the message and the key.
#include "worker/engine/gpu/protocol_messages.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <string>
#include <variant>

namespace ptxbench::gpu {
namespace {

using json = nlohmann::json;

// ToJson, a trip through text (as on the pipe), FromJson, ToJson again: the same document.
template <typename M>
M RoundTrip(const M& message) {
  const json first = ToJson(message);
  absl::StatusOr<M> back = FromJson<M>(json::parse(first.dump()));
  INFO(first.dump());
  INFO(back.status().message());
  REQUIRE(back.ok());
  CHECK(ToJson(*back) == first);
  return *back;
}

std::string ErrorOf(const absl::Status& status) {
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  return std::string(status.message());
}

Submission ASubmission() {
  Submission s;
  s.task = {"/tasks/gemm", "abc123"};
  s.arch = "sm_90a";
  s.language = SubmissionLanguage::kPtx;
  s.source = ".version 8.7\n";
  s.launch_plan_json = R"({"launches":[]})";
  return s;
}

std::vector<OutputHandle> Outputs() {
  return {{"C", 117440512, OutputTransfer::kIpc, "00ff"},
          {"lse", 4096, OutputTransfer::kFile, "/tmp/x/trial0.lse.bin"}};
}

DeviceDescription Device() {
  DeviceDescription d;
  d.name = "NVIDIA H200";
  d.arch = "sm_90a";
  d.compute_capability = "9.0";
  d.sm_count = 132;
  d.total_memory = 150754820096;
  d.library_versions = json{{"cublaslt", 130100}};
  d.nvml_max_sm_mhz = 1980;
  return d;
}

TEST_CASE("requests round-trip, 64-bit seeds as decimal text", "[protocol]") {
  CandidateRequest candidate;
  candidate.submission = ASubmission();
  candidate.gpu = 3;
  candidate.hash_key = 18446744073709551615ull;
  candidate.timing_workload = "timed";
  candidate.timing_baseline_candidates = 8;
  CandidateRequest back = RoundTrip(candidate);
  CHECK(back.hash_key == candidate.hash_key);
  CHECK(back.timing_baseline_candidates == 8);
  CHECK_FALSE(back.timing_cached_baseline.has_value());
  CHECK_FALSE(ToJson(candidate).contains("timing_cached_baseline"));
  candidate.timing_cached_baseline = CachedBaselineChoice{3, {{"engine_config", 7}}};
  REQUIRE(RoundTrip(candidate).timing_cached_baseline.has_value());
  CHECK(RoundTrip(candidate).timing_cached_baseline->index == 3);
  CHECK(RoundTrip(candidate).timing_cached_baseline->algorithm["engine_config"] == 7);
  CHECK_FALSE(back.module.has_value());
  CHECK(ToJson(candidate)["hash_key"] == "18446744073709551615");
  CHECK(ToJson(candidate)["submission"]["language"] == "ptx");
  CHECK_FALSE(ToJson(candidate).contains("module"));  // Optional fields are absent when empty.
  candidate.module = ModulePaths{"/w/module.cubin", "/w/module.ptx"};
  CHECK(RoundTrip(candidate).module->cubin_path == "/w/module.cubin");

  InstrumentRequest instrument;
  instrument.submission = ASubmission();
  instrument.seed = 1ull << 60;
  instrument.launch_index = 2;
  instrument.transfer = OutputTransfer::kFile;
  instrument.wait_for_go = true;
  CHECK(RoundTrip(instrument).seed == (1ull << 60));
  RoundTrip(CompileRequest{ASubmission(), "/w"});
  RoundTrip(SassMapRequest{"sm_100a", {"/w/a.cubin", "/w/a.ptx"}});
  RoundTrip(ReferenceRequest{{"/tasks/gemm", "abc"}, 1, 42});
  RoundTrip(ReplayRequest{ASubmission(), 0, 7, {"c", "p"}, "small", 9, "/w/replay"});
  RoundTrip(HealthRequest{2});
}

TEST_CASE("a candidate process prepares every library candidate the baseline choice may time",
          "[protocol]") {
  TimingLoopOptions loop;
  loop.baseline_selection = BaselineSelection::kFastest;
  loop.baseline_candidates = 8;
  CHECK(PreparedBaselineCandidates(loop) == 8);
  loop.baseline_candidates = 0;  // The choice still asks for one (candidate_mode.cc).
  CHECK(PreparedBaselineCandidates(loop) == 1);
  loop.baseline_selection = BaselineSelection::kFirstHeuristic;
  loop.baseline_candidates = 8;
  CHECK(PreparedBaselineCandidates(loop) == 0);  // The first heuristic choice alone.
}

TEST_CASE("a candidate process configures ahead the hardware counters the loop will open",
          "[protocol]") {
  TimingLoopOptions loop;
  loop.counter_session = CounterSession::kPerConfiguration;
  loop.counted_per_config = 2;
  loop.counted_min_total = 0;
  CHECK(PreparedCounterSession(loop) == CounterSession::kPerConfiguration);
  loop.counted_per_config = 0;
  loop.counted_min_total = 5;
  CHECK(PreparedCounterSession(loop) == CounterSession::kPerConfiguration);
  loop.counted_min_total = 0;  // No counted samples asked: nothing configured.
  CHECK_FALSE(PreparedCounterSession(loop).has_value());
}

TEST_CASE("commands carry their name and round-trip", "[protocol]") {
  CHECK(ToJson(QuitCommand{}) == json{{"cmd", "quit"}});
  CHECK(ToJson(ResetCommand{}) == json{{"cmd", "reset"}});
  CHECK(RoundTrip(BeginCommand{99}).hash_key == 99);
  CHECK(RoundTrip(ComputeReferenceCommand{"timed", 5}).workload == "timed");
  CompareCommand compare{"timed", 12345678901234567890ull, Outputs(), true};
  CompareCommand compared = RoundTrip(compare);
  REQUIRE(compared.outputs.size() == 2);
  CHECK(compared.outputs[1].transfer == OutputTransfer::kFile);
  CHECK(compared.outputs[0].bytes == 117440512);
  CHECK(compared.keep);
  RoundTrip(ModuleCommand{{"/c", "/p"}});
  CHECK(RoundTrip(TrialCommand{"small", 1, "/w/trial0", OutputTransfer::kFile}).transfer ==
        OutputTransfer::kFile);
  RoundTrip(SaveOutputsCommand{"/w/trial0"});
  CHECK_FALSE(RoundTrip(PrepareTimingCommand{"timed", 8, std::nullopt, std::nullopt})
                  .counter_session.has_value());
  const PrepareTimingCommand prepare =
      RoundTrip(PrepareTimingCommand{"timed", 8, CounterSession::kPerCollection,
                                     CachedBaselineChoice{5, {{"algorithm", "heuristic #5"}}}});
  CHECK(prepare.counter_session == CounterSession::kPerCollection);
  REQUIRE(prepare.cached_baseline.has_value());
  CHECK(prepare.cached_baseline->index == 5);
  CHECK(prepare.cached_baseline->algorithm["algorithm"] == "heuristic #5");
  TimeCommand time;
  time.workload = "timed";
  time.candidate_seed_base = 1;
  time.baseline_seed_base = 2;
  time.check_position_seed = 3;
  time.loop.max_samples = 123;
  time.loop.target_rse = 0.01;
  time.loop.counted_per_config = 3;
  time.loop.jitter_us_max = 150;
  time.loop.gap_pad_max_us = 12345;
  time.loop.counter_session = CounterSession::kPerConfiguration;
  time.loop.sketch_projections = 6;
  time.counter_seed = 0xfedcba9876543210ull;
  time.sketch_seed = (1ull << 63) + 5;
  time.loop.baseline_selection = BaselineSelection::kFastest;
  time.cached_baseline = CachedBaselineChoice{2, {{"algorithm", "heuristic #2"}}};
  TimeCommand timed = RoundTrip(time);
  CHECK(timed.loop.baseline_selection == BaselineSelection::kFastest);
  REQUIRE(timed.cached_baseline.has_value());
  CHECK(timed.cached_baseline->index == 2);
  CHECK(timed.cached_baseline->algorithm["algorithm"] == "heuristic #2");
  CHECK(ToJson(time)["loop"]["baseline_selection"] == "fastest");
  // Without a cached choice the key is absent, and a misspelt selection is refused.
  CHECK_FALSE(RoundTrip(TimeCommand{}).cached_baseline.has_value());
  nlohmann::json misspelt = ToJson(time);
  misspelt["loop"]["baseline_selection"] = "fastest_please";
  CHECK_FALSE(FromJson<TimeCommand>(misspelt).ok());
  CHECK(timed.loop.max_samples == 123);
  CHECK(timed.loop.counted_per_config == 3);
  CHECK(timed.loop.jitter_us_max == 150);
  CHECK(timed.loop.gap_pad_max_us == 12345);
  CHECK(timed.loop.counter_session == CounterSession::kPerConfiguration);
  CHECK(ToJson(time)["loop"]["counter_session"] == "per_configuration");
  nlohmann::json unknown_session = ToJson(time);
  unknown_session["loop"]["counter_session"] = "one_per_range";
  CHECK_FALSE(FromJson<TimeCommand>(unknown_session).ok());
  CHECK(timed.loop.sketch_projections == 6);
  CHECK(timed.counter_seed == 0xfedcba9876543210ull);
  CHECK(timed.sketch_seed == (1ull << 63) + 5);
  // Secrets travel as decimal text (exact past 2^53 for any JSON reader).
  CHECK(ToJson(time)["sketch_seed"] == "9223372036854775813");
  SketchReferenceCommand sketch{"timed", {{0, 11}, {7, 1ull << 60}}, 42, 4};
  SketchReferenceCommand sketched = RoundTrip(sketch);
  REQUIRE(sketched.samples.size() == 2);
  CHECK(sketched.samples[1].sample == 7);
  CHECK(sketched.samples[1].seed == (1ull << 60));
  CHECK(sketched.projections == 4);
  CHECK(ToJson(sketch)["cmd"] == "sketch_reference");
  CHECK(RoundTrip(GoCommand{OutputTransfer::kFile}).transfer == OutputTransfer::kFile);
  CHECK(ToJson(TrialCommand{})["cmd"] == "trial");
}

TEST_CASE("events round-trip with their nested parts", "[protocol]") {
  ReadyEvent ready{Device(), true};
  ReadyEvent r = RoundTrip(ready);
  CHECK(r.device.library_versions == json{{"cublaslt", 130100}});
  CHECK(r.device.nvml_max_sm_mhz == 1980u);
  CHECK_FALSE(r.device.nvml_driver_version.has_value());
  CHECK(r.device.total_memory == 150754820096);
  CHECK(ToJson(ready)["event"] == "ready");
  ResetEvent reset_back = RoundTrip(ResetEvent{uint64_t{3} << 30, 150754820096});
  CHECK(reset_back.device_buffer_bytes == uint64_t{3} << 30);
  CHECK(reset_back.device_total_bytes == 150754820096);
  ReferenceEvent reference{"timed", 5,   77, json{{"library", "cublaslt"}},
                           0.2,     0.3, 3,  {"runs 1 and 2: O: 1 non-finite now"}};
  ReferenceEvent reference_back = RoundTrip(reference);
  CHECK(reference_back.input_hash == 77);
  CHECK(reference_back.library_runs == 3);
  CHECK(reference_back.repeat_disagreements == reference.repeat_disagreements);

  CompareReport pass;
  pass.pass = true;
  pass.elements = 100;
  pass.reference_norm = 2.5;
  CompareReport fail;
  fail.reason = "3 of 100 elements outside tolerance";
  fail.elements = 100;
  fail.mismatched = 3;
  fail.first_mismatches.push_back({7, {0, 7}, 1.5, 2.0, "mismatch"});
  CompareEvent compare{"timed", 5, {{"C", pass}, {"lse", fail}}, std::nullopt, 0.01};
  CompareEvent c = RoundTrip(compare);
  CHECK(c.tensors.at("C").pass);
  CHECK(c.tensors.at("lse").first_mismatches.at(0).coordinates == std::vector<int64_t>{0, 7});
  CompareEvent refused{"timed", 5, {}, "cudaErrorMapBufferObjectFailed", 0.001};
  CHECK(RoundTrip(refused).ipc_failed == "cudaErrorMapBufferObjectFailed");

  RoundTrip(TrialEvent{"small", 1, 2, 2, Outputs(), 0.5, 0.01});
  RoundTrip(OutputsEvent{Outputs()});

  TimingEvent timing;
  timing.workload = "timed";
  timing.result.candidate.n = 20;
  timing.result.candidate.median_ms = 0.8;
  timing.result.baseline.median_ms = 0.75;
  timing.result.speedup = 0.9375;
  timing.result.stop_reason = "converged";
  timing.result.candidate_ms = {0.8, 0.81};
  timing.result.clocks = json::array({{{"t", 0.1}, {"sm_mhz", 1980}}});
  timing.result.checked_samples = {{3, 99}};
  timing.checks = {{3, 99, Outputs()}, {19, 100, Outputs()}};
  timing.device = Device();
  timing.nvml_unavailable = "libnvidia-ml.so.1 not loadable";
  timing.result.counters.collected = true;
  timing.result.counters.chip = "GH100";
  timing.result.counters.needed = 20;
  timing.result.counters.passes = 8;
  timing.result.counters.rate = 1.0 / 3;
  timing.result.pairs = 61;
  timing.result.counters.configs = {{"sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32.sum"},
                                    {"sm__inst_executed_pipe_tma.sum"}};
  timing.result.counters.samples = {
      {5, 4, 1234, 0, 80, 95, {{"sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32.sum", 6.01295e11}}},
      {40, 38, 99, 1, 75.5, 88.25, {{"sm__inst_executed_pipe_tma.sum", 516096}}}};
  timing.result.sketches.projections = 2;
  timing.result.sketches.tensors = {"C", "lse"};
  TensorSketch c_sketch{{1.5, -2.25}, 10, 20, 0, 0, 0};
  TensorSketch lse_sketch{{1e30, -1e-30}, 4, 5, 3, 0.5, 0.25};
  timing.result.sketches.samples = {{0, false, 7, {c_sketch, lse_sketch}},
                                    {5, true, 1234, {lse_sketch, c_sketch}}};
  timing.result.jitter_us_max = 200;
  timing.result.jitter_us_mean = 99.5;
  timing.result.counted_ms = {0.7, 0.72};
  timing.result.gap_pad_us = 1900;
  timing.result.gap_pad_seconds = 0.23;
  timing.result.timed_idle_us_mean = 3.5;
  timing.result.counted_idle_us_mean = 950;
  timing.result.gap_pad_exceeded = 1;
  timing.result.counted_end_seconds = 0.125;
  timing.result.counted_prepare_seconds = 0.0625;
  timing.setup_split = {0.5, 0.25, 0.125, 0.375};
  timing.setup_split.preparing_thread_seconds = 1.5;
  timing.setup_split.counters_configure_availability_seconds = 0.0625;
  timing.baseline_choice.selection = BaselineSelection::kFastest;
  timing.baseline_choice.measured = true;
  timing.baseline_choice.chosen = 1;
  timing.baseline_choice.first_ms = 0.78;
  timing.baseline_choice.chosen_ms = 0.75;
  timing.baseline_choice.candidates = {
      {0, {{"algorithm", "heuristic #0"}}, 0.78, 15, true, ""},
      {1, {{"algorithm", "heuristic #1"}}, 0.75, 15, true, ""},
      {2, {{"algorithm", "heuristic #2"}}, 0, 0, false, "differs"}};
  TimingEvent t = RoundTrip(timing);
  CHECK(t.baseline_choice.chosen == 1);
  REQUIRE(t.baseline_choice.candidates.size() == 3);
  CHECK(t.baseline_choice.candidates[2].note == "differs");
  CHECK_FALSE(t.baseline_choice.candidates[2].eligible);
  CHECK(t.baseline_choice.chosen_ms == 0.75);
  CHECK(t.result.candidate.n == 20);
  CHECK(t.result.counters.samples.at(1).position == 40);
  CHECK(t.result.counters.samples.at(1).after_sample == 38);
  CHECK(t.result.counters.samples.at(0).metrics.at(
            "sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32.sum") == 6.01295e11);
  CHECK(t.result.counters.configs.at(1).at(0) == "sm__inst_executed_pipe_tma.sum");
  CHECK(t.result.counters.passes == 8);
  CHECK(t.result.sketches.samples.at(1).counted);
  CHECK(t.result.sketches.samples.at(1).tensors.at(0).projections.at(0) == 1e30);
  CHECK(t.result.sketches.samples.at(1).tensors.at(0).nonfinite == 3);
  CHECK(t.result.sketches.samples.at(0).tensors.at(1).tolerance_square_sum == 0.25);
  CHECK(t.result.jitter_us_mean == 99.5);
  CHECK(t.result.counters.samples.at(1).idle_us == 88.25);
  CHECK(t.result.gap_pad_us == 1900);
  CHECK(t.result.gap_pad_seconds == 0.23);
  CHECK(t.result.timed_idle_us_mean == 3.5);
  CHECK(t.result.counted_idle_us_mean == 950);
  CHECK(t.result.gap_pad_exceeded == 1);
  CHECK(t.result.counters.needed == 20);
  CHECK(t.result.pairs == 61);
  CHECK(t.result.counted_end_seconds == 0.125);
  CHECK(t.result.counted_prepare_seconds == 0.0625);
  CHECK(t.setup_split.prepare_wait_seconds == 0.5);
  CHECK(t.setup_split.module_seconds == 0.25);
  CHECK(t.setup_split.baseline_choice_seconds == 0.125);
  CHECK(t.setup_split.counters_seconds == 0.375);
  CHECK(t.setup_split.preparing_thread_seconds == 1.5);
  CHECK(t.setup_split.counters_configure_availability_seconds == 0.0625);
  TimingEvent uncounted;
  uncounted.result.counters.not_collected_reason = "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES";
  CHECK_FALSE(RoundTrip(uncounted).result.counters.collected);
  ReferenceSketchesEvent reference_sketches{"timed", timing.result.sketches, 0.25};
  CHECK(RoundTrip(reference_sketches).sketches.samples.at(0).tensors.at(0).projections.at(1) ==
        -2.25);
  CHECK(ToJson(reference_sketches)["event"] == "reference_sketches");
  CHECK(t.checks.at(1).seed == 100);
  CHECK(ToJson(timing)["result"]["candidate"]["median_ms"] == 0.8);

  InstrumentEvent instrument;
  instrument.kernel = "gemm";
  instrument.cubin_crc = 0xfedcba9876543210ull;
  instrument.records = {{"gemm", 0x470, 512, 4096, 512, 0}, {"gemm", 0x290, 8, 8, 0, 8}};
  instrument.other_module_records = {{"ptxbench_generate", 12}};
  InstrumentEvent host = RoundTrip(instrument);  // Host inputs: no outputs, no hashes.
  CHECK_FALSE(host.outputs.has_value());
  CHECK(host.records.at(1).tma_warp_inst == 8);
  instrument.outputs = Outputs();
  instrument.input_hash_before = 1;
  instrument.input_hash_after = 1ull << 63;
  CHECK(RoundTrip(instrument).input_hash_after == (1ull << 63));

  SassFamilyMap sass;
  sass.available = true;
  sass.tool = "/usr/local/cuda/bin/nvdisasm";
  sass.line_method = SiteEvidence::kPtxLine;
  sass.functions["gemm"].instructions = 64;
  sass.functions["gemm"].sites["wgmma"].push_back(
      {0x470, "HGMMA.64x256x16.F32.BF16 R24, gdesc[UR4], R24", SiteEvidence::kSassOpcode, 120,
       "submission.cu:40"});
  SassMapEvent map = RoundTrip(SassMapEvent{sass});
  CHECK(map.sass.functions.at("gemm").sites.at("wgmma").at(0).ptx_line == 120);
  CHECK(ToJson(SassMapEvent{sass})["sass"]["functions"]["gemm"]["sites"]["wgmma"][0]["by"] ==
        "sass_opcode");
  CHECK(RoundTrip(SassMapEvent{UnavailableSassMap("nvdisasm not found")}).sass.reason ==
        "nvdisasm not found");

  CompileEvent compiled;
  compiled.outcome = CompileOutcome::kCompiled;
  compiled.report = json{{"ok", true}};
  compiled.ptx_families = {{"wgmma", 4}};
  compiled.compiled = CompiledModule{{"/w/module.cubin", "/w/module.ptx"},
                                     4096,
                                     {"gemm"},
                                     {{"gemm", {56, 64, 1}, {384, 1, 1}, 197696}},
                                     {"c0ffee", "beef", "13.0.48", "ptxas 13.0.48"}};
  const CompileEvent back = RoundTrip(compiled);
  CHECK(back.compiled->launch_kernels == std::vector<std::string>{"gemm"});
  REQUIRE(back.compiled->timed_launches.size() == 1);
  CHECK(back.compiled->timed_launches[0].grid == std::vector<uint32_t>{56, 64, 1});
  CHECK(back.compiled->timed_launches[0].dynamic_shared_bytes == 197696);
  CHECK(back.compiled->identity.cubin_sha256 == "c0ffee");
  CHECK(back.compiled->identity.ptxas_version == "ptxas 13.0.48");
  // The toolchain and hashes are required: a compile event without them is refused by name.
  json no_identity = ToJson(compiled);
  no_identity["compiled"].erase("identity");
  CHECK(!FromJson<CompileEvent>(no_identity).ok());
  CompileEvent invalid;
  invalid.outcome = CompileOutcome::kPlanInvalid;
  invalid.plan_error = "launches[0].grid: empty";
  CHECK(RoundTrip(invalid).plan_error == "launches[0].grid: empty");

  RoundTrip(HealthEvent{Device(), 0.4});
  RoundTrip(FaultEvent{FaultPhase::kInstrumentedRun, "cudaErrorIllegalAddress", "at x: ..."});
  CHECK(ToJson(FaultEvent{FaultPhase::kSavingOutputs, "", ""})["during"] == "saving outputs");
  RoundTrip(PlanInvalidEvent{"grid too large"});
  RoundTrip(ErrorEvent{ErrorKind::kProfilerUnavailable, "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES",
                       "UNAVAILABLE"});
}

TEST_CASE("a missing key names the message and the key", "[protocol]") {
  json trial = ToJson(TrialEvent{"small", 1, 2, 2, Outputs(), 0.5, 0.01});
  trial.erase("input_hash_after");
  std::string e = ErrorOf(FromJson<TrialEvent>(trial).status());
  CHECK(e == "trial event: missing key 'input_hash_after'");
  trial = ToJson(TrialEvent{"small", 1, 2, 2, Outputs(), 0.5, 0.01});
  trial["outputs"][1].erase("bytes");
  CHECK(ErrorOf(FromJson<TrialEvent>(trial).status()) ==
        "trial event: outputs[1]: missing key 'bytes'");
  json request = ToJson(CandidateRequest{});
  request["submission"]["task"].erase("version_hash");
  CHECK(ErrorOf(FromJson<CandidateRequest>(request).status()) ==
        "candidate request: submission.task: missing key 'version_hash'");
}

TEST_CASE("a mistyped value names the key, the expected and the actual type", "[protocol]") {
  json trial = ToJson(TrialEvent{"small", 1, 2, 2, Outputs(), 0.5, 0.01});
  trial["outputs"][0]["bytes"] = "117440512";
  CHECK(ErrorOf(FromJson<TrialEvent>(trial).status()) ==
        "trial event: outputs[0].bytes: expected an unsigned integer, got string");
  trial["outputs"][0]["bytes"] = -1;
  CHECK(ErrorOf(FromJson<TrialEvent>(trial).status()).find("outputs[0].bytes") !=
        std::string::npos);
  json ready = ToJson(ReadyEvent{Device(), false});
  ready["device"]["sm_count"] = 1e12;
  CHECK(ErrorOf(FromJson<ReadyEvent>(ready).status()) ==
        "ready event: device.sm_count: expected an integer, got number");
  ready = ToJson(ReadyEvent{Device(), false});
  ready["device"]["sm_count"] = 1ull << 40;  // An integer, but not an int.
  CHECK(ErrorOf(FromJson<ReadyEvent>(ready).status()).find("out of range") != std::string::npos);
  ready = ToJson(ReadyEvent{Device(), false});
  ready["reused"] = 1;
  CHECK(ErrorOf(FromJson<ReadyEvent>(ready).status()) ==
        "ready event: reused: expected true or false, got number");
  json begin = ToJson(BeginCommand{5});
  begin["hash_key"] = "12x";
  CHECK(ErrorOf(FromJson<BeginCommand>(begin).status()).find("begin command: hash_key: ") == 0);
  begin["hash_key"] = "18446744073709551616";  // 2^64
  CHECK_FALSE(FromJson<BeginCommand>(begin).ok());
  json compare = ToJson(CompareEvent{"timed", 5, {{"C", CompareReport{}}}, std::nullopt, 0});
  compare["tensors"]["C"].erase("pass");
  CHECK(ErrorOf(FromJson<CompareEvent>(compare).status()).find("compare event: tensors.C: ") == 0);
}

TEST_CASE("enum names outside their table are errors listing the known ones", "[protocol]") {
  json trial = ToJson(TrialCommand{"small", 1, "/w/t", OutputTransfer::kIpc});
  trial["transfer"] = "shared_memory";
  CHECK(ErrorOf(FromJson<TrialCommand>(trial).status()) ==
        "trial command: transfer: 'shared_memory' is not one of ipc, file");
  json fault = ToJson(FaultEvent{});
  fault["during"] = 3;
  CHECK(ErrorOf(FromJson<FaultEvent>(fault).status()) ==
        "fault event: during: expected a name, got number");
  CHECK(EnumFromName<EvaluatorMode>("sassmap") == EvaluatorMode::kSassMap);
  CHECK(NameOf(EvaluatorMode::kInstrument) == "instrument");
  CHECK_FALSE(EnumFromName<EvaluatorMode>("profile").has_value());
}

TEST_CASE("extra keys and the wrong message name are errors", "[protocol]") {
  json trial = ToJson(TrialCommand{});
  trial["sead"] = "1";  // A typo of a foreign writer.
  CHECK(ErrorOf(FromJson<TrialCommand>(trial).status()) == "trial command: unexpected key 'sead'");
  CHECK(ErrorOf(FromJson<TrialEvent>(ToJson(FaultEvent{})).status()) ==
        "trial event: its 'event' is \"fault\"");
  CHECK(ErrorOf(FromJson<QuitCommand>(json{{"event", "quit"}}).status()) ==
        "quit command: its 'cmd' is missing");
  CHECK(ErrorOf(FromJson<QuitCommand>(json::array()).status()) ==
        "quit command: expected an object, got array");
}

TEST_CASE("a process decodes only the commands it accepts", "[protocol]") {
  using ReferenceCommands = absl::StatusOr<std::variant<QuitCommand, ResetCommand, BeginCommand,
                                                        ComputeReferenceCommand, CompareCommand>>;
  ReferenceCommands begin =
      FromJsonOneOf<QuitCommand, ResetCommand, BeginCommand, ComputeReferenceCommand,
                    CompareCommand>(ToJson(BeginCommand{8}));
  REQUIRE(begin.ok());
  REQUIRE(std::holds_alternative<BeginCommand>(*begin));
  CHECK(std::get<BeginCommand>(*begin).hash_key == 8);
  ReferenceCommands trial =
      FromJsonOneOf<QuitCommand, ResetCommand, BeginCommand, ComputeReferenceCommand,
                    CompareCommand>(ToJson(TrialCommand{}));
  CHECK(ErrorOf(trial.status()) ==
        "command: 'trial' is not accepted here (expected quit, reset, begin, reference, compare)");
  json bad_begin = ToJson(BeginCommand{8});
  bad_begin.erase("hash_key");
  CHECK(ErrorOf(FromJsonOneOf<QuitCommand, BeginCommand>(bad_begin).status()) ==
        "begin command: missing key 'hash_key'");
  CHECK_FALSE(FromJsonOneOf<QuitCommand>(json{{"event", "quit"}}).ok());
}

TEST_CASE("kinds of lines, and non-finite doubles", "[protocol]") {
  CHECK(*EventKindOf(ToJson(ErrorEvent{})) == EventKind::kError);
  CHECK(*CommandKindOf(ToJson(GoCommand{})) == CommandKind::kGo);
  CHECK(ErrorOf(EventKindOf(json{{"event", "telemetry"}}).status()).find("unknown event") == 0);
  CHECK(ErrorOf(CommandKindOf(json{{"event", "ready"}}).status()).find("not a protocol command") ==
        0);
  // JSON has no Inf or NaN: nlohmann writes null, read back as NaN.
  ReferenceEvent reference;
  reference.seconds = std::numeric_limits<double>::infinity();
  auto back = FromJson<ReferenceEvent>(json::parse(ToJson(reference).dump()));
  REQUIRE(back.ok());
  CHECK(std::isnan(back->seconds));
}

}  // namespace
}  // namespace ptxbench::gpu
