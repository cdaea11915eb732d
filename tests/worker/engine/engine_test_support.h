// Helpers shared by the engine tests: where the source tree is, and file reading.
#ifndef PTXBENCH_TESTS_WORKER_ENGINE_ENGINE_TEST_SUPPORT_H_
#define PTXBENCH_TESTS_WORKER_ENGINE_ENGINE_TEST_SUPPORT_H_

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace ptxbench {

// ctest sets PTXBENCH_SOURCE_DIR; run by hand, the build's source directory is compiled in.
inline std::string SourceDir() {
  if (const char* dir = std::getenv("PTXBENCH_SOURCE_DIR")) return dir;
  return PTXBENCH_SOURCE_DIR_DEFAULT;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

}  // namespace ptxbench

#endif  // PTXBENCH_TESTS_WORKER_ENGINE_ENGINE_TEST_SUPPORT_H_
