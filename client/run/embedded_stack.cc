#include "client/run/embedded_stack.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <ostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "common/build_info.h"
#include "common/files.h"
#include "common/subprocess.h"

namespace ptxbench::client::run {
namespace {

namespace fs = std::filesystem;

// A stack's log: a few KiB per run; the bound only keeps a runaway log out of memory.
constexpr size_t kMaxStackLogBytes = size_t{256} << 20;

std::string Tail(const std::string& path, size_t lines) {
  std::vector<std::string> all = absl::StrSplit(ReadFileOrEmpty(path, kMaxStackLogBytes), '\n');
  const size_t from = all.size() > lines ? all.size() - lines : 0;
  std::string out;
  for (size_t i = from; i < all.size(); ++i) absl::StrAppend(&out, all[i], "\n");
  return out;
}

// fork + exec with the output appended to `log_path`. The child gets SIGTERM when this
// process dies (PR_SET_PDEATHSIG), so a killed `ptxbench run` leaves no stack behind; the
// parent's SIGTERM is what ptxbench-server and ptxbench-worker take as a graceful stop.
absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& argv, const std::string& log_path) {
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork failed for ", argv[0]));
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(1);  // The parent died before prctl took effect.
    const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      close(fd);
    }
    const int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    std::vector<char*> args;
    args.reserve(argv.size() + 1);
    for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

bool Alive(pid_t pid) {
  int status = 0;
  return waitpid(pid, &status, WNOHANG) == 0;
}

// SIGTERM, then SIGKILL when the process has not ended within `grace`.
void Terminate(pid_t pid, std::chrono::seconds grace) {
  kill(pid, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + grace;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

size_t FileSize(const std::string& path) {
  std::error_code error;
  const auto size = fs::file_size(path, error);
  return error ? 0 : static_cast<size_t>(size);
}

// The first line containing `needle` that the log gained after its first `offset` bytes,
// waiting while `pid` lives. The logs are appended to across runs on one stack folder: an
// earlier run's "serving grpc=" line names a port that is gone.
std::string WaitForLine(const std::string& log_path, size_t offset, const std::string& needle,
                        pid_t pid, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string text = ReadFileOrEmpty(log_path, kMaxStackLogBytes);
    for (const absl::string_view line :
         absl::StrSplit(text.size() > offset ? text.substr(offset) : std::string(), '\n')) {
      if (line.find(needle) != absl::string_view::npos) return std::string(line);
    }
    if (!Alive(pid)) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return "";
}

// A server of an earlier run on this folder may still be stopping (it got SIGTERM when that
// run was killed). Its embedded PostgreSQL holds owner.lock until the cluster is down
// (server/embedded_pg/embedded_postgres.h) and a second server refuses the folder meanwhile,
// so wait for the lock to be free.
void WaitForEarlierStack(const std::string& data_dir, std::chrono::seconds timeout,
                         std::ostream* notes) {
  const std::string lock_path = data_dir + "/postgres/owner.lock";
  const int fd = open(lock_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;  // No cluster yet.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool told = false;
  while (flock(fd, LOCK_EX | LOCK_NB) != 0 && std::chrono::steady_clock::now() < deadline) {
    if (!told && notes != nullptr) {
      // Said at once: a silent wait of up to a minute looks like a hang.
      *notes << "ptxbench run: waiting (up to " << timeout.count()
             << " s) for the embedded stack of an earlier run to stop: its PostgreSQL still "
                "holds "
             << lock_path << "\n";
      notes->flush();
      told = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  close(fd);  // Releases the lock if it was taken.
}

}  // namespace

bool GpuPresent() {
  const char* path = std::getenv("PATH");
  const std::optional<std::string> nvidia_smi =
      FindInPath("nvidia-smi", path != nullptr ? path : "/usr/bin:/bin");
  if (!nvidia_smi.has_value()) return false;
  SubprocessOptions command;
  command.argv = {*nvidia_smi, "-L"};
  // It needs only to find the driver's NVML library; nothing else of the user's environment
  // (a model API key, the server's token) reaches it.
  command.environment.inherit = {"PATH", "LD_LIBRARY_PATH"};
  command.max_stdout_bytes = 64 << 10;  // One line per GPU; read only for its exit code.
  command.max_stderr_bytes = 64 << 10;
  // It answers in well under a second; a driver that hangs (a GPU fallen off the bus) must not
  // hang `ptxbench run`: no answer in time reads as no GPU.
  command.deadline = absl::Seconds(10);
  const absl::StatusOr<SubprocessResult> ran = RunSubprocess(command);
  return ran.ok() && !ran->timed_out && ran->exit_code == 0;
}

absl::StatusOr<std::unique_ptr<EmbeddedStack>> EmbeddedStack::Start(const StackOptions& in) {
  std::unique_ptr<EmbeddedStack> stack(new EmbeddedStack(in));
  StackOptions& options = stack->options_;
  if (options.bin_dir.empty()) {
    options.bin_dir = fs::read_symlink("/proc/self/exe").parent_path().string();
  }
  if (options.tasks_dir.empty()) options.tasks_dir = SourceTreeDir("tasks");
  if (options.migrations_dir.empty()) options.migrations_dir = SourceTreeDir("migrations");
  const std::string server = options.bin_dir + "/ptxbench-server";
  const std::string worker = options.bin_dir + "/ptxbench-worker";
  for (const std::string& program : {server, worker}) {
    if (access(program.c_str(), X_OK) != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "no server given (--server or PTXBENCH_SERVER) and ", program,
          " is missing: the embedded stack needs ptxbench-server and ptxbench-worker next to "
          "ptxbench"));
    }
  }
  std::error_code error;
  fs::create_directories(options.data_dir, error);
  if (error) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create ", options.data_dir, ": ", error.message()));
  }
  WaitForEarlierStack(options.data_dir, std::chrono::seconds(60), options.notes);
  if (options.notes != nullptr && !fs::exists(options.data_dir + "/postgres")) {
    *options.notes << "ptxbench run: first start in " << options.data_dir
                   << ": creating its PostgreSQL cluster (initdb, a few seconds)\n";
    options.notes->flush();
  }
  const std::string server_log = options.data_dir + "/server.log";
  const size_t server_log_start = FileSize(server_log);
  auto pid = Spawn({server, "serve", "--data-dir", options.data_dir, "--tasks-dir",
                    options.tasks_dir, "--migrations-dir", options.migrations_dir, "--listen",
                    "127.0.0.1:0", "--metrics-listen", "off"},
                   server_log);
  if (!pid.ok()) return pid.status();
  stack->server_pid_ = *pid;
  // The first start initialises the PostgreSQL cluster (initdb: a few seconds).
  const std::string serving =
      WaitForLine(server_log, server_log_start, "ptxbench-server serving grpc=", *pid,
                  std::chrono::seconds(180));
  if (serving.empty()) {
    return absl::UnavailableError(absl::StrCat("ptxbench-server did not start; the end of ",
                                               server_log, ":\n", Tail(server_log, 20)));
  }
  const size_t at = serving.find("grpc=") + 5;
  stack->address_ = serving.substr(at, serving.find(' ', at) - at);

  const std::string cpu_log = options.data_dir + "/worker-cpu.log";
  const size_t cpu_log_start = FileSize(cpu_log);
  auto cpu = Spawn({worker, "--compile-only", "--server", stack->address_, "--tasks-dir",
                    options.tasks_dir, "--hostname", "ptxbench-run-cpu"},
                   cpu_log);
  if (!cpu.ok()) return cpu.status();
  stack->worker_pids_.push_back(*cpu);
  if (WaitForLine(cpu_log, cpu_log_start, "registered with", *cpu, std::chrono::seconds(60))
          .empty()) {
    return absl::UnavailableError(
        absl::StrCat("the compile-only worker did not register; the end "
                     "of ",
                     cpu_log, ":\n", Tail(cpu_log, 20)));
  }
  if (!options.use_gpu || !GpuPresent()) {
    stack->gpu_note_ = options.use_gpu ? "no GPU on this machine" : "GPU worker not asked for";
    return stack;
  }
  const std::string gpu_log = options.data_dir + "/worker-gpu.log";
  const size_t gpu_log_start = FileSize(gpu_log);
  auto gpu = Spawn({worker, "--gpu", "0", "--server", stack->address_, "--tasks-dir",
                    options.tasks_dir, "--hostname", "ptxbench-run-gpu"},
                   gpu_log);
  if (!gpu.ok()) return gpu.status();
  const std::string registered =
      WaitForLine(gpu_log, gpu_log_start, "registered with", *gpu, std::chrono::seconds(120));
  if (registered.empty()) {
    stack->gpu_note_ = absl::StrCat("GPU present but not usable: ", Tail(gpu_log, 1));
    if (Alive(*gpu)) Terminate(*gpu, std::chrono::seconds(10));
    return stack;
  }
  stack->worker_pids_.push_back(*gpu);
  // "worker W: registered with ADDR (sm_90a, lease 30 s)".
  const size_t open = registered.find(" (sm_");
  if (open != std::string::npos) {
    stack->gpu_arch_ = registered.substr(open + 2, registered.find(',', open) - open - 2);
  }
  return stack;
}

absl::Status EmbeddedStack::Stop() {
  // Workers first, so none is left reconnecting to a server that is gone.
  for (pid_t pid : worker_pids_) kill(pid, SIGTERM);
  for (pid_t pid : worker_pids_) Terminate(pid, std::chrono::seconds(60));
  worker_pids_.clear();
  if (server_pid_ > 0) {
    Terminate(server_pid_, std::chrono::seconds(60));
    server_pid_ = -1;
  }
  return absl::OkStatus();
}

std::vector<pid_t> EmbeddedStack::pids() const {
  std::vector<pid_t> all;
  if (server_pid_ > 0) all.push_back(server_pid_);
  all.insert(all.end(), worker_pids_.begin(), worker_pids_.end());
  return all;
}

EmbeddedStack::~EmbeddedStack() { (void)Stop(); }

}  // namespace ptxbench::client::run
