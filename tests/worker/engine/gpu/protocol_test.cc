// The line protocol over real pipes.
#include "worker/engine/gpu/protocol.h"

#include <unistd.h>

#include <catch2/catch.hpp>

namespace ptxbench::gpu {
namespace {

TEST_CASE("lines arrive whole, partial lines wait, EOF returns the rest", "[protocol]") {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  REQUIRE(WriteJsonLine(fds[1], {{"a", 1}}).ok());
  REQUIRE(write(fds[1], "{\"b\":2}\n{\"c\"", 12) == 12);
  LineReader reader(fds[0]);
  auto first = reader.ReadLine(1000);
  REQUIRE(first.ok());
  CHECK(**first == "{\"a\":1}");
  auto second = reader.ReadLine(1000);
  REQUIRE(second.ok());
  CHECK(**second == "{\"b\":2}");
  auto partial = reader.ReadLine(50);
  CHECK(partial.status().code() == absl::StatusCode::kDeadlineExceeded);
  close(fds[1]);
  auto rest = reader.ReadLine(1000);
  REQUIRE(rest.ok());
  CHECK(**rest == "{\"c\"");
  auto eof = reader.ReadLine(1000);
  REQUIRE(eof.ok());
  CHECK_FALSE(eof->has_value());
  close(fds[0]);
}

TEST_CASE("64-bit seeds travel as decimal strings", "[protocol]") {
  uint64_t big = 18446744073709551615ull;
  auto parsed = ParseU64(nlohmann::json(U64(big)));
  REQUIRE(parsed.ok());
  CHECK(*parsed == big);
  CHECK(*ParseU64(nlohmann::json(42)) == 42);
  CHECK_FALSE(ParseU64(nlohmann::json("-1")).ok());
  CHECK_FALSE(ParseU64(nlohmann::json("18446744073709551616")).ok());
  CHECK_FALSE(ParseU64(nlohmann::json("12x")).ok());
  CHECK_FALSE(ParseU64(nlohmann::json(-3)).ok());
}

}  // namespace
}  // namespace ptxbench::gpu
