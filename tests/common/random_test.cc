// common/random: hex from getrandom(2).
#include "common/random.h"

#include <catch2/catch.hpp>
#include <set>
#include <string>

namespace ptxbench {
namespace {

TEST_CASE("RandomHex: twice the bytes in lower-case hex digits, different every time") {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    absl::StatusOr<std::string> hex = RandomHex(16);
    REQUIRE(hex.ok());
    REQUIRE(hex->size() == 32);
    CHECK(hex->find_first_not_of("0123456789abcdef") == std::string::npos);
    seen.insert(*hex);
  }
  CHECK(seen.size() == 100);  // 128 random bits: a repeat means the bytes are not random.
  // Large requests are filled whole (getrandom may return fewer bytes than asked).
  absl::StatusOr<std::string> large = RandomHex(size_t{1} << 20);
  REQUIRE(large.ok());
  CHECK(large->size() == size_t{2} << 20);
  CHECK(large->find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(RandomHex(0).value_or("x").empty());
}

}  // namespace
}  // namespace ptxbench
