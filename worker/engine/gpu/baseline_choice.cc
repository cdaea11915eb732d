#include "worker/engine/gpu/baseline_choice.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ptxbench::gpu {

absl::StatusOr<size_t> ChooseFastestBaseline(const std::vector<BaselineCandidateFigure>& figures) {
  const BaselineCandidateFigure* first = nullptr;
  for (const BaselineCandidateFigure& f : figures) {
    if (f.index == 0) first = &f;
  }
  // The library's failures, not the submission's: infrastructure (Internal), never a verdict
  // against the candidate (an InvalidArgument here once read as plan_invalid on the H100).
  if (first == nullptr) {
    return absl::InternalError("baseline choice: the heuristic's first choice (0) is missing");
  }
  if (!first->eligible || first->runs == 0 || !(first->median_ms > 0)) {
    return absl::InternalError(absl::StrCat(
        "baseline choice: the heuristic's first choice was not timed (", first->note, ")"));
  }
  // In the library's order, so that a tie keeps the earlier-ranked candidate.
  std::vector<const BaselineCandidateFigure*> ranked;
  ranked.reserve(figures.size());
  for (const BaselineCandidateFigure& f : figures) ranked.push_back(&f);
  std::sort(ranked.begin(), ranked.end(),
            [](const auto* a, const auto* b) { return a->index < b->index; });
  const BaselineCandidateFigure* best = first;
  for (const BaselineCandidateFigure* f : ranked) {
    if (f == first || !f->eligible || f->runs == 0 || !(f->median_ms > 0)) continue;
    if (f->median_ms < best->median_ms * (1 - kBaselineTieFraction)) best = f;
  }
  return best->index;
}

std::vector<size_t> InterleavedRunOrder(size_t candidates, size_t rounds) {
  std::vector<size_t> order;
  order.reserve(candidates * rounds);
  for (size_t r = 0; r < rounds; ++r) {
    for (size_t j = 0; j < candidates; ++j) order.push_back((r + j) % candidates);
  }
  return order;
}

std::string BaselineChoiceKey(const std::string& task_hash, const std::string& workload,
                              const std::map<std::string, int64_t>& axes,
                              const std::string& gpu_name, const std::string& library,
                              const std::string& operation) {
  std::string key = absl::StrCat(task_hash, "|", workload, "|");
  for (const auto& [axis, value] : axes) absl::StrAppend(&key, axis, "=", value, ",");
  absl::StrAppend(&key, "|", gpu_name, "|", library, "/", operation);
  return key;
}

BaselineChoiceCache& BaselineChoiceCache::Process() {
  static BaselineChoiceCache* const kCache = new BaselineChoiceCache();
  return *kCache;
}

std::optional<CachedBaselineChoice> BaselineChoiceCache::Find(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = choices_.find(key);
  if (it == choices_.end()) return std::nullopt;
  return it->second;
}

void BaselineChoiceCache::Store(const std::string& key, const CachedBaselineChoice& choice) {
  std::lock_guard<std::mutex> lock(mu_);
  choices_[key] = choice;
}

void BaselineChoiceCache::NoteGpu(int ordinal, const std::string& gpu_name) {
  std::lock_guard<std::mutex> lock(mu_);
  gpu_names_[ordinal] = gpu_name;
}

std::optional<std::string> BaselineChoiceCache::GpuName(int ordinal) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = gpu_names_.find(ordinal);
  if (it == gpu_names_.end()) return std::nullopt;
  return it->second;
}

void BaselineChoiceCache::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  choices_.clear();
  gpu_names_.clear();
}

size_t BaselineChoiceCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return choices_.size();
}

}  // namespace ptxbench::gpu
