// Trajectory files: the record of one multi-turn run of one model on one task, as JSON lines.
// `ptxbench run` writes them (one fsync'd line per finished turn, so a crash loses at most the
// turn in flight), `ptxbench report` and `ptxbench export` read them. The layout is documented
// in docs/client.md ("Trajectory files"); this header is its only implementation.
//
//   RUN_DIR/<model-slug>/<task>/<arch>/<knowledge>/traj-<NN>.jsonl
//   {"kind":"header","run":{...},"started_at":"..."}     line 1, exactly once
//   {"kind":"turn","turn":1,...}                          one per turn attempt
//   {"kind":"end","reason":"tic_reached"}                 last, when the run finished
#ifndef PTXBENCH_CLIENT_TRAJECTORY_H_
#define PTXBENCH_CLIENT_TRAJECTORY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/verdict.h"
#include "nlohmann/json.hpp"
#include "ptxbench/v1/types.pb.h"

namespace ptxbench::client {

// The configuration of one trajectory: everything needed to tell trajectories apart in a
// report and to resume one with the same settings.
struct RunConfig {
  std::string model;            // "provider:model", e.g. "openai:gpt-5".
  std::string provider;         // "openai", "anthropic", "replay", ...
  std::string task;             // Task id, e.g. "gemm_n7168_k5120".
  std::string task_version;     // The task's content hash (TaskSummary.version_hash).
  std::string arch;             // "sm_90a" or "sm_100a" (proto/wire_names.h spelling).
  std::string knowledge;        // "none", "templates" or "contract".
  int trajectory_index = 0;     // 0-based; the NN of traj-NN.jsonl.
  std::string context_policy;   // How earlier turns are shown to the model (docs/client.md "run").
  int turns = 0;                // The turn budget: charged turns at most.
  double target_speedup = 1.0;  // The run stops early at a TIC turn with at least this speedup.
  double temperature = 0;
  int64_t max_tokens = 0;
  // What the server was asked to evaluate: EVALUATION_SCOPE_FULL, or _COMPILE_ONLY (no turn
  // can be TIC; reports give such runs compile figures only, never mixed with full-scope ones).
  v1::EvaluationScope scope = v1::EVALUATION_SCOPE_FULL;
  std::string client_version;  // The ptxbench that wrote the file ("" when not recorded).
  std::string server;          // "host:port" of the server, or "embedded" (the stack it started).
};

struct TrajectoryHeader {
  RunConfig run;
  std::string started_at;  // RFC 3339 UTC, e.g. "2026-11-30T05:40:00Z".
  // False for files written before the header recorded run.scope: ReadTrajectory then infers
  // it (compile_only when some verdict is of class `compiled`, which only compile-only
  // submissions receive; full otherwise).
  bool scope_recorded = true;
};

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant".
  std::string content;
};

struct TokenUsage {
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  // As the provider reports them (OpenAI's and DeepSeek's completion_tokens_details, SGLang's
  // usage.reasoning_tokens); absent when it reports none (vLLM, Anthropic), which is not 0.
  std::optional<int64_t> reasoning_tokens;
};

// An infrastructure failure met during a turn (lost worker, queue timeout, provider outage),
// with how many attempts were made before giving up or succeeding.
struct InfraFailure {
  std::string what;
  int attempts = 0;
};

// One turn attempt. `turn` is the 1-based number of the charged turn this record attempts:
// an infrastructure-failed record (infra_failed true) is not charged, and the record after it
// carries the same number. So for every record, turn == 1 + (charged records before it).
struct TurnRecord {
  int turn = 0;
  std::vector<ChatMessage> prompt_messages;  // Exactly what was sent to the model.
  std::string reply;                         // The model's whole reply text, as it came.
  // The model's reasoning: what the provider returned apart from the reply (reasoning_content
  // or reasoning of OpenAI-compatible servers, Anthropic's thinking blocks), else the
  // <think>...</think> sections of the reply. Never sent back to the model (docs/client.md).
  std::string reasoning;
  std::string stop_reason;  // The provider's finish_reason / stop_reason ("stop", "length", ...).
  TokenUsage usage;
  bool extracted = false;          // Whether a kernel source was found in the reply.
  std::string source;              // The extracted source ("" when not extracted).
  std::string language;            // "cuda" or "ptx" ("" when not extracted).
  std::string source_sha256;       // Lower-case hex of `source`.
  std::string submission_id;       // Server submission id ("" for local evaluation or none).
  std::optional<Verdict> verdict;  // Absent when nothing was evaluated.
  std::string feedback;            // The text given to the model for its next turn.
  std::vector<InfraFailure> infra_failures;
  bool infra_failed = false;  // Not charged: counts for nothing in reports and exports.
  double model_seconds = 0;
  double eval_seconds = 0;
  std::string finished_at;  // RFC 3339 UTC.
};

// Why a trajectory ended.
enum class EndReason { kTicReached, kTurnLimit, kError };
std::string EndReasonName(EndReason reason);  // "tic_reached", "turn_limit", "error".
absl::StatusOr<EndReason> ParseEndReason(const std::string& name);

struct TrajectoryEnd {
  EndReason reason = EndReason::kTurnLimit;
  std::string message;  // Why, for kError ("" otherwise).
  std::string finished_at;
};

// A trajectory file as read back.
struct Trajectory {
  std::string path;
  TrajectoryHeader header;
  std::vector<TurnRecord> turns;  // In file order, infrastructure-failed records included.
  std::optional<TrajectoryEnd> end;
  // A last line without its newline is a write torn by a crash: it is ignored, and reported
  // here (1-based line number; 0 when the file ended cleanly).
  int torn_line = 0;

  // Charged turns finished so far; a resumed run continues with turn charged_turns() + 1.
  int charged_turns() const;
  bool finished() const { return end.has_value(); }
};

// The verdict rule every report and export uses: a turn is TIC when its verdict is a pass with
// tic set and its runtime stages really ran. runtime_unverified verdicts (sm_100a here, where no
// GPU runs the kernel) are never TIC, whatever their other fields say.
bool IsTic(const TurnRecord& turn);
// Correct (every workload within tolerance), again only when the runtime stages ran.
bool IsCorrect(const TurnRecord& turn);
// The verdict says the source compiled (for every scope; runtime_unverified verdicts included).
bool IsCompiled(const TurnRecord& turn);
// The fraction of the speed of light a TIC turn reached: the timed workload's roofline floor
// (timing stage detail `roofline_floor_ms`, docs/measurement.md) over the candidate's median
// time (`timing.result.candidate.median_ms`). nullopt for a turn that is not TIC, has no timing
// stage, or whose figures are missing, not positive, or give a fraction above 1 (a time below
// the floor is impossible_time, never TIC). migrations/0005_benchmark_figures.up.sql computes the
// same figure from the stored verdict (benchmark_speed_of_light).
std::optional<double> SpeedOfLight(const TurnRecord& turn);

// JSON of each record as one line holds it (without the newline).
nlohmann::json HeaderJson(const TrajectoryHeader& header);
nlohmann::json TurnJson(const TurnRecord& turn);
nlohmann::json EndJson(const TrajectoryEnd& end);

// Reads a whole trajectory file. Errors name the file and line ("PATH:3: field 'turn': expected
// an integer"); NOT_FOUND when the file does not exist, DATA_LOSS when it has no complete
// header line (a crash right after creating it: start the trajectory again with Create).
absl::StatusOr<Trajectory> ReadTrajectory(const std::string& path);

// Appends records, each as one line followed by fsync, so a record is either wholly on disk or
// (after a crash) a torn last line that readers ignore.
class TrajectoryWriter {
 public:
  // Creates (or truncates) `path`, its parent directories, and writes the header line.
  static absl::StatusOr<TrajectoryWriter> Create(const std::string& path,
                                                 const TrajectoryHeader& header);
  // Reopens a file ReadTrajectory read for appending more turns: a torn last line is cut off
  // first. Refuses a finished trajectory (it has its end record).
  static absl::StatusOr<TrajectoryWriter> Resume(const Trajectory& trajectory);

  TrajectoryWriter(TrajectoryWriter&& other) noexcept;
  TrajectoryWriter& operator=(TrajectoryWriter&& other) noexcept;
  TrajectoryWriter(const TrajectoryWriter&) = delete;
  TrajectoryWriter& operator=(const TrajectoryWriter&) = delete;
  ~TrajectoryWriter();

  // Checks `turn.turn` against the records written so far (1 + charged turns before it).
  absl::Status AppendTurn(const TurnRecord& turn);
  absl::Status AppendEnd(const TrajectoryEnd& end);
  int charged_turns() const { return charged_turns_; }
  const std::string& path() const { return path_; }

 private:
  TrajectoryWriter(std::string path, int fd, int charged_turns)
      : path_(std::move(path)), fd_(fd), charged_turns_(charged_turns) {}
  absl::Status AppendLine(const nlohmann::json& record);

  std::string path_;
  int fd_ = -1;
  int charged_turns_ = 0;
  bool ended_ = false;
};

// "openai:gpt-4.1" -> "openai_gpt-4.1": every character outside [A-Za-z0-9._-] becomes '_'.
std::string ModelSlug(const std::string& model);
// RUN_DIR/<model-slug>/<task>/<arch>/<knowledge>/traj-<NN>.jsonl (NN at least two digits).
std::string TrajectoryPath(const std::string& run_dir, const RunConfig& run);
// Every "traj-*.jsonl" under `dir`, recursively, sorted; NOT_FOUND when `dir` does not exist.
absl::StatusOr<std::vector<std::string>> FindTrajectoryFiles(const std::string& dir);

// The engine-side verdict of a wire verdict (detail_json and report_json parsed), so that a
// trajectory stores the same verdict JSON the server stores (common/verdict.h ToJson).
absl::StatusOr<Verdict> VerdictFromWire(const v1::Verdict& verdict);

// Now as RFC 3339 UTC with seconds ("2026-11-30T05:40:00Z").
std::string NowRfc3339();

}  // namespace ptxbench::client

#endif  // PTXBENCH_CLIENT_TRAJECTORY_H_
