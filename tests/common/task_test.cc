#include "common/task.h"

#include <stdlib.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "common/expr.h"
#include "common/target_families.h"

namespace ptxbench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string SourceDir() {
  if (const char* dir = std::getenv("PTXBENCH_SOURCE_DIR")) return dir;
  return PTXBENCH_SOURCE_DIR_DEFAULT;
}

std::string TestData() { return SourceDir() + "/tests/common/testdata"; }

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteFile(const fs::path& path, const std::string& content) {
  std::ofstream out(path, std::ios::trunc);
  out << content;
}

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// A private copy of testdata/tasks, so a test can edit task.json and the prompt files.
class TaskCopy {
 public:
  TaskCopy() {
    char pattern[] = "/tmp/ptxbench_task_test_XXXXXX";
    root_ = mkdtemp(pattern);
    fs::copy(TestData() + "/tasks", root_ / "tasks", fs::copy_options::recursive);
    original_ = Definition();
  }
  ~TaskCopy() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  fs::path dir() const { return root_ / "tasks" / "tiny_add"; }
  json Definition() const { return json::parse(ReadFile(dir() / "task.json")); }
  void SetDefinition(const json& definition) const {
    WriteFile(dir() / "task.json", definition.dump(2));
  }
  // Applies `edit` to task.json and returns LoadTask's error message ("" when it loads).
  std::string LoadWith(const std::function<void(json&)>& edit) const {
    json definition = original_;
    edit(definition);
    SetDefinition(definition);
    auto task = LoadTask(dir().string());
    return task.ok() ? "" : std::string(task.status().message());
  }

 private:
  fs::path root_;
  json original_;
};

TEST_CASE("The fixture task loads with every field") {
  auto task = LoadTask(TestData() + "/tasks/tiny_add");
  REQUIRE(task.ok());
  CHECK(task->id == "tiny_add");
  CHECK(task->axes == std::vector<std::string>{"R", "S"});
  REQUIRE(task->tensors.size() == 3);
  CHECK(task->tensors[1].dtype == DType::kBF16);
  CHECK(task->tensors[1].distribution == Distribution::kSpiky);
  CHECK(task->tensors[2].role == TensorRole::kOutput);
  CHECK(task->tensors[2].shape == std::vector<std::string>{"R", "S"});
  CHECK(task->scalars.at("scale") == "1 / sqrt(S)");
  REQUIRE(task->workloads.size() == 2);
  CHECK(task->TimedWorkload().name == "timed");
  CHECK(task->TimedWorkload().trials == 2);
  CHECK(task->workloads[1].axes.at("R") == 3);
  CHECK(task->workloads[1].trials == 1);
  CHECK(task->tolerance.rtol == 0.002);
  CHECK(task->tolerance.matched_ratio == 0.999);
  CHECK(task->baseline_library == "cublaslt");
  CHECK(task->flops_expr == "R*S");
  CHECK(task->scratch_cap_bytes == 1048576);
  REQUIRE(task->FindArch("sm_100a") != nullptr);
  CHECK(task->FindArch("sm_100a")->runtime_unverified);
  CHECK(task->FindArch("sm_100a")->target_families ==
        std::vector<std::string>{"tma", "tcgen05_tmem"});
  CHECK(task->FindArch("sm_80") == nullptr);
  CHECK(task->solutions.size() == 1);
  CHECK(task->solutions[0].scope == "full");
  CHECK(task->prompt_paths.at("contract") == "prompts/contract.md");
  CHECK(task->files.count("../_shared/contract/submission.md") == 1);
  CHECK(task->files.count("solutions/add.cu") == 1);
  CHECK(task->version_hash.size() == 64);
  CHECK(task->version_hash.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(task->definition["title"] == "Element-wise addition (test fixture)");
  CHECK(fs::path(task->dir).is_absolute());
}

TEST_CASE("The version hash is reproducible, location-independent and content-sensitive") {
  auto original = LoadTask(TestData() + "/tasks/tiny_add");
  REQUIRE(original.ok());
  auto again = LoadTask(TestData() + "/tasks/tiny_add/");
  REQUIRE(again.ok());
  CHECK(again->version_hash == original->version_hash);

  TaskCopy copy;
  auto copied = LoadTask(copy.dir().string());
  REQUIRE(copied.ok());
  CHECK(copied->version_hash == original->version_hash);

  // One byte in a prompt, a header, the contract or a solution changes it.
  for (const char* file :
       {"prompts/templates.md", "solutions/add.cu", "../_shared/templates/fixture_hopper.cuh",
        "../_shared/contract/submission.md"}) {
    TaskCopy edited;
    const fs::path path = edited.dir() / file;
    WriteFile(path, ReadFile(path) + " ");
    auto changed = LoadTask(edited.dir().string());
    REQUIRE(changed.ok());
    INFO(file);
    CHECK(changed->version_hash != original->version_hash);
  }
}

TEST_CASE("Malformed task files are rejected naming the file and the field") {
  TaskCopy copy;
  const std::string file = (copy.dir() / "task.json").string();
  auto expect = [&](const std::function<void(json&)>& edit, const std::string& field_and_problem) {
    INFO(field_and_problem);
    CHECK(copy.LoadWith(edit) == file + ": " + field_and_problem);
  };
  expect([](json& d) { d["workloads"][1]["axes"].erase("S"); },
         "field 'workloads[1].axes': missing axis 'S'");
  expect([](json& d) { d["workloads"][0]["axes"]["R"] = 0; },
         "field 'workloads[0].axes.R': 0 is outside 1..1099511627776");
  expect([](json& d) { d["workloads"][0]["axes"]["T"] = 5; },
         "field 'workloads[0].axes.T': not an axis of the task");
  expect([](json& d) { d["workloads"][1]["timed"] = true; },
         "field 'workloads': exactly one workload must be timed; 2 are");
  expect([](json& d) { d["axis"] = json::array(); },
         "field 'axis': unknown key (allowed: arches, axes, baseline, decoys, description, id, "
         "prompts, roofline, scalars, schema, scratch_cap_bytes, solutions, templates, tensors, "
         "title, tolerance, workloads)");
  expect([](json& d) { d["tensors"][1]["distribution"] = "block_scale"; },
         "field 'tensors[1].distribution': 'block_scale' draws fp32 scales: the tensor's dtype "
         "must be fp32");
  expect([](json& d) { d["tensors"][1]["distribution"] = "uniform"; },
         "field 'tensors[1].distribution': 'uniform' is not 'normal', 'spiky', 'block_scale', "
         "'fp8_normal', 'tensor_descale', 'page_permutation' or 'length_ladder'");
  // The fp8 attention task's kinds hold their dtypes (tensor 1 of tiny_add is not fp8 / fp32).
  expect([](json& d) { d["tensors"][1]["distribution"] = "fp8_normal"; },
         "field 'tensors[1].distribution': 'fp8_normal' draws e4m3 values: the tensor's dtype "
         "must be fp8_e4m3");
  expect([](json& d) { d["tensors"][1]["distribution"] = "tensor_descale"; },
         "field 'tensors[1].distribution': 'tensor_descale' draws fp32 scales: the tensor's "
         "dtype must be fp32");
  CHECK(copy.LoadWith([](json& d) { d["tensors"][0]["distribution"] = "block_scale"; }) == "");
  expect(
      [](json& d) { d["tensors"][1]["dtype"] = "bf17"; },
      "field 'tensors[1].dtype': unknown dtype 'bf17' (known: bf16, fp16, fp32, fp8_e4m3, int32)");
  expect(
      [](json& d) {
        d["tensors"][0]["shape"] = {"R", "Q"};
      },
      "field 'tensors[0].shape[1]': 'Q' is not an axis of the task");
  expect(
      [](json& d) {
        d["tensors"][0]["shape"] = {"R - 3", "S"};
      },
      "field 'tensors[0].shape[0]': extent 0 is not positive (workload 'small')");
  expect(
      [](json& d) {
        d["tensors"][0]["shape"] = {"R /", "S"};
      },
      "field 'tensors[0].shape[0]': syntax error: expected a number, a name or '(' at the end "
      "in 'R /' at position 4");
  expect([](json& d) { d["tensors"][2]["distribution"] = "normal"; },
         "field 'tensors[2].distribution': outputs have no input distribution");
  expect([](json& d) { d["tensors"][1]["name"] = "A"; },
         "field 'tensors[1].name': duplicate tensor 'A'");
  expect([](json& d) { d["scalars"]["scale"] = "1 / sqrt(S - 512)"; },
         "field 'scalars.scale': division by zero in '1 / sqrt(S - 512)' at position 3 (workload "
         "'timed')");
  expect([](json& d) { d["roofline"]["flops"] = "R*T"; },
         "field 'roofline.flops': 'T' is not an axis of the task");
  expect([](json& d) { d["tolerance"]["matched_ratio"] = 1.5; },
         "field 'tolerance.matched_ratio': must be in (0, 1]");
  expect(
      [](json& d) {
        d["tolerance"] = {{"rule", "relative_norm"}};
      },
      "field 'tolerance.max_relative_norm': missing");
  expect([](json& d) { d["tolerance"] = json::array(); },
         "field 'tolerance': at least one rule is needed");
  expect([](json& d) { d["tolerance"] = 0.01; },
         "field 'tolerance': expected a rule object or an array of rule objects");
  expect(
      [](json& d) {
        d["tolerance"] = {{{"rule", "allclose"}, {"atol", 0.01}, {"rtol", 0.01}},
                          {{"rule", "relative_norm"}, {"max_relative_norm", 0}}};
      },
      "field 'tolerance[1].max_relative_norm': must be positive");
  expect(
      [](json& d) {
        d["tolerance"] = {{{"rule", "relative_norm"}, {"max_relative_norm", 0.1}},
                          {{"rule", "relative_norm"}, {"max_relative_norm", 0.2}}};
      },
      "field 'tolerance[1].rule': rule 'relative_norm' is declared twice");
  expect(
      [](json& d) {
        d["tolerance"] = {{{"rule", "relative_norm"}, {"max_relative_norm", 0.1}, {"atol", 1}}};
      },
      "field 'tolerance[0].atol': unknown key (allowed: block_rows, fp64_reference, "
      "max_block_relative_norm, max_relative_norm, rule)");
  expect(
      [](json& d) {
        d["tolerance"] = {
            {"rule", "relative_norm"}, {"max_relative_norm", 0.1}, {"block_rows", 64}};
      },
      "field 'tolerance.max_block_relative_norm': missing: block_rows and "
      "max_block_relative_norm are declared together");
  expect(
      [](json& d) {
        d["tolerance"] = {{"rule", "relative_norm"},
                          {"max_relative_norm", 0.1},
                          {"max_block_relative_norm", 0.03}};
      },
      "field 'tolerance.block_rows': missing: block_rows and max_block_relative_norm are "
      "declared together");
  expect(
      [](json& d) {
        d["tolerance"] = {{"rule", "relative_norm"},
                          {"max_relative_norm", 0.1},
                          {"block_rows", 0},
                          {"max_block_relative_norm", 0.03}};
      },
      "field 'tolerance.block_rows': 0 is outside 1..1048576");
  expect(
      [](json& d) {
        d["tolerance"] = {{"rule", "relative_norm"},
                          {"max_relative_norm", 0.1},
                          {"block_rows", 64},
                          {"max_block_relative_norm", -1}};
      },
      "field 'tolerance.max_block_relative_norm': must be positive");
  // The fp64 reference rule: each error names the field; tiny_add's outputs are C (A and B are
  // inputs) and its baseline (add_fp32) has no fp64 definition.
  const json fp64_ok = {{"outputs", {"C"}}, {"max_relative_norm", 0.006}};
  expect(
      [&](json& d) {
        d["tolerance"]["fp64_reference"] = {{"outputs", {"dQ"}}, {"max_relative_norm", 0.006}};
      },
      "field 'tolerance.fp64_reference.outputs[0]': 'dQ' is not an output tensor");
  expect(
      [&](json& d) {
        d["tolerance"]["fp64_reference"] = {{"outputs", {"A"}}, {"max_relative_norm", 0.006}};
      },
      "field 'tolerance.fp64_reference.outputs[0]': 'A' is not an output tensor");
  expect(
      [&](json& d) {
        d["tolerance"]["fp64_reference"] = {{"outputs", {"C", "C"}}, {"max_relative_norm", 0.006}};
      },
      "field 'tolerance.fp64_reference.outputs[1]': 'C' is listed twice");
  expect(
      [&](json& d) {
        d["tolerance"]["fp64_reference"] = {{"outputs", json::array()},
                                            {"max_relative_norm", 0.006}};
      },
      "field 'tolerance.fp64_reference.outputs': expected a non-empty array of output names");
  expect(
      [&](json& d) {
        d["tolerance"]["fp64_reference"] = {{"outputs", {"C"}}};
      },
      "field 'tolerance.fp64_reference.max_relative_norm': missing");
  expect(
      [&](json& d) {
        d["tolerance"]["fp64_reference"] = {{"outputs", {"C"}}, {"max_relative_norm", 1}};
      },
      "field 'tolerance.fp64_reference.max_relative_norm': 1 is not in (0, 1)");
  expect(
      [&](json& d) {
        d["tolerance"]["fp64_reference"] = {{"outputs", {"C"}}, {"max_relative_norm", 0}};
      },
      "field 'tolerance.fp64_reference.max_relative_norm': 0 is not in (0, 1)");
  expect(
      [&](json& d) {
        d["tolerance"]["fp64_reference"] = {
            {"outputs", {"C"}}, {"max_relative_norm", 0.006}, {"bound", 1}};
      },
      "field 'tolerance.fp64_reference.bound': unknown key (allowed: max_relative_norm, "
      "outputs)");
  expect(
      [&](json& d) {
        d["tolerance"] = {
            {{"rule", "allclose"}, {"atol", 0.02}, {"rtol", 0.03}, {"fp64_reference", fp64_ok}},
            {{"rule", "relative_norm"}, {"max_relative_norm", 0.009}, {"fp64_reference", fp64_ok}}};
      },
      "field 'tolerance[1].fp64_reference': declared twice");
  expect([&](json& d) { d["tolerance"]["fp64_reference"] = fp64_ok; },
         "field 'tolerance.fp64_reference': the engine has no fp64 reference for 'add_fp32' "
         "(only sdpa_bwd_bf16 and sdpa_bwd_bf16_causal)");
  expect(
      [](json& d) {
        d["arches"]["sm_90a"]["target_families"] = {"wgmma", "tma"};
      },
      "field 'arches.sm_90a.min_work_share': missing: required with a matrix-multiply target "
      "family (wgmma, tcgen05_mma); {\"share_of_task\": x, \"share_of_executed\": y}");
  expect(
      [](json& d) {
        d["arches"]["sm_90a"]["min_work_share"] = {{"share_of_task", 0.9},
                                                   {"share_of_executed", 0.9}};
      },
      "field 'arches.sm_90a.min_work_share': only meaningful with a matrix-multiply target "
      "family");
  expect(
      [](json& d) {
        d["arches"]["sm_90a"]["target_families"] = {"wgmma"};
        d["arches"]["sm_90a"]["min_work_share"] = {{"share_of_task", 1.5},
                                                   {"share_of_executed", 0.9}};
      },
      "field 'arches.sm_90a.min_work_share.share_of_task': must be in (0, 1]");
  expect(
      [](json& d) {
        d["arches"]["sm_90a"]["target_families"] = {"wgmma"};
        d["arches"]["sm_90a"]["min_work_share"] = {{"share_of_task", 0.9}};
      },
      "field 'arches.sm_90a.min_work_share.share_of_executed': missing");
  expect([](json& d) { d["baseline"]["library"] = "cublas"; },
         "field 'baseline.library': 'cublas' is not 'cublaslt' or 'cudnn'");
  expect(
      [](json& d) {
        d["arches"]["sm_90a"]["target_families"] = {"tma", "mbarrier"};
      },
      "field 'arches.sm_90a.target_families[1]': 'mbarrier' is informational and cannot be "
      "required");
  expect([](json& d) { d["arches"]["sm_100a"]["target_families"] = {"wgmma"}; },
         "field 'arches.sm_100a.target_families[0]': 'wgmma' does not exist on sm_100a");
  expect([](json& d) { d["arches"]["sm_90a"]["target_families"] = {"hgmma"}; },
         "field 'arches.sm_90a.target_families[0]': unknown target family 'hgmma'");
  expect([](json& d) { d["arches"]["sm_80"] = d["arches"]["sm_90a"]; },
         "field 'arches.sm_80': unknown arch (known: sm_90a, sm_100a)");
  expect([](json& d) { d["solutions"][0]["expect"] = "great"; },
         "field 'solutions[0].expect': unknown verdict class 'great'");
  expect([](json& d) { d["solutions"][0]["expect"] = "infrastructure_failure"; },
         "field 'solutions[0].expect': must be a statement about the kernel");
  expect([](json& d) { d["solutions"][0]["arch"] = "sm_100"; },
         "field 'solutions[0].arch': 'sm_100' is not one of the task's arches");
  expect([](json& d) { d["id"] = "other"; },
         "field 'id': 'other' differs from the folder name 'tiny_add'");
  expect([](json& d) { d["schema"] = 2; }, "field 'schema': version 2 is not supported (1 is)");
  expect([](json& d) { d.erase("title"); }, "field 'title': missing");
  expect([](json& d) { d["prompts"].erase("contract"); }, "field 'prompts.contract': missing");
  expect([](json& d) { d["templates"]["sm_90a"] = {"/etc/hostname"}; },
         "field 'templates.sm_90a[0]': path '/etc/hostname' must be relative to the task folder");
  expect([](json& d) { d["templates"]["sm_90a"] = {"../../x.cuh"}; },
         "field 'templates.sm_90a[0]': path '../../x.cuh' leaves the tasks folder");
  expect([](json& d) { d["templates"]["sm_90a"] = {"prompts"}; },
         "field 'templates.sm_90a[0]': 'prompts' is not a regular file");
  expect(
      [](json& d) {
        d["templates"]["sm_100a"] = {"../_shared/templates/fixture_hopper.cuh",
                                     "prompts/../../_shared/templates/fixture_hopper.cuh"};
      },
      "field 'templates.sm_100a[1]': a second header named 'fixture_hopper.cuh'");
}

TEST_CASE("Tolerance rules: one object or several that must all hold; work-share thresholds") {
  TaskCopy copy;
  SECTION("both rules") {
    CHECK(copy.LoadWith([](json& d) {
      d["tolerance"] = {{{"rule", "allclose"}, {"atol", 0.02}, {"rtol", 0.03}},
                        {{"rule", "relative_norm"}, {"max_relative_norm", 0.009}}};
    }) == "");
    auto task = LoadTask(copy.dir().string());
    REQUIRE(task.ok());
    CHECK(task->tolerance.all_close);
    CHECK(task->tolerance.atol == 0.02);
    CHECK(task->tolerance.rtol == 0.03);
    CHECK(task->tolerance.max_relative_norm == 0.009);
    auto prompt = RenderPrompt(*task, "sm_90a", "none");
    REQUIRE(prompt.ok());
    CHECK(prompt->find("allclose: an element fails only if |out - ref| > 0.02") !=
          std::string::npos);
    CHECK(prompt->find("relative norm: ||out - ref||_2 / ||ref||_2 must not exceed 0.009") !=
          std::string::npos);
  }
  SECTION("relative norm with the block rule") {
    CHECK(copy.LoadWith([](json& d) {
      d["tolerance"] = {{"rule", "relative_norm"},
                        {"max_relative_norm", 0.01},
                        {"block_rows", 64},
                        {"max_block_relative_norm", 0.03}};
    }) == "");
    auto task = LoadTask(copy.dir().string());
    REQUIRE(task.ok());
    CHECK(task->tolerance.block_rows == 64);
    CHECK(task->tolerance.max_block_relative_norm == 0.03);
    auto prompt = RenderPrompt(*task, "sm_90a", "none");
    REQUIRE(prompt.ok());
    CHECK(prompt->find("for every block of 64 consecutive rows") != std::string::npos);
    CHECK(prompt->find("must not exceed 0.03") != std::string::npos);
  }
  SECTION("the fp64 reference rule of the backward tasks") {
    for (const char* id : {"mha_bwd_d128", "mha_bwd_d128_causal"}) {
      auto task = LoadTask(SourceDir() + "/tasks/" + id);
      REQUIRE(task.ok());
      CHECK(task->tolerance.fp64_outputs == std::vector<std::string>{"dQ"});
      CHECK(task->tolerance.fp64_max_relative_norm == 0.006);
      CHECK(task->tolerance.max_relative_norm == 0.01);
      auto prompt = RenderPrompt(*task, "sm_90a", "none");
      REQUIRE(prompt.ok());
      CHECK(prompt->find("fp64 reference: on every correctness workload (not the timed one), dQ "
                         "must also keep ||out - ref64||_2 / ||ref64||_2 <= 0.006") !=
            std::string::npos);
    }
    CHECK(Fp64ReferenceSupported("sdpa_bwd_bf16_causal"));
    CHECK_FALSE(Fp64ReferenceSupported("sdpa_fwd_bf16"));
  }
  SECTION("relative norm alone") {
    CHECK(copy.LoadWith([](json& d) {
      d["tolerance"] = {{"rule", "relative_norm"}, {"max_relative_norm", 0.01}};
    }) == "");
    auto task = LoadTask(copy.dir().string());
    REQUIRE(task.ok());
    CHECK_FALSE(task->tolerance.all_close);
    CHECK(task->tolerance.max_relative_norm == 0.01);
  }
  SECTION("min_work_share with a matrix family") {
    CHECK(copy.LoadWith([](json& d) {
      d["arches"]["sm_90a"]["target_families"] = {"wgmma", "tma"};
      d["arches"]["sm_90a"]["min_work_share"] = {{"share_of_task", 0.85},
                                                 {"share_of_executed", 0.95}};
    }) == "");
    auto task = LoadTask(copy.dir().string());
    REQUIRE(task.ok());
    const ArchSpec* arch = task->FindArch("sm_90a");
    REQUIRE(arch != nullptr);
    REQUIRE(arch->min_work_share.has_value());
    CHECK(arch->min_work_share->share_of_task == 0.85);
    CHECK(arch->min_work_share->share_of_executed == 0.95);
    CHECK_FALSE(task->FindArch("sm_100a")->min_work_share.has_value());
  }
}

TEST_CASE("The judging hash covers task.json only") {
  TaskCopy copy;
  REQUIRE(copy.LoadWith([](json&) {}) == "");
  auto before = LoadTask(copy.dir().string());
  REQUIRE(before.ok());
  CHECK(before->JudgingHash().size() == 64);
  // A prompt edit changes the version hash but not how submissions are judged.
  std::ofstream(copy.dir() / "prompts" / "none.md", std::ios::app) << "\nOne more line.\n";
  auto prompt_edit = LoadTask(copy.dir().string());
  REQUIRE(prompt_edit.ok());
  CHECK(prompt_edit->version_hash != before->version_hash);
  CHECK(prompt_edit->JudgingHash() == before->JudgingHash());
  REQUIRE(copy.LoadWith([](json& d) { d["tolerance"]["atol"] = 0.5; }) == "");
  auto rule_edit = LoadTask(copy.dir().string());
  REQUIRE(rule_edit.ok());
  CHECK(rule_edit->JudgingHash() != before->JudgingHash());
}

TEST_CASE("A file that task.json names but that is missing is NotFound, naming both") {
  TaskCopy copy;
  json definition = copy.Definition();
  definition["solutions"][0]["path"] = "solutions/nope.cu";
  copy.SetDefinition(definition);
  auto task = LoadTask(copy.dir().string());
  REQUIRE_FALSE(task.ok());
  CHECK(task.status().code() == absl::StatusCode::kNotFound);
  CHECK(std::string(task.status().message()) ==
        (copy.dir() / "solutions/nope.cu").string() +
            ": file not found (named by task.json field 'solutions[0].path')");

  fs::remove(copy.dir() / ".." / "_shared" / "contract" / "submission.md");
  definition["solutions"][0]["path"] = "solutions/add.cu";
  copy.SetDefinition(definition);
  task = LoadTask(copy.dir().string());
  REQUIRE_FALSE(task.ok());
  CHECK(std::string(task.status().message()) ==
        (copy.dir().parent_path() / "_shared/contract/submission.md").string() +
            ": file not found (the submission contract every prompt includes)");
}

TEST_CASE("Broken fixture folders are rejected with clear messages") {
  const std::string broken = TestData() + "/broken_tasks";
  auto json_error = LoadTask(broken + "/broken_json");
  REQUIRE_FALSE(json_error.ok());
  CHECK(std::string(json_error.status().message())
            .rfind(broken + "/broken_json/task.json: not valid JSON at line 4 (byte ", 0) == 0);

  auto missing = LoadTask(broken + "/missing_prompt");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CHECK(std::string(missing.status().message()) ==
        broken +
            "/missing_prompt/prompts/contract.md: file not found (named by task.json field "
            "'prompts.contract')");

  auto placeholder = LoadTask(broken + "/bad_placeholder");
  REQUIRE_FALSE(placeholder.ok());
  CHECK(
      std::string(placeholder.status().message())
          .rfind(broken +
                     "/bad_placeholder/prompts/none.md:3: unknown placeholder '{{nope}}' (known: ",
                 0) == 0);

  auto escape = LoadTask(broken + "/escape_path");
  REQUIRE_FALSE(escape.ok());
  CHECK(std::string(escape.status().message()) ==
        broken +
            "/escape_path/task.json: field 'templates.sm_90a[0]': path "
            "'../../../../../../../../etc/hostname' leaves the tasks folder");

  auto absent = LoadTask(broken + "/no_such_task");
  REQUIRE_FALSE(absent.ok());
  CHECK(absent.status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE("Prompts render every placeholder and add the contract, hardware and headers") {
  auto task = LoadTask(TestData() + "/tasks/tiny_add");
  REQUIRE(task.ok());

  auto none = RenderPrompt(*task, "sm_90a", "none");
  REQUIRE(none.ok());
  CHECK(none->find(
            "# Element-wise addition (test fixture) on sm_90a (NVIDIA H100 / H200 (Hopper))") == 0);
  CHECK(none->find("Axes: R, S. Scalars: - scale = 1 / sqrt(S)") != std::string::npos);
  CHECK(none->find("| A | input | fp32 | [R, S] |") != std::string::npos);
  CHECK(none->find("| timed | R=1024, S=512 | yes |") != std::string::npos);
  CHECK(none->find("| small | R=3, S=64 | no (correctness only) |") != std::string::npos);
  CHECK(none->find("AND |out - ref| > 0.002 * |ref|; 99.9% of elements must pass") !=
        std::string::npos);
  CHECK(none->find(
            "Baseline: cublaslt (add_fp32). Roofline: flops = R*S; minimum bytes moved = 12*R*S. "
            "Scratch cap: 1048576 bytes.") != std::string::npos);
  CHECK(none->find("Level: none. Task: tiny_add.") != std::string::npos);
  CHECK(none->find("- tma: bulk tensor copies") != std::string::npos);
  CHECK(none->find("int a[2][2] = {{1, 2}, {3, 4}};") != std::string::npos);
  CHECK(none->find("FIXTURE HEADER") == std::string::npos);
  CHECK(Count(*none, "FIXTURE CONTRACT") == 1);
  CHECK(none->find("## Submission contract") != std::string::npos);
  CHECK(none->find("132 streaming multiprocessors") != std::string::npos);
  CHECK(none->find("{{") == none->find("{{1, 2}"));  // No placeholder left.

  auto templates = RenderPrompt(*task, "sm_90a", "templates");
  REQUIRE(templates.ok());
  CHECK(templates->find("#include \"fixture_hopper.cuh\"") != std::string::npos);
  CHECK(Count(*templates, "FIXTURE HEADER") == 1);
  CHECK(Count(*templates, "FIXTURE CONTRACT") == 1);
  CHECK(templates->find("## Submission contract") == std::string::npos);  // Placed by the file.
  CHECK(templates->find("## Hardware") != std::string::npos);             // Appended.

  auto blackwell = RenderPrompt(*task, "sm_100a", "contract");
  REQUIRE(blackwell.ok());
  CHECK(blackwell->find("148 streaming multiprocessors") != std::string::npos);
  CHECK(blackwell->find("Tensor memory: 256 KB per SM") != std::string::npos);
  CHECK(blackwell->find("132 streaming") == std::string::npos);
  CHECK(blackwell->find("FIXTURE HEADER") == std::string::npos);  // No sm_100a headers.

  CHECK(RenderPrompt(*task, "sm_80", "none").status().message() ==
        "task 'tiny_add' is not defined for arch 'sm_80'");
  CHECK(RenderPrompt(*task, "sm_90a", "expert").status().message() ==
        "unknown knowledge level 'expert' (known: none, templates, contract)");
}

TEST_CASE("Template headers are served by their include name") {
  auto task = LoadTask(TestData() + "/tasks/tiny_add");
  REQUIRE(task.ok());
  auto headers = TemplateHeaders(*task, "sm_90a");
  REQUIRE(headers.ok());
  REQUIRE(headers->size() == 1);
  CHECK(headers->begin()->first == "fixture_hopper.cuh");
  CHECK(headers->begin()->second.find("FIXTURE HEADER") == 3);
  CHECK(TemplateHeaders(*task, "sm_100a")->empty());
  CHECK_FALSE(TemplateHeaders(*task, "sm_75").ok());
}

TEST_CASE("Every task of the repository loads and renders for every arch and level") {
  auto catalog = TaskCatalog::Load(SourceDir() + "/tasks");
  INFO(catalog.status().ToString());
  REQUIRE(catalog.ok());
  REQUIRE_FALSE(catalog->tasks().empty());
  const Task* gemm = catalog->Find("gemm_n7168_k5120");
  REQUIRE(gemm != nullptr);
  CHECK(gemm->TimedWorkload().axes.at("N") == 7168);
  CHECK(gemm->TimedWorkload().axes.at("K") == 5120);
  CHECK(catalog->Find("no_such_task") == nullptr);
  // Trial order: fewest output elements first (256x256, 1024x2048, 384x7168, then the timed).
  std::vector<std::string> order;
  for (const Workload* w : gemm->WorkloadsInTrialOrder()) order.push_back(w->name);
  CHECK(order == std::vector<std::string>{"small_square", "medium", "ragged_m", "timed"});
  // The backward's three outputs: 'long' (1x1x16384) after 'medium' (2x4x1024), timed last.
  const Task* backward = catalog->Find("mha_bwd_d128");
  REQUIRE(backward != nullptr);
  order.clear();
  for (const Workload* w : backward->WorkloadsInTrialOrder()) order.push_back(w->name);
  CHECK(order == std::vector<std::string>{"small", "odd_blocks", "medium", "long", "timed"});

  const std::string contract = ReadFile(SourceDir() + "/tasks/_shared/contract/submission.md");
  for (const Task& task : catalog->tasks()) {
    for (const auto& [arch, spec] : task.arches) {
      auto headers = TemplateHeaders(task, arch);
      REQUIRE(headers.ok());
      for (const std::string& family : spec.target_families) {
        REQUIRE(FindTargetFamily(family) != nullptr);
      }
      for (const std::string& level : KnowledgeLevels()) {
        INFO(task.id << " " << arch << " " << level);
        auto prompt = RenderPrompt(task, arch, level);
        REQUIRE(prompt.ok());
        CHECK(Count(*prompt, contract) == 1);
        CHECK(prompt->find(*HardwareParametersText(arch)) != std::string::npos);
        for (const char* name : {"title", "arch", "tensors", "workloads", "contract", "hardware",
                                 "templates", "target_families"}) {
          CHECK(prompt->find(std::string("{{") + name + "}}") == std::string::npos);
        }
        for (const auto& [name, content] : *headers) {
          CHECK((prompt->find(content) != std::string::npos) == (level != "none"));
        }
      }
    }
  }
}

// A private copy of the repository's tasks/_shared and one of its tasks, for edits.
class RepositoryTaskCopy {
 public:
  explicit RepositoryTaskCopy(const std::string& id) : id_(id) {
    char pattern[] = "/tmp/ptxbench_task_test_XXXXXX";
    root_ = mkdtemp(pattern);
    fs::create_directories(root_ / "tasks");
    fs::copy(SourceDir() + "/tasks/_shared", root_ / "tasks" / "_shared",
             fs::copy_options::recursive);
    fs::copy(SourceDir() + "/tasks/" + id, root_ / "tasks" / id, fs::copy_options::recursive);
    original_ = json::parse(ReadFile(dir() / "task.json"));
  }
  ~RepositoryTaskCopy() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  fs::path dir() const { return root_ / "tasks" / id_; }
  std::string LoadWith(const std::function<void(json&)>& edit) const {
    json definition = original_;
    edit(definition);
    WriteFile(dir() / "task.json", definition.dump(2));
    auto task = LoadTask(dir().string());
    return task.ok() ? "" : std::string(task.status().message());
  }

 private:
  std::string id_;
  fs::path root_;
  json original_;
};

TEST_CASE("The attention tasks follow the shared contract") {
  auto catalog = TaskCatalog::Load(SourceDir() + "/tasks");
  REQUIRE(catalog.ok());
  for (const char* id :
       {"mha_with_lse_d128", "mha_with_lse_d128_causal", "mha_bwd_d128", "mha_bwd_d128_causal"}) {
    INFO(id);
    const Task* task = catalog->Find(id);
    REQUIRE(task != nullptr);
    const bool bwd = std::string(id).find("bwd") != std::string::npos;
    const bool causal = std::string(id).find("causal") != std::string::npos;
    CHECK(task->axes == std::vector<std::string>{"B", "H", "S", "D"});
    CHECK(task->baseline_library == "cudnn");
    CHECK(task->baseline_operation ==
          std::string(bwd ? "sdpa_bwd_bf16" : "sdpa_fwd_bf16") + (causal ? "_causal" : ""));
    const Workload& timed = task->TimedWorkload();
    CHECK(timed.axes ==
          std::map<std::string, int64_t>{{"B", 4}, {"H", 48}, {"S", 4096}, {"D", 128}});
    CHECK(timed.trials == (bwd ? 1 : 3));
    for (const Workload& w : task->workloads) {
      CHECK(w.axes.at("D") == 128);
      CHECK(w.axes.at("S") % 128 == 0);
    }
    // scale = 1/sqrt(D), passed to kernels as a float.
    auto scale = EvalRealExpr(task->scalars.at("scale"), timed.axes);
    REQUIRE(scale.ok());
    CHECK(*scale == Approx(0.08838834764831845).epsilon(1e-15));
    std::vector<std::string> names;
    for (const TensorSpec& t : task->tensors) names.push_back(t.name);
    if (bwd) {
      CHECK(names == std::vector<std::string>{"Q", "K", "V", "O", "dO", "LSE", "dQ", "dK", "dV"});
      CHECK_FALSE(task->tolerance.all_close);
      CHECK(task->tolerance.max_relative_norm == 0.01);
      CHECK(task->scratch_cap_bytes == 1073741824);
      const std::string fwd = causal ? "sdpa_fwd_bf16_causal" : "sdpa_fwd_bf16";
      REQUIRE(task->tensors[3].derived.has_value());
      CHECK(task->tensors[3].derived->operation == fwd);
      CHECK(task->tensors[3].derived->output == "O");
      REQUIRE(task->tensors[5].derived.has_value());
      CHECK(task->tensors[5].derived->output == "LSE");
      CHECK(task->tensors[5].dtype == DType::kFP32);
      for (int i : {0, 1, 2, 4}) {
        CHECK(task->tensors[i].distribution == Distribution::kSpiky);
        CHECK_FALSE(task->tensors[i].derived.has_value());
      }
      auto prompt = RenderPrompt(*task, "sm_90a", "none");
      REQUIRE(prompt.ok());
      CHECK(prompt->find("| LSE | input (computed by the harness: LSE of " + fwd + ") | fp32 |") !=
            std::string::npos);
    } else {
      CHECK(names == std::vector<std::string>{"Q", "K", "V", "O", "LSE"});
      CHECK(task->tolerance.all_close);
      // The norm bound beside all-close (docs/task-authoring.md, "Tolerance margins").
      CHECK(task->tolerance.max_relative_norm == 0.009);
      CHECK(task->tolerance.atol == 0.01);
      CHECK(task->tolerance.rtol == 0.01);
      CHECK(task->tolerance.matched_ratio == 1.0);
      CHECK(task->scratch_cap_bytes == 268435456);
    }
    auto flops = EvalRealExpr(task->flops_expr, timed.axes);
    REQUIRE(flops.ok());
    const double forward_flops = 4.0 * 4 * 48 * 4096.0 * 4096 * 128 / (causal ? 2 : 1);
    CHECK(*flops == Approx(forward_flops * (bwd ? 2.5 : 1)));
    CHECK(task->FindArch("sm_100a")->runtime_unverified);
  }
}

// The head-dim 64 and 256 forward tasks (issue 17) are the d128 forward task at another D: the
// same tensors, tolerance, baseline operation and formulas; shapes from SmolLM2-1.7B (32 heads of
// 64) and Gemma 2 9B (16 heads of 256), docs/task-authoring.md.
TEST_CASE("The head-dim 64 and 256 forward tasks are the d128 forward task at their D") {
  auto catalog = TaskCatalog::Load(SourceDir() + "/tasks");
  REQUIRE(catalog.ok());
  struct Case {
    const char* id;
    int64_t d, heads;
    bool causal;
    const char* output_product;  // The O += P V wgmma the templates prompt names.
  };
  for (const Case& c :
       {Case{"mha_with_lse_d64", 64, 32, false, "wgmma_m64n64k16_rs_bf16_t"},
        Case{"mha_with_lse_d64_causal", 64, 32, true, "wgmma_m64n64k16_rs_bf16_t"},
        Case{"mha_with_lse_d256", 256, 16, false, "wgmma_m64n256k16_rs_bf16_t"},
        Case{"mha_with_lse_d256_causal", 256, 16, true, "wgmma_m64n256k16_rs_bf16_t"}}) {
    INFO(c.id);
    const Task* task = catalog->Find(c.id);
    REQUIRE(task != nullptr);
    const Task* d128 = catalog->Find(c.causal ? "mha_with_lse_d128_causal" : "mha_with_lse_d128");
    REQUIRE(d128 != nullptr);
    CHECK(task->axes == d128->axes);
    CHECK(task->baseline_library == "cudnn");
    CHECK(task->baseline_operation == std::string("sdpa_fwd_bf16") + (c.causal ? "_causal" : ""));
    CHECK(task->flops_expr == d128->flops_expr);
    CHECK(task->min_bytes_expr == d128->min_bytes_expr);
    CHECK(task->scratch_cap_bytes == d128->scratch_cap_bytes);
    CHECK(task->tolerance.all_close == d128->tolerance.all_close);
    CHECK(task->tolerance.atol == d128->tolerance.atol);
    CHECK(task->tolerance.rtol == d128->tolerance.rtol);
    CHECK(task->tolerance.matched_ratio == d128->tolerance.matched_ratio);
    CHECK(task->tolerance.max_relative_norm == d128->tolerance.max_relative_norm);
    REQUIRE(task->tensors.size() == d128->tensors.size());
    for (size_t i = 0; i < task->tensors.size(); ++i) {
      CHECK(task->tensors[i].name == d128->tensors[i].name);
      CHECK(task->tensors[i].dtype == d128->tensors[i].dtype);
      CHECK(task->tensors[i].shape == d128->tensors[i].shape);
      CHECK(task->tensors[i].distribution == d128->tensors[i].distribution);
    }
    const Workload& timed = task->TimedWorkload();
    CHECK(timed.axes ==
          std::map<std::string, int64_t>{{"B", 4}, {"H", c.heads}, {"S", 4096}, {"D", c.d}});
    for (const Workload& w : task->workloads) {
      CHECK(w.axes.at("D") == c.d);
      CHECK(w.axes.at("S") % 128 == 0);
    }
    auto scale = EvalRealExpr(task->scalars.at("scale"), timed.axes);
    REQUIRE(scale.ok());
    CHECK(*scale == Approx(1.0 / std::sqrt(static_cast<double>(c.d))).epsilon(1e-15));
    auto flops = EvalRealExpr(task->flops_expr, timed.axes);
    REQUIRE(flops.ok());
    CHECK(*flops == Approx(4.0 * 4 * c.heads * 4096.0 * 4096 * c.d / (c.causal ? 2 : 1)));
    CHECK(task->FindArch("sm_100a")->runtime_unverified);
    // An sm_90a reference expected to pass, and at least one decoy expected to fail.
    CHECK(std::any_of(task->solutions.begin(), task->solutions.end(),
                      [](const SourceRef& s) { return s.arch == "sm_90a" && s.expect == "pass"; }));
    CHECK(std::any_of(task->decoys.begin(), task->decoys.end(), [](const SourceRef& s) {
      return s.arch == "sm_90a" && s.expect == "wrong_result";
    }));
    for (const char* level : {"templates", "contract"}) {
      auto prompt = RenderPrompt(*task, "sm_90a", level);
      REQUIRE(prompt.ok());
      CHECK(prompt->find(c.output_product) != std::string::npos);
    }
  }
}

TEST_CASE("The contract level carries the architecture rules of its arch only") {
  auto catalog = TaskCatalog::Load(SourceDir() + "/tasks");
  REQUIRE(catalog.ok());
  // Every task of the suite renders its contract from the shared per-arch fragments.
  const std::string task_id = GENERATE(
      as<std::string>{}, "gemm_n7168_k5120", "mha_with_lse_d128", "mha_with_lse_d128_causal",
      "mha_bwd_d128", "mha_bwd_d128_causal", "mha_with_lse_d64", "mha_with_lse_d64_causal",
      "mha_with_lse_d256", "mha_with_lse_d256_causal");
  CAPTURE(task_id);
  const Task* task = catalog->Find(task_id);
  REQUIRE(task != nullptr);
  const std::string common = ReadFile(SourceDir() + "/tasks/_shared/contract/arch_common.md");
  const std::string hopper = ReadFile(SourceDir() + "/tasks/_shared/contract/arch_sm_90a.md");
  const std::string blackwell = ReadFile(SourceDir() + "/tasks/_shared/contract/arch_sm_100a.md");
  REQUIRE(hopper.find("imm-trans-b = 1") != std::string::npos);
  REQUIRE(blackwell.find("tcgen05.alloc") != std::string::npos);
  CHECK(task->files.count(kArchContractCommonPath) == 1);
  CHECK(task->files.count(ArchContractPath("sm_100a")) == 1);

  auto sm90 = RenderPrompt(*task, "sm_90a", "contract");
  REQUIRE(sm90.ok());
  CHECK(Count(*sm90, common) == 1);
  CHECK(Count(*sm90, hopper) == 1);
  CHECK(sm90->find(blackwell) == std::string::npos);
  CHECK(sm90->find("### sm_100a (Blackwell)") == std::string::npos);
  CHECK(sm90->find("{{arch_contract}}") == std::string::npos);
  auto sm100 = RenderPrompt(*task, "sm_100a", "contract");
  REQUIRE(sm100.ok());
  CHECK(Count(*sm100, common) == 1);
  CHECK(Count(*sm100, blackwell) == 1);
  CHECK(sm100->find(hopper) == std::string::npos);
  CHECK(sm100->find("### sm_90a (Hopper)") == std::string::npos);
  for (const char* level : {"none", "templates"}) {
    auto lower = RenderPrompt(*task, "sm_90a", level);
    REQUIRE(lower.ok());
    CHECK(lower->find(hopper) == std::string::npos);
    CHECK(lower->find(common) == std::string::npos);
  }

  // The fragments are part of the version hash.
  RepositoryTaskCopy copy("mha_bwd_d128_causal");
  auto before = LoadTask(copy.dir().string());
  REQUIRE(before.ok());
  WriteFile(copy.dir() / ".." / "_shared" / "contract" / "arch_sm_100a.md", blackwell + "x\n");
  auto after = LoadTask(copy.dir().string());
  REQUIRE(after.ok());
  CHECK(after->version_hash != before->version_hash);
  fs::remove(copy.dir() / ".." / "_shared" / "contract" / "arch_sm_90a.md");
  auto missing = LoadTask(copy.dir().string());
  REQUIRE_FALSE(missing.ok());
  CHECK(std::string(missing.status().message())
            .find("arch_sm_90a.md: file not found (the "
                  "architecture rules of sm_90a)") != std::string::npos);
}

TEST_CASE("The architecture rules are a placeholder of the contract level only") {
  TaskCopy copy;
  WriteFile(copy.dir() / "prompts" / "templates.md", "{{title}}\n{{arch_contract}}\n");
  const std::string message = copy.LoadWith([](json&) {});
  CHECK(message.find("prompts/templates.md:2: placeholder '{{arch_contract}}' at knowledge "
                     "level 'templates'; the architecture rules belong to level 'contract'") !=
        std::string::npos);
}

TEST_CASE("Derived inputs are validated at load, naming the field") {
  RepositoryTaskCopy copy("mha_bwd_d128");
  const std::string file = (copy.dir() / "task.json").string();
  CHECK(copy.LoadWith([](json&) {}) == "");
  auto expect = [&](const std::function<void(json&)>& edit, const std::string& field_and_problem) {
    INFO(field_and_problem);
    CHECK(copy.LoadWith(edit) == file + ": " + field_and_problem);
  };
  expect([](json& d) { d["tensors"][3]["derived"]["operation"] = "sdpa_fwd_fp8"; },
         "field 'tensors[3].derived.operation': 'sdpa_fwd_fp8' is not an operation of cudnn that "
         "can derive an input");
  expect([](json& d) { d["tensors"][5]["derived"]["output"] = "Stats"; },
         "field 'tensors[5].derived.output': 'Stats' is not an output of sdpa_fwd_bf16 (outputs: "
         "O, LSE)");
  expect([](json& d) { d["tensors"][5]["derived"]["output"] = "O"; },
         "field 'tensors[5].derived': sdpa_fwd_bf16 output O is bf16 [B, H, S, D], the tensor is "
         "fp32 [B, H, S]");
  expect([](json& d) { d["tensors"][3]["derived"].erase("output"); },
         "field 'tensors[3].derived.output': missing");
  expect([](json& d) { d["tensors"][3]["derived"]["seed"] = 1; },
         "field 'tensors[3].derived.seed': unknown key (allowed: operation, output)");
  expect([](json& d) { d["tensors"][3]["distribution"] = "normal"; },
         "field 'tensors[3].derived': a derived input has no distribution");
  expect([](json& d) { d["tensors"][6]["derived"] = d["tensors"][3]["derived"]; },
         "field 'tensors[6].derived': only inputs can be derived");
  expect([](json& d) { d["tensors"][1]["name"] = "Kt"; },
         "field 'tensors[3].derived.operation': sdpa_fwd_bf16 reads 'K', which is not a drawn "
         "input of the task");
  expect([](json& d) { d["tensors"][0]["dtype"] = "fp16"; },
         "field 'tensors[3].derived.operation': sdpa_fwd_bf16 reads Q as bf16 [B, H, S, D], the "
         "task has fp16 [B, H, S, D]");
  expect(
      [](json& d) {
        d["baseline"] = {{"library", "cublaslt"}, {"operation", "x"}};
        d["tolerance"].erase("fp64_reference");  // Its own check would name operation 'x'.
      },
      "field 'tensors[3].derived.operation': 'sdpa_fwd_bf16' is not an operation of cublaslt "
      "that can derive an input");
  CHECK(FindDerivableOperation("cudnn", "sdpa_bwd_bf16") == nullptr);
  REQUIRE(FindDerivableOperation("cudnn", "sdpa_fwd_bf16_causal") != nullptr);
  CHECK(FindDerivableOperation("cudnn", "sdpa_fwd_bf16_causal")->outputs[1].name == "LSE");
}

TEST_CASE("The integer distributions are parsed with their parameters, naming the field") {
  RepositoryTaskCopy copy("gqa_paged_decode_hq64_hk8_d128");
  const std::string file = (copy.dir() / "task.json").string();
  REQUIRE(copy.LoadWith([](json&) {}) == "");
  auto task = LoadTask(copy.dir().string());
  REQUIRE(task.ok());
  REQUIRE(task->tensors[3].name == "page_table");
  CHECK(task->tensors[3].distribution == Distribution::kPagePermutation);
  CHECK(task->tensors[3].distribution_params.pages == "NP");
  REQUIRE(task->tensors[4].name == "seq_lens");
  CHECK(task->tensors[4].distribution == Distribution::kLengthLadder);
  CHECK(task->tensors[4].distribution_params.max == "PPS*PS");
  CHECK(task->tensors[4].distribution_params.jitter == "PS");
  CHECK(task->tensors[4].distribution_params.pages.empty());
  // Integers are accepted where an expression is, and the object form of a plain kind.
  CHECK(copy.LoadWith([](json& d) { d["tensors"][4]["distribution"]["jitter"] = 0; }) == "");
  CHECK(copy.LoadWith([](json& d) {
    d["tensors"][0]["distribution"] = {{"kind", "spiky"}};
  }) == "");

  auto expect = [&](const std::function<void(json&)>& edit, const std::string& field_and_problem) {
    INFO(field_and_problem);
    CHECK(copy.LoadWith(edit) == file + ": " + field_and_problem);
  };
  expect([](json& d) { d["tensors"][3]["distribution"]["kind"] = "shuffle"; },
         "field 'tensors[3].distribution.kind': 'shuffle' is not 'normal', 'spiky', "
         "'block_scale', 'fp8_normal', 'tensor_descale', 'page_permutation' or "
         "'length_ladder'");
  expect(
      [](json& d) {
        d["tensors"][3]["distribution"] = {{"pages", "NP"}};
      },
      "field 'tensors[3].distribution.kind': missing");
  expect([](json& d) { d["tensors"][3]["distribution"] = 7; },
         "field 'tensors[3].distribution': expected a distribution name or an object with a "
         "'kind'");
  expect([](json& d) { d["tensors"][3]["distribution"].erase("pages"); },
         "field 'tensors[3].distribution.pages': 'page_permutation' needs the parameter 'pages'");
  expect([](json& d) { d["tensors"][3]["distribution"] = "page_permutation"; },
         "field 'tensors[3].distribution.pages': 'page_permutation' needs the parameter 'pages'");
  expect([](json& d) { d["tensors"][4]["distribution"].erase("jitter"); },
         "field 'tensors[4].distribution.jitter': 'length_ladder' needs the parameter 'jitter'");
  expect([](json& d) { d["tensors"][4]["distribution"]["pages"] = "NP"; },
         "field 'tensors[4].distribution.pages': unknown key (allowed: jitter, kind, max)");
  expect([](json& d) { d["tensors"][4]["distribution"]["jitter"] = -1; },
         "field 'tensors[4].distribution.jitter': evaluates to -1, outside 0 .. 2147483647 "
         "(workload 'timed')");
  expect([](json& d) { d["tensors"][4]["distribution"]["max"] = "PS - 64"; },
         "field 'tensors[4].distribution.max': evaluates to 0, outside 1 .. 2147483647 "
         "(workload 'timed')");
  expect([](json& d) { d["tensors"][4]["distribution"]["max"] = "PPS*PS / (PS - 64)"; },
         "field 'tensors[4].distribution.max': division by zero in 'PPS*PS / (PS - 64)' at "
         "position 8 (workload 'timed')");
  expect([](json& d) { d["tensors"][4]["distribution"]["max"] = 1.5; },
         "field 'tensors[4].distribution.max': expected an axis expression or an integer");
  expect([](json& d) { d["tensors"][3]["distribution"]["pages"] = "NQ"; },
         "field 'tensors[3].distribution.pages': 'NQ' is not an axis of the task");
  expect([](json& d) { d["tensors"][3]["distribution"]["pages"] = "B*PPS - 1"; },
         "field 'tensors[3].distribution.pages': evaluates to 8191, fewer pages than the 8192 "
         "distinct entries of the tensor (workload 'timed')");
  expect([](json& d) { d["tensors"][3]["distribution"]["pages"] = "NP*NP*NP"; },
         "field 'tensors[3].distribution.pages': evaluates to 549755813888, outside 1 .. "
         "2147483647 (workload 'timed')");
  expect(
      [](json& d) {
        d["tensors"][0]["distribution"] = {{"kind", "page_permutation"}, {"pages", "NP"}};
      },
      "field 'tensors[0].distribution.kind': 'page_permutation' draws int32 values: the "
      "tensor's dtype must be int32");
  expect([](json& d) { d["tensors"][5]["distribution"] = d["tensors"][4]["distribution"]; },
         "field 'tensors[5].distribution': outputs have no input distribution");
}

TEST_CASE("Hardware parameters state the figures of each arch") {
  auto hopper = HardwareParametersText("sm_90a");
  REQUIRE(hopper.ok());
  CHECK(hopper->find("132 streaming multiprocessors") != std::string::npos);
  CHECK(hopper->find("228 KB per SM; at most 227 KB (232448 bytes) per thread block") !=
        std::string::npos);
  CHECK(hopper->find("L2 cache: 50 MB (H100) to 60 MB (H200)") != std::string::npos);
  auto blackwell = HardwareParametersText("sm_100a");
  REQUIRE(blackwell.ok());
  CHECK(blackwell->find("148 streaming multiprocessors") != std::string::npos);
  CHECK(blackwell->find("Tensor memory: 256 KB per SM") != std::string::npos);
  CHECK_FALSE(HardwareParametersText("sm_89").ok());
}

}  // namespace
}  // namespace ptxbench
