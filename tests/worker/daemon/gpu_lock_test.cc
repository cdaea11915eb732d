// The per-GPU lock (worker/daemon/gpu_lock.h): one holder at a time, the refusal naming the GPU,
// the lock file and the holder's pid, released with its owner, and bad keys and directories
// refused by name.
#include "worker/daemon/gpu_lock.h"

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

#include "absl/strings/str_cat.h"

namespace ptxbench::worker {
namespace {

std::string TempDir() {
  char templ[] = "/tmp/ptxbench-gpu-lock-XXXXXX";
  REQUIRE(mkdtemp(templ) != nullptr);
  return templ;
}

TEST_CASE("a GPU's lock has one holder; the second is refused by name until it is released",
          "[gpu_lock]") {
  const std::string dir = TempDir();
  auto first = GpuLock::Acquire(dir, "GPU-0c1d2e3f-aaaa");
  REQUIRE(first.ok());
  CHECK((*first)->path() == dir + "/ptxbench-gpu-GPU-0c1d2e3f-aaaa.lock");

  // flock(2) binds an open file description: a second open of the same file, even in this
  // process, is another holder.
  auto second = GpuLock::Acquire(dir, "GPU-0c1d2e3f-aaaa");
  REQUIRE_FALSE(second.ok());
  CHECK(second.status().code() == absl::StatusCode::kFailedPrecondition);
  const std::string message(second.status().message());
  INFO(message);
  CHECK(message.find("GPU GPU-0c1d2e3f-aaaa is already evaluated by another ptxbench-worker") !=
        std::string::npos);
  CHECK(message.find(absl::StrCat("(pid ", getpid(), ")")) != std::string::npos);
  CHECK(message.find((*first)->path()) != std::string::npos);

  // Another GPU is another lock.
  CHECK(GpuLock::Acquire(dir, "GPU-other").ok());

  first->reset();  // The first worker ends.
  CHECK(GpuLock::Acquire(dir, "GPU-0c1d2e3f-aaaa").ok());
}

TEST_CASE("a worker killed while holding the lock leaves no stale lock", "[gpu_lock]") {
  const std::string dir = TempDir();
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    auto held = GpuLock::Acquire(dir, "GPU-killed");
    const char byte = held.ok() ? 'y' : 'n';
    (void)!write(ready[1], &byte, 1);
    pause();  // Until SIGKILL.
    _exit(0);
  }
  char byte = 0;
  REQUIRE(read(ready[0], &byte, 1) == 1);
  REQUIRE(byte == 'y');
  auto while_alive = GpuLock::Acquire(dir, "GPU-killed");
  REQUIRE_FALSE(while_alive.ok());
  CHECK(std::string(while_alive.status().message()).find(absl::StrCat("(pid ", child, ")")) !=
        std::string::npos);
  kill(child, SIGKILL);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(GpuLock::Acquire(dir, "GPU-killed").ok());
  close(ready[0]);
  close(ready[1]);
}

TEST_CASE("the GPU lock refuses keys that are not file-name words and unusable directories",
          "[gpu_lock]") {
  const std::string dir = TempDir();
  for (const char* key : {"", "../etc/passwd", "GPU 1", "a/b"}) {
    auto lock = GpuLock::Acquire(dir, key);
    INFO(key);
    REQUIRE_FALSE(lock.ok());
    CHECK(lock.status().code() == absl::StatusCode::kInvalidArgument);
  }
  auto missing = GpuLock::Acquire(dir + "/no-such-dir", "GPU-1");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(std::string(missing.status().message()).find("--gpu-lock-dir") != std::string::npos);
}

}  // namespace
}  // namespace ptxbench::worker
