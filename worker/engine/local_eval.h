// The engine's half of `ptxbench eval` (an evaluation on this machine, no server): where the
// evaluation's private folders can go. The verb itself (flags, files, output, exit codes) is
// the client's, client/eval_command.h; the engine never depends on the client.
#ifndef PTXBENCH_WORKER_ENGINE_LOCAL_EVAL_H_
#define PTXBENCH_WORKER_ENGINE_LOCAL_EVAL_H_

#include <string>

namespace ptxbench::engine {

struct LocalWorkRoot {
  std::string path;  // For EngineOptions::work_root.
  // Why `path` is not the $TMPDIR the user asked for ("" when it is): "TMPDIR /x is not
  // reachable by the sandbox user (/x has no execute bit for others); working under /tmp".
  std::string note;
};

// Where the evaluation's private folders go: $TMPDIR, else /tmp. As root the sandboxes run as
// nobody, who must traverse every folder above their own: a private $TMPDIR (mode 0700, as a
// sandboxed shell or `systemd-run -p PrivateTmp` gives) made the compile sandbox fail with
// "request.json: Permission denied" and an infrastructure verdict. Such a TMPDIR is passed
// over for /tmp (or /var/tmp) and the note says so; as any other user the sandboxes run as
// that user and $TMPDIR is kept.
LocalWorkRoot ChooseLocalWorkRoot();

}  // namespace ptxbench::engine

#endif  // PTXBENCH_WORKER_ENGINE_LOCAL_EVAL_H_
