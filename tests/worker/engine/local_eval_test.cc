// Where `ptxbench eval` puts the evaluation's private folders (worker/engine/local_eval.h): the
// user's $TMPDIR, unless the sandbox user (nobody, when run as root) cannot pass through it.
#include "worker/engine/local_eval.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <optional>
#include <string>

#include "tests/support/temp_files.h"

namespace ptxbench::engine {
namespace {

using ::ptxbench::testing::ScopedEnv;

TEST_CASE("local eval: the work root is $TMPDIR unless the sandbox user cannot pass it") {
  // Made under /tmp: the test's own $TMPDIR may itself be private.
  const ScopedEnv under_tmp("TMPDIR", "/tmp");
  const testing::ScopedTempDir dir;
  // mkdtemp makes its folder 0700; opened up, folders inside it are as passable as their mode.
  REQUIRE(chmod(dir.path().c_str(), 0755) == 0);
  auto folder = [&](const std::string& name, mode_t mode) {
    std::string path = dir.path() + "/" + name;
    REQUIRE(std::filesystem::create_directory(path));
    REQUIRE(chmod(path.c_str(), mode) == 0);
    return path;
  };

  SECTION("a folder anyone can pass is kept") {
    const std::string open_tmp = folder("open", 0755);
    const ScopedEnv tmpdir("TMPDIR", open_tmp);
    const LocalWorkRoot root = ChooseLocalWorkRoot();
    CHECK(root.path == open_tmp);
    CHECK(root.note.empty());
  }
  SECTION("without $TMPDIR: /tmp") {
    const ScopedEnv tmpdir("TMPDIR", std::nullopt);
    const LocalWorkRoot root = ChooseLocalWorkRoot();
    CHECK(root.path == "/tmp");
    CHECK(root.note.empty());
  }
  SECTION("a private folder is passed over as root, and the note says why") {
    const std::string private_tmp = folder("private", 0700);
    const ScopedEnv tmpdir("TMPDIR", private_tmp);
    const LocalWorkRoot root = ChooseLocalWorkRoot();
    if (geteuid() == 0) {
      // The sandboxes run as nobody, who could not reach a folder under it.
      CHECK(root.path == "/tmp");
      CHECK(root.note == "TMPDIR " + private_tmp + " is not reachable by the sandbox user (" +
                             private_tmp + " has no execute bit for others); working under /tmp");
    } else {
      // As any other user the sandboxes run as that user, who owns the folder.
      CHECK(root.path == private_tmp);
      CHECK(root.note.empty());
    }
  }
}

}  // namespace
}  // namespace ptxbench::engine
