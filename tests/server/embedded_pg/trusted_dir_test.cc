// TrustedDir: the folder walk refuses what another local user could change (a folder they own
// or may write, a symlink they own), and the files of a verified folder are never reached
// through a planted link. The "another user" cases need root (to hand files to 'nobody');
// run as an unprivileged user they are skipped with a warning.
#include "server/embedded_pg/trusted_dir.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "tests/support/status_testing.h"
#include "tests/support/temp_files.h"

namespace ptxbench::embedded_pg {
namespace {

namespace fs = std::filesystem;
using ::ptxbench::testing::ReadWholeFile;
using ::ptxbench::testing::ScopedTempDir;
using ::ptxbench::testing::ValueOrFail;

uid_t NobodyUid() {
  const passwd* nobody = getpwnam("nobody");
  REQUIRE(nobody != nullptr);
  return nobody->pw_uid;
}

mode_t ModeOf(const std::string& path) {
  struct stat st;
  REQUIRE(lstat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  REQUIRE(out.good());
}

std::string MessageOf(const absl::Status& status) { return std::string(status.message()); }

TEST_CASE("missing folders are created: parents 0755, the folder itself 0700", "[trusted_dir]") {
  ScopedTempDir root("ptxbench-trusted-");
  const std::string path = root.path() + "/a/b/data";
  TrustedDir dir = ValueOrFail(TrustedDir::Open(path, {}));
  REQUIRE(dir.path() == path);
  REQUIRE((ModeOf(root.path() + "/a") & 0022) == 0);
  REQUIRE(ModeOf(path) == 0700);
  // Opening it again finds the same folder; "." and ".." are resolved.
  TrustedDir again = ValueOrFail(TrustedDir::Open(root.path() + "/a/./b/../b/data", {}));
  REQUIRE(again.path() == path);
  // Without create, a missing folder is NOT_FOUND.
  TrustedDir::Options no_create;
  no_create.create = false;
  REQUIRE_STATUS(TrustedDir::Open(root.path() + "/missing", no_create),
                 absl::StatusCode::kNotFound);
}

TEST_CASE("a parent writable by others is refused unless sticky; the folder never",
          "[trusted_dir]") {
  ScopedTempDir root("ptxbench-trusted-");
  const std::string shared = root.path() + "/shared";
  REQUIRE(mkdir(shared.c_str(), 0755) == 0);
  REQUIRE(chmod(shared.c_str(), 0777) == 0);
  auto refused = TrustedDir::Open(shared + "/data", {});
  REQUIRE(absl::IsFailedPrecondition(refused.status()));
  REQUIRE_THAT(MessageOf(refused.status()),
               Catch::Contains(shared + " is writable by other users"));
  REQUIRE_THAT(MessageOf(refused.status()), Catch::Contains("0777"));
  REQUIRE_FALSE(fs::exists(shared + "/data"));  // Refused before anything was made below it.

  // Sticky, like /tmp: others cannot remove or rename what is below, so it may be a parent.
  REQUIRE(chmod(shared.c_str(), 01777) == 0);
  REQUIRE_OK(TrustedDir::Open(shared + "/data", {}));
  // But the folder itself must not be writable by others, sticky or not.
  REQUIRE_STATUS(TrustedDir::Open(shared, {}), absl::StatusCode::kFailedPrecondition);
  REQUIRE(chmod((shared + "/data").c_str(), 0770) == 0);
  auto group_writable = TrustedDir::Open(shared + "/data", {});
  REQUIRE(absl::IsFailedPrecondition(group_writable.status()));
  REQUIRE_THAT(MessageOf(group_writable.status()), Catch::Contains("0770"));
}

TEST_CASE("symlinks on the way are followed only when root or this user owns them",
          "[trusted_dir]") {
  ScopedTempDir root("ptxbench-trusted-");
  const std::string real = root.path() + "/real";
  REQUIRE(mkdir(real.c_str(), 0700) == 0);
  const std::string own_link = root.path() + "/own-link";
  REQUIRE(symlink(real.c_str(), own_link.c_str()) == 0);
  TrustedDir followed = ValueOrFail(TrustedDir::Open(own_link + "/data", {}));
  REQUIRE(followed.path() == real + "/data");  // The resolved path, not the link's.

  if (geteuid() != 0) {
    WARN("not root: the symlink owned by another user is not tested");
    return;
  }
  const std::string victim = root.path() + "/victim";
  REQUIRE(mkdir(victim.c_str(), 0755) == 0);
  const std::string planted = root.path() + "/planted";
  REQUIRE(symlink(victim.c_str(), planted.c_str()) == 0);
  REQUIRE(lchown(planted.c_str(), NobodyUid(), static_cast<gid_t>(-1)) == 0);
  auto refused = TrustedDir::Open(planted, {});
  REQUIRE(absl::IsFailedPrecondition(refused.status()));
  REQUIRE_THAT(MessageOf(refused.status()), Catch::Contains("is a symlink owned by uid"));
  refused = TrustedDir::Open(planted + "/data", {});
  REQUIRE(absl::IsFailedPrecondition(refused.status()));
  REQUIRE_FALSE(fs::exists(victim + "/data"));
  REQUIRE(ModeOf(victim) == 0755);
}

TEST_CASE("folders owned by another user are refused; the delegate may own the folder",
          "[trusted_dir]") {
  if (geteuid() != 0) {
    WARN("not root: ownership by another user is not tested");
    return;
  }
  ScopedTempDir root("ptxbench-trusted-");
  const uid_t nobody = NobodyUid();
  const std::string theirs = root.path() + "/theirs";
  REQUIRE(mkdir(theirs.c_str(), 0755) == 0);
  REQUIRE(chown(theirs.c_str(), nobody, static_cast<gid_t>(-1)) == 0);
  // As a parent: its owner could swap what is below it.
  auto parent = TrustedDir::Open(theirs + "/data", {});
  REQUIRE(absl::IsFailedPrecondition(parent.status()));
  REQUIRE_THAT(MessageOf(parent.status()), Catch::Contains(theirs + " belongs to uid"));
  REQUIRE_FALSE(fs::exists(theirs + "/data"));
  // As the folder itself: refused, unless its owner is the delegate.
  REQUIRE_STATUS(TrustedDir::Open(theirs, {}), absl::StatusCode::kFailedPrecondition);
  TrustedDir::Options delegated;
  delegated.delegate = nobody;
  TrustedDir dir = ValueOrFail(TrustedDir::Open(theirs, delegated));
  REQUIRE(dir.owner() == nobody);
}

TEST_CASE("files are created and opened without following planted links", "[trusted_dir]") {
  ScopedTempDir root("ptxbench-trusted-");
  const std::string victim = root.path() + "/victim";
  WriteText(victim, "precious\n");
  REQUIRE(chmod(victim.c_str(), 0644) == 0);
  TrustedDir dir = ValueOrFail(TrustedDir::Open(root.path() + "/data", {}));
  const std::string planted = dir.path() + "/password";
  REQUIRE(symlink(victim.c_str(), planted.c_str()) == 0);

  // Opening by name refuses the link and leaves its target alone.
  auto opened = dir.OpenFile("password", O_RDWR | O_CREAT, /*private_mode=*/false);
  REQUIRE(absl::IsFailedPrecondition(opened.status()));
  REQUIRE_THAT(MessageOf(opened.status()), Catch::Contains("is a symlink"));
  REQUIRE_STATUS(dir.ReadFile("password"), absl::StatusCode::kFailedPrecondition);
  REQUIRE(dir.ReadTail("password", 0, 100).empty());

  // Creating replaces the link with a new private file; the target is untouched.
  {
    UniqueFd fd = ValueOrFail(dir.CreateFile("password", 0600));
    REQUIRE_OK(WriteAll(fd.get(), "secret\n", "password"));
  }
  REQUIRE(ReadWholeFile(victim) == "precious\n");
  REQUIRE(ModeOf(victim) == 0644);
  struct stat st;
  REQUIRE(lstat(planted.c_str(), &st) == 0);
  REQUIRE(S_ISREG(st.st_mode));
  REQUIRE((st.st_mode & 0777) == 0600);
  REQUIRE(ValueOrFail(dir.ReadFile("password")).value() == "secret\n");

  // A hard link to a file elsewhere has two names: refused.
  const std::string hard = dir.path() + "/owner.lock";
  REQUIRE(link(victim.c_str(), hard.c_str()) == 0);
  auto linked = dir.OpenFile("owner.lock", O_RDWR, /*private_mode=*/false);
  REQUIRE(absl::IsFailedPrecondition(linked.status()));
  REQUIRE_THAT(MessageOf(linked.status()), Catch::Contains("hard links"));

  // A FIFO neither hangs the open nor passes as a file.
  const std::string fifo = dir.path() + "/postgresql.log";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  REQUIRE_STATUS(dir.OpenFile("postgresql.log", O_RDONLY, false),
                 absl::StatusCode::kFailedPrecondition);

  // A private file must be private.
  REQUIRE(chmod(planted.c_str(), 0644) == 0);
  auto shared = dir.OpenFile("password", O_RDONLY, /*private_mode=*/true);
  REQUIRE(absl::IsFailedPrecondition(shared.status()));
  REQUIRE_THAT(MessageOf(shared.status()), Catch::Contains("0644"));

  // Remove takes the name itself away, never a link's target.
  const std::string link_to_victim = dir.path() + "/app_password";
  REQUIRE(symlink(victim.c_str(), link_to_victim.c_str()) == 0);
  REQUIRE_OK(dir.Remove("app_password"));
  REQUIRE_OK(dir.Remove("app_password"));  // Missing: fine.
  REQUIRE(ReadWholeFile(victim) == "precious\n");
}

TEST_CASE("subfolders are opened without following links", "[trusted_dir]") {
  ScopedTempDir root("ptxbench-trusted-");
  TrustedDir dir = ValueOrFail(TrustedDir::Open(root.path() + "/data", {}));
  REQUIRE_STATUS(dir.OpenSubdir("pgdata"), absl::StatusCode::kNotFound);
  const std::string elsewhere = root.path() + "/elsewhere";
  REQUIRE(mkdir(elsewhere.c_str(), 0700) == 0);
  REQUIRE(symlink(elsewhere.c_str(), (dir.path() + "/pgdata").c_str()) == 0);
  REQUIRE_STATUS(dir.OpenSubdir("pgdata"), absl::StatusCode::kFailedPrecondition);
  REQUIRE_OK(dir.Remove("pgdata"));
  REQUIRE(mkdir((dir.path() + "/pgdata").c_str(), 0700) == 0);
  TrustedDir pgdata = ValueOrFail(dir.OpenSubdir("pgdata"));
  REQUIRE(pgdata.path() == dir.path() + "/pgdata");
  REQUIRE_FALSE(pgdata.Exists("PG_VERSION"));
}

}  // namespace
}  // namespace ptxbench::embedded_pg
