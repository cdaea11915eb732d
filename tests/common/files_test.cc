// common/files: the one file reader. Every error names the file, what it is for, and why; a
// FIFO or device where a file is expected is refused at once instead of blocking the reader.
#include "common/files.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <future>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "catch2/catch.hpp"
#include "tests/support/temp_files.h"

namespace ptxbench {
namespace {

using testing::ScopedTempDir;

std::string WriteFile(const ScopedTempDir& dir, const std::string& name, const std::string& bytes) {
  const std::string path = absl::StrCat(dir.path(), "/", name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TEST_CASE("ReadFileToString: the bytes of a file, NUL bytes and all") {
  const ScopedTempDir dir;
  const std::string bytes = std::string("a\0b\nc", 5) + std::string(200000, 'x');
  auto read = ReadFileToString(WriteFile(dir, "data", bytes), "the data");
  REQUIRE(read.ok());
  CHECK(*read == bytes);
  auto empty = ReadFileToString(WriteFile(dir, "empty", ""), "the empty file");
  REQUIRE(empty.ok());
  CHECK(empty->empty());
}

TEST_CASE("ReadFileToString: a missing file is NotFound naming the path and what it is for") {
  const ScopedTempDir dir;
  const std::string path = dir.path() + "/absent.pem";
  auto read = ReadFileToString(path, "--tls-ca");
  REQUIRE(read.status().code() == absl::StatusCode::kNotFound);
  CHECK(read.status().message() ==
        absl::StrCat("--tls-ca: cannot read ", path, ": No such file or directory"));
  auto empty = ReadFileToString("", "--plan");
  CHECK(empty.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(absl::StrContains(empty.status().message(), "--plan: no file named"));
}

TEST_CASE("ReadFileToString: over the limit is FailedPrecondition, or a prefix when asked") {
  const ScopedTempDir dir;
  const std::string path = WriteFile(dir, "big", std::string(100, 'z'));
  auto refused = ReadFileToString(path, "the log", {.max_bytes = 99});
  REQUIRE(refused.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(absl::StrContains(refused.status().message(), "the log: cannot read " + path));
  CHECK(absl::StrContains(refused.status().message(), "100 bytes, larger than the limit of 99"));
  auto exact = ReadFileToString(path, "the log", {.max_bytes = 100});
  REQUIRE(exact.ok());
  CHECK(exact->size() == 100);
  auto prefix = ReadFileToString(path, "the log", {.max_bytes = 7, .truncate_at_limit = true});
  REQUIRE(prefix.ok());
  CHECK(*prefix == "zzzzzzz");
  CHECK(ReadFileOrEmpty(path, 3) == "zzz");
}

TEST_CASE("ReadFileToString: a directory is refused by name") {
  const ScopedTempDir dir;
  auto read = ReadFileToString(dir.path(), "task.json");
  REQUIRE(read.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(absl::StrContains(read.status().message(),
                          absl::StrCat("task.json: cannot read ", dir.path(), ": is a directory")));
  CHECK(ReadFileOrEmpty(dir.path()).empty());
}

TEST_CASE("ReadFileToString: /proc files (size 0) read in full, and are bounded") {
  auto stat = ReadFileToString("/proc/self/stat", "/proc/self/stat");
  REQUIRE(stat.ok());
  // "<pid> (<comm>) <state> ...": the pid is this process's.
  CHECK(absl::StartsWith(*stat, absl::StrCat(getpid(), " (")));
  auto maps = ReadFileToString("/proc/self/maps", "maps", {.max_bytes = 10});
  CHECK(maps.status().code() == absl::StatusCode::kFailedPrecondition);
  // A process that is gone: NotFound, and "" from ReadFileOrEmpty.
  const pid_t child = fork();
  if (child == 0) _exit(0);
  REQUIRE(child > 0);
  REQUIRE(waitpid(child, nullptr, 0) == child);
  auto gone = ReadFileToString(absl::StrCat("/proc/", child, "/stat"), "the child's stat");
  CHECK(gone.status().code() == absl::StatusCode::kNotFound);
  CHECK(ReadFileOrEmpty(absl::StrCat("/proc/", child, "/stat")).empty());
}

TEST_CASE("ReadFileToString: a file without read permission is PermissionDenied") {
  if (geteuid() == 0) {
    WARN("running as root: permissions do not stop root; the permission case is not checked");
    return;
  }
  const ScopedTempDir dir;
  const std::string path = WriteFile(dir, "secret", "token");
  REQUIRE(chmod(path.c_str(), 0) == 0);
  auto read = ReadFileToString(path, "--token-file");
  REQUIRE(read.status().code() == absl::StatusCode::kPermissionDenied);
  CHECK(absl::StrContains(read.status().message(), "--token-file: cannot read " + path));
  CHECK(absl::StrContains(read.status().message(), "Permission denied"));
}

TEST_CASE("ReadFileToString: a FIFO, device or socket is refused at once, never waited on") {
  const ScopedTempDir dir;
  const std::string fifo = dir.path() + "/planted.pem";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  // No writer ever opens the FIFO: a blocking open or read would never return. Run the read
  // on another thread so that a regression fails the check instead of hanging the suite.
  auto reading = std::async(std::launch::async, [&] { return ReadFileToString(fifo, "the CA"); });
  REQUIRE(reading.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  auto refused = reading.get();
  REQUIRE(refused.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(absl::StrContains(refused.status().message(), "is a FIFO, not a regular file"));

  auto zero = ReadFileToString("/dev/zero", "the source");
  REQUIRE(zero.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(absl::StrContains(zero.status().message(), "is a device, not a regular file"));
  // A socket cannot even be opened with open(2) (ENXIO): refused all the same.
  const std::string socket_path = dir.path() + "/s";
  const int listener = socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(listener >= 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  socket_path.copy(address.sun_path, sizeof(address.sun_path) - 1);
  REQUIRE(bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
  CHECK_FALSE(ReadFileToString(socket_path, "the plan").ok());
  close(listener);
}

TEST_CASE("ReadFileToString: allow_pipes reads a FIFO to its writer's end") {
  const ScopedTempDir dir;
  const std::string fifo = dir.path() + "/generated.ptx";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  std::thread writer([&] {
    const int fd = open(fifo.c_str(), O_WRONLY);  // blocks until the reader opens it
    if (fd < 0) return;
    const std::string text = ".version 8.7\n";
    (void)!write(fd, text.data(), text.size());
    close(fd);
  });
  auto read = ReadFileToString(fifo, "--source", {.allow_pipes = true});
  writer.join();
  REQUIRE(read.ok());
  CHECK(*read == ".version 8.7\n");
}

TEST_CASE("ReadFdToString: reads an open descriptor under the same limits, leaving it open") {
  const ScopedTempDir dir;
  const std::string path = WriteFile(dir, "postmaster.pid", "4242\n/data\n");
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  auto read =
      ReadFdToString(fd, path, "postmaster.pid", {.max_bytes = 5, .truncate_at_limit = true});
  REQUIRE(read.ok());
  CHECK(*read == "4242\n");
  CHECK(fcntl(fd, F_GETFD) >= 0);  // still open: the caller owns it
  REQUIRE(lseek(fd, 0, SEEK_SET) == 0);
  auto refused = ReadFdToString(fd, path, "postmaster.pid", {.max_bytes = 5});
  CHECK(refused.status().code() == absl::StatusCode::kFailedPrecondition);
  close(fd);
  auto closed = ReadFdToString(fd, path, "postmaster.pid");
  CHECK(closed.status().code() == absl::StatusCode::kUnavailable);
  CHECK(absl::StrContains(closed.status().message(), "Bad file descriptor"));
}

}  // namespace
}  // namespace ptxbench
