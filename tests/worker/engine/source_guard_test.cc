// The include gate against the ways a source can hide a directive from a lexer that reads it
// differently from NVRTC (issue 12: prefixed character literals made the old gate read "/*" as a
// comment while NVRTC compiled the #include after it), and the sources it must still accept.
#include "worker/engine/source_guard.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace ptxbench {
namespace {

const std::map<std::string, std::string> kHeaders = {{"ptxbench_test.cuh", "#define V 3\n"}};

std::string Refusal(const std::string& source) {
  const auto refusal = CheckIncludes(source, "submission.cu", kHeaders);
  return refusal.value_or("");
}

TEST_CASE("Host includes hidden behind literals, numbers, splices and comments are refused") {
  const std::string include = "#include </etc/passwd>\n";
  // Each opens something the old lexer took for a comment, or a raw string, that NVRTC does not.
  const std::vector<std::string> hiders = {
      "int a = L'/*';\n",
      "int a = u'/*';\n",
      "int a = U'/*';\n",
      "int a = u8'/*';\n",
      "int a = x'/*';\n",
      "auto a = \"s\"_x'/*';\n",
      "auto a = 'a'_x'/*';\n",
      "int a = 1$'/*';\n",
      "auto s = xR\"(\n",
      "auto s = \"a\"R\"(\n",
      "auto s = R\"12345678901234567(\n",
      "int a = 0'/*';\n",
      "int a = 1'000; /*\n",
      "int a = 0x1'F /*\n",
      "int a = 1'a' /*\n",
      "auto a = ''R\"(\n",
      "// x ?\?/\n",
      "// x \\ \n",
      "#if 0\nint a = 1'0 /*\n#endif\n",
      "#line 7'0 /*\n",
      "#define X 7'0.5'# /*\n",
      "#pragma 7R\"x(\n",
  };
  for (const std::string& hider : hiders) {
    const std::string source = hider + include + "// */ )\" )12345678901234567\"\n";
    INFO(source);
    const std::string refusal = Refusal(source);
    CHECK_FALSE(refusal.empty());
    CHECK(refusal.find(" is refused") != std::string::npos);
  }
}

TEST_CASE("A line NVRTC reads two ways is refused with its line and text") {
  const std::string refusal =
      Refusal("__global__ void k() {}\nint n = 7'168; /* the N\ndimension */\n");
  CHECK(refusal.rfind("submission.cu:2: this line (int n = 7'168; /* the N) is refused: NVRTC "
                      "reads it one way in code it compiles and another in a skipped #if group",
                      0) == 0);
}

TEST_CASE("Directives beyond the usual ones are refused") {
  CHECK(
      Refusal("#ident \"x\"\n")
          .rfind(
              "submission.cu:1: #ident is refused: only #include (of the task's template headers), "
              "#define",
              0) == 0);
  CHECK(Refusal("#if 0\n#sccs x\n#endif\n").rfind("submission.cu:2: #sccs is refused", 0) == 0);
  CHECK(Refusal("#assert x(y)\n").rfind("submission.cu:1: #assert is refused", 0) == 0);
}

TEST_CASE("Honest sources pass: separators, suffixes, raw strings, comments in directives") {
  const std::vector<std::string> honest = {
      "#include \"ptxbench_test.cuh\"\nconstexpr int kN = 7'168;\nconstexpr long kM = 0x1'0000;\n",
      "__device__ const char* s = R\"ptx(\n  mov.u32 %r1, 1; // #include </etc/passwd>\n)ptx\";\n",
      "#define TILE 128 /* rows per\n                    block */\nint x = TILE;\n",
      "// #include </etc/passwd>\n/* #include </etc/passwd> */\nint c = 'a';\n",
      "#pragma unroll\n#pragma nv_diag_suppress 177\n#line 10 \"kernel.cu\"\n# 12\n#\n",
      "#if 0\n#error not built\n#elif 1\n#warning built\n#else\n#endif\n",
  };
  for (const std::string& source : honest) {
    INFO(source);
    CHECK(Refusal(source).empty());
  }
}

}  // namespace
}  // namespace ptxbench
