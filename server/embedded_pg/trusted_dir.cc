#include "server/embedded_pg/trusted_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/files.h"

namespace ptxbench::embedded_pg {
namespace {

// Linux's own limit on symlinks in one lookup (MAXSYMLINKS, path_resolution(7)).
constexpr int kMaxSymlinks = 40;
// A file this module reads (password, pid file, log tail) is small; anything larger is not
// one of ours.
constexpr size_t kMaxReadBytes = 1 << 20;

std::string ErrnoText(int error) { return std::strerror(error); }

std::string ModeText(mode_t mode) { return absl::StrFormat("%04o", mode & 07777); }

std::string Joined(const std::vector<std::string>& components) {
  return "/" + absl::StrJoin(components, "/");
}

absl::Status Untrusted(const std::string& path, const std::string& why) {
  return absl::FailedPreconditionError(absl::StrCat(
      "data_dir: ", path, " ", why,
      "; the embedded PostgreSQL keeps its password and lock files below it, so every folder "
      "on the way must be changeable only by root or this user (fix the owner or mode, or "
      "choose another --data-dir)"));
}

// A file of a verified folder that is not what this module made.
absl::Status UntrustedFile(const std::string& path, const std::string& why) {
  return absl::FailedPreconditionError(
      absl::StrCat("data_dir: ", path, " ", why,
                   "; it is not a file the embedded PostgreSQL made, so it is neither followed "
                   "nor used (remove it if it is yours, or look into who planted it)"));
}

bool WritableByOthers(const struct stat& st) { return (st.st_mode & (S_IWGRP | S_IWOTH)) != 0; }

// An ancestor: owned by root or us; not writable by others unless sticky.
absl::Status CheckAncestor(const std::string& path, const struct stat& st, uid_t self) {
  if (st.st_uid != 0 && st.st_uid != self) {
    return Untrusted(path, absl::StrCat("belongs to uid ", st.st_uid, ", another user"));
  }
  if (WritableByOthers(st) && (st.st_mode & S_ISVTX) == 0) {
    return Untrusted(path, absl::StrCat("is writable by other users (mode ", ModeText(st.st_mode),
                                        ", no sticky bit)"));
  }
  return absl::OkStatus();
}

std::deque<std::string> Components(const std::string& path) {
  std::deque<std::string> out;
  for (absl::string_view part : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    out.emplace_back(part);
  }
  return out;
}

absl::StatusOr<std::string> Absolute(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  char buffer[4096];
  if (getcwd(buffer, sizeof(buffer)) == nullptr) {
    return absl::InternalError(absl::StrCat("getcwd: ", ErrnoText(errno)));
  }
  return absl::StrCat(buffer, "/", path);
}

}  // namespace

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) close(fd_);
}

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.Release();
  }
  return *this;
}

int UniqueFd::Release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

absl::Status WriteAll(int fd, const std::string& data, const std::string& what) {
  size_t written = 0;
  while (written < data.size()) {
    const ssize_t n = write(fd, data.data() + written, data.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::InternalError(absl::StrCat("writing ", what, ": ", ErrnoText(errno)));
    written += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::StatusOr<TrustedDir> TrustedDir::Open(const std::string& path, const Options& options) {
  if (path.empty()) return absl::InvalidArgumentError("data_dir: empty path");
  const uid_t self = geteuid();
  std::string absolute;
  {
    auto made = Absolute(path);
    if (!made.ok()) return made.status();
    absolute = *made;
  }
  std::deque<std::string> pending = Components(absolute);
  int symlinks = 0;
  while (true) {  // One pass per symlink met: the walk restarts from "/" with it resolved.
    UniqueFd current(open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!current.valid()) return absl::InternalError(absl::StrCat("open /: ", ErrnoText(errno)));
    struct stat st;
    if (fstat(current.get(), &st) != 0) {
      return absl::InternalError(absl::StrCat("stat /: ", ErrnoText(errno)));
    }
    if (absl::Status root = CheckAncestor("/", st, self); !root.ok()) return root;
    std::vector<std::string> resolved;
    std::deque<std::string> rest = pending;
    bool restart = false;
    while (!rest.empty()) {
      const std::string name = rest.front();
      rest.pop_front();
      if (name == ".") continue;
      if (name == "..") {
        // The components so far contain no symlink, so ".." is their lexical parent.
        if (!resolved.empty()) resolved.pop_back();
        pending.assign(resolved.begin(), resolved.end());
        pending.insert(pending.end(), rest.begin(), rest.end());
        restart = true;
        break;
      }
      const bool last =
          std::none_of(rest.begin(), rest.end(), [](const std::string& c) { return c != "."; });
      std::vector<std::string> here = resolved;
      here.push_back(name);
      const std::string here_path = Joined(here);
      if (fstatat(current.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno != ENOENT) {
          return absl::InternalError(absl::StrCat("stat ", here_path, ": ", ErrnoText(errno)));
        }
        if (!options.create) return absl::NotFoundError(absl::StrCat(here_path, " does not exist"));
        if (mkdirat(current.get(), name.c_str(), last ? 0700 : 0755) != 0 && errno != EEXIST) {
          return absl::FailedPreconditionError(
              absl::StrCat("data_dir: cannot create ", here_path, ": ", ErrnoText(errno)));
        }
        rest.push_front(name);  // Look at what is there now (ours, or a racing creator's).
        continue;
      }
      if (S_ISLNK(st.st_mode)) {
        if (st.st_uid != 0 && st.st_uid != self) {
          return Untrusted(here_path, absl::StrCat("is a symlink owned by uid ", st.st_uid,
                                                   ", another user, who could point it anywhere"));
        }
        if (++symlinks > kMaxSymlinks) {
          return absl::FailedPreconditionError(
              absl::StrCat("data_dir: too many symlinks resolving ", absolute));
        }
        char target[4096];
        const ssize_t length = readlinkat(current.get(), name.c_str(), target, sizeof(target) - 1);
        if (length < 0) {
          return absl::InternalError(absl::StrCat("readlink ", here_path, ": ", ErrnoText(errno)));
        }
        const std::string link(target, static_cast<size_t>(length));
        std::deque<std::string> next = Components(link);
        if (link.empty() || link[0] != '/')
          next.insert(next.begin(), resolved.begin(), resolved.end());
        next.insert(next.end(), rest.begin(), rest.end());
        pending = std::move(next);
        restart = true;
        break;
      }
      if (!S_ISDIR(st.st_mode)) return Untrusted(here_path, "is not a directory");
      const int flags = (last ? O_RDONLY : O_PATH) | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
      UniqueFd next(openat(current.get(), name.c_str(), flags));
      if (!next.valid()) {
        if (errno == ELOOP || errno == ENOTDIR || errno == ENOENT) {
          rest.push_front(name);  // Replaced between fstatat and openat: look again.
          continue;
        }
        return absl::FailedPreconditionError(
            absl::StrCat("data_dir: cannot open ", here_path, ": ", ErrnoText(errno)));
      }
      if (fstat(next.get(), &st) != 0) {
        return absl::InternalError(absl::StrCat("stat ", here_path, ": ", ErrnoText(errno)));
      }
      if (!last) {
        if (absl::Status ancestor = CheckAncestor(here_path, st, self); !ancestor.ok()) {
          return ancestor;
        }
      } else {
        const bool owner_ok =
            st.st_uid == self || (options.delegate.has_value() && st.st_uid == *options.delegate);
        if (!owner_ok) {
          return Untrusted(here_path, absl::StrCat("belongs to uid ", st.st_uid, ", another user"));
        }
        if (WritableByOthers(st)) {
          return Untrusted(here_path, absl::StrCat("is writable by other users (mode ",
                                                   ModeText(st.st_mode), ")"));
        }
        return TrustedDir(std::move(next), here_path, st.st_uid, options.delegate);
      }
      current = std::move(next);
      resolved = std::move(here);
    }
    if (!restart) {
      return absl::InvalidArgumentError(absl::StrCat("data_dir: ", path, " names the root folder"));
    }
  }
}

bool TrustedDir::TrustedOwner(uid_t uid) const {
  return uid == geteuid() || (delegate_.has_value() && uid == *delegate_);
}

absl::StatusOr<TrustedDir> TrustedDir::OpenSubdir(const std::string& name) const {
  const std::string path = absl::StrCat(path_, "/", name);
  UniqueFd fd(openat(fd_.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, " does not exist"));
    if (errno == ELOOP || errno == ENOTDIR) return Untrusted(path, "is a symlink or not a folder");
    return absl::InternalError(absl::StrCat("open ", path, ": ", ErrnoText(errno)));
  }
  struct stat st;
  if (fstat(fd.get(), &st) != 0) {
    return absl::InternalError(absl::StrCat("stat ", path, ": ", ErrnoText(errno)));
  }
  if (!TrustedOwner(st.st_uid)) {
    return Untrusted(path, absl::StrCat("belongs to uid ", st.st_uid, ", another user"));
  }
  if (WritableByOthers(st)) {
    return Untrusted(path,
                     absl::StrCat("is writable by other users (mode ", ModeText(st.st_mode), ")"));
  }
  return TrustedDir(std::move(fd), path, st.st_uid, delegate_);
}

absl::Status TrustedDir::SetMode(mode_t mode) const {
  if (fchmod(fd_.get(), mode) != 0) {
    return absl::InternalError(absl::StrCat("chmod ", path_, ": ", ErrnoText(errno)));
  }
  return absl::OkStatus();
}

absl::Status TrustedDir::SetOwner(uid_t uid, gid_t gid) const {
  if (fchown(fd_.get(), uid, gid) != 0) {
    return absl::InternalError(absl::StrCat("chown ", path_, ": ", ErrnoText(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<UniqueFd> TrustedDir::CreateFile(const std::string& name, mode_t mode) const {
  const std::string path = absl::StrCat(path_, "/", name);
  if (absl::Status removed = Remove(name); !removed.ok()) return removed;
  UniqueFd fd(
      openat(fd_.get(), name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
  if (!fd.valid()) {
    // EEXIST: someone created the name again between our unlink and open.
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create ", path, ": ", ErrnoText(errno)));
  }
  if (fchmod(fd.get(), mode) != 0) {  // The umask may have taken bits; say exactly which.
    return absl::InternalError(absl::StrCat("chmod ", path, ": ", ErrnoText(errno)));
  }
  return fd;
}

absl::StatusOr<UniqueFd> TrustedDir::OpenFile(const std::string& name, int flags,
                                              bool private_mode) const {
  const std::string path = absl::StrCat(path_, "/", name);
  // O_NONBLOCK: a FIFO planted under the name must not hang the open; it is refused below.
  UniqueFd fd(openat(fd_.get(), name.c_str(), flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
                     S_IRUSR | S_IWUSR));
  if (!fd.valid()) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, " does not exist"));
    if (errno == ELOOP) return UntrustedFile(path, "is a symlink");
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open ", path, ": ", ErrnoText(errno)));
  }
  struct stat st;
  if (fstat(fd.get(), &st) != 0) {
    return absl::InternalError(absl::StrCat("stat ", path, ": ", ErrnoText(errno)));
  }
  if (!S_ISREG(st.st_mode)) return UntrustedFile(path, "is not a regular file");
  if (!TrustedOwner(st.st_uid)) {
    return UntrustedFile(path, absl::StrCat("belongs to uid ", st.st_uid, ", another user"));
  }
  if (st.st_nlink != 1) {
    return UntrustedFile(
        path,
        absl::StrCat("has ", st.st_nlink, " hard links (a link to a file elsewhere?); expected 1"));
  }
  if (private_mode && (st.st_mode & 077) != 0) {
    return UntrustedFile(path, absl::StrCat("is readable or writable by others (mode ",
                                            ModeText(st.st_mode), "); expected 0600"));
  }
  return fd;
}

absl::StatusOr<std::optional<std::string>> TrustedDir::ReadFile(const std::string& name) const {
  auto fd = OpenFile(name, O_RDONLY, /*private_mode=*/false);
  if (absl::IsNotFound(fd.status())) return std::optional<std::string>();
  if (!fd.ok()) return fd.status();
  // Read through the descriptor OpenFile checked (no symlink, regular, our owner, one link),
  // never by path again: the file checked is the file read.
  absl::StatusOr<std::string> contents =
      ReadFdToString(fd->get(), absl::StrCat(path_, "/", name), name,
                     {.max_bytes = kMaxReadBytes, .truncate_at_limit = true});
  if (!contents.ok()) return absl::InternalError(contents.status().message());
  return std::optional<std::string>(*std::move(contents));
}

std::string TrustedDir::ReadTail(const std::string& name, off_t offset, size_t limit) const {
  auto fd = OpenFile(name, O_RDONLY, /*private_mode=*/false);
  if (!fd.ok()) return "";
  struct stat st;
  if (fstat(fd->get(), &st) != 0) return "";
  const auto max_bytes = static_cast<off_t>(limit);
  if (st.st_size - offset > max_bytes) offset = st.st_size - max_bytes;
  if (offset < 0) offset = 0;
  std::string contents;
  char buffer[4096];
  while (contents.size() < limit) {
    const ssize_t n = pread(fd->get(), buffer, sizeof(buffer), offset);
    if (n <= 0) break;
    contents.append(buffer, static_cast<size_t>(n));
    offset += n;
  }
  return contents;
}

off_t TrustedDir::FileSize(const std::string& name) const {
  struct stat st;
  if (fstatat(fd_.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
    return 0;
  }
  return st.st_size;
}

bool TrustedDir::Exists(const std::string& name) const {
  struct stat st;
  return fstatat(fd_.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
}

absl::Status TrustedDir::Remove(const std::string& name) const {
  if (unlinkat(fd_.get(), name.c_str(), 0) != 0 && errno != ENOENT) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot remove ", path_, "/", name, ": ", ErrnoText(errno)));
  }
  return absl::OkStatus();
}

}  // namespace ptxbench::embedded_pg
