// SHA-256 (FIPS 180-4), implemented here so that common needs no crypto library. Used for task
// version hashes and source hashes, which are pinned in every verdict and must be reproducible
// bit for bit on every machine.
#ifndef PTXBENCH_COMMON_SHA256_H_
#define PTXBENCH_COMMON_SHA256_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ptxbench {

// Incremental hasher: Update() any number of times, then Finish() once.
class Sha256 {
 public:
  using Digest = std::array<uint8_t, 32>;

  Sha256();
  void Update(std::string_view data);
  Digest Finish();

 private:
  void ProcessBlock(const uint8_t* block);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_;
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

// Lowercase hexadecimal of a digest (64 characters).
std::string DigestHex(const Sha256::Digest& digest);

// One-shot convenience: lowercase hex SHA-256 of `data`.
std::string Sha256Hex(std::string_view data);

}  // namespace ptxbench

#endif  // PTXBENCH_COMMON_SHA256_H_
