// A stand-in for ptxbench-evaluator's GPU modes, so that Evaluate()'s supervisor logic (stage
// order, reference bookkeeping, pipelined trials, comparisons, the SASS-map process, target
// analysis, timing checks, timeouts, faults, refusals) runs end to end on a machine without a
// GPU. compile mode is the real evaluator's (exec'd from the same directory); the GPU modes
// write deterministic outputs: output element i for seed s is a function of (s, i), in both the
// "reference" and the "candidate" process, unless the behaviour says otherwise. The reference
// process compares on the CPU (compare.h, the GPU kernel's oracle). Outputs handed over "by IPC"
// are files here too, named in the "ipc" field.
//
// The behaviour comes from the program's own name, fake-evaluator-<behaviour> (sandboxes get a
// minimal environment): pass, wrong, wrong_timed, fault, hang, mutate, no_records, too_fast,
// no_ipc (the reference process cannot map outputs: the supervisor falls back to files),
// begin_dies (a warm reference process exits when the next evaluation begins).
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "common/expr.h"
#include "common/task.h"
#include "nlohmann/json.hpp"
#include "worker/engine/gpu/compare.h"
#include "worker/engine/gpu/philox.h"
#include "worker/engine/gpu/poison.h"
#include "worker/engine/gpu/protocol.h"

namespace {

using json = nlohmann::json;
using ptxbench::gpu::Mix64;

std::string behaviour;

void Emit(const json& event) { (void)ptxbench::gpu::WriteJsonLine(3, event); }

uint64_t U(const json& v) { return *ptxbench::gpu::ParseU64(v); }

uint16_t Element(uint64_t seed, uint64_t i) {
  float f = std::sin(static_cast<float>((seed % 1000) + i % 977)) * 4.0f + 0.5f;
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<uint16_t>(bits >> 16);
}

// Writes every output tensor of `workload` for `seed` to "<prefix>.<tensor>.bin"; describes them
// under `field` ("path", or "ipc" for the stand-in of a CUDA IPC hand-over).
json WriteOutputs(const ptxbench::Task& task, const std::string& workload, uint64_t seed,
                  const std::string& prefix, bool corrupt, const std::string& field = "path") {
  json files = json::array();
  const ptxbench::Workload* w = nullptr;
  for (const auto& x : task.workloads) {
    if (x.name == workload) w = &x;
  }
  for (const ptxbench::TensorSpec& t : task.tensors) {
    if (t.role != ptxbench::TensorRole::kOutput) continue;
    uint64_t n = 1;
    for (const std::string& d : t.shape)
      n *= static_cast<uint64_t>(*ptxbench::EvalIntExpr(d, w->axes));
    std::vector<uint16_t> data(n);
    for (uint64_t i = 0; i < n; ++i) data[i] = Element(seed, i);
    if (corrupt) data[n / 2] ^= 0x4000;
    std::string path = prefix + "." + t.name + ".bin";
    (void)ptxbench::gpu::WriteFileBytes(
        path, std::string(reinterpret_cast<const char*>(data.data()), n * 2));
    files.push_back({{"tensor", t.name}, {field, path}, {"bytes", n * 2}});
  }
  return files;
}

std::string Field(const json& cmd) {
  return cmd.value("transfer", std::string()) == "ipc" ? "ipc" : "path";
}

// The reference process's "compare": the reference regenerated, the candidate's files read back.
json Compare(const ptxbench::Task& task, const json& cmd) {
  json event = {{"event", "compare"}, {"workload", cmd["workload"]}, {"seed", cmd["seed"]}};
  const ptxbench::Workload* w = nullptr;
  for (const auto& x : task.workloads) {
    if (x.name == cmd["workload"]) w = &x;
  }
  ptxbench::gpu::ToleranceRule rule;
  rule.atol = task.tolerance.atol;
  rule.rtol = task.tolerance.rtol;
  rule.matched_ratio = task.tolerance.matched_ratio;
  json tensors = json::object();
  for (const ptxbench::TensorSpec& t : task.tensors) {
    if (t.role != ptxbench::TensorRole::kOutput) continue;
    std::vector<int64_t> shape;
    uint64_t n = 1;
    for (const std::string& d : t.shape) {
      shape.push_back(*ptxbench::EvalIntExpr(d, w->axes));
      n *= static_cast<uint64_t>(shape.back());
    }
    std::string path;
    for (const json& o : cmd["outputs"]) {
      if (o.value("tensor", std::string()) != t.name) continue;
      if (o.contains("ipc") && behaviour == "no_ipc") {
        return {{"event", "compare"}, {"ipc_failed", "fake: cudaErrorMapBufferObjectFailed"}};
      }
      path = o.value(o.contains("ipc") ? "ipc" : "path", std::string());
    }
    std::string got = *ptxbench::gpu::ReadFileBytes(path);
    std::vector<uint16_t> expected(n);
    for (uint64_t i = 0; i < n; ++i) expected[i] = Element(U(cmd["seed"]), i);
    tensors[t.name] = ptxbench::gpu::ToJson(ptxbench::gpu::CompareOutputs(
        got.data(), expected.data(), n, ptxbench::gpu::ElementType::kBF16, shape, rule,
        ptxbench::gpu::kPoisonBF16, 1));
  }
  event["tensors"] = tensors;
  event["seconds"] = 0.001;
  return event;
}

json Device() {
  return {{"name", "Fake H200"},         {"arch", "sm_90a"},
          {"compute_capability", "9.0"}, {"sm_count", 132},
          {"sm_clock_max_khz", 1980000}, {"memory_clock_max_khz", 3201000},
          {"memory_bus_bits", 6144},     {"runtime_version", 13000},
          {"driver_version", 13000},     {"uuid", "GPU-fake"}};
}

std::string InputHash(uint64_t seed, uint64_t key) { return ptxbench::gpu::U64(Mix64(seed ^ key)); }

}  // namespace

int main(int argc, char** argv) {
  std::string self = argv[0];
  std::string dir = self.substr(0, self.rfind('/'));
  behaviour = self.substr(self.rfind("fake-evaluator-") + 15);
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "compile") {
    std::string real = dir + "/ptxbench-evaluator";
    execv(real.c_str(), argv);
    return 2;
  }
  json request = json::object();
  if (argc > 3) request = json::parse(*ptxbench::gpu::ReadFileBytes(argv[3]), nullptr, false);
  if (mode == "health") {
    Emit({{"event", "health"}, {"ok", true}, {"device", Device()}});
    return 0;
  }
  if (mode == "sassmap") {
    json sites = {
        {"wgmma",
         {{{"pc", 256},
           {"sass", "HGMMA.64x256x16.F32.BF16 R24, gdesc[UR4], R24"},
           {"by", "sass_opcode"}}}},
        {"tma", {{{"pc", 512}, {"sass", "UTMALDG.2D [UR4], [UR8]"}, {"by", "sass_opcode"}}}}};
    json functions = {{"gemm_kernel", {{"instructions", 64}, {"sites", sites}}}};
    Emit({{"event", "sassmap"}, {"sass", {{"available", true}, {"functions", functions}}}});
    return 0;
  }
  auto task = ptxbench::LoadTask(request.value("task_dir", std::string()));
  if (!task.ok()) {
    Emit({{"event", "error"},
          {"kind", "infrastructure"},
          {"message", std::string(task.status().message())}});
    return 2;
  }
  uint64_t key = U(request.value("hash_key", json("0")));
  if (mode == "instrument") {
    uint64_t seed = U(request["seed"]);
    std::string transfer = request.value("transfer", std::string());
    ptxbench::gpu::LineReader instrument_in(0);  // One reader: it buffers past a line.
    if (request.value("wait_for_go", false)) {
      auto line = instrument_in.ReadLine(-1);
      if (!line.ok() || !line->has_value()) return 0;
      json go = json::parse(**line, nullptr, false);
      if (go.value("cmd", std::string()) != "go") return 0;
      transfer = go.value("transfer", transfer);
      request["transfer"] = transfer;
      request["started_after_go"] = true;
    }
    json records = json::array();
    if (behaviour != "no_records") {
      records.push_back({"gemm_kernel", 256, 512, 4096, 512, 0});
      records.push_back({"gemm_kernel", 512, 8, 8, 0, 8});
      records.push_back({"gemm_kernel", 768, 100, 3200, 0, 0});
    }
    json event = {{"event", "instrument"},
                  {"kernel", "gemm_kernel"},
                  {"launch_index", request.value("launch_index", 0)},
                  {"records", records},
                  {"host_inputs", request.value("host_inputs", false)},
                  {"instrumented_seconds", 0.01},
                  {"waited_for_go", request.value("started_after_go", false)}};
    const bool host_inputs = request.value("host_inputs", false);
    if (!host_inputs) {
      event["outputs"] = WriteOutputs(*task, request["workload"], seed, request["output_prefix"],
                                      false, Field(request));
      event["input_hash_before"] = event["input_hash_after"] = InputHash(seed, key);
    }
    Emit(event);
    if (Field(request) == "ipc" && !host_inputs) {
      // Like the real one: alive until the supervisor is done with the outputs.
      while (true) {
        auto line = instrument_in.ReadLine(-1);
        if (!line.ok() || !line->has_value()) return 0;
        json cmd = json::parse(**line, nullptr, false);
        if (cmd.value("cmd", std::string()) != "save_outputs") return 0;
        Emit({{"event", "outputs"},
              {"outputs", WriteOutputs(*task, request["workload"], seed, cmd["prefix"], false)}});
      }
    }
    return 0;
  }
  bool reference = mode == "reference";
  ptxbench::gpu::LineReader in(0);
  if (!reference && request.value("wait_for_module", false)) {
    // Started beside the compiler, like the real one: the module comes with "module".
    auto line = in.ReadLine(-1);
    if (!line.ok() || !line->has_value()) return 0;
    json cmd = json::parse(**line, nullptr, false);
    if (cmd.value("cmd", std::string()) != "module" ||
        !ptxbench::gpu::ReadFileBytes(cmd.value("cubin_path", std::string())).ok()) {
      return 0;
    }
  }
  Emit({{"event", "ready"}, {"device", Device()}});
  json last_trial;
  while (true) {
    auto line = in.ReadLine(-1);
    if (!line.ok() || !line->has_value()) return 0;
    json cmd = json::parse(**line, nullptr, false);
    std::string name = cmd.value("cmd", std::string());
    if (name == "quit") return 0;
    if (name == "reset" && reference) {
      Emit({{"event", "reset"}});
    } else if (name == "begin" && reference) {
      if (behaviour == "begin_dies") return 0;  // A warm process that died in between.
      key = U(cmd["hash_key"]);
      Emit({{"event", "ready"}, {"device", Device()}, {"reused", true}});
    } else if (name == "reference") {
      uint64_t seed = U(cmd["seed"]);
      Emit({{"event", "reference"},
            {"workload", cmd["workload"]},
            {"seed", cmd["seed"]},
            {"input_hash", InputHash(seed, key)}});
    } else if (name == "compare" && reference) {
      Emit(Compare(*task, cmd));
    } else if (name == "save_outputs" && !reference) {
      Emit({{"event", "outputs"},
            {"outputs", WriteOutputs(*task, last_trial["workload"], U(last_trial["seed"]),
                                     cmd["prefix"], behaviour == "wrong")}});
    } else if (name == "trial" && !reference) {
      last_trial = cmd;
      uint64_t seed = U(cmd["seed"]);
      if (behaviour == "hang") sleep(1000);
      if (behaviour == "fault") {
        Emit({{"event", "fault"},
              {"during", "trial"},
              {"message", "cudaErrorIllegalAddress (an illegal memory access was encountered)"}});
        return 3;
      }
      json event = {{"event", "trial"},
                    {"workload", cmd["workload"]},
                    {"seed", cmd["seed"]},
                    {"input_hash_before", InputHash(seed, key)},
                    {"input_hash_after",
                     behaviour == "mutate" ? InputHash(seed + 1, key) : InputHash(seed, key)},
                    {"kernel_ms", 0.5},
                    {"seconds", 0.01}};
      event["outputs"] = WriteOutputs(*task, cmd["workload"], seed, cmd["prefix"],
                                      behaviour == "wrong", Field(cmd));
      Emit(event);
    } else if (name == "time") {
      uint64_t base = U(cmd["candidate_seed_base"]), position = U(cmd["check_position_seed"]);
      size_t every = cmd.value("check_every", 16);
      json checks = json::array();
      const size_t n = 20;
      for (size_t block = 0; block * every < n; ++block) {
        size_t i = ptxbench::gpu::CheckedSampleOfBlock(position, block, every);
        if (i >= n) break;
        uint64_t seed = ptxbench::gpu::SampleSeed(base, i);
        checks.push_back({{"sample", i},
                          {"seed", ptxbench::gpu::U64(seed)},
                          {"outputs", WriteOutputs(*task, cmd["workload"], seed,
                                                   cmd["check_prefix"].get<std::string>() + "." +
                                                       std::to_string(i),
                                                   behaviour == "wrong_timed", Field(cmd))}});
      }
      uint64_t last = ptxbench::gpu::SampleSeed(base, n - 1);
      checks.push_back({{"sample", n - 1},
                        {"seed", ptxbench::gpu::U64(last)},
                        {"outputs", WriteOutputs(*task, cmd["workload"], last,
                                                 cmd["check_prefix"].get<std::string>() + ".last",
                                                 behaviour == "wrong_timed", Field(cmd))}});
      double cand = behaviour == "too_fast" ? 1e-6 : 0.8;
      json side = {{"n", n}, {"median_ms", cand}};
      Emit({{"event", "timing"},
            {"workload", cmd["workload"]},
            {"result",
             {{"candidate", side},
              {"baseline", {{"n", n}, {"median_ms", 0.75}}},
              {"speedup", 0.75 / cand},
              {"kernel_ms_total", 31.0},
              {"stop_reason", "converged"},
              {"clocks", json::array()}}},
            {"checks", checks},
            {"baseline", {{"library", "fake"}}},
            {"seconds", 0.1}});
    }
  }
}
