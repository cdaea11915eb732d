// The compile cache: a key that changes with every compile input (the toolchain's versions
// among them), hits and misses, the LRU bound, and the tamper check that refuses an entry
// whose bytes no longer hash to what was stored.
#include "worker/engine/compile_cache.h"

#include <catch2/catch.hpp>
#include <string>

#include "common/sha256.h"

namespace ptxbench::engine {
namespace {

CompileInputs GemmInputs() {
  CompileInputs in;
  in.task_id = "gemm_n7168_k5120";
  in.task_version_hash = "3f0c";
  in.arch = "sm_90a";
  in.language = "cuda";
  in.source = "extern \"C\" __global__ void gemm() {}\n";
  in.launch_plan_json = "";
  in.nvrtc_version = "13.0";
  in.ptxas_version = "13.0.88";
  in.harness_version = "0.9.0";
  return in;
}

CachedCompile Entry(const std::string& cubin, const std::string& ptx = ".version 9.0") {
  return CachedCompile{R"({"outcome":"compiled"})", cubin, ptx, Sha256Hex(cubin), Sha256Hex(ptx)};
}

TEST_CASE("the compile cache key changes with every input") {
  const std::string base = CompileCacheKey(GemmInputs());
  CHECK(base.size() == 64);
  CHECK(CompileCacheKey(GemmInputs()) == base);
  const std::vector<std::function<void(CompileInputs&)>> changes = {
      [](CompileInputs& in) { in.task_id = "mha_bwd_d128"; },
      [](CompileInputs& in) { in.task_version_hash = "3f0d"; },
      [](CompileInputs& in) { in.arch = "sm_100a"; },
      [](CompileInputs& in) { in.language = "ptx"; },
      [](CompileInputs& in) { in.source += " "; },
      [](CompileInputs& in) { in.launch_plan_json = "{}"; },
      [](CompileInputs& in) { in.nvrtc_version = "13.1"; },
      [](CompileInputs& in) { in.ptxas_version = "13.0.89"; },
      [](CompileInputs& in) { in.harness_version = "0.9.1"; },
  };
  for (size_t i = 0; i < changes.size(); ++i) {
    CompileInputs in = GemmInputs();
    changes[i](in);
    INFO("change " << i);
    CHECK(CompileCacheKey(in) != base);
  }
  // Length-prefixed fields: moving bytes from one field to the next is another key.
  CompileInputs shifted = GemmInputs();
  shifted.task_id = "gemm_n7168_k512";
  shifted.task_version_hash = "03f0c";
  CHECK(CompileCacheKey(shifted) != base);
}

TEST_CASE("a stored compile is found by its key, and nothing else is") {
  CompileCache cache;
  const std::string key = CompileCacheKey(GemmInputs());
  CHECK_FALSE(cache.Get(key).has_value());
  REQUIRE(cache.Put(key, Entry("cubin-bytes")).ok());
  auto hit = cache.Get(key);
  REQUIRE(hit.has_value());
  CHECK(hit->cubin == "cubin-bytes");
  CHECK(hit->event_json == R"({"outcome":"compiled"})");
  CompileCacheStats stats = cache.stats();
  CHECK(stats.hits == 1);
  CHECK(stats.misses == 1);
  CHECK(stats.entries == 1);
  CHECK(stats.tampered == 0);
}

TEST_CASE("a different toolchain version misses the compile cache") {
  CompileCache cache;
  REQUIRE(cache.Put(CompileCacheKey(GemmInputs()), Entry("built by ptxas 13.0.88")).ok());
  // The worker's ptxas changed under it (an upgrade): its key is another one.
  CompileInputs upgraded = GemmInputs();
  upgraded.ptxas_version = "13.0.89";
  CHECK_FALSE(cache.Get(CompileCacheKey(upgraded)).has_value());
  CHECK(cache.stats().misses == 1);
  cache.SetToolchain("13.0", "13.0.89");
  CHECK(cache.Toolchain() == std::make_pair(std::string("13.0"), std::string("13.0.89")));
}

TEST_CASE("a tampered compile cache entry is refused, dropped and counted") {
  CompileCache cache;
  const std::string key = CompileCacheKey(GemmInputs());
  REQUIRE(cache.Put(key, Entry("the submission's cubin")).ok());
  // Same length, other bytes: a cubin that is not the submission's.
  std::string* cubin = cache.MutableCubinForTesting(key);
  REQUIRE(cubin != nullptr);
  (*cubin)[4] ^= 0x01;
  CHECK_FALSE(cache.Get(key).has_value());
  CompileCacheStats stats = cache.stats();
  CHECK(stats.tampered == 1);
  CHECK(stats.entries == 0);
  CHECK(stats.bytes == 0);
  // Gone: the next lookup is a plain miss, and a fresh compile can be stored again.
  CHECK_FALSE(cache.Get(key).has_value());
  CHECK(cache.stats().tampered == 1);
  REQUIRE(cache.Put(key, Entry("the submission's cubin")).ok());
  CHECK(cache.Get(key).has_value());
}

TEST_CASE("the compile cache refuses bytes that do not match the compile report's hashes") {
  CompileCache cache;
  CachedCompile entry = Entry("cubin");
  entry.cubin = "another cubin";
  absl::Status put = cache.Put("k", entry);
  CHECK(put.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(put.message()).find("SHA-256") != std::string::npos);
  entry = Entry("cubin");
  entry.ptx_sha256 = Sha256Hex("other ptx");
  CHECK_FALSE(cache.Put("k", entry).ok());
  CHECK(cache.stats().entries == 0);
}

TEST_CASE("the compile cache stays under its byte bound, dropping the least recently used") {
  const std::string event = R"({"outcome":"compiled"})";
  const std::string ptx = ".version 9.0";
  const size_t entry_size = event.size() + 100 + ptx.size();
  CompileCache cache(3 * entry_size);
  for (const char* key : {"a", "b", "c"}) {
    REQUIRE(cache.Put(key, Entry(std::string(100, key[0]), ptx)).ok());
  }
  CHECK(cache.Get("a").has_value());  // "b" is now the least recently used.
  REQUIRE(cache.Put("d", Entry(std::string(100, 'd'), ptx)).ok());
  CHECK_FALSE(cache.Get("b").has_value());
  CHECK(cache.Get("a").has_value());
  CHECK(cache.Get("c").has_value());
  CHECK(cache.Get("d").has_value());
  CompileCacheStats stats = cache.stats();
  CHECK(stats.evictions == 1);
  CHECK(stats.entries == 3);
  CHECK(stats.bytes == static_cast<int64_t>(3 * entry_size));
  // An entry larger than the whole cache is refused rather than emptying it.
  CHECK_FALSE(cache.Put("huge", Entry(std::string(4 * entry_size, 'h'), ptx)).ok());
  CHECK(cache.stats().entries == 3);
}

}  // namespace
}  // namespace ptxbench::engine
