#include "worker/engine/compile_cache.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/sha256.h"

namespace ptxbench::engine {

std::string CompileCacheKey(const CompileInputs& inputs) {
  Sha256 hash;
  for (const std::string* field :
       {&inputs.task_id, &inputs.task_version_hash, &inputs.arch, &inputs.language, &inputs.source,
        &inputs.launch_plan_json, &inputs.nvrtc_version, &inputs.ptxas_version,
        &inputs.harness_version}) {
    // Length-prefixed: ("ab", "c") and ("a", "bc") hash apart.
    hash.Update(absl::StrCat(field->size(), ":"));
    hash.Update(*field);
  }
  return DigestHex(hash.Finish());
}

CompileCache::CompileCache(size_t max_bytes) : max_bytes_(max_bytes) {}

int64_t CompileCache::SizeOf(const CachedCompile& entry) {
  return static_cast<int64_t>(entry.event_json.size() + entry.cubin.size() + entry.ptx.size());
}

void CompileCache::EraseLocked(std::unordered_map<std::string, Slot>::iterator it) {
  stats_.bytes -= SizeOf(it->second.entry);
  --stats_.entries;
  lru_.erase(it->second.lru);
  slots_.erase(it);
}

absl::Status CompileCache::Put(const std::string& key, CachedCompile entry) {
  if (Sha256Hex(entry.cubin) != entry.cubin_sha256 || Sha256Hex(entry.ptx) != entry.ptx_sha256) {
    spdlog::warn(
        "compile cache: a module whose bytes do not hash to its compile report's SHA-256 (cubin "
        "{}) was not stored",
        entry.cubin_sha256.substr(0, 16));
    return absl::InvalidArgumentError(
        "compile cache: the module's bytes do not hash to the compile report's SHA-256; not "
        "stored");
  }
  const int64_t size = SizeOf(entry);
  if (size > static_cast<int64_t>(max_bytes_)) {
    return absl::InvalidArgumentError(absl::StrCat("compile cache: an entry of ", size,
                                                   " bytes exceeds the cache's ", max_bytes_));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = slots_.find(key); it != slots_.end()) EraseLocked(it);
  while (!lru_.empty() && stats_.bytes + size > static_cast<int64_t>(max_bytes_)) {
    EraseLocked(slots_.find(lru_.back()));
    ++stats_.evictions;
  }
  lru_.push_front(key);
  slots_.emplace(key, Slot{std::move(entry), lru_.begin()});
  stats_.bytes += size;
  ++stats_.entries;
  return absl::OkStatus();
}

std::optional<CachedCompile> CompileCache::Get(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = slots_.find(key);
  if (it == slots_.end()) {
    ++stats_.misses;
    return std::nullopt;
  }
  const CachedCompile& entry = it->second.entry;
  if (Sha256Hex(entry.cubin) != entry.cubin_sha256 || Sha256Hex(entry.ptx) != entry.ptx_sha256) {
    spdlog::warn(
        "compile cache: entry {} refused: its module bytes no longer hash to the stored "
        "SHA-256 (cubin {}); dropped, the source is compiled again",
        key.substr(0, 16), entry.cubin_sha256.substr(0, 16));
    EraseLocked(it);
    ++stats_.tampered;
    ++stats_.misses;
    return std::nullopt;
  }
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  ++stats_.hits;
  return entry;
}

void CompileCache::SetToolchain(const std::string& nvrtc_version,
                                const std::string& ptxas_version) {
  std::lock_guard<std::mutex> lock(mu_);
  nvrtc_version_ = nvrtc_version;
  ptxas_version_ = ptxas_version;
}

std::pair<std::string, std::string> CompileCache::Toolchain() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {nvrtc_version_, ptxas_version_};
}

CompileCacheStats CompileCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

std::string* CompileCache::MutableCubinForTesting(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = slots_.find(key);
  return it == slots_.end() ? nullptr : &it->second.entry.cubin;
}

}  // namespace ptxbench::engine
