#include "worker/engine/compile_jail.h"

#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <grp.h>
#include <link.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <set>
#include <string_view>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status.h"

namespace ptxbench {
namespace {

using Clock = std::chrono::steady_clock;

// Exit codes of the child that are not the body's.
constexpr int kExitAnswered = 0;
constexpr int kExitJailRefused = 90;
constexpr int kExitOutOfMemory = 91;
constexpr int kExitBodyThrew = 92;
constexpr int kExitOrphaned = 93;

constexpr uid_t kNobody = 65534;
constexpr size_t kDiagnosticsTail = 4096;

std::string Errno(const char* what) { return absl::StrCat(what, ": ", std::strerror(errno)); }

// ------------------------------------------------------------------------- answer framing

void AppendU64(std::string& out, uint64_t value) {
  for (int b = 0; b < 8; ++b) out.push_back(static_cast<char>((value >> (8 * b)) & 0xff));
}

bool ReadU64(const std::string& in, size_t& at, uint64_t& value) {
  if (in.size() - at < 8) return false;
  value = 0;
  for (int b = 0; b < 8; ++b) value |= uint64_t{static_cast<unsigned char>(in[at + b])} << (8 * b);
  at += 8;
  return true;
}

// ------------------------------------------------------------------------- child side

bool WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

bool WriteText(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = WriteAll(fd, text);
  close(fd);
  return ok;
}

// operator new failed (past RLIMIT_AS, in the child): nothing may allocate here.
void OnAllocationFailure() {
  static const char kMessage[] = "compile jail: operator new failed\n";
  [[maybe_unused]] const ssize_t written = write(2, kMessage, sizeof(kMessage) - 1);
  _exit(kExitOutOfMemory);
}

bool DropCapabilities() {
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  for (int cap = 0; cap <= 63; ++cap) prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capset, &header, data) != 0) return false;
  __user_cap_data_struct check[2] = {};
  if (syscall(SYS_capget, &header, check) != 0) return false;
  return check[0].effective == 0 && check[0].permitted == 0 && check[1].effective == 0 &&
         check[1].permitted == 0;
}

// mkdir -p of the parents of `path` (absolute) under the current directory.
bool MakeParents(const std::string& path) {
  size_t at = 1;
  while ((at = path.find('/', at)) != std::string::npos) {
    const std::string dir = "." + path.substr(0, at);
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return false;
    ++at;
  }
  return true;
}

// The per-mount flags of `path` that a bind inside a user namespace must keep (they are
// locked: leaving one out of the remount fails with EPERM).
uint64_t LockedFlags(const std::string& path) {
  struct statvfs fs {};
  if (statvfs(path.c_str(), &fs) != 0) return 0;
  uint64_t flags = 0;
  if (fs.f_flag & ST_NOEXEC) flags |= MS_NOEXEC;
  if (fs.f_flag & ST_NOATIME) flags |= MS_NOATIME;
  if (fs.f_flag & ST_NODIRATIME) flags |= MS_NODIRATIME;
  if (fs.f_flag & ST_RELATIME) flags |= MS_RELATIME;
  return flags;
}

// Enters the jail; an error message names the step that failed.
absl::StatusOr<JailReport> EnterJail(const JailOptions& options) {
  JailReport report;
  const uid_t uid = getuid();
  const gid_t gid = getgid();
  std::string tried;
  if (unshare(CLONE_NEWNS) == 0) {
    report.method = JailMethod::kMountNamespace;
  } else {
    tried = Errno("mount namespace (unshare(CLONE_NEWNS))");
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          tried, "; user namespace (unshare(CLONE_NEWUSER|CLONE_NEWNS)): ", std::strerror(errno)));
    }
    if (!WriteText("/proc/self/setgroups", "deny") ||
        !WriteText("/proc/self/uid_map", absl::StrCat(uid, " ", uid, " 1")) ||
        !WriteText("/proc/self/gid_map", absl::StrCat(gid, " ", gid, " 1"))) {
      return absl::FailedPreconditionError(Errno("user namespace: writing the id maps"));
    }
    report.method = JailMethod::kUserNamespace;
  }
  auto failed = [&](const char* step) {
    return absl::FailedPreconditionError(
        absl::StrCat(JailMethodName(report.method), ": ", Errno(step)));
  };
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return failed("making the mounts private");
  }
  // The files to bind, opened in this namespace (a bind source must be in it) and before /tmp
  // is covered, so that a file under /tmp is found too.
  std::vector<int> file_fds;
  struct Closer {
    std::vector<int>& fds;
    ~Closer() {
      for (int fd : fds) close(fd);
    }
  } closer{file_fds};
  for (const std::string& file : options.files) {
    const int fd = open(file.c_str(), O_PATH | O_CLOEXEC);
    if (fd < 0) return failed("opening a file to bind");
    file_fds.push_back(fd);
  }
  // The new root: an empty tmpfs over /tmp (in this namespace only).
  if (mount("ptxbench-jail", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755") != 0) {
    return failed("mounting the empty root (tmpfs on /tmp)");
  }
  if (chdir("/tmp") != 0) return failed("chdir(new root)");
  for (size_t k = 0; k < options.files.size(); ++k) {
    const std::string& path = options.files[k];
    const std::string source = absl::StrCat("/proc/self/fd/", file_fds[k]);
    const std::string target = "." + path;
    if (!MakeParents(path)) return failed("creating a folder in the new root");
    const int created = open(target.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0444);
    if (created < 0 && errno != EEXIST) return failed("creating a bind target");
    if (created >= 0) close(created);
    if (mount(source.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0) {
      return failed("binding a file into the new root");
    }
    if (mount(nullptr, target.c_str(), nullptr,
              MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | LockedFlags(source),
              nullptr) != 0) {
      return failed("making a bound file read-only");
    }
  }
  if (mkdir("./work", 0700) != 0) return failed("creating /work");
  const std::string work_options =
      report.method == JailMethod::kMountNamespace
          ? absl::StrCat("size=", options.work_bytes, ",mode=0700,uid=", kNobody, ",gid=", kNobody)
          : absl::StrCat("size=", options.work_bytes, ",mode=0700");
  if (mount("ptxbench-work", "./work", "tmpfs", MS_NOSUID | MS_NODEV, work_options.c_str()) != 0) {
    return failed("mounting /work");
  }
  // pivot_root(".", ".") stacks the old root on the new one; detaching it leaves nothing of the
  // host's tree in this namespace. Where the root cannot be pivoted (an initramfs root),
  // chroot: the old tree is still mounted but no path reaches it, and no capability is left
  // to get out.
  if (syscall(SYS_pivot_root, ".", ".") == 0) {
    if (umount2(".", MNT_DETACH) != 0) return failed("detaching the old root");
    report.root = "pivot_root";
  } else if (chroot(".") == 0) {
    report.root = "chroot";
  } else {
    return failed("pivot_root and chroot");
  }
  if (chdir("/") != 0) return failed("chdir(/)");
  if (mount(nullptr, "/", nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
            nullptr) != 0) {
    return failed("remounting the root read-only");
  }
  if (report.method == JailMethod::kMountNamespace && uid == 0) {
    if (setgroups(0, nullptr) != 0 || setresgid(kNobody, kNobody, kNobody) != 0 ||
        setresuid(kNobody, kNobody, kNobody) != 0) {
      return failed("dropping to uid 65534");
    }
    report.detail = absl::StrCat("uid ", kNobody, " gid ", kNobody);
  } else {
    report.detail = absl::StrCat("uid ", uid, ", no capabilities");
  }
  if (!DropCapabilities()) return failed("dropping capabilities");
  return report;
}

void SetLimit(int resource, uint64_t value) {
  rlimit limit{static_cast<rlim_t>(value), static_cast<rlim_t>(value)};
  setrlimit(resource, &limit);
}

uint64_t PeakVirtualBytes(int status_fd) {
  char buffer[4096];
  const ssize_t n = pread(status_fd, buffer, sizeof(buffer) - 1, 0);
  if (n <= 0) return 0;
  buffer[n] = '\0';
  const char* peak = std::strstr(buffer, "VmPeak:");
  return peak == nullptr ? 0 : std::strtoull(peak + 7, nullptr, 10) * 1024;
}

[[noreturn]] void RunChild(const std::function<std::string()>& body, const JailOptions& options,
                           pid_t parent, int answer_fd, int error_fd) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(kExitOrphaned);
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd >= 0) dup2(null_fd, 0);
  dup2(error_fd, 1);
  dup2(error_fd, 2);
  const int status_fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  // Nothing else of the parent stays open (a database socket of a caller, say).
  std::vector<int> keep = {answer_fd, status_fd, null_fd};
  std::sort(keep.begin(), keep.end());
  int next = 3;
  for (int fd : keep) {
    if (fd < next) continue;
    if (fd > next) close_range(static_cast<unsigned>(next), static_cast<unsigned>(fd - 1), 0);
    next = fd + 1;
  }
  close_range(static_cast<unsigned>(next), ~0U, 0);

  absl::StatusOr<JailReport> jail = EnterJail(options);
  if (null_fd >= 0) close(null_fd);
  JailReport report;
  if (jail.ok()) {
    report = *jail;
  } else if (options.policy == JailPolicy::kAllowUnjailed) {
    report.method = JailMethod::kNone;
    report.detail =
        absl::StrCat("allowed by PTXBENCH_COMPILE_JAIL=allow-unjailed: ", jail.status().message());
  } else {
    WriteAll(answer_fd, EncodeFields({{"jail_error", std::string(jail.status().message())}}));
    _exit(kExitJailRefused);
  }
  // After the uid change, which clears it.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(kExitOrphaned);
  prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  if (options.max_memory_bytes > 0) SetLimit(RLIMIT_AS, options.max_memory_bytes);
  SetLimit(RLIMIT_CPU, static_cast<uint64_t>(options.max_seconds) + 2);
  SetLimit(RLIMIT_CORE, 0);
  SetLimit(RLIMIT_FSIZE, options.work_bytes);
  std::set_new_handler(&OnAllocationFailure);

  std::string output;
  try {
    output = body();
  } catch (const std::bad_alloc&) {
    _exit(kExitOutOfMemory);
  } catch (...) {
    _exit(kExitBodyThrew);
  }
  const std::string frames = EncodeFields({{"jail_method", JailMethodName(report.method)},
                                           {"jail_root", report.root},
                                           {"jail_detail", report.detail},
                                           {"vm_peak", std::to_string(PeakVirtualBytes(status_fd))},
                                           {"output", std::move(output)}});
  _exit(WriteAll(answer_fd, frames) ? kExitAnswered : kExitBodyThrew);
}

// ------------------------------------------------------------------------- ELF

// A read-only mapping of a whole file (ptxas is tens of MiB; only its headers are read).
class MappedFile {
 public:
  static absl::StatusOr<MappedFile> Open(const std::string& path) {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return absl::InvalidArgumentError(Errno(path.c_str()));
    struct stat st {};
    if (fstat(fd, &st) != 0 || st.st_size == 0) {
      close(fd);
      return absl::InvalidArgumentError(absl::StrCat(path, ": empty or unreadable"));
    }
    void* data = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (data == MAP_FAILED) return absl::InvalidArgumentError(Errno(path.c_str()));
    return MappedFile(static_cast<const char*>(data), static_cast<size_t>(st.st_size));
  }
  MappedFile(MappedFile&& other) noexcept : data_(other.data_), size_(other.size_) {
    other.data_ = nullptr;
  }
  MappedFile& operator=(MappedFile&&) = delete;
  ~MappedFile() {
    if (data_ != nullptr) munmap(const_cast<char*>(data_), size_);
  }
  std::string_view view() const { return {data_, size_}; }

 private:
  MappedFile(const char* data, size_t size) : data_(data), size_(size) {}
  const char* data_;
  size_t size_;
};

struct ElfNeeds {
  std::string interpreter;
  std::vector<std::string> needed;
};

// PT_INTERP and DT_NEEDED of a 64-bit little-endian ELF file.
absl::StatusOr<ElfNeeds> ReadElfNeeds(const std::string& path, std::string_view image) {
  auto bad = [&](const char* what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
  };
  if (image.size() < sizeof(Elf64_Ehdr) || image.compare(0, 4, ELFMAG) != 0 ||
      image[EI_CLASS] != ELFCLASS64) {
    return bad("not a 64-bit ELF file");
  }
  Elf64_Ehdr header;
  std::memcpy(&header, image.data(), sizeof(header));
  std::vector<Elf64_Phdr> segments;
  for (size_t k = 0; k < header.e_phnum; ++k) {
    const size_t at = header.e_phoff + k * sizeof(Elf64_Phdr);
    if (at + sizeof(Elf64_Phdr) > image.size()) return bad("truncated program headers");
    Elf64_Phdr segment;
    std::memcpy(&segment, image.data() + at, sizeof(segment));
    segments.push_back(segment);
  }
  auto file_offset = [&](uint64_t address) -> std::optional<uint64_t> {
    for (const Elf64_Phdr& s : segments) {
      if (s.p_type == PT_LOAD && address >= s.p_vaddr && address < s.p_vaddr + s.p_filesz) {
        return address - s.p_vaddr + s.p_offset;
      }
    }
    return std::nullopt;
  };
  ElfNeeds needs;
  for (const Elf64_Phdr& s : segments) {
    if (s.p_type == PT_INTERP && s.p_offset + s.p_filesz <= image.size()) {
      const std::string_view interpreter = image.substr(s.p_offset, s.p_filesz);
      needs.interpreter = std::string(interpreter.substr(0, interpreter.find('\0')));
    }
    if (s.p_type != PT_DYNAMIC || s.p_offset + s.p_filesz > image.size()) continue;
    std::vector<uint64_t> names;
    std::optional<uint64_t> strings;
    for (uint64_t at = s.p_offset; at + sizeof(Elf64_Dyn) <= s.p_offset + s.p_filesz;
         at += sizeof(Elf64_Dyn)) {
      Elf64_Dyn entry;
      std::memcpy(&entry, image.data() + at, sizeof(entry));
      if (entry.d_tag == DT_NULL) break;
      if (entry.d_tag == DT_NEEDED) names.push_back(entry.d_un.d_val);
      if (entry.d_tag == DT_STRTAB) strings = file_offset(entry.d_un.d_ptr);
    }
    if (!names.empty() && !strings.has_value()) return bad("no string table");
    for (uint64_t name : names) {
      if (*strings + name >= image.size()) return bad("bad DT_NEEDED");
      const std::string_view rest = image.substr(*strings + name);
      needs.needed.emplace_back(rest.substr(0, rest.find('\0')));
    }
  }
  return needs;
}

// Where this process's loader finds `library` (loading it if it is not loaded yet).
absl::StatusOr<std::string> ResolveLibrary(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) handle = dlopen(library.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (handle == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot find the library ", library, ": ", dlerror()));
  }
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr || map->l_name == nullptr ||
      map->l_name[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat("cannot tell where ", library, " is"));
  }
  return std::string(map->l_name);
}

absl::Status AddExecutable(const std::string& path, std::vector<std::string>& files,
                           std::set<std::string>& seen, int depth) {
  if (depth > 8) return absl::InvalidArgumentError(absl::StrCat(path, ": nested too deep"));
  if (!seen.insert(path).second) return absl::OkStatus();
  files.push_back(path);
  absl::StatusOr<MappedFile> mapped = MappedFile::Open(path);
  if (!mapped.ok()) return mapped.status();
  const std::string_view image = mapped->view();
  if (image.size() >= 2 && image[0] == '#' && image[1] == '!') {
    const std::string line(image.substr(2, image.find('\n') - 2));
    std::vector<std::string> words = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (words.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": empty #! line"));
    return AddExecutable(words[0], files, seen, depth + 1);
  }
  ASSIGN_OR_RETURN(const ElfNeeds needs, ReadElfNeeds(path, image));
  if (!needs.interpreter.empty() && seen.insert(needs.interpreter).second) {
    files.push_back(needs.interpreter);
  }
  for (const std::string& library : needs.needed) {
    ASSIGN_OR_RETURN(const std::string resolved, ResolveLibrary(library));
    RETURN_IF_ERROR(AddExecutable(resolved, files, seen, depth + 1));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<JailPolicy> JailPolicyFromEnvironment() {
  const char* value = std::getenv("PTXBENCH_COMPILE_JAIL");
  if (value == nullptr || *value == '\0' || std::string_view(value) == "required") {
    return JailPolicy::kRequired;
  }
  if (std::string_view(value) == "allow-unjailed") return JailPolicy::kAllowUnjailed;
  return absl::InvalidArgumentError(
      absl::StrCat("PTXBENCH_COMPILE_JAIL='", value, "' is not one of: required, allow-unjailed"));
}

std::string JailMethodName(JailMethod method) {
  switch (method) {
    case JailMethod::kNone:
      return "none";
    case JailMethod::kMountNamespace:
      return "mount_namespace";
    case JailMethod::kUserNamespace:
      return "user_namespace";
  }
  return "unknown";
}

nlohmann::json ToJson(const JailReport& report) {
  return {
      {"method", JailMethodName(report.method)}, {"root", report.root}, {"detail", report.detail}};
}

std::string EncodeFields(const std::map<std::string, std::string>& fields) {
  std::string out;
  for (const auto& [name, value] : fields) {
    AppendU64(out, name.size());
    out += name;
    AppendU64(out, value.size());
    out += value;
  }
  return out;
}

absl::StatusOr<std::map<std::string, std::string>> DecodeFields(const std::string& encoded) {
  std::map<std::string, std::string> fields;
  size_t at = 0;
  while (at < encoded.size()) {
    uint64_t name_size = 0, value_size = 0;
    if (!ReadU64(encoded, at, name_size) || encoded.size() - at < name_size) {
      return absl::DataLossError("a truncated field name");
    }
    std::string name = encoded.substr(at, name_size);
    at += name_size;
    if (!ReadU64(encoded, at, value_size) || encoded.size() - at < value_size) {
      return absl::DataLossError(absl::StrCat("field '", name, "' is truncated"));
    }
    fields[std::move(name)] = encoded.substr(at, value_size);
    at += value_size;
  }
  return fields;
}

absl::StatusOr<std::vector<std::string>> ExecutableFiles(const std::string& program) {
  if (program.empty() || program[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat("'", program, "' is not an absolute path"));
  }
  if (access(program.c_str(), X_OK) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot run ", program, ": ", std::strerror(errno)));
  }
  std::vector<std::string> files;
  std::set<std::string> seen;
  RETURN_IF_ERROR(AddExecutable(program, files, seen, 0));
  return files;
}

std::string LibraryPath(const std::vector<std::string>& files) {
  std::vector<std::string> dirs;
  for (const std::string& file : files) {
    if (file.find(".so") == std::string::npos) continue;
    const std::string dir = file.substr(0, file.rfind('/'));
    if (std::find(dirs.begin(), dirs.end(), dir) == dirs.end()) dirs.push_back(dir);
  }
  return absl::StrJoin(dirs, ":");
}

// What the compilers' process tree got from the scheduler so far. A compile is judged by the
// time it could run: wall time minus the time its runnable processes waited for a CPU
// (/proc/<pid>/schedstat, field 2, in ns; sched(7)). A compiler that spins or blocks on its
// input reaches its budget at about budget seconds of wall time; one on a node too loaded to
// give it a CPU does not, and its wait is not held against the source. Values are kept per
// process across samples, so a reaped ptxas still counts.
class CompilerTreeClock {
 public:
  explicit CompilerTreeClock(pid_t root) : root_(root) {}

  void Sample() {
    static const double kTicks = static_cast<double>(sysconf(_SC_CLK_TCK));
    std::map<pid_t, pid_t> parents;
    std::map<pid_t, Times> now;
    DIR* proc = opendir("/proc");
    if (proc == nullptr) return;
    while (const dirent* entry = readdir(proc)) {
      pid_t pid = 0;
      if (!absl::SimpleAtoi(entry->d_name, &pid)) continue;
      const std::string stat = ReadSmall(absl::StrCat("/proc/", pid, "/stat"));
      const size_t paren = stat.rfind(')');
      if (paren == std::string::npos || paren + 2 >= stat.size()) continue;
      // After ") ": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
      // utime stime (proc(5), fields 3-15).
      const std::vector<absl::string_view> fields =
          absl::StrSplit(absl::string_view(stat).substr(paren + 2), ' ', absl::SkipEmpty());
      if (fields.size() < 13 || !absl::SimpleAtoi(fields[1], &parents[pid])) continue;
      Times t;
      for (size_t f : {11, 12}) {
        double v = 0;
        if (absl::SimpleAtod(fields[f], &v)) t.cpu_seconds += v / kTicks;
      }
      now[pid] = t;
    }
    closedir(proc);
    std::vector<pid_t> frontier = {root_};
    std::set<pid_t> tree = {root_};
    while (!frontier.empty()) {
      const pid_t parent = frontier.back();
      frontier.pop_back();
      for (const auto& [pid, ppid] : parents) {
        if (ppid == parent && tree.insert(pid).second) frontier.push_back(pid);
      }
    }
    for (pid_t pid : tree) {
      auto it = now.find(pid);
      if (it == now.end()) continue;
      const std::string schedstat = ReadSmall(absl::StrCat("/proc/", pid, "/schedstat"));
      const std::vector<absl::string_view> sched =
          absl::StrSplit(absl::StripAsciiWhitespace(schedstat), ' ');
      double wait_ns = 0;
      if (sched.size() >= 2 && absl::SimpleAtod(sched[1], &wait_ns)) {
        it->second.wait_seconds = wait_ns * 1e-9;
      } else {
        schedstat_ = false;
      }
      Times& kept = seen_[pid];
      kept.cpu_seconds = std::max(kept.cpu_seconds, it->second.cpu_seconds);
      kept.wait_seconds = std::max(kept.wait_seconds, it->second.wait_seconds);
    }
  }
  double cpu_seconds() const { return Sum(&Times::cpu_seconds); }
  // Without schedstat (a kernel without CONFIG_SCHED_INFO) no wait is known: wall time rules.
  double wait_seconds() const { return schedstat_ ? Sum(&Times::wait_seconds) : 0; }

 private:
  struct Times {
    double cpu_seconds = 0;
    double wait_seconds = 0;
  };
  static std::string ReadSmall(const std::string& path) {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return "";
    char buffer[1024];
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    close(fd);
    return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : "";
  }
  double Sum(double Times::*field) const {
    double sum = 0;
    for (const auto& [pid, t] : seen_) sum += t.*field;
    return sum;
  }
  pid_t root_;
  bool schedstat_ = true;
  std::map<pid_t, Times> seen_;
};

absl::StatusOr<JailedRun> RunInCompileJail(const std::function<std::string()>& body,
                                           const JailOptions& options) {
  int answer[2], errors[2];
  if (pipe2(answer, O_CLOEXEC) != 0) return absl::InternalError(Errno("pipe2"));
  if (pipe2(errors, O_CLOEXEC) != 0) {
    close(answer[0]);
    close(answer[1]);
    return absl::InternalError(Errno("pipe2"));
  }
  const pid_t parent = getpid();
  const Clock::time_point start = Clock::now();
  const double cpu_budget = std::max(options.max_seconds, 0.0);
  const double wall_budget =
      options.max_wall_seconds > 0 ? options.max_wall_seconds : 4 * cpu_budget;
  const Clock::time_point deadline =
      start + std::chrono::duration_cast<Clock::duration>(
                  std::chrono::duration<double>(std::max(wall_budget, cpu_budget)));
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(Errno("fork"));
  if (pid == 0) {
    close(answer[0]);
    close(errors[0]);
    RunChild(body, options, parent, answer[1], errors[1]);
  }
  setpgid(pid, pid);  // Also here: no window in which a kill(-pid) misses it.
  close(answer[1]);
  close(errors[1]);

  JailedRun run;
  std::string frames;
  bool too_large = false;
  bool timed_out = false;  // The CPU budget was used up.
  bool starved = false;    // The wall backstop passed first.
  int open_fds = 2;
  pollfd fds[2] = {{answer[0], POLLIN, 0}, {errors[0], POLLIN, 0}};
  char buffer[1 << 16];
  // The compile's own time (wall minus waiting for a CPU) is measured once the wall time could
  // have used the budget, then every 100 ms.
  CompilerTreeClock clock(pid);
  const auto over_budget = [&] {
    const double wall = std::chrono::duration<double>(Clock::now() - start).count();
    if (wall < cpu_budget) return false;
    clock.Sample();
    run.cpu_seconds = clock.cpu_seconds();
    run.scheduler_wait_seconds = clock.wait_seconds();
    if (wall - run.scheduler_wait_seconds >= cpu_budget) {
      timed_out = true;
    } else if (Clock::now() >= deadline) {
      starved = true;
    }
    return timed_out || starved;
  };
  while (open_fds > 0) {
    if (over_budget()) break;
    const auto remaining =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    const int ready = poll(fds, 2, static_cast<int>(std::clamp<int64_t>(remaining, 1, 100)));
    if (ready < 0 && errno != EINTR) break;
    for (pollfd& p : fds) {
      if (p.fd < 0 || (p.revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t n = read(p.fd, buffer, sizeof(buffer));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        close(p.fd);
        p.fd = -1;
        --open_fds;
        continue;
      }
      if (p.fd == answer[0]) {
        if (frames.size() + static_cast<size_t>(n) > options.max_output_bytes + 4096) {
          too_large = true;
        } else {
          frames.append(buffer, static_cast<size_t>(n));
        }
      } else {
        run.diagnostics.append(buffer, static_cast<size_t>(n));
        if (run.diagnostics.size() > 2 * kDiagnosticsTail) {
          run.diagnostics.erase(0, run.diagnostics.size() - kDiagnosticsTail);
        }
      }
    }
  }
  for (const pollfd& p : fds) {
    if (p.fd >= 0) close(p.fd);
  }
  // The answer is complete (or the deadline passed): the child exits now, or is killed.
  int status = 0;
  rusage usage{};
  while (true) {
    const pid_t waited = wait4(pid, &status, WNOHANG, &usage);
    if (waited == pid) break;
    if (waited < 0 && errno != EINTR) return absl::InternalError(Errno("wait4"));
    if (timed_out || starved || too_large || over_budget()) {
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      while (wait4(pid, &status, 0, &usage) < 0 && errno == EINTR) {
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  kill(-pid, SIGKILL);  // Anything of its group that outlived it.
  run.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  run.peak_rss_bytes = static_cast<uint64_t>(usage.ru_maxrss) * 1024;
  if (run.diagnostics.size() > kDiagnosticsTail) {
    run.diagnostics.erase(0, run.diagnostics.size() - kDiagnosticsTail);
  }
  if (too_large) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the compile jail's answer exceeded ", options.max_output_bytes, " bytes"));
  }
  if (timed_out) {
    run.end = JailedRun::End::kTimedOut;
    return run;
  }
  if (starved) {
    return absl::UnavailableError(absl::StrFormat(
        "the compile node is overloaded: in %.1f s of wall time the compilers waited %.1f s for "
        "a CPU and ran %.1f s (their budget is %.0f s); the compile says nothing about the source",
        run.seconds, run.scheduler_wait_seconds, run.cpu_seconds, cpu_budget));
  }
  if (WIFSIGNALED(status)) {
    run.signal = WTERMSIG(status);
    if (run.signal == SIGXCPU) {
      run.end = JailedRun::End::kTimedOut;
      return run;
    }
    if (run.signal == SIGKILL) {
      return absl::UnavailableError(
          "the compile process was killed by SIGKILL from outside (the machine's out-of-memory "
          "killer?)");
    }
    run.end = JailedRun::End::kCrashed;
    return run;
  }
  const int code = WEXITSTATUS(status);
  auto fields = DecodeFields(frames);
  if (code == kExitJailRefused) {
    return absl::FailedPreconditionError(
        absl::StrCat("the compile jail cannot be entered on this machine (",
                     fields.ok() ? (*fields)["jail_error"] : "no reason given",
                     "); set PTXBENCH_COMPILE_JAIL=allow-unjailed to compile without it"));
  }
  if (code == kExitOutOfMemory) {
    run.end = JailedRun::End::kOutOfMemory;
    return run;
  }
  if (code != kExitAnswered || !fields.ok() || fields->count("output") == 0) {
    run.end = JailedRun::End::kCrashed;
    return run;
  }
  const std::string method = (*fields)["jail_method"];
  run.jail.method = method == "mount_namespace"  ? JailMethod::kMountNamespace
                    : method == "user_namespace" ? JailMethod::kUserNamespace
                                                 : JailMethod::kNone;
  run.jail.root = (*fields)["jail_root"];
  run.jail.detail = (*fields)["jail_detail"];
  run.output = std::move((*fields)["output"]);
  if (!absl::SimpleAtoi((*fields)["vm_peak"], &run.peak_virtual_bytes)) run.peak_virtual_bytes = 0;
  run.end = JailedRun::End::kFinished;
  return run;
}

}  // namespace ptxbench
