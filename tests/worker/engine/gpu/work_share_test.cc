// Work-share arithmetic (worker/engine/gpu/work_share.h) on counter values shaped like the H200
// probe's (docs/results/2026-12-01-h200-counter-probe.txt), and the counter names against
// CUPTI's own metric catalogue for both chips (the profiler host API needs no GPU).
#include "worker/engine/gpu/work_share.h"

#include <catch2/catch.hpp>

#include "worker/engine/gpu/cupti_counters.h"

namespace ptxbench::gpu {
namespace {

constexpr double kGemmFlops = 2.0 * 8192 * 7168 * 5120;  // gemm_n7168_k5120's timed workload.
constexpr double kGemmMinBytes = 2.0 * (8192.0 * 5120 + 7168.0 * 5120 + 8192.0 * 7168);

// One sample per metric group, every metric zero unless set.
std::vector<std::map<std::string, double>> Samples(const WorkCounterSet& set,
                                                   const std::map<std::string, double>& values) {
  std::map<std::string, double> sample;
  for (const std::string& m : set.AllMetrics()) sample[m] = 0;
  for (const auto& [m, v] : values) sample[m] = v;
  return {sample};
}

TEST_CASE("work share: an honest wgmma GEMM does all of the task's FLOPs on the target",
          "[work_share]") {
  auto set = WorkCountersFor("sm_90a", DType::kBF16);
  REQUIRE(set.ok());
  // The cuBLASLt figures of the probe: HGMMA FLOPs = 2MNK exactly, TMA bytes 7.05e9.
  auto share =
      ComputeWorkShare(*set,
                       Samples(*set, {{set->target_matrix_flops, kGemmFlops},
                                      {"sm__ops_path_tensor_src_bf16_dst_fp32.sum", kGemmFlops},
                                      {"sm__thread_inst_executed_pipe_fma_pred_on.sum", 2.0e7},
                                      {set->tensor_warp_insts, 9.17504e6},
                                      {set->target_matrix_warp_insts, 9.17504e6},
                                      {set->bulk_copy_insts, 516096},
                                      {set->bulk_copy_load_bytes, 7.04643e9},
                                      {set->l2_read_bytes, 7.10e9}}),
                       kGemmFlops, kGemmMinBytes);
  REQUIRE(share.ok());
  CHECK(share->matrix.share_of_task == Approx(1.0));
  CHECK(share->matrix.share_of_executed == Approx(kGemmFlops / (kGemmFlops + 4.0e7)));
  CHECK(share->matrix.share_of_executed > 0.999);
  CHECK(share->bulk_copy.share_of_l2_reads == Approx(7.04643e9 / 7.10e9));
  CHECK(share->matrix.other_tensor_warp_insts == 0);
}

TEST_CASE("work share: a token wgmma next to an mma.sync GEMM gets almost nothing",
          "[work_share]") {
  auto set = WorkCountersFor("sm_90a", DType::kBF16);
  REQUIRE(set.ok());
  const double token = 2.0 * 64 * 256 * 16;  // One wgmma in block 0.
  auto share = ComputeWorkShare(
      *set,
      Samples(*set, {{set->target_matrix_flops, token},
                     {"sm__ops_path_tensor_src_bf16_dst_fp32.sum", kGemmFlops + token},
                     {set->tensor_warp_insts, 9e6},
                     {set->target_matrix_warp_insts, 4},
                     {set->l2_read_bytes, 1e9}}),
      kGemmFlops, kGemmMinBytes);
  REQUIRE(share.ok());
  CHECK(share->matrix.share_of_task < 1e-6);
  CHECK(share->matrix.share_of_executed < 1e-6);
  CHECK(share->matrix.other_tensor_warp_insts == Approx(9e6 - 4));
}

TEST_CASE("work share: full-size wgmma on unused data beside the real work halves the share",
          "[work_share]") {
  auto set = WorkCountersFor("sm_90a", DType::kBF16);
  REQUIRE(set.ok());
  SECTION("real work by mma.sync (bf16 tensor path)") {
    auto share = ComputeWorkShare(
        *set,
        Samples(*set, {{set->target_matrix_flops, kGemmFlops},
                       {"sm__ops_path_tensor_src_bf16_dst_fp32.sum", 2 * kGemmFlops}}),
        kGemmFlops, kGemmMinBytes);
    REQUIRE(share.ok());
    CHECK(share->matrix.share_of_task == Approx(1.0));
    CHECK(share->matrix.share_of_executed == Approx(0.5));
  }
  SECTION("real work by fp16 mma.sync (bf16 converted exactly)") {
    auto share = ComputeWorkShare(
        *set,
        Samples(*set, {{set->target_matrix_flops, kGemmFlops},
                       {"sm__ops_path_tensor_src_bf16_dst_fp32.sum", kGemmFlops},
                       {"sm__ops_path_tensor_op_hmma_src_fp16_dst_fp32.sum", kGemmFlops}}),
        kGemmFlops, kGemmMinBytes);
    REQUIRE(share.ok());
    CHECK(share->matrix.share_of_executed == Approx(0.5));
  }
  SECTION("real work by FFMA (one thread instruction = 2 FLOPs)") {
    auto share = ComputeWorkShare(
        *set,
        Samples(*set, {{set->target_matrix_flops, kGemmFlops},
                       {"sm__ops_path_tensor_src_bf16_dst_fp32.sum", kGemmFlops},
                       {"sm__thread_inst_executed_pipe_fma_pred_on.sum", kGemmFlops / 2}}),
        kGemmFlops, kGemmMinBytes);
    REQUIRE(share.ok());
    CHECK(share->matrix.share_of_executed == Approx(0.5));
  }
  SECTION("real work by fp64 tensor cores (DMMA)") {
    auto share =
        ComputeWorkShare(*set,
                         Samples(*set, {{set->target_matrix_flops, kGemmFlops},
                                        {"sm__ops_path_tensor_src_bf16_dst_fp32.sum", kGemmFlops},
                                        {"sm__ops_path_tensor_src_fp64.sum", kGemmFlops}}),
                         kGemmFlops, kGemmMinBytes);
    REQUIRE(share.ok());
    CHECK(share->matrix.share_of_executed == Approx(0.5));
  }
}

TEST_CASE("work share: metrics spread over samples are averaged per metric", "[work_share]") {
  auto set = WorkCountersFor("sm_90a", DType::kBF16);
  REQUIRE(set.ok());
  auto samples = Samples(*set, {});
  // A second sample that collected only the target FLOPs, with a different value: the kernel
  // did different work on different samples.
  samples[0][set->target_matrix_flops] = kGemmFlops;
  samples.push_back({{set->target_matrix_flops, kGemmFlops / 2}});
  auto share = ComputeWorkShare(*set, samples, kGemmFlops, kGemmMinBytes);
  REQUIRE(share.ok());
  CHECK(share->matrix.target_flops == Approx(0.75 * kGemmFlops));
  CHECK(share->target_flops_spread == Approx(1.0));
  CHECK(share->counted_samples == 2);
}

TEST_CASE("work share: a metric no sample collected is an error naming it", "[work_share]") {
  auto set = WorkCountersFor("sm_90a", DType::kBF16);
  REQUIRE(set.ok());
  auto samples = Samples(*set, {});
  samples[0].erase(set->bulk_copy_load_bytes);
  auto share = ComputeWorkShare(*set, samples, kGemmFlops, kGemmMinBytes);
  REQUIRE_FALSE(share.ok());
  CHECK(std::string(share.status().message()).find(set->bulk_copy_load_bytes) != std::string::npos);
}

TEST_CASE("work share: FLOPs per warp execution from the SASS shape", "[work_share]") {
  CHECK(WarpInstructionMatrixFlops("HGMMA.64x256x16.F32.BF16 R24, gdesc[UR4], R24") ==
        2.0 * 64 * 256 * 16 / 4);
  CHECK(WarpInstructionMatrixFlops("@P0 HGMMA.64x8x16.F32.BF16 R0, gdesc[UR8], RZ, !UPT") ==
        2.0 * 64 * 8 * 16 / 4);
  CHECK(WarpInstructionMatrixFlops("QGMMA.64x128x32.F32.E4M3.E4M3 R0, gdesc[UR4], R0") ==
        2.0 * 64 * 128 * 32 / 4);
  CHECK_FALSE(WarpInstructionMatrixFlops("HMMA.16816.F32.BF16 R0, R4, R8, R0").has_value());
  CHECK_FALSE(WarpInstructionMatrixFlops("UTCHMMA gdesc[UR4], gdesc[UR6], tmem[UR8]").has_value());
  CHECK_FALSE(WarpInstructionMatrixFlops("HGMMA.64xQx16.F32 R0").has_value());
  CHECK_FALSE(WarpInstructionMatrixFlops("HGMMA").has_value());
}

TEST_CASE("work share: the profiled path must equal the timed path", "[work_share]") {
  auto set = WorkCountersFor("sm_90a", DType::kBF16);
  REQUIRE(set.ok());
  auto samples = Samples(*set, {{set->target_matrix_flops, kGemmFlops},
                                {set->target_matrix_warp_insts, 9.17504e6},
                                {set->bulk_copy_insts, 516096}});
  ProfiledWork same{kGemmFlops, 9.17504e6, 516096, true, 0, kGemmFlops};
  PathAgreement a = CompareProfiledWithTimed(same, *set, samples);
  CHECK(a.checked);
  CHECK(a.agrees);
  // A kernel that takes its wgmma path only when profiled: the timed path ran no wgmma.
  auto timed_other = Samples(*set, {{set->bulk_copy_insts, 516096}});
  PathAgreement b = CompareProfiledWithTimed(same, *set, timed_other);
  CHECK(b.checked);
  CHECK_FALSE(b.agrees);
  CHECK(b.target_insts_difference == Approx(1.0));
  CHECK_FALSE(b.reason.empty());
  // Missing counters: not checked (the verdict must then say the cross-check was not made).
  PathAgreement c = CompareProfiledWithTimed(same, *set, {});
  CHECK_FALSE(c.checked);
  CHECK_FALSE(c.agrees);
}

TEST_CASE("work share: the TMA pipe's prefetches and commits count on the timed side only",
          "[work_share]") {
  auto set = WorkCountersFor("sm_90a", DType::kBF16);
  REQUIRE(set.ok());
  // The H200, 2026-12-02, GEMM solution: 301,056 copies per the per-PC metric, 308,224 TMA-pipe
  // instructions per the hardware counter; 7,168 = 1,792 CTAs x 4 prefetches and commits.
  auto timed = Samples(*set, {{set->target_matrix_flops, kGemmFlops},
                              {set->target_matrix_warp_insts, 4.58752e6},
                              {set->bulk_copy_insts, 308224}});
  ProfiledWork honest{kGemmFlops, 4.58752e6, 301056, true, 7168, kGemmFlops};
  PathAgreement a = CompareProfiledWithTimed(honest, *set, timed);
  CHECK(a.agrees);
  CHECK(a.bulk_copy_insts_difference == 0);
  // Without the instrumented run's other TMA-pipe instructions the same run disagreed (2.3 %).
  ProfiledWork copies_only{kGemmFlops, 4.58752e6, 301056, true, 0, kGemmFlops};
  PathAgreement b = CompareProfiledWithTimed(copies_only, *set, timed);
  CHECK_FALSE(b.agrees);
  CHECK(b.bulk_copy_insts_difference == Approx(7168.0 / 308224));
  // A timed path that copies less than the profiled one is never excused by the allowance: the
  // kernel that uses TMA only when profiled (plain loads when timed) keeps its prefetches.
  auto timed_fewer_copies = Samples(*set, {{set->target_matrix_flops, kGemmFlops},
                                           {set->target_matrix_warp_insts, 4.58752e6},
                                           {set->bulk_copy_insts, 7168}});
  PathAgreement c = CompareProfiledWithTimed(honest, *set, timed_fewer_copies);
  CHECK(c.checked);
  CHECK_FALSE(c.agrees);
  CHECK(c.reason.find("7168 other TMA-pipe instructions") != std::string::npos);
  // Nor one that runs more TMA-pipe instructions than the profiled copies and the rest together.
  auto timed_more = Samples(*set, {{set->target_matrix_flops, kGemmFlops},
                                   {set->target_matrix_warp_insts, 4.58752e6},
                                   {set->bulk_copy_insts, 320000}});
  CHECK_FALSE(CompareProfiledWithTimed(honest, *set, timed_more).agrees);
}

TEST_CASE("work share: a timed path without counters is not compared", "[work_share]") {
  auto set = WorkCountersFor("sm_90a", DType::kBF16);
  REQUIRE(set.ok());
  ProfiledWork same{kGemmFlops, 9.17504e6, 516096, true, 0, kGemmFlops};
  PathAgreement c = CompareProfiledWithTimed(same, *set, {});
  CHECK_FALSE(c.checked);
  CHECK_FALSE(c.agrees);
}

ArchSpec Hopper(double of_task = 0.9, double of_executed = 0.9) {
  ArchSpec arch;
  arch.arch = "sm_90a";
  arch.target_families = {"wgmma", "tma"};
  arch.min_work_share = MinWorkShare{of_task, of_executed};
  return arch;
}

PathAgreement Agreeing() {
  PathAgreement a;
  a.checked = true;
  a.agrees = true;
  return a;
}

TEST_CASE("judging: the honest GEMM meets both thresholds", "[work_share][judge]") {
  auto set = WorkCountersFor("sm_90a", DType::kBF16);
  REQUIRE(set.ok());
  auto share =
      ComputeWorkShare(*set,
                       Samples(*set, {{set->target_matrix_flops, kGemmFlops},
                                      {"sm__ops_path_tensor_src_bf16_dst_fp32.sum", kGemmFlops},
                                      {"sm__thread_inst_executed_pipe_fma_pred_on.sum", 2.0e7}}),
                       kGemmFlops, kGemmMinBytes);
  REQUIRE(share.ok());
  TargetWorkJudgement j = JudgeTargetWork(Hopper(), *share, "", Agreeing());
  CHECK(j.verdict_class == VerdictClass::kPass);
  CHECK(j.work.strong_check == StrongCheck::kMade);
  CHECK(j.work.share_of_task == Approx(1.0));
  CHECK(j.work.min_share_of_task == 0.9);
  CHECK(j.feedback.empty());
  CHECK(j.work.figures["work_share"]["matrix"]["share_of_executed"].get<double>() > 0.999);
  // The passing verdict's message names the shares.
  CHECK(j.summary ==
        "wgmma did 100.0 % of the task's FLOPs and 100.0 % of the executed "
        "multiply-add work");
  CHECK(j.work.other_work_over_task == Approx(4.0e7 / kGemmFlops));
  CHECK(j.work.max_other_work_over_task == Approx(0.1 / 0.9));
}

TEST_CASE("judging: a token wgmma is target_work_insufficient with figures and units",
          "[work_share][judge]") {
  auto set = WorkCountersFor("sm_90a", DType::kBF16);
  REQUIRE(set.ok());
  const double token = 2.0 * 64 * 64 * 16;
  auto share = ComputeWorkShare(
      *set,
      Samples(*set, {{set->target_matrix_flops, token},
                     {"sm__ops_path_tensor_src_bf16_dst_fp32.sum", kGemmFlops + token},
                     {"sm__thread_inst_executed_pipe_fma_pred_on.sum", 1.0e8}}),
      kGemmFlops, kGemmMinBytes);
  REQUIRE(share.ok());
  // The legacy bf16 tensor FLOPs are the largest other unit, then the FMA pipe.
  REQUIRE(share->matrix.other_units.size() == 2);
  CHECK(share->matrix.other_units[0].first == "bf16_dst_fp32 tensor (not the target)");
  CHECK(share->matrix.other_units[0].second == Approx(kGemmFlops));
  CHECK(share->matrix.other_units[1].second == Approx(2.0e8));
  TargetWorkJudgement j = JudgeTargetWork(Hopper(), *share, "", Agreeing());
  CHECK(j.verdict_class == VerdictClass::kTargetWorkInsufficient);
  CHECK(j.work.strong_check == StrongCheck::kMade);
  INFO(j.feedback);
  CHECK(j.feedback.find("wgmma did 2.2e-05 % of the task's FLOPs (threshold 90.0 %)") == 0);
  CHECK(j.feedback.find("100.0 % of the executed multiply-add work ran on other units") !=
        std::string::npos);
  CHECK(j.feedback.find("bf16_dst_fp32 tensor (not the target)") != std::string::npos);
  CHECK(j.work.reason == j.feedback);
}

TEST_CASE("judging: wgmma padded onto unused data cannot dilute a GEMM done elsewhere",
          "[work_share][judge]") {
  // The padding attack on share_of_executed alone: C from mma.sync (1x the task's FLOPs on the
  // legacy bf16 path) beside 10x the task's FLOPs of wgmma into a scratch sink. share_of_task
  // 10 and share_of_executed 0.909 both clear 0.9; the work done elsewhere is still the whole
  // task (decoy padded_unused_wgmma).
  auto set = WorkCountersFor("sm_90a", DType::kBF16);
  REQUIRE(set.ok());
  for (const double padding : {10.0, 100.0}) {
    auto share = ComputeWorkShare(
        *set,
        Samples(*set, {{set->target_matrix_flops, padding * kGemmFlops},
                       {"sm__ops_path_tensor_src_bf16_dst_fp32.sum", (padding + 1) * kGemmFlops}}),
        kGemmFlops, kGemmMinBytes);
    REQUIRE(share.ok());
    CHECK(share->matrix.share_of_task == Approx(padding));
    CHECK(share->matrix.share_of_executed > 0.9);
    CHECK(share->matrix.other_work_over_task == Approx(1.0));
    TargetWorkJudgement j = JudgeTargetWork(Hopper(), *share, "", Agreeing());
    CHECK(j.verdict_class == VerdictClass::kTargetWorkInsufficient);
    CHECK(j.work.other_work_over_task == Approx(1.0));
    INFO(j.feedback);
    CHECK(j.feedback.find("the work done on other units is 100.0 % of the task's FLOPs "
                          "(threshold: at most 11.1 %)") != std::string::npos);
    CHECK(j.summary.empty());
  }
  // The honest solution with the most work elsewhere on the H200 (the GQA decode, run 9:
  // share of task 1.008, of executed 0.962, elsewhere 0.040 of the task) still passes.
  auto honest = ComputeWorkShare(
      *set,
      Samples(*set, {{set->target_matrix_flops, 1.008 * kGemmFlops},
                     {"sm__ops_path_tensor_src_bf16_dst_fp32.sum", 1.008 * kGemmFlops},
                     {"sm__thread_inst_executed_pipe_fma_pred_on.sum", 0.02 * kGemmFlops}}),
      kGemmFlops, kGemmMinBytes);
  REQUIRE(honest.ok());
  CHECK(honest->matrix.other_work_over_task == Approx(0.04));
  CHECK(JudgeTargetWork(Hopper(), *honest, "", Agreeing()).verdict_class == VerdictClass::kPass);
}

TEST_CASE("judging: full-size wgmma on unused data fails the executed share only",
          "[work_share][judge]") {
  auto set = WorkCountersFor("sm_90a", DType::kBF16);
  REQUIRE(set.ok());
  auto share = ComputeWorkShare(
      *set,
      Samples(*set, {{set->target_matrix_flops, kGemmFlops},
                     {"sm__ops_path_tensor_src_bf16_dst_fp32.sum", 2 * kGemmFlops}}),
      kGemmFlops, kGemmMinBytes);
  REQUIRE(share.ok());
  TargetWorkJudgement j = JudgeTargetWork(Hopper(), *share, "", Agreeing());
  CHECK(j.verdict_class == VerdictClass::kTargetWorkInsufficient);
  CHECK(j.work.share_of_task == Approx(1.0));
  CHECK(j.work.share_of_executed == Approx(0.5));
  CHECK(j.feedback.find("50.0 % of the executed multiply-add work ran on other units") !=
        std::string::npos);
  // The thresholds are the task's: a task that asked for half would accept it.
  CHECK(JudgeTargetWork(Hopper(0.9, 0.5), *share, "", Agreeing()).verdict_class ==
        VerdictClass::kPass);
}

TEST_CASE("judging: a path that differs when profiled is named for it, before the share",
          "[work_share][judge]") {
  auto set = WorkCountersFor("sm_90a", DType::kBF16);
  REQUIRE(set.ok());
  // The profiling detector: no HGMMA on the timed path, the reference kernel when profiled.
  auto samples = Samples(
      *set, {{"sm__ops_path_tensor_src_bf16_dst_fp32.sum", kGemmFlops}, {set->bulk_copy_insts, 0}});
  auto share = ComputeWorkShare(*set, samples, kGemmFlops, kGemmMinBytes);
  REQUIRE(share.ok());
  ProfiledWork profiled{kGemmFlops, 9.17504e6, 516096, true, 0, kGemmFlops};
  PathAgreement path = CompareProfiledWithTimed(profiled, *set, samples);
  TargetWorkJudgement j = JudgeTargetWork(Hopper(), *share, "", path);
  CHECK(j.verdict_class == VerdictClass::kProfiledPathDiffers);
  CHECK(j.work.path_checked);
  CHECK_FALSE(j.work.path_agrees);
  CHECK(j.feedback.find("different work when profiled than when timed") != std::string::npos);
  CHECK(j.feedback.find("target instructions by 100.0 %") != std::string::npos);
}

TEST_CASE("judging: missing evidence is 'not made', never a silent pass", "[work_share][judge]") {
  SECTION("no counters") {
    PathAgreement path;
    path.reason = "the timed path's counters were not collected";
    TargetWorkJudgement j = JudgeTargetWork(Hopper(), std::nullopt,
                                            "CUPTI profiler refused: insufficient privilege", path);
    CHECK(j.verdict_class == VerdictClass::kPass);        // Not proven insufficient either...
    CHECK(j.work.strong_check == StrongCheck::kNotMade);  // ...but TIC (strong) stays false.
    CHECK(j.work.reason.find("insufficient privilege") != std::string::npos);
    CHECK(j.feedback.find("was NOT made") != std::string::npos);
  }
  SECTION("counters but no profiled side") {
    auto set = WorkCountersFor("sm_90a", DType::kBF16);
    REQUIRE(set.ok());
    auto share =
        ComputeWorkShare(*set,
                         Samples(*set, {{set->target_matrix_flops, kGemmFlops},
                                        {"sm__ops_path_tensor_src_bf16_dst_fp32.sum", kGemmFlops}}),
                         kGemmFlops, kGemmMinBytes);
    REQUIRE(share.ok());
    PathAgreement path;
    path.reason = "the instrumented run's target work is not known (no SASS map)";
    TargetWorkJudgement j = JudgeTargetWork(Hopper(), *share, "", path);
    CHECK(j.work.strong_check == StrongCheck::kNotMade);
    CHECK(j.work.reason.find("no SASS map") != std::string::npos);
  }
  SECTION("an arch without a matrix family: the paper's check is the whole check") {
    ArchSpec tma_only;
    tma_only.arch = "sm_90a";
    tma_only.target_families = {"tma"};
    TargetWorkJudgement j = JudgeTargetWork(tma_only, std::nullopt, "", PathAgreement{});
    CHECK(j.verdict_class == VerdictClass::kPass);
    CHECK(j.work.strong_check == StrongCheck::kMade);
  }
}

TEST_CASE("judging: the instrumented runs' target work from per-PC counts and the SASS map",
          "[work_share][judge]") {
  SassFamilyMap map;
  map.available = true;
  SassFunctionSites& gemm = map.functions["gemm"];
  gemm.sites["wgmma"] = {{256, "HGMMA.64x256x16.F32.BF16 R24, gdesc[UR4], R24",
                          SiteEvidence::kSassOpcode, std::nullopt, std::nullopt},
                         {272, "HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], R24",
                          SiteEvidence::kSassOpcode, std::nullopt, std::nullopt}};
  InstrumentEvent run;
  run.kernel = "gemm";
  // pc 256: 1000 warp executions, all predicate-on; pc 272: predicated off (no threads on);
  // pc 300: ptxas's no-op HGMMA (no site: no work), still counted as a GMMA instruction.
  run.records = {{"gemm", 256, 1000, 32000, 1000, 0},
                 {"gemm", 272, 400, 0, 400, 0},
                 {"gemm", 300, 8, 256, 8, 0},
                 {"gemm", 512, 64, 64, 0, 64}};
  ProfiledWork w = ProfiledWorkFromRuns(map, {run}, "wgmma", DType::kBF16);
  CHECK(w.flops_known);
  CHECK(w.target_flops == Approx(1000 * 2.0 * 64 * 256 * 16 / 4));
  CHECK(w.target_warp_insts == 1408);
  CHECK(w.bulk_copy_warp_insts == 64);
  CHECK(w.tma_pipe_other_warp_insts == 0);
  // A tensor-map prefetch site: its executions are the TMA pipe's, not copies.
  gemm.sites["tma_control"] = {
      {600, "UTMAPF.L2.2D [UR10], [UR8]", SiteEvidence::kSassOpcode, std::nullopt, std::nullopt}};
  run.records.push_back({"gemm", 600, 2, 2, 0, 0});
  CHECK(ProfiledWorkFromRuns(map, {run}, "wgmma", DType::kBF16).tma_pipe_other_warp_insts == 2);
  run.records.pop_back();
  // A site without a shape (a line-view match) makes the FLOPs unknown, not zero.
  gemm.sites["wgmma"].push_back(
      {400, "UNKNOWN.GMMA R0", SiteEvidence::kSassOpcode, std::nullopt, std::nullopt});
  run.records.push_back({"gemm", 400, 4, 128, 4, 0});
  CHECK_FALSE(ProfiledWorkFromRuns(map, {run}, "wgmma", DType::kBF16).flops_known);
}

TEST_CASE("judging: only the task's operand precision earns target FLOPs on the profiled side",
          "[work_share][judge]") {
  CHECK(WarpInstructionOperandsAre("HGMMA.64x256x16.F32.BF16 R24, gdesc[UR4], R24", DType::kBF16));
  CHECK_FALSE(
      WarpInstructionOperandsAre("HGMMA.64x256x16.F32.BF16 R24, gdesc[UR4], R24", DType::kFP16));
  CHECK(WarpInstructionOperandsAre("HGMMA.64x256x16.F32 R24, gdesc[UR4], R24", DType::kFP16));
  CHECK_FALSE(WarpInstructionOperandsAre("HGMMA.64x256x16.F32 R24, gdesc[UR4], R24", DType::kBF16));
  CHECK_FALSE(
      WarpInstructionOperandsAre("HGMMA.64x128x8.F32.TF32 R0, gdesc[UR4], R0", DType::kFP16));
  CHECK(WarpInstructionOperandsAre("QGMMA.64x128x32.F32.E4M3.E4M3 R0, gdesc[UR4], R0",
                                   DType::kFP8E4M3));
  CHECK_FALSE(WarpInstructionOperandsAre("QGMMA.64x128x32.F32.E5M2.E4M3 R0, gdesc[UR4], R0",
                                         DType::kFP8E4M3));
  CHECK_FALSE(WarpInstructionOperandsAre("HGMMA.64x256x16.F32.BF16 R24", DType::kFP8E4M3));
  // GH100's fp8 FLOP counter counts QGMMA of either fp8 format; the bf16 counter only bf16.
  CHECK(WarpInstructionCountedAs("QGMMA.64x128x32.F32.E5M2.E4M3 R0, gdesc[UR4], R0",
                                 DType::kFP8E4M3));
  CHECK(WarpInstructionCountedAs("QGMMA.64x128x32.F32.E4M3.E4M3 R0, gdesc[UR4], R0",
                                 DType::kFP8E4M3));
  CHECK_FALSE(WarpInstructionCountedAs("HGMMA.64x256x16.F32 R24, gdesc[UR4], R24", DType::kBF16));

  // The fp16_operands decoy on the bf16 GEMM: its HGMMA sites do the instructions, none of the
  // bf16 FLOPs, so both sides say 0 FLOPs and the verdict is the work share's.
  SassFamilyMap map;
  map.available = true;
  map.functions["gemm"].sites["wgmma"] = {{256, "HGMMA.64x128x16.F32 R24, gdesc[UR4], R24",
                                           SiteEvidence::kSassOpcode, std::nullopt, std::nullopt}};
  InstrumentEvent run;
  run.kernel = "gemm";
  run.records = {{"gemm", 256, 1000, 32000, 1000, 0}};
  ProfiledWork fp16_on_bf16 = ProfiledWorkFromRuns(map, {run}, "wgmma", DType::kBF16);
  CHECK(fp16_on_bf16.flops_known);
  CHECK(fp16_on_bf16.target_flops == 0);
  CHECK(fp16_on_bf16.target_warp_insts == 1000);
  ProfiledWork fp16_task = ProfiledWorkFromRuns(map, {run}, "wgmma", DType::kFP16);
  CHECK(fp16_task.target_flops == Approx(1000 * 2.0 * 64 * 128 * 16 / 4));
  // tcgen05's unshaped sites keep the FLOPs unknown whatever the precision.
  map.functions["gemm"].sites["tcgen05_mma"] = {{300, "UTCHMMA gdesc[UR6], gdesc[UR10], tmem[UR8]",
                                                 SiteEvidence::kSassOpcode, std::nullopt,
                                                 std::nullopt}};
  run.records.push_back({"gemm", 300, 4, 128, 0, 0});
  CHECK_FALSE(ProfiledWorkFromRuns(map, {run}, "tcgen05_mma", DType::kBF16).flops_known);
}

// The p_e5m2 decoy of the fp8 attention task (H100, 2026-12-06): Q·Kᵀ on e4m3 QGMMA, P·V on
// QGMMA reading P as e5m2. GH100's one fp8 counter counted both products, the SASS side credited
// only the e4m3 one, and the verdict read profiled_path_differs (a 50 % FLOP difference). The
// sides now agree on what the counter counts, and the e5m2 half is other work.
TEST_CASE("judging: QGMMA on another fp8 format is counted on both sides and credited on neither",
          "[work_share][judge]") {
  SassFamilyMap map;
  map.available = true;
  map.functions["attn"].sites["wgmma"] = {
      {100, "QGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR4], R24", SiteEvidence::kSassOpcode,
       std::nullopt, std::nullopt},
      {200, "QGMMA.64x128x32.F32.E5M2.E4M3 R24, R88, gdesc[UR8], R24", SiteEvidence::kSassOpcode,
       std::nullopt, std::nullopt}};
  InstrumentEvent run;
  run.kernel = "attn";
  run.records = {{"attn", 100, 1000, 32000, 1000, 0}, {"attn", 200, 1000, 32000, 1000, 0}};
  const double per_site = 1000 * 2.0 * 64 * 128 * 32 / 4;
  ProfiledWork profiled = ProfiledWorkFromRuns(map, {run}, "wgmma", DType::kFP8E4M3);
  REQUIRE(profiled.flops_known);
  CHECK(profiled.target_flops == Approx(per_site));
  CHECK(profiled.counter_flops == Approx(2 * per_site));

  auto set = WorkCountersFor("sm_90a", DType::kFP8E4M3);
  REQUIRE(set.ok());
  // The timed counter: both products' FLOPs; the task is exactly those FLOPs.
  auto samples = Samples(*set, {{set->target_matrix_flops, 2 * per_site},
                                {set->target_matrix_warp_insts, 2000},
                                {set->bulk_copy_insts, 0}});
  PathAgreement path = CompareProfiledWithTimed(profiled, *set, samples);
  CHECK(path.agrees);
  CHECK(path.target_flops_difference == 0);
  auto share = ComputeWorkShare(*set, samples, 2 * per_site, 1);
  REQUIRE(share.ok());
  CHECK(share->matrix.share_of_task == Approx(1.0));
  const WorkShare credited = CreditTaskPrecisionOnly(*share, profiled);
  CHECK(credited.matrix.share_of_task == Approx(0.5));
  CHECK(credited.matrix.share_of_executed == Approx(0.5));
  CHECK(credited.matrix.other_work_over_task == Approx(0.5));
  REQUIRE_FALSE(credited.matrix.other_units.empty());
  CHECK(credited.matrix.other_units[0].first.find("another operand precision") !=
        std::string::npos);
  TargetWorkJudgement j = JudgeTargetWork(Hopper(), credited, "", path);
  CHECK(j.verdict_class == VerdictClass::kTargetWorkInsufficient);
  // An all-e4m3 kernel keeps its share.
  ProfiledWork e4m3_only = profiled;
  e4m3_only.counter_flops = e4m3_only.target_flops;
  CHECK(CreditTaskPrecisionOnly(*share, e4m3_only).matrix.share_of_task == Approx(1.0));

  // The attack on the split: the whole task on e5m2 QGMMA, padded with e4m3 QGMMA on discarded
  // data worth 0.9 of the task so that the credited share reaches the threshold. The e5m2 work
  // moves to other work, a whole task's worth, far above the 0.111 bound.
  ProfiledWork padded;
  padded.flops_known = true;
  padded.target_flops = 0.9 * 2 * per_site;
  padded.counter_flops = 1.9 * 2 * per_site;
  auto padded_samples = Samples(*set, {{set->target_matrix_flops, 1.9 * 2 * per_site},
                                       {set->target_matrix_warp_insts, 3800},
                                       {set->bulk_copy_insts, 0}});
  auto padded_share = ComputeWorkShare(*set, padded_samples, 2 * per_site, 1);
  REQUIRE(padded_share.ok());
  const WorkShare padded_credited = CreditTaskPrecisionOnly(*padded_share, padded);
  CHECK(padded_credited.matrix.share_of_task == Approx(0.9));
  CHECK(padded_credited.matrix.other_work_over_task == Approx(1.0));
  CHECK(JudgeTargetWork(Hopper(), padded_credited, "", path).verdict_class ==
        VerdictClass::kTargetWorkInsufficient);
}

TEST_CASE("work share: every counter the engine asks for exists in CUPTI's catalogue",
          "[work_share]") {
  for (const char* arch : {"sm_90a", "sm_100a"}) {
    for (DType operands : {DType::kBF16, DType::kFP16, DType::kFP8E4M3}) {
      auto set = WorkCountersFor(arch, operands);
      if (std::string(arch) == "sm_100a" && operands == DType::kFP8E4M3) continue;  // Below.
      REQUIRE(set.ok());
      INFO(arch << " " << DTypeName(operands) << " on " << set->chip);
      absl::Status known = HardwareCounters::CheckMetricsKnown(set->chip, set->AllMetrics());
      CHECK(known.ok());
      if (!known.ok()) WARN(known.message());
    }
  }
  CHECK_FALSE(HardwareCounters::CheckMetricsKnown("GH100", {"sm__no_such_metric.sum"}).ok());
}

// HardwareCounters::Create refuses a metric that needs two passes alone; on the H200 that
// failed every counted range until the fp16 tensor metric was split by accumulator type.
TEST_CASE("work share: every counter the engine asks for is one pass on its chip", "[work_share]") {
  for (const char* arch : {"sm_90a", "sm_100a"}) {
    for (DType operands : {DType::kBF16, DType::kFP16, DType::kFP8E4M3}) {
      auto set = WorkCountersFor(arch, operands);
      if (std::string(arch) == "sm_100a" && operands == DType::kFP8E4M3) {
        // No one-pass tcgen05 fp8 FLOP counter: refused with the reason, so the verdict says
        // the strong check was not made.
        CHECK(set.status().code() == absl::StatusCode::kUnimplemented);
        continue;
      }
      REQUIRE(set.ok());
      const std::vector<std::string> metrics = set->AllMetrics();
      auto passes = HardwareCounters::PassesOnChip(set->chip, metrics);
      INFO(arch << " on " << set->chip << ": " << passes.status().message());
      REQUIRE(passes.ok());
      for (size_t i = 0; i < metrics.size(); ++i) {
        INFO(metrics[i]);
        CHECK((*passes)[i] == 1);
      }
      // Together, as the one configuration of CounterSession::kOneSessionPassPerLaunch: a few
      // passes, each a counted launch of a round (the GPU's own counter-availability image may
      // change the count there; gpu_counters_test records it).
      auto together = HardwareCounters::PassesTogetherOnChip(set->chip, metrics);
      REQUIRE(together.ok());
      CHECK(*together >= 1);
      CHECK(*together <= metrics.size());
      WARN(arch << " " << static_cast<int>(operands) << " on " << set->chip << ": "
                << metrics.size() << " metrics in " << *together << " passes together");
    }
  }
}

TEST_CASE("work share: counters for unsupported targets are refused", "[work_share]") {
  CHECK_FALSE(WorkCountersFor("sm_80", DType::kBF16).ok());
  CHECK_FALSE(WorkCountersFor("sm_90a", DType::kInt32).ok());
}

TEST_CASE("work share: counted launches much faster than timed ones mean another path",
          "[work_share]") {
  PathAgreement agreeing;
  agreeing.checked = true;
  agreeing.agrees = true;
  // Honest figures of the H200 run 5 (2026-12-02): counted 1.000-1.065 x timed, cuBLASLt 1.11 x.
  for (double ratio : {1.0, 1.065, 1.11, 1.5}) {
    PathAgreement p = agreeing;
    CheckCountedLaunchTimes(0.78 * ratio, 0.78, &p);
    CHECK(p.agrees);
    CHECK(p.counted_over_timed == Approx(ratio));
  }
  // counted_launch_detect: wgmma (0.8 ms) when counted, mma.sync (4.4 ms) when timed.
  PathAgreement detected = agreeing;
  CheckCountedLaunchTimes(0.8, 4.4, &detected);
  CHECK_FALSE(detected.agrees);
  CHECK(detected.reason.find("another path when counted") != std::string::npos);
  CHECK(detected.counted_over_timed == Approx(0.8 / 4.4));
  // Unknown times change nothing; a disagreement already found keeps its reason.
  PathAgreement unknown = agreeing;
  CheckCountedLaunchTimes(0, 0.78, &unknown);
  CHECK(unknown.agrees);
  CHECK(unknown.counted_over_timed == 0);
  PathAgreement differs;
  differs.checked = true;
  differs.reason = "target FLOPs differ";
  CheckCountedLaunchTimes(0.1, 1.0, &differs);
  CHECK(differs.reason == "target FLOPs differ");
}

}  // namespace
}  // namespace ptxbench::gpu
