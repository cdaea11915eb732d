// LogQuoted: nothing a caller writes can end a log line or pass for a quote of ours.
#include "server/api/log_text.h"

#include <catch2/catch.hpp>
#include <string>

namespace ptxbench::api {
namespace {

TEST_CASE("control characters, quotes and non-UTF-8 bytes are escaped", "[log_text]") {
  CHECK(LogQuoted("plain model-1") == "\"plain model-1\"");
  CHECK(LogQuoted("a\nsubmission accepted") == "\"a\\nsubmission accepted\"");
  CHECK(LogQuoted("a\r\tb") == "\"a\\r\\tb\"");
  CHECK(LogQuoted("say \"hi\" \\") == "\"say \\\"hi\\\" \\\\\"");
  CHECK(LogQuoted(std::string("nul\0x\x1b[31m\x7f", 11)) == "\"nul\\x00x\\x1b[31m\\x7f\"");
  CHECK(LogQuoted("\xc2\x85next line") == "\"\\u0085next line\"");                 // NEL (C1).
  CHECK(LogQuoted("line\xe2\x80\xa8sep") == "\"line\\u2028sep\"");                 // U+2028.
  CHECK(LogQuoted("caf\xc3\xa9 \xe6\xbc\xa2") == "\"caf\xc3\xa9 \xe6\xbc\xa2\"");  // Kept.
  CHECK(LogQuoted("bad\xff\xc0\x80") == "\"bad\\xff\\xc0\\x80\"");  // Not UTF-8, overlong.
}

TEST_CASE("long texts are cut and say by how much", "[log_text]") {
  const std::string quoted = LogQuoted(std::string(600, 'm'), 512);
  CHECK(quoted == "\"" + std::string(512, 'm') + "...(+88 bytes)\"");
}

}  // namespace
}  // namespace ptxbench::api
