// A worker-local, content-addressed cache of compile results, so that a worker never compiles
// the same input twice (issue 16: each evaluate job recompiled, 0.4-1.0 s on the H200, the
// source its compile job had just compiled). It lives in the worker process's memory and
// survives nothing but that process.
//
// Threat model (docs/architecture.md, "Compile artifact reuse"):
//  - The key is sha256 over every input of the compile, each length-prefixed: the submission
//    (task id and version hash, arch, language, source, launch plan) and the toolchain that
//    compiled it (NVRTC version, ptxas version, harness version). A lookup computes the key
//    from what THIS worker would compile with, so an entry made by another toolchain, another
//    task version or another source can never be found.
//  - The entry stores the SHA-256 of its cubin and PTX bytes as they were when the compile
//    finished (checked against the compile report's own hashes at Put). Every Get hashes the
//    bytes again: bytes that no longer match are refused, the entry is dropped and counted as
//    tampered, and the caller compiles afresh.
//  - Only successful compiles are cached: a compile error or a refused plan is always
//    recomputed (cheap, and its log is the model's feedback).
// Residual trust: the compile process that produced the entry (the same process whose output
// an uncached evaluation would trust), and this worker's own memory.
#ifndef PTXBENCH_WORKER_ENGINE_COMPILE_CACHE_H_
#define PTXBENCH_WORKER_ENGINE_COMPILE_CACHE_H_

#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "absl/status/status.h"

namespace ptxbench::engine {

// Everything a compile's output depends on. `toolchain` is NVRTC's and ptxas's versions and
// the harness version, as the compile report records them.
struct CompileInputs {
  std::string task_id;
  std::string task_version_hash;
  std::string arch;
  std::string language;
  std::string source;
  std::string launch_plan_json;
  std::string nvrtc_version;
  std::string ptxas_version;
  std::string harness_version;
};

// sha256 (hex) over every field, each length-prefixed, so no two inputs share a key.
std::string CompileCacheKey(const CompileInputs& inputs);

struct CachedCompile {
  std::string event_json;  // The compile event as the compile process sent it.
  std::string cubin;
  std::string ptx;
  std::string cubin_sha256;  // Of the bytes above when they were stored.
  std::string ptx_sha256;
};

struct CompileCacheStats {
  int64_t hits = 0;
  int64_t misses = 0;
  int64_t tampered = 0;   // Entries refused because their bytes no longer matched.
  int64_t evictions = 0;  // Least recently used entries dropped to stay under max_bytes.
  int64_t entries = 0;
  int64_t bytes = 0;
};

class CompileCache {
 public:
  // 256 MiB: 2,000 reference GEMM modules (about 120 KiB of cubin and PTX each) on a worker
  // with tens of GiB of memory.
  static constexpr size_t kDefaultMaxBytes = size_t{256} << 20;

  explicit CompileCache(size_t max_bytes = kDefaultMaxBytes);
  CompileCache(const CompileCache&) = delete;
  CompileCache& operator=(const CompileCache&) = delete;

  // Stores an entry whose cubin and PTX hash to the given SHA-256 (the compile report's);
  // InvalidArgument when they do not (nothing is stored), or when the entry alone exceeds
  // max_bytes.
  absl::Status Put(const std::string& key, CachedCompile entry);
  // The entry when present and its bytes still hash to what was stored; nullopt otherwise
  // (a tampered entry is dropped and counted).
  std::optional<CachedCompile> Get(const std::string& key);

  // The toolchain of the latest real compile on this worker: the versions a lookup keys by
  // (empty until the first compile, so the first lookup misses).
  void SetToolchain(const std::string& nvrtc_version, const std::string& ptxas_version);
  std::pair<std::string, std::string> Toolchain() const;

  CompileCacheStats stats() const;

  // For tests of the tamper check: the stored bytes of an entry, to overwrite.
  std::string* MutableCubinForTesting(const std::string& key);

 private:
  struct Slot {
    CachedCompile entry;
    std::list<std::string>::iterator lru;
  };
  static int64_t SizeOf(const CachedCompile& entry);
  void EraseLocked(std::unordered_map<std::string, Slot>::iterator it);

  const size_t max_bytes_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Slot> slots_;
  std::list<std::string> lru_;  // Most recently used first.
  std::string nvrtc_version_;
  std::string ptxas_version_;
  CompileCacheStats stats_;
};

}  // namespace ptxbench::engine

#endif  // PTXBENCH_WORKER_ENGINE_COMPILE_CACHE_H_
