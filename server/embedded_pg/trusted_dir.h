// A directory that no other local user can change, and the files in it, reached without
// following links that someone else could have planted.
//
// Why: the embedded PostgreSQL runs as root on GPU nodes (device-e2e, systemd) and writes its
// password, lock and log files under a data folder that may sit below a shared one (/tmp,
// /var/tmp). Opening "<dir>/password" by name follows whatever another user placed there — a
// symlink to /etc/shadow is then truncated, chmodded and chowned to 'postgres'
// (issue 12, "High"; on this machine fs.protected_symlinks is 0, so the kernel does not
// stop it). So every directory is opened one component at a time from "/" with O_NOFOLLOW,
// each one checked to be changeable by trusted users only, and every file is created with
// openat(O_CREAT | O_EXCL | O_NOFOLLOW) in the verified directory and changed through its
// descriptor (fchmod, fchown), never through its name.
//
// Trust rules (`TrustedDir::Open`):
//   - every ancestor is owned by root or by this process's effective user, and is not
//     writable by group or others unless its sticky bit is set (then others cannot remove or
//     rename the entry below it, which itself must pass these rules: /tmp passes);
//   - a symlink on the way is followed only when it is owned by root or by this user (its
//     target then cannot be changed by anyone else);
//   - the directory itself is owned by this user or by `delegate` (the 'postgres' account
//     when running as root) and is not writable by group or others, sticky or not.
#ifndef PTXBENCH_SERVER_EMBEDDED_PG_TRUSTED_DIR_H_
#define PTXBENCH_SERVER_EMBEDDED_PG_TRUSTED_DIR_H_

#include <sys/types.h>

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ptxbench::embedded_pg {

// An owned file descriptor, closed on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd();
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.Release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int Release();

 private:
  int fd_ = -1;
};

class TrustedDir {
 public:
  struct Options {
    // Create missing components: ancestors with mode 0755 (the delegate must be able to
    // traverse them), the directory itself with mode 0700.
    bool create = true;
    // A second account that may own the directory and the files in it.
    std::optional<uid_t> delegate;
  };

  // FAILED_PRECONDITION naming the offending path and what is wrong with it (owner, mode,
  // a symlink owned by another user, not a directory); INTERNAL for system call failures.
  static absl::StatusOr<TrustedDir> Open(const std::string& path, const Options& options);

  // A subdirectory that passes the rules for the directory itself; NOT_FOUND when missing.
  absl::StatusOr<TrustedDir> OpenSubdir(const std::string& name) const;

  const std::string& path() const { return path_; }
  int fd() const { return fd_.get(); }
  uid_t owner() const { return owner_; }

  // fchmod / fchown of the directory itself.
  absl::Status SetMode(mode_t mode) const;
  absl::Status SetOwner(uid_t uid, gid_t gid) const;

  // A new regular file: any existing entry of that name (a file, a planted symlink) is
  // removed first, then the file is created with O_CREAT | O_EXCL | O_NOFOLLOW, so the
  // descriptor is a file this process just made, never the target of a link.
  absl::StatusOr<UniqueFd> CreateFile(const std::string& name, mode_t mode) const;
  // Opens (O_CREAT allowed with `flags`) without following a link; the result must be a
  // regular file owned by this user or the delegate, with a single hard link (a hard link
  // planted to a file elsewhere has two) and, when `private_mode`, no group or other bits.
  absl::StatusOr<UniqueFd> OpenFile(const std::string& name, int flags, bool private_mode) const;
  // The file's contents, or nullopt when there is no such entry. Refuses what OpenFile
  // refuses (with private_mode false).
  absl::StatusOr<std::optional<std::string>> ReadFile(const std::string& name) const;
  // The contents from byte `offset` on, at most `limit` bytes from the end; "" when missing.
  std::string ReadTail(const std::string& name, off_t offset, size_t limit) const;
  // Size of the entry (not following a link); 0 when missing.
  off_t FileSize(const std::string& name) const;
  bool Exists(const std::string& name) const;
  // unlinkat: removes the entry itself (a symlink, not its target). OK when missing.
  absl::Status Remove(const std::string& name) const;

 private:
  TrustedDir(UniqueFd fd, std::string path, uid_t owner, std::optional<uid_t> delegate)
      : fd_(std::move(fd)), path_(std::move(path)), owner_(owner), delegate_(delegate) {}

  bool TrustedOwner(uid_t uid) const;

  UniqueFd fd_;
  std::string path_;
  uid_t owner_ = 0;
  std::optional<uid_t> delegate_;
};

// Writes all of `data` at the file's current offset; INTERNAL naming `what` on failure.
absl::Status WriteAll(int fd, const std::string& data, const std::string& what);

}  // namespace ptxbench::embedded_pg

#endif  // PTXBENCH_SERVER_EMBEDDED_PG_TRUSTED_DIR_H_
