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
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/files.h"
#include "common/random.h"
#include "common/status.h"
#include "common/subprocess.h"
#include "server/embedded_pg/trusted_dir.h"
#include "server/store/database.h"

namespace ptxbench::embedded_pg {
namespace {

namespace fs = std::filesystem;

// pg_ctl's own wait for start and stop; a cold start of a cluster after a crash replays WAL,
// which takes seconds, not minutes.
constexpr char kPgCtlTimeoutSeconds[] = "60";
constexpr char kLogName[] = "postgresql.log";
constexpr char kPasswordName[] = "password";
constexpr char kAppPasswordName[] = "app_password";
constexpr char kLockName[] = "owner.lock";
constexpr char kPgdataName[] = "pgdata";

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together.
};

std::string ErrnoText(int error) { return std::strerror(error); }

// The whole environment of initdb, pg_ctl, runuser and so of the postmaster and every backend:
// PATH and TZ (initdb writes the host's time zone into postgresql.conf) and nothing else of
// the server's, whose environment may hold PTXBENCH_ADMIN_TOKEN or PTXBENCH_DATABASE_URL.
// Before this was stated, the children inherited all of it (execv), and a superuser's
// `COPY ... FROM PROGRAM 'env'` printed it (tests/server/embedded_pg).
ChildEnvironment PostgresEnvironment() { return {.inherit = {"PATH", "TZ"}}; }

// What one initdb or pg_ctl may take before it is killed: pg_ctl waits kPgCtlTimeoutSeconds
// itself; initdb of an empty cluster takes about a second. A bound for a hung tool, not a
// policy.
constexpr absl::Duration kPgToolDeadline = absl::Minutes(10);

// Runs argv[0] with the given arguments, collecting stdout and stderr together (the tail
// goes into our errors). The runner closes every inherited descriptor above stderr in the
// child: otherwise the postmaster that pg_ctl leaves behind would keep the server's
// listening sockets (and this process's lock file) open after the server exits.
// `new_session` detaches the child (and the postmaster it starts) from our session, so a
// Ctrl-C meant for the server does not reach PostgreSQL before the server has stopped it in
// order. (pg_ctl's postmaster calls setsid() itself, so the runner's kill of the child's
// group when the child exits never reaches it.)
absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv, bool new_session) {
  SubprocessOptions command;
  command.argv = argv;
  command.environment = PostgresEnvironment();
  command.new_session = new_session;
  command.merge_stderr_into_stdout = true;
  command.deadline = kPgToolDeadline;
  ASSIGN_OR_RETURN(SubprocessResult run, RunSubprocess(command));
  CommandResult result;
  result.output = std::move(run.stdout_bytes);
  result.exit_code = run.term_signal == 0 ? run.exit_code : 128 + run.term_signal;
  if (run.timed_out)
    absl::StrAppend(&result.output, "\nkilled after ", absl::FormatDuration(kPgToolDeadline), "\n");
  return result;
}

std::string Tail(const std::string& text, int lines) {
  std::vector<std::string> all = absl::StrSplit(text, '\n', absl::SkipWhitespace());
  if (static_cast<int>(all.size()) > lines) all.erase(all.begin(), all.end() - lines);
  return absl::StrJoin(all, " | ");
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

// 48 hex digits: only [0-9a-f], so it is safe inside a SQL literal.
absl::StatusOr<std::string> NewPassword() {
  absl::StatusOr<std::string> password = RandomHex(24);
  if (!password.ok()) return Annotate(password.status(), "the database password");
  return password;
}

bool IsHexPassword(const std::string& text) {
  if (text.size() < 32) return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// A /proc file, or nullopt once the process is gone (read(2) then fails with ESRCH, which
// std::ifstream turns into an exception: common/files.h).
std::optional<std::string> ReadProcFile(const std::string& path) {
  absl::StatusOr<std::string> contents = ReadFileToString(
      path, "a /proc file", {.max_bytes = size_t{1} << 20, .truncate_at_limit = true});
  if (!contents.ok()) return std::nullopt;
  return *std::move(contents);
}

// The state letter of /proc/<pid>/stat ('R', 'S', 'Z', ...), if readable.
std::optional<char> ProcessState(pid_t pid) {
  auto stat = ReadProcFile(absl::StrCat("/proc/", pid, "/stat"));
  if (!stat) return std::nullopt;
  const size_t end_of_name = stat->rfind(')');  // The name may contain spaces and parens.
  if (end_of_name == std::string::npos || end_of_name + 2 >= stat->size()) return std::nullopt;
  return (*stat)[end_of_name + 2];
}

// Alive, not a zombie, and a PostgreSQL server: after a reboot or a crash the pid may belong
// to anything, and only a postgres process is ever signalled (pg_ctl stop).
bool IsLivePostmaster(pid_t pid) {
  if (kill(pid, 0) != 0 && errno != EPERM) return false;
  if (ProcessState(pid) == 'Z') return false;
  auto comm = ReadProcFile(absl::StrCat("/proc/", pid, "/comm"));
  return comm && std::string(absl::StripAsciiWhitespace(*comm)) == "postgres";
}

// The pid in postmaster.pid (read without following a link), if there is one.
std::optional<pid_t> PidFileOwner(const TrustedDir& dir) {
  auto pgdata = dir.OpenSubdir(kPgdataName);
  if (!pgdata.ok()) return std::nullopt;
  auto contents = pgdata->ReadFile("postmaster.pid");
  if (!contents.ok() || !contents->has_value()) return std::nullopt;
  pid_t pid = 0;
  const std::string first_line = (*contents)->substr(0, (*contents)->find('\n'));
  if (!absl::SimpleAtoi(first_line, &pid) || pid <= 0) return std::nullopt;
  return pid;
}

std::optional<pid_t> RunningPostmaster(const TrustedDir& dir) {
  const std::optional<pid_t> pid = PidFileOwner(dir);
  if (!pid || !IsLivePostmaster(*pid)) return std::nullopt;
  return pid;
}

// Waits until the live postmaster `pid` of `dir` says "ready" in its pid file (PostgreSQL 10+
// writes its status on the file's 8th line and its port on the 4th) and listens on `port`.
absl::Status AwaitReadyPostmaster(const TrustedDir& dir, pid_t pid, int port) {
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  std::string last = "no pid file";
  while (absl::Now() < deadline) {
    if (!IsLivePostmaster(pid)) {
      return absl::UnavailableError(absl::StrCat("the postmaster ", pid, " exited while starting"));
    }
    auto pgdata = dir.OpenSubdir(kPgdataName);
    if (pgdata.ok()) {
      auto contents = pgdata->ReadFile("postmaster.pid");
      if (contents.ok() && contents->has_value()) {
        const std::vector<std::string> lines = absl::StrSplit(**contents, '\n');
        int file_port = 0;
        if (lines.size() >= 8 && absl::SimpleAtoi(lines[3], &file_port)) {
          if (file_port != port) {
            return absl::FailedPreconditionError(
                absl::StrCat("a postmaster (pid ", pid, ") runs on the data folder on port ",
                             file_port, ", not on ", port, " where the server's connections go"));
          }
          last = std::string(absl::StripAsciiWhitespace(lines[7]));
          if (last == "ready") return absl::OkStatus();
        }
      }
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("the postmaster ", pid, " was not ready within 60 s (status: ", last, ")"));
}

// Makes the application role the owner of every object of the public schema that another
// role (the superuser, in clusters made before the role existed) owns. Tables carry their
// indexes, triggers, row types and the sequences of their serial/identity columns with them;
// only free-standing sequences, routines and types need their own ALTER.
constexpr char kHandOverObjectsSql[] = R"sql(
DO $$
DECLARE r record;
BEGIN
  FOR r IN SELECT c.oid::regclass AS name, c.relkind FROM pg_class c
           JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
             AND c.relowner <> 'ptxbench_app'::regrole LOOP
    EXECUTE format('ALTER %s %s OWNER TO ptxbench_app',
                   CASE r.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW'
                                  WHEN 'f' THEN 'FOREIGN TABLE' ELSE 'TABLE' END, r.name);
  END LOOP;
  FOR r IN SELECT c.oid::regclass AS name FROM pg_class c
           JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE n.nspname = 'public' AND c.relkind = 'S'
             AND c.relowner <> 'ptxbench_app'::regrole
             AND NOT EXISTS (SELECT 1 FROM pg_depend d
                             WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
                               AND d.deptype IN ('a', 'i')) LOOP
    EXECUTE format('ALTER SEQUENCE %s OWNER TO ptxbench_app', r.name);
  END LOOP;
  FOR r IN SELECT p.oid::regprocedure AS name FROM pg_proc p
           JOIN pg_namespace n ON n.oid = p.pronamespace
           WHERE n.nspname = 'public' AND p.prokind IN ('f', 'p')
             AND p.proowner <> 'ptxbench_app'::regrole LOOP
    EXECUTE format('ALTER ROUTINE %s OWNER TO ptxbench_app', r.name);
  END LOOP;
  FOR r IN SELECT t.oid::regtype AS name, t.typtype FROM pg_type t
           JOIN pg_namespace n ON n.oid = t.typnamespace
           WHERE n.nspname = 'public' AND t.typtype IN ('e', 'd', 'r')
             AND t.typowner <> 'ptxbench_app'::regrole LOOP
    EXECUTE format('ALTER %s %s OWNER TO ptxbench_app',
                   CASE r.typtype WHEN 'd' THEN 'DOMAIN' ELSE 'TYPE' END, r.name);
  END LOOP;
END $$;
ALTER SCHEMA public OWNER TO ptxbench_app;
)sql";

}  // namespace

EmbeddedPostgres::EmbeddedPostgres() = default;

absl::StatusOr<EmbeddedPostgres::RunAs> EmbeddedPostgres::DecideUser() {
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

namespace {

absl::StatusOr<CommandResult> RunAsPostgres(bool needed, const std::string& runuser,
                                            std::vector<std::string> argv,
                                            bool new_session = false) {
  if (needed) argv.insert(argv.begin(), {runuser, "-u", "postgres", "--"});
  return RunCommand(argv, new_session);
}

// The password in `name` (a private file of the data folder), or nullopt when there is none.
absl::StatusOr<std::optional<std::string>> ReadPassword(const TrustedDir& dir,
                                                        const std::string& name) {
  auto fd = dir.OpenFile(name, O_RDONLY, /*private_mode=*/true);
  if (absl::IsNotFound(fd.status())) return std::optional<std::string>();
  if (!fd.ok()) return fd.status();
  auto contents = dir.ReadFile(name);
  if (!contents.ok()) return contents.status();
  if (!contents->has_value()) return std::optional<std::string>();
  return std::optional<std::string>(std::string(absl::StripAsciiWhitespace(**contents)));
}

// (uid, gid) hands the file to 'postgres' (initdb reads the superuser's); uid -1
// keeps this process's user.
absl::Status WritePassword(const TrustedDir& dir, const std::string& name,
                           const std::string& password, uid_t uid, gid_t gid) {
  ASSIGN_OR_RETURN(UniqueFd fd, dir.CreateFile(name, S_IRUSR | S_IWUSR));
  RETURN_IF_ERROR(WriteAll(fd.get(), password + "\n", absl::StrCat(dir.path(), "/", name)));
  if (uid != static_cast<uid_t>(-1) && fchown(fd.get(), uid, gid) != 0) {
    return absl::InternalError(
        absl::StrCat("chown ", dir.path(), "/", name, " to postgres: ", ErrnoText(errno)));
  }
  if (fsync(fd.get()) != 0) {
    return absl::InternalError(
        absl::StrCat("fsync ", dir.path(), "/", name, ": ", ErrnoText(errno)));
  }
  return absl::OkStatus();
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

  std::unique_ptr<EmbeddedPostgres> pg(new EmbeddedPostgres());
  ASSIGN_OR_RETURN(pg->run_as_, DecideUser());
  const RunAs& run_as = pg->run_as_;
  pg->options_ = options;

  TrustedDir::Options dir_options;
  if (run_as.needed) dir_options.delegate = run_as.uid;
  ASSIGN_OR_RETURN(TrustedDir dir, TrustedDir::Open(options.data_dir, dir_options));
  pg->dir_ = std::make_unique<TrustedDir>(std::move(dir));
  const TrustedDir& data = *pg->dir_;
  // The verified folder's own path: symlinks on the way (owned by root or us) are resolved.
  const std::string& dir_path = data.path();
  pg->pgdata_ = absl::StrCat(dir_path, "/", kPgdataName);
  if (run_as.needed && data.owner() != run_as.uid) {
    RETURN_IF_ERROR(data.SetOwner(run_as.uid, run_as.gid));
  }
  RETURN_IF_ERROR(data.SetMode(S_IRWXU));

  // The owner lock. flock() locks die with their process (SIGKILL included), so holding it
  // means "a live server owns this cluster", and getting it means any running postmaster is
  // an orphan of a dead one. O_CLOEXEC keeps it out of pg_ctl and the postmaster. It must be
  // this process's own file: 'postgres' may write in the folder, and a lock file it made
  // could be a hard link to anything.
  {
    ASSIGN_OR_RETURN(UniqueFd lock,
                     data.OpenFile(kLockName, O_RDWR | O_CREAT, /*private_mode=*/true));
    struct stat st;
    if (fstat(lock.get(), &st) != 0 || st.st_uid != geteuid()) {
      return absl::FailedPreconditionError(absl::StrCat(
          dir_path, "/", kLockName, " belongs to uid ", st.st_uid, ", not to this process's user"));
    }
    pg->lock_fd_ = lock.Release();
  }
  if (flock(pg->lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    auto owner = data.ReadFile(kLockName);
    const std::string owner_pid = owner.ok() && owner->has_value() ? **owner : "?";
    return absl::FailedPreconditionError(absl::StrCat(
        "the PostgreSQL cluster in ", dir_path, " is in use by another live process (pid ",
        absl::StripAsciiWhitespace(owner_pid), "); one server per data_dir"));
  }
  const std::string pid_text = absl::StrCat(getpid(), "\n");
  if (ftruncate(pg->lock_fd_, 0) != 0 ||
      pwrite(pg->lock_fd_, pid_text.data(), pid_text.size(), 0) < 0) {
    return absl::InternalError(
        absl::StrCat("writing ", dir_path, "/", kLockName, ": ", ErrnoText(errno)));
  }

  if (run_as.needed) {
    // Fails early, with the reason, when a parent folder is closed to 'postgres' (e.g. a
    // data_dir under /root); initdb's own message would not say why it must be 'postgres'.
    ASSIGN_OR_RETURN(CommandResult writable,
                     RunAsPostgres(true, run_as.runuser, {"/usr/bin/test", "-w", dir_path}));
    if (writable.exit_code != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the user 'postgres' cannot write ", dir_path,
          ": PostgreSQL runs as 'postgres' because "
          "this process is root, so every parent folder of data_dir must be searchable by it"));
    }
  }

  const uid_t password_owner = run_as.needed ? run_as.uid : static_cast<uid_t>(-1);
  auto pgdata = data.OpenSubdir(kPgdataName);
  if (!pgdata.ok() && !absl::IsNotFound(pgdata.status())) return pgdata.status();
  const bool new_cluster = !pgdata.ok() || !pgdata->Exists("PG_VERSION");
  if (new_cluster) {
    // No cluster, or the remains of an initdb that was killed halfway (initdb removes its
    // own remains on ordinary failures): start over. Nothing in it can be data. As root the
    // remains are removed as 'postgres', who made them: a root rm -rf in a folder 'postgres'
    // can write could be steered (by swapping a subfolder for a link) to remove root's files.
    if (run_as.needed) {
      ASSIGN_OR_RETURN(CommandResult removed,
                       RunAsPostgres(true, run_as.runuser, {"/bin/rm", "-rf", "--", pg->pgdata_}));
      if (removed.exit_code != 0) {
        return absl::FailedPreconditionError(absl::StrCat(
            "cannot remove the incomplete cluster ", pg->pgdata_, ": ", Tail(removed.output, 3)));
      }
    } else {
      fs::remove_all(pg->pgdata_, error);
    }
    ASSIGN_OR_RETURN(pg->superuser_password_, NewPassword());
    // The password file is written before initdb and is initdb's --pwfile, so a crash
    // between the two never leaves a cluster whose password nobody knows.
    RETURN_IF_ERROR(
        WritePassword(data, kPasswordName, pg->superuser_password_, password_owner, run_as.gid));
    const std::string initdb = options.pg_bin_dir + "/initdb";
    ASSIGN_OR_RETURN(CommandResult init,
                     RunAsPostgres(run_as.needed, run_as.runuser,
                                   {initdb, "-D", pg->pgdata_, "-U", kSuperuser,
                                    absl::StrCat("--pwfile=", dir_path, "/", kPasswordName),
                                    "--auth-host=scram-sha-256", "--auth-local=peer", "-E", "UTF8",
                                    "--no-locale", "--no-instructions"}));
    if (init.exit_code != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("initdb failed in ", pg->pgdata_, ": ", Tail(init.output, 10)));
    }
  } else {
    ASSIGN_OR_RETURN(std::optional<std::string> password, ReadPassword(data, kPasswordName));
    if (!password.has_value() || password->empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the cluster in ", pg->pgdata_, " exists but its password file ", dir_path,
                       "/", kPasswordName, " is missing; restore it or remove ", dir_path,
                       " to start with an empty database"));
    }
    pg->superuser_password_ = *password;
  }
  // The application role's password: made with the cluster, set on the role at every start
  // (so a lost file only costs a new password, never access).
  std::optional<std::string> app_password;
  if (!new_cluster) {
    ASSIGN_OR_RETURN(app_password, ReadPassword(data, kAppPasswordName));
  }
  if (app_password.has_value() && IsHexPassword(*app_password)) {
    pg->app_password_ = *app_password;
  } else {
    ASSIGN_OR_RETURN(pg->app_password_, NewPassword());
    RETURN_IF_ERROR(
        WritePassword(data, kAppPasswordName, pg->app_password_, static_cast<uid_t>(-1), 0));
  }

  // A postmaster still running here belongs to a server that was killed (we hold the owner
  // lock). It is stopped cleanly rather than reused: a fresh start applies this start's port
  // and settings, and a fast shutdown writes a checkpoint, so nothing is replayed or lost.
  if (auto orphan = RunningPostmaster(data)) {
    ASSIGN_OR_RETURN(CommandResult stop,
                     RunAsPostgres(run_as.needed, run_as.runuser,
                                   {options.pg_bin_dir + "/pg_ctl", "stop", "-D", pg->pgdata_, "-m",
                                    "fast", "-w", "-t", kPgCtlTimeoutSeconds}));
    if (stop.exit_code != 0 && RunningPostmaster(data)) {
      return absl::FailedPreconditionError(
          absl::StrCat("an orphaned PostgreSQL server (pid ", *orphan, ") is running on ",
                       pg->pgdata_, " and did not stop: ", Tail(stop.output, 5)));
    }
  }
  RETURN_IF_ERROR(pg->StartServer(/*keep_port=*/false));
  return pg;
}

absl::Status EmbeddedPostgres::StartServer(bool keep_port) {
  const TrustedDir& data = *dir_;
  // A postmaster killed outright leaves its pid file behind. PostgreSQL ignores the file when
  // that pid is gone, but a zombie (an orphan whose new parent has not reaped it yet) still
  // answers kill(pid, 0) and would make it refuse to start; a zombie holds nothing, so its
  // file is removed here.
  if (auto owner = PidFileOwner(data); owner && ProcessState(*owner) == 'Z') {
    if (auto pgdata = data.OpenSubdir(kPgdataName); pgdata.ok()) {
      pgdata->Remove("postmaster.pid").IgnoreError();
    }
  }
  // A restart finds a live postmaster of our own: pg_ctl -w gives up after
  // kPgCtlTimeoutSeconds while the postmaster it started goes on coming up (seen once in
  // chaos_test "the embedded postmaster killed too" on 2 busy cores: every later start then
  // failed on the pid file that postmaster holds). The data folder is this process's alone
  // (owner.lock), so a live postmaster in it is one we started: keep it once it is ready.
  if (keep_port) {
    if (std::optional<pid_t> live = RunningPostmaster(data)) {
      RETURN_IF_ERROR(AwaitReadyPostmaster(data, *live, port_));
      running_ = true;
      postmaster_ = live;
      app_ready_ = false;
      RETURN_IF_ERROR(Annotate(EnsureAppDatabase(), "creating the application role and database"));
      app_ready_ = true;
      return absl::OkStatus();
    }
  }
  // Start. With an automatically chosen port, another process can take the port between our
  // probe and the postmaster's bind; that (and only that) is retried with a new port. A
  // restart keeps its port: the store's connection URL names it.
  const bool pick_port = options_.port == 0 && !keep_port;
  const int kStartAttempts = pick_port ? 3 : 1;
  for (int attempt = 1;; ++attempt) {
    if (pick_port) {
      ASSIGN_OR_RETURN(port_, PickFreeLoopbackPort());
    } else if (!keep_port) {
      port_ = options_.port;
    }
    const off_t log_offset = data.FileSize(kLogName);
    // listen_addresses: loopback only, never the network. unix_socket_directories='': the
    // default socket folder /var/run/postgresql may not exist or belong to another cluster;
    // every client here connects over TCP.
    const std::string server_options = absl::StrCat("-p ", port_, " -c listen_addresses=127.0.0.1",
                                                    " -c unix_socket_directories=''");
    ASSIGN_OR_RETURN(CommandResult start,
                     RunAsPostgres(run_as_.needed, run_as_.runuser,
                                   {options_.pg_bin_dir + "/pg_ctl", "start", "-D", pgdata_, "-l",
                                    absl::StrCat(data.path(), "/", kLogName), "-w", "-t",
                                    kPgCtlTimeoutSeconds, "-o", server_options},
                                   /*new_session=*/true));
    if (start.exit_code == 0) break;
    const std::string log = Tail(data.ReadTail(kLogName, log_offset, 64 << 10), 15);
    if (attempt < kStartAttempts && absl::StrContains(log, "could not bind")) continue;
    return absl::UnavailableError(absl::StrCat("PostgreSQL did not start on 127.0.0.1:", port_,
                                               ": ", Tail(start.output, 3), "; server log: ", log));
  }
  running_ = true;
  postmaster_ = PidFileOwner(data);
  app_ready_ = false;
  if (auto created = EnsureAppDatabase(); !created.ok()) {
    return Annotate(created, "creating the application role and database");
  }
  app_ready_ = true;
  return absl::OkStatus();
}

absl::Status EmbeddedPostgres::EnsureAppDatabase() {
  // The role first: CREATE ROLE has no IF NOT EXISTS. Its password is hex, so the literal
  // needs no escaping. Nobody but the owner and the superuser may connect to the
  // application's database, and nobody but the superuser to 'postgres'.
  const std::string role_sql = absl::StrCat(
      "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '", kAppRole,
      "') THEN CREATE ROLE ", kAppRole, "; END IF; END $$;", "ALTER ROLE ", kAppRole,
      " WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD '",
      app_password_, "';", "REVOKE ALL ON DATABASE postgres FROM PUBLIC;");
  RETURN_IF_ERROR(store::RunSql(superuser_url("postgres"), role_sql).status());
  RETURN_IF_ERROR(store::EnsureDatabase(superuser_url("postgres"), kAppDatabase).status());
  RETURN_IF_ERROR(
      store::RunSql(superuser_url("postgres"),
                    absl::StrCat("ALTER DATABASE ", kAppDatabase, " OWNER TO ", kAppRole,
                                 "; REVOKE ALL ON DATABASE ", kAppDatabase, " FROM PUBLIC;"))
          .status());
  return store::RunSql(superuser_url(kAppDatabase), kHandOverObjectsSql).status();
}

bool EmbeddedPostgres::Running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_ && postmaster_.has_value() && IsLivePostmaster(*postmaster_);
}

absl::Status EmbeddedPostgres::Restart() {
  std::lock_guard<std::mutex> lock(mu_);
  if (lock_fd_ < 0) return absl::FailedPreconditionError("the embedded PostgreSQL was stopped");
  if (running_ && postmaster_.has_value() && IsLivePostmaster(*postmaster_)) {
    if (app_ready_) return absl::OkStatus();
    RETURN_IF_ERROR(Annotate(EnsureAppDatabase(), "creating the application role and database"));
    app_ready_ = true;
    return absl::OkStatus();
  }
  running_ = false;
  postmaster_.reset();
  return StartServer(/*keep_port=*/true);
}

std::optional<pid_t> EmbeddedPostgres::postmaster_pid() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_ ? postmaster_ : std::nullopt;
}

absl::Status EmbeddedPostgres::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  absl::Status status = absl::OkStatus();
  if (running_) {
    running_ = false;
    const std::string pg_ctl = options_.pg_bin_dir + "/pg_ctl";
    auto stop = RunAsPostgres(
        run_as_.needed, run_as_.runuser,
        {pg_ctl, "stop", "-D", pgdata_, "-m", "fast", "-w", "-t", kPgCtlTimeoutSeconds});
    if (!stop.ok()) {
      status = stop.status();
    } else if (stop->exit_code != 0 && postmaster_.has_value() && IsLivePostmaster(*postmaster_)) {
      // A fast shutdown that hangs (a stuck backend) is finished immediately: the next start
      // replays the WAL, so committed data is still safe.
      auto immediate = RunAsPostgres(run_as_.needed, run_as_.runuser,
                                     {pg_ctl, "stop", "-D", pgdata_, "-m", "immediate", "-w"});
      if (!immediate.ok() || immediate->exit_code != 0) {
        status = absl::InternalError(
            absl::StrCat("pg_ctl stop failed on ", pgdata_, ": ", Tail(stop->output, 5)));
      }
    }
    postmaster_.reset();
  }
  if (lock_fd_ >= 0) {
    close(lock_fd_);  // Releases the owner lock.
    lock_fd_ = -1;
  }
  return status;
}

EmbeddedPostgres::~EmbeddedPostgres() { Stop().IgnoreError(); }

std::string EmbeddedPostgres::database_url() const {
  return absl::StrCat("postgresql://", kAppRole, ":", app_password_, "@127.0.0.1:", port_, "/",
                      kAppDatabase);
}

std::string EmbeddedPostgres::superuser_url(const std::string& database) const {
  return absl::StrCat("postgresql://", kSuperuser, ":", superuser_password_, "@127.0.0.1:", port_,
                      "/", database);
}

}  // namespace ptxbench::embedded_pg
