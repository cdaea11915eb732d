#include "server/embedded_pg/embedded_postgres.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status.h"
#include "server/store/database.h"

namespace ptxbench::embedded_pg {
namespace {

namespace fs = std::filesystem;

constexpr char kSuperuser[] = "ptxbench";
constexpr char kDatabase[] = "ptxbench";
// pg_ctl's own wait for start and stop; a cold start of a cluster after a crash replays WAL,
// which takes seconds, not minutes.
constexpr char kPgCtlTimeoutSeconds[] = "60";

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together.
};

// The unprivileged account PostgreSQL runs as when we are root.
struct RunAs {
  bool needed = false;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string runuser;  // Path of runuser(1).
};

std::string ErrnoText(int error) { return std::strerror(error); }

// Runs argv[0] with the given arguments, collecting stdout and stderr. The child closes every
// inherited descriptor above stderr: otherwise the postmaster that pg_ctl leaves behind
// would keep the server's listening sockets (and this process's lock file) open after the
// server exits. `new_session` detaches the child (and the postmaster it starts) from our
// process group, so a Ctrl-C meant for the server does not reach PostgreSQL before the server
// has stopped it in order.
absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv, bool new_session) {
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", ErrnoText(errno)));
  }
  const pid_t pid = fork();
  if (pid < 0) {
    const int error = errno;
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    return absl::InternalError(absl::StrCat("fork: ", ErrnoText(error)));
  }
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec (the parent has threads).
    if (new_session) setsid();
    const int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    dup2(pipe_fds[1], STDOUT_FILENO);
    dup2(pipe_fds[1], STDERR_FILENO);
    close_range(3, ~0U, 0);
    execv(args[0], args.data());
    const char message[] = "exec failed\n";
    [[maybe_unused]] ssize_t ignored = write(STDERR_FILENO, message, sizeof(message) - 1);
    _exit(127);
  }
  close(pipe_fds[1]);
  CommandResult result;
  char buffer[4096];
  while (true) {
    const ssize_t n = read(pipe_fds[0], buffer, sizeof(buffer));
    if (n > 0) {
      result.output.append(buffer, n);
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(pipe_fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

absl::StatusOr<CommandResult> RunPostgresCommand(const RunAs& run_as, std::vector<std::string> argv,
                                                 bool new_session = false) {
  if (run_as.needed) {
    argv.insert(argv.begin(), {run_as.runuser, "-u", "postgres", "--"});
  }
  return RunCommand(argv, new_session);
}

std::string Tail(const std::string& text, int lines) {
  std::vector<std::string> all = absl::StrSplit(text, '\n', absl::SkipWhitespace());
  if (static_cast<int>(all.size()) > lines) all.erase(all.begin(), all.end() - lines);
  return absl::StrJoin(all, " | ");
}

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

// The server log written since byte `offset`: the current start's messages only.
std::string LogSince(const std::string& path, std::streamoff offset) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "(no server log)";
  in.seekg(offset);
  std::ostringstream contents;
  contents << in.rdbuf();
  return Tail(contents.str(), 15);
}

std::streamoff FileSize(const std::string& path) {
  std::error_code error;
  const auto size = fs::file_size(path, error);
  return error ? 0 : static_cast<std::streamoff>(size);
}

absl::StatusOr<RunAs> DecideUser() {
  RunAs run_as;
  if (geteuid() != 0) return run_as;
  // initdb refuses to run as root ("cannot be run as root"), and so does postgres.
  const passwd* user = getpwnam("postgres");
  if (user == nullptr) {
    return absl::FailedPreconditionError(
        "running as root, PostgreSQL must run as the unprivileged user 'postgres', which does "
        "not exist; install the Debian package postgresql-15 (it creates the user) or run "
        "the server as an unprivileged user");
  }
  run_as.needed = true;
  run_as.uid = user->pw_uid;
  run_as.gid = user->pw_gid;
  for (const char* path : {"/usr/sbin/runuser", "/sbin/runuser", "/usr/bin/runuser"}) {
    if (access(path, X_OK) == 0) {
      run_as.runuser = path;
      break;
    }
  }
  if (run_as.runuser.empty()) {
    return absl::FailedPreconditionError(
        "running as root needs runuser(1) (package util-linux) to start PostgreSQL as "
        "'postgres'");
  }
  return run_as;
}

absl::Status CheckBinaries(const std::string& bin_dir) {
  for (const char* binary : {"initdb", "pg_ctl", "postgres"}) {
    const std::string path = absl::StrCat(bin_dir, "/", binary);
    if (access(path.c_str(), X_OK) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("PostgreSQL 15 binaries not found: ", path,
                       " is missing or not executable; install "
                       "the Debian package postgresql-15 (apt-get install postgresql-15) or point "
                       "pg_bin_dir at a PostgreSQL 15 bin folder"));
    }
  }
  return absl::OkStatus();
}

absl::Status GiveToPostgres(const RunAs& run_as, const std::string& path) {
  if (!run_as.needed) return absl::OkStatus();
  if (chown(path.c_str(), run_as.uid, run_as.gid) != 0) {
    return absl::InternalError(absl::StrCat("chown ", path, " to postgres: ", ErrnoText(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> PickFreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", ErrnoText(errno)));
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    const int error = errno;
    close(fd);
    return absl::InternalError(absl::StrCat("picking a free port: ", ErrnoText(error)));
  }
  close(fd);
  return ntohs(address.sin_port);
}

absl::StatusOr<std::string> NewPassword() {
  std::ifstream random("/dev/urandom", std::ios::binary);
  unsigned char bytes[24];
  if (!random.read(reinterpret_cast<char*>(bytes), sizeof(bytes))) {
    return absl::InternalError("cannot read /dev/urandom for the database password");
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string password;
  for (unsigned char byte : bytes) {
    password += kHex[byte >> 4];
    password += kHex[byte & 15];
  }
  return password;
}

std::optional<pid_t> PidFileOwner(const std::string& pgdata) {
  auto contents = ReadFile(pgdata + "/postmaster.pid");
  if (!contents) return std::nullopt;
  pid_t pid = 0;
  const std::string first_line = contents->substr(0, contents->find('\n'));
  if (!absl::SimpleAtoi(first_line, &pid) || pid <= 0) return std::nullopt;
  return pid;
}

// The state letter of /proc/<pid>/stat ('R', 'S', 'Z', ...), if readable.
std::optional<char> ProcessState(pid_t pid) {
  auto stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  if (!stat) return std::nullopt;
  const size_t end_of_name = stat->rfind(')');  // The name may contain spaces and parens.
  if (end_of_name == std::string::npos || end_of_name + 2 >= stat->size()) return std::nullopt;
  return (*stat)[end_of_name + 2];
}

// The pid in postmaster.pid if that process is alive and is a PostgreSQL server. Only such a
// pid is ever signalled (pg_ctl stop): after a reboot the pid may belong to anything.
std::optional<pid_t> RunningPostmaster(const std::string& pgdata) {
  const std::optional<pid_t> pid = PidFileOwner(pgdata);
  if (!pid) return std::nullopt;
  if (kill(*pid, 0) != 0 && errno != EPERM) return std::nullopt;
  if (ProcessState(*pid) == 'Z') return std::nullopt;
  auto comm = ReadFile(absl::StrCat("/proc/", *pid, "/comm"));
  if (!comm || std::string(absl::StripAsciiWhitespace(*comm)) != "postgres") return std::nullopt;
  return pid;
}

}  // namespace

absl::StatusOr<std::unique_ptr<EmbeddedPostgres>> EmbeddedPostgres::Start(Options options) {
  if (options.data_dir.empty()) return absl::InvalidArgumentError("data_dir is required");
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("port ", options.port, " is out of range"));
  }
  std::error_code error;
  options.data_dir = fs::absolute(options.data_dir, error).lexically_normal().string();
  while (options.data_dir.size() > 1 && options.data_dir.back() == '/') {
    options.data_dir.pop_back();
  }
  RETURN_IF_ERROR(CheckBinaries(options.pg_bin_dir));
  ASSIGN_OR_RETURN(RunAs run_as, DecideUser());

  std::unique_ptr<EmbeddedPostgres> pg(new EmbeddedPostgres());
  pg->options_ = options;
  pg->pgdata_ = options.data_dir + "/pgdata";
  const std::string& dir = options.data_dir;
  const std::string log_path = dir + "/postgresql.log";
  const std::string password_path = dir + "/password";
  const std::string initdb = options.pg_bin_dir + "/initdb";
  const std::string pg_ctl = options.pg_bin_dir + "/pg_ctl";

  fs::create_directories(dir, error);
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create data_dir ", dir, ": ", error.message()));
  }
  RETURN_IF_ERROR(GiveToPostgres(run_as, dir));
  chmod(dir.c_str(), 0700);

  // The owner lock. flock() locks die with their process (SIGKILL included), so holding it
  // means "a live server owns this cluster", and getting it means any running postmaster is
  // an orphan of a dead one. O_CLOEXEC keeps it out of pg_ctl and the postmaster.
  const std::string lock_path = dir + "/owner.lock";
  pg->lock_fd_ = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (pg->lock_fd_ < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open ", lock_path, ": ", ErrnoText(errno)));
  }
  if (flock(pg->lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const std::string owner = ReadFile(lock_path).value_or("?");
    return absl::FailedPreconditionError(
        absl::StrCat("the PostgreSQL cluster in ", dir, " is in use by another live process (pid ",
                     absl::StripAsciiWhitespace(owner), "); one server per data_dir"));
  }
  const std::string pid_text = absl::StrCat(getpid(), "\n");
  if (ftruncate(pg->lock_fd_, 0) != 0 ||
      pwrite(pg->lock_fd_, pid_text.data(), pid_text.size(), 0) < 0) {
    return absl::InternalError(absl::StrCat("writing ", lock_path, ": ", ErrnoText(errno)));
  }

  if (run_as.needed) {
    // Fails early, with the reason, when a parent folder is closed to 'postgres' (e.g. a
    // data_dir under /root); initdb's own message would not say why it must be 'postgres'.
    ASSIGN_OR_RETURN(CommandResult writable,
                     RunPostgresCommand(run_as, {"/usr/bin/test", "-w", dir}));
    if (writable.exit_code != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the user 'postgres' cannot write ", dir,
          ": PostgreSQL runs as 'postgres' because "
          "this process is root, so every parent folder of data_dir must be searchable by it"));
    }
  }

  if (!fs::exists(pg->pgdata_ + "/PG_VERSION")) {
    // No cluster, or the remains of an initdb that was killed halfway (initdb removes its
    // own remains on ordinary failures): start over. Nothing in it can be data.
    fs::remove_all(pg->pgdata_, error);
    ASSIGN_OR_RETURN(pg->password_, NewPassword());
    // The password file is written before initdb and is initdb's --pwfile, so a crash
    // between the two never leaves a cluster whose password nobody knows.
    {
      std::ofstream out(password_path, std::ios::trunc);
      out << pg->password_ << "\n";
      if (!out) return absl::InternalError(absl::StrCat("cannot write ", password_path));
    }
    chmod(password_path.c_str(), 0600);
    RETURN_IF_ERROR(GiveToPostgres(run_as, password_path));
    ASSIGN_OR_RETURN(
        CommandResult init,
        RunPostgresCommand(
            run_as, {initdb, "-D", pg->pgdata_, "-U", kSuperuser, "--pwfile=" + password_path,
                     "--auth-host=scram-sha-256", "--auth-local=peer", "-E", "UTF8", "--no-locale",
                     "--no-instructions"}));
    if (init.exit_code != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("initdb failed in ", pg->pgdata_, ": ", Tail(init.output, 10)));
    }
  } else {
    auto password = ReadFile(password_path);
    if (!password || absl::StripAsciiWhitespace(*password).empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the cluster in ", pg->pgdata_, " exists but its password file ", password_path,
          " is missing; restore it or remove ", dir, " to start with an empty database"));
    }
    pg->password_ = std::string(absl::StripAsciiWhitespace(*password));
  }

  // A postmaster still running here belongs to a server that was killed (we hold the owner
  // lock). It is stopped cleanly rather than reused: a fresh start applies this start's port
  // and settings, and a fast shutdown writes a checkpoint, so nothing is replayed or lost.
  if (auto orphan = RunningPostmaster(pg->pgdata_)) {
    ASSIGN_OR_RETURN(CommandResult stop,
                     RunPostgresCommand(run_as, {pg_ctl, "stop", "-D", pg->pgdata_, "-m", "fast",
                                                 "-w", "-t", kPgCtlTimeoutSeconds}));
    if (stop.exit_code != 0 && RunningPostmaster(pg->pgdata_)) {
      return absl::FailedPreconditionError(
          absl::StrCat("an orphaned PostgreSQL server (pid ", *orphan, ") is running on ",
                       pg->pgdata_, " and did not stop: ", Tail(stop.output, 5)));
    }
  }

  // A postmaster killed outright leaves its pid file behind. PostgreSQL ignores the file when
  // that pid is gone, but a zombie (an orphan whose new parent has not reaped it yet) still
  // answers kill(pid, 0) and would make it refuse to start; a zombie holds nothing, so its
  // file is removed here.
  if (auto owner = PidFileOwner(pg->pgdata_); owner && ProcessState(*owner) == 'Z') {
    fs::remove(pg->pgdata_ + "/postmaster.pid", error);
  }

  // Start. With an automatically chosen port, another process can take the port between our
  // probe and the postmaster's bind; that (and only that) is retried with a new port.
  const int kStartAttempts = options.port == 0 ? 3 : 1;
  for (int attempt = 1;; ++attempt) {
    if (options.port != 0) {
      pg->port_ = options.port;
    } else {
      ASSIGN_OR_RETURN(pg->port_, PickFreeLoopbackPort());
    }
    const std::streamoff log_offset = FileSize(log_path);
    // listen_addresses: loopback only, never the network. unix_socket_directories='': the
    // default socket folder /var/run/postgresql may not exist or belong to another cluster;
    // every client here connects over TCP.
    const std::string server_options = absl::StrCat(
        "-p ", pg->port_, " -c listen_addresses=127.0.0.1", " -c unix_socket_directories=''");
    ASSIGN_OR_RETURN(CommandResult start,
                     RunPostgresCommand(run_as,
                                        {pg_ctl, "start", "-D", pg->pgdata_, "-l", log_path, "-w",
                                         "-t", kPgCtlTimeoutSeconds, "-o", server_options},
                                        /*new_session=*/true));
    if (start.exit_code == 0) break;
    const std::string log = LogSince(log_path, log_offset);
    if (attempt < kStartAttempts && absl::StrContains(log, "could not bind")) continue;
    return absl::UnavailableError(absl::StrCat("PostgreSQL did not start on 127.0.0.1:", pg->port_,
                                               ": ", Tail(start.output, 3), "; server log: ", log));
  }
  pg->running_ = true;

  const std::string server_url = absl::StrCat("postgresql://", kSuperuser, ":", pg->password_,
                                              "@127.0.0.1:", pg->port_, "/postgres");
  if (auto created = store::EnsureDatabase(server_url, kDatabase); !created.ok()) {
    pg->Stop().IgnoreError();
    return Annotate(created.status(), "creating the ptxbench database");
  }
  return pg;
}

absl::Status EmbeddedPostgres::Stop() {
  absl::Status status = absl::OkStatus();
  if (running_) {
    running_ = false;
    auto run_as = DecideUser();
    if (!run_as.ok()) return run_as.status();
    const std::string pg_ctl = options_.pg_bin_dir + "/pg_ctl";
    auto stop = RunPostgresCommand(
        *run_as, {pg_ctl, "stop", "-D", pgdata_, "-m", "fast", "-w", "-t", kPgCtlTimeoutSeconds});
    if (!stop.ok()) {
      status = stop.status();
    } else if (stop->exit_code != 0) {
      // A fast shutdown that hangs (a stuck backend) is finished immediately: the next start
      // replays the WAL, so committed data is still safe.
      auto immediate =
          RunPostgresCommand(*run_as, {pg_ctl, "stop", "-D", pgdata_, "-m", "immediate", "-w"});
      if (!immediate.ok() || immediate->exit_code != 0) {
        status = absl::InternalError(
            absl::StrCat("pg_ctl stop failed on ", pgdata_, ": ", Tail(stop->output, 5)));
      }
    }
  }
  if (lock_fd_ >= 0) {
    close(lock_fd_);  // Releases the owner lock.
    lock_fd_ = -1;
  }
  return status;
}

EmbeddedPostgres::~EmbeddedPostgres() { Stop().IgnoreError(); }

std::string EmbeddedPostgres::database_url() const {
  return absl::StrCat("postgresql://", kSuperuser, ":", password_, "@127.0.0.1:", port_, "/",
                      kDatabase);
}

}  // namespace ptxbench::embedded_pg
