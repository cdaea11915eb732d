// The fair baseline (issue 16): which of the library's candidate algorithms the candidate
// submission is timed against, and the worker's cache of that choice. CPU-only: the timing
// process measures (worker/evaluator/candidate_mode.cc), this decides and remembers.
#ifndef PTXBENCH_WORKER_ENGINE_GPU_BASELINE_CHOICE_H_
#define PTXBENCH_WORKER_ENGINE_GPU_BASELINE_CHOICE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/engine/gpu/protocol_messages.h"

namespace ptxbench::gpu {

// A later candidate replaces the best so far only when its median is at least this much lower:
// closer than that is timing noise (the interleaved A/A ratio of the cuBLASLt GEMM against
// itself is within 1.001 on the H200, docs/results/2026-12-02-h200-gpu-test-3.json), and the
// library's own order then decides, so that workers of one GPU model choose alike.
inline constexpr double kBaselineTieFraction = 0.003;

// The index of the fastest eligible timed candidate under the tie rule. Candidate 0 (the
// heuristic's first choice, where the references come from) must be present and eligible:
// InvalidArgument otherwise, naming what is wrong.
absl::StatusOr<size_t> ChooseFastestBaseline(const std::vector<BaselineCandidateFigure>& figures);

// The order in which the candidate process times the eligible candidates (candidate_mode.cc
// ChooseBaseline): `rounds` rounds, each running every candidate once, round r in the rotated
// order r mod n, r+1 mod n, ... (positions 0..n-1 of `candidates`). Why interleaved: timed one
// after another (every run of candidate 0, then of 1, ...), a candidate's median carried the GPU's
// state at its turn - clocks still ramping for the first, the software power cap's throttle for
// the later ones (docs/measurement.md "Timing") - and the choice moved between processes on one
// H200: heuristic #0 in one, #3 in the next, speedups 0.966 against 0.947 for the same kernel
// (docs/results/2026-12-06-h200-start-up-interference.json and -reference-candidates). Rotated,
// every candidate meets every moment of the drift alike, so the medians compare the candidates,
// and each takes every position of a round equally often when `rounds` is a multiple of n.
std::vector<size_t> InterleavedRunOrder(size_t candidates, size_t rounds);

// What a choice depends on: the task's content hash, the timed workload and its axes, the GPU
// model and the library operation. The library's version is not in the key: the cached
// algorithm's description (which carries it) must equal the candidate's, or it is measured again.
std::string BaselineChoiceKey(const std::string& task_hash, const std::string& workload,
                              const std::map<std::string, int64_t>& axes,
                              const std::string& gpu_name, const std::string& library,
                              const std::string& operation);

// The choices made on this worker, for the life of the process (the worker daemon's: every
// evaluation of the same key after the first times against the same algorithm without
// measuring again). Thread-safe.
class BaselineChoiceCache {
 public:
  static BaselineChoiceCache& Process();
  std::optional<CachedBaselineChoice> Find(const std::string& key) const;
  // Records a measured choice; a choice that failed (its algorithm changed) is replaced.
  void Store(const std::string& key, const CachedBaselineChoice& choice);
  // The GPU model each device ordinal of this process answered with (a start-up's ReadyEvent):
  // a candidate process started beside the compiler, before its own answer, is handed the
  // choice for its key with it (evaluate_processes.cc CandidateProcess::StartEarly).
  void NoteGpu(int ordinal, const std::string& gpu_name);
  std::optional<std::string> GpuName(int ordinal) const;
  void Clear();  // Choices and GPU models.
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, CachedBaselineChoice> choices_;
  std::map<int, std::string> gpu_names_;
};

}  // namespace ptxbench::gpu

#endif  // PTXBENCH_WORKER_ENGINE_GPU_BASELINE_CHOICE_H_
