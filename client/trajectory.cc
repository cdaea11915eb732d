#include "client/trajectory.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/files.h"
#include "common/status.h"
#include "proto/wire_names.h"

namespace ptxbench::client {
namespace {

// A bound against reading a runaway file into memory, not a policy: a trajectory holds one
// line per turn with its source (at most 1 MiB each), so even hundreds of turns stay far below.
constexpr size_t kMaxTrajectoryBytes = size_t{1} << 30;

using json = nlohmann::json;

// Typed field access whose errors name the field: "field 'turn': expected an integer".
// Absent optional fields keep the value `out` already holds.
template <typename T>
absl::Status Field(const json& object, const char* key, T& out, bool required) {
  auto it = object.find(key);
  if (it == object.end() || (!required && it->is_null())) {
    if (!required) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("missing field '", key, "'"));
  }
  const char* expected = nullptr;
  if constexpr (std::is_same_v<T, bool>) {
    if (!it->is_boolean()) expected = "a boolean";
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!it->is_string()) expected = "a string";
  } else if constexpr (std::is_integral_v<T>) {
    if (!it->is_number_integer()) expected = "an integer";
  } else {
    if (!it->is_number()) expected = "a number";
  }
  if (expected != nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("field '", key, "': expected ", expected));
  }
  out = it->get<T>();
  return absl::OkStatus();
}

template <typename T>
absl::Status Required(const json& object, const char* key, T& out) {
  return Field(object, key, out, /*required=*/true);
}

template <typename T>
absl::Status Optional(const json& object, const char* key, T& out) {
  return Field(object, key, out, /*required=*/false);
}

absl::Status ObjectField(const json& object, const char* key, const json*& out, bool required) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) {
    out = nullptr;
    if (!required) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("missing field '", key, "'"));
  }
  if (!it->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat("field '", key, "': expected an object"));
  }
  out = &*it;
  return absl::OkStatus();
}

absl::StatusOr<TrajectoryHeader> HeaderFromJson(const json& line) {
  TrajectoryHeader header;
  const json* run = nullptr;
  RETURN_IF_ERROR(ObjectField(line, "run", run, /*required=*/true));
  RunConfig& r = header.run;
  RETURN_IF_ERROR(Required(*run, "model", r.model));
  RETURN_IF_ERROR(Optional(*run, "provider", r.provider));
  RETURN_IF_ERROR(Required(*run, "task", r.task));
  RETURN_IF_ERROR(Optional(*run, "task_version", r.task_version));
  RETURN_IF_ERROR(Required(*run, "arch", r.arch));
  RETURN_IF_ERROR(Required(*run, "knowledge", r.knowledge));
  RETURN_IF_ERROR(Required(*run, "trajectory_index", r.trajectory_index));
  RETURN_IF_ERROR(Optional(*run, "context_policy", r.context_policy));
  RETURN_IF_ERROR(Required(*run, "turns", r.turns));
  RETURN_IF_ERROR(Optional(*run, "target_speedup", r.target_speedup));
  RETURN_IF_ERROR(Optional(*run, "temperature", r.temperature));
  RETURN_IF_ERROR(Optional(*run, "max_tokens", r.max_tokens));
  RETURN_IF_ERROR(Optional(*run, "client", r.client_version));
  RETURN_IF_ERROR(Optional(*run, "server", r.server));
  std::string scope;
  header.scope_recorded = run->contains("scope") && !(*run)["scope"].is_null();
  RETURN_IF_ERROR(Optional(*run, "scope", scope));
  if (header.scope_recorded) {
    auto parsed = wire::ParseScope(scope);
    if (!parsed.ok()) return Annotate(parsed.status(), "run.scope");
    r.scope = *parsed;
  }
  if (r.turns < 1) return absl::InvalidArgumentError("run.turns must be at least 1");
  if (r.trajectory_index < 0) {
    return absl::InvalidArgumentError("run.trajectory_index must not be negative");
  }
  RETURN_IF_ERROR(Optional(line, "started_at", header.started_at));
  return header;
}

absl::StatusOr<TurnRecord> TurnFromJson(const json& line) {
  TurnRecord turn;
  RETURN_IF_ERROR(Required(line, "turn", turn.turn));
  if (auto it = line.find("prompt_messages"); it != line.end() && !it->is_null()) {
    if (!it->is_array()) {
      return absl::InvalidArgumentError("field 'prompt_messages': expected an array");
    }
    for (size_t i = 0; i < it->size(); ++i) {
      const json& m = (*it)[i];
      ChatMessage message;
      absl::Status status = m.is_object() ? Required(m, "role", message.role)
                                          : absl::InvalidArgumentError("expected an object");
      if (status.ok()) status = Required(m, "content", message.content);
      if (!status.ok()) return Annotate(status, absl::StrCat("prompt_messages[", i, "]"));
      turn.prompt_messages.push_back(std::move(message));
    }
  }
  RETURN_IF_ERROR(Optional(line, "reply", turn.reply));
  RETURN_IF_ERROR(Optional(line, "reasoning", turn.reasoning));
  RETURN_IF_ERROR(Optional(line, "stop_reason", turn.stop_reason));
  const json* usage = nullptr;
  RETURN_IF_ERROR(ObjectField(line, "usage", usage, /*required=*/false));
  if (usage != nullptr) {
    absl::Status status = Optional(*usage, "input_tokens", turn.usage.input_tokens);
    if (status.ok()) status = Optional(*usage, "output_tokens", turn.usage.output_tokens);
    if (status.ok()) {
      // null or absent: the provider did not report the figure (not the same as 0).
      int64_t reasoning = -1;
      status = Optional(*usage, "reasoning_tokens", reasoning);
      if (status.ok() && reasoning >= 0) turn.usage.reasoning_tokens = reasoning;
    }
    if (!status.ok()) return Annotate(status, "usage");
  }
  RETURN_IF_ERROR(Required(line, "extracted", turn.extracted));
  RETURN_IF_ERROR(Optional(line, "source", turn.source));
  RETURN_IF_ERROR(Optional(line, "language", turn.language));
  RETURN_IF_ERROR(Optional(line, "source_sha256", turn.source_sha256));
  RETURN_IF_ERROR(Optional(line, "submission_id", turn.submission_id));
  const json* verdict = nullptr;
  RETURN_IF_ERROR(ObjectField(line, "verdict", verdict, /*required=*/false));
  if (verdict != nullptr) {
    auto parsed = VerdictFromJson(*verdict);
    if (!parsed.ok()) return Annotate(parsed.status(), "field 'verdict'");
    turn.verdict = *std::move(parsed);
  }
  RETURN_IF_ERROR(Optional(line, "feedback", turn.feedback));
  if (auto it = line.find("infra_failures"); it != line.end() && !it->is_null()) {
    if (!it->is_array()) {
      return absl::InvalidArgumentError("field 'infra_failures': expected an array");
    }
    for (size_t i = 0; i < it->size(); ++i) {
      const json& f = (*it)[i];
      InfraFailure failure;
      absl::Status status = f.is_object() ? Required(f, "what", failure.what)
                                          : absl::InvalidArgumentError("expected an object");
      if (status.ok()) status = Optional(f, "attempts", failure.attempts);
      if (!status.ok()) return Annotate(status, absl::StrCat("infra_failures[", i, "]"));
      turn.infra_failures.push_back(std::move(failure));
    }
  }
  RETURN_IF_ERROR(Required(line, "infra_failed", turn.infra_failed));
  const json* timings = nullptr;
  RETURN_IF_ERROR(ObjectField(line, "timings", timings, /*required=*/false));
  if (timings != nullptr) {
    absl::Status status = Optional(*timings, "model_s", turn.model_seconds);
    if (status.ok()) status = Optional(*timings, "eval_s", turn.eval_seconds);
    if (!status.ok()) return Annotate(status, "timings");
  }
  RETURN_IF_ERROR(Optional(line, "finished_at", turn.finished_at));
  return turn;
}

absl::StatusOr<TrajectoryEnd> EndFromJson(const json& line) {
  TrajectoryEnd end;
  std::string reason;
  RETURN_IF_ERROR(Required(line, "reason", reason));
  ASSIGN_OR_RETURN(end.reason, ParseEndReason(reason));
  RETURN_IF_ERROR(Optional(line, "message", end.message));
  RETURN_IF_ERROR(Optional(line, "finished_at", end.finished_at));
  return end;
}

absl::Status WriteAll(int fd, const std::string& bytes) {
  size_t written = 0;
  while (written < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("write: ", std::strerror(errno)));
    }
    written += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// A new file's directory entry is only durable once its directory is synced too.
void SyncDirectory(const std::filesystem::path& dir) {
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)fsync(fd);
  close(fd);
}

}  // namespace

std::string EndReasonName(EndReason reason) {
  switch (reason) {
    case EndReason::kTicReached:
      return "tic_reached";
    case EndReason::kTurnLimit:
      return "turn_limit";
    case EndReason::kError:
      return "error";
  }
  return "error";
}

absl::StatusOr<EndReason> ParseEndReason(const std::string& name) {
  for (EndReason r : {EndReason::kTicReached, EndReason::kTurnLimit, EndReason::kError}) {
    if (EndReasonName(r) == name) return r;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown end reason '", name, "' (tic_reached, turn_limit or error)"));
}

int Trajectory::charged_turns() const {
  return static_cast<int>(std::count_if(turns.begin(), turns.end(),
                                        [](const TurnRecord& t) { return !t.infra_failed; }));
}

bool IsTic(const TurnRecord& turn) {
  return !turn.infra_failed && turn.verdict.has_value() &&
         turn.verdict->verdict_class == VerdictClass::kPass && turn.verdict->tic &&
         !turn.verdict->runtime_unverified;
}

bool IsCorrect(const TurnRecord& turn) {
  return !turn.infra_failed && turn.verdict.has_value() && turn.verdict->correct &&
         !turn.verdict->runtime_unverified;
}

bool IsCompiled(const TurnRecord& turn) {
  return !turn.infra_failed && turn.verdict.has_value() && turn.verdict->compiled;
}

std::optional<double> SpeedOfLight(const TurnRecord& turn) {
  if (!IsTic(turn)) return std::nullopt;
  for (const StageReport& stage : turn.verdict->stages) {
    if (stage.stage != Stage::kTiming || !stage.detail.is_object()) continue;
    const json* floor_ms = nullptr;
    const json* median_ms = nullptr;
    if (auto it = stage.detail.find("roofline_floor_ms"); it != stage.detail.end()) {
      floor_ms = &*it;
    }
    const json::json_pointer median_path("/timing/result/candidate/median_ms");
    if (stage.detail.contains(median_path)) median_ms = &stage.detail.at(median_path);
    if (floor_ms == nullptr || median_ms == nullptr || !floor_ms->is_number() ||
        !median_ms->is_number()) {
      return std::nullopt;
    }
    const double floor = floor_ms->get<double>();
    const double median = median_ms->get<double>();
    if (!(floor > 0) || !(median > 0) || floor > median) return std::nullopt;
    return floor / median;
  }
  return std::nullopt;
}

json HeaderJson(const TrajectoryHeader& header) {
  const RunConfig& r = header.run;
  return json{
      {"kind", "header"},
      {"run",
       {
           {"model", r.model},
           {"provider", r.provider},
           {"task", r.task},
           {"task_version", r.task_version},
           {"arch", r.arch},
           {"knowledge", r.knowledge},
           {"trajectory_index", r.trajectory_index},
           {"context_policy", r.context_policy},
           {"turns", r.turns},
           {"target_speedup", r.target_speedup},
           {"temperature", r.temperature},
           {"max_tokens", r.max_tokens},
           {"scope", wire::ScopeName(r.scope)},
           {"client", r.client_version},
           {"server", r.server},
       }},
      {"started_at", header.started_at},
  };
}

json TurnJson(const TurnRecord& turn) {
  json messages = json::array();
  for (const ChatMessage& m : turn.prompt_messages) {
    messages.push_back({{"role", m.role}, {"content", m.content}});
  }
  json failures = json::array();
  for (const InfraFailure& f : turn.infra_failures) {
    failures.push_back({{"what", f.what}, {"attempts", f.attempts}});
  }
  return json{
      {"kind", "turn"},
      {"turn", turn.turn},
      {"prompt_messages", std::move(messages)},
      {"reply", turn.reply},
      {"reasoning", turn.reasoning},
      {"stop_reason", turn.stop_reason},
      {"usage",
       {{"input_tokens", turn.usage.input_tokens},
        {"output_tokens", turn.usage.output_tokens},
        {"reasoning_tokens", turn.usage.reasoning_tokens.has_value()
                                 ? json(*turn.usage.reasoning_tokens)
                                 : json(nullptr)}}},
      {"extracted", turn.extracted},
      {"source", turn.source},
      {"language", turn.language},
      {"source_sha256", turn.source_sha256},
      {"submission_id", turn.submission_id},
      {"verdict", turn.verdict.has_value() ? ToJson(*turn.verdict) : json(nullptr)},
      {"feedback", turn.feedback},
      {"infra_failures", std::move(failures)},
      {"infra_failed", turn.infra_failed},
      {"timings", {{"model_s", turn.model_seconds}, {"eval_s", turn.eval_seconds}}},
      {"finished_at", turn.finished_at},
  };
}

json EndJson(const TrajectoryEnd& end) {
  json line = {{"kind", "end"}, {"reason", EndReasonName(end.reason)}};
  if (!end.message.empty()) line["message"] = end.message;
  line["finished_at"] = end.finished_at;
  return line;
}

absl::StatusOr<Trajectory> ReadTrajectory(const std::string& path) {
  // A missing file stays kNotFound: the run loop starts a fresh trajectory for it.
  ASSIGN_OR_RETURN(const std::string text,
                   ReadFileToString(path, "the trajectory", {.max_bytes = kMaxTrajectoryBytes}));

  Trajectory trajectory;
  trajectory.path = path;
  bool have_header = false;
  int charged = 0;
  size_t pos = 0;
  int line_number = 0;
  while (pos < text.size()) {
    ++line_number;
    size_t newline = text.find('\n', pos);
    if (newline == std::string::npos) {
      // The writer never counts a record as written before its newline is synced: whatever
      // follows the last newline is a torn write, kept out of the trajectory.
      trajectory.torn_line = line_number;
      break;
    }
    const std::string line = text.substr(pos, newline - pos);
    pos = newline + 1;
    auto fail = [&](const absl::Status& status) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line_number, ": ", status.message()));
    };
    if (line.find_first_not_of(" \t\r") == std::string::npos) {
      return fail(absl::InvalidArgumentError("empty line"));
    }
    json record = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (record.is_discarded()) return fail(absl::InvalidArgumentError("not valid JSON"));
    if (!record.is_object()) return fail(absl::InvalidArgumentError("not a JSON object"));
    std::string kind;
    if (absl::Status s = Required(record, "kind", kind); !s.ok()) return fail(s);
    if (trajectory.end.has_value()) {
      return fail(absl::InvalidArgumentError("a record after the end record"));
    }
    if (kind == "header") {
      if (have_header) return fail(absl::InvalidArgumentError("a second header"));
      auto header = HeaderFromJson(record);
      if (!header.ok()) return fail(header.status());
      trajectory.header = *std::move(header);
      have_header = true;
      continue;
    }
    if (!have_header) {
      return fail(absl::InvalidArgumentError(
          absl::StrCat("the first record must be the header, found kind '", kind, "'")));
    }
    if (kind == "turn") {
      auto turn = TurnFromJson(record);
      if (!turn.ok()) return fail(turn.status());
      if (turn->turn != charged + 1) {
        return fail(absl::InvalidArgumentError(
            absl::StrCat("turn ", turn->turn, " out of order: ", charged,
                         " charged turns precede it, so ", charged + 1, " was expected")));
      }
      if (!turn->infra_failed) ++charged;
      trajectory.turns.push_back(*std::move(turn));
    } else if (kind == "end") {
      auto end = EndFromJson(record);
      if (!end.ok()) return fail(end.status());
      trajectory.end = *std::move(end);
    } else {
      return fail(absl::InvalidArgumentError(
          absl::StrCat("unknown record kind '", kind, "' (header, turn or end)")));
    }
  }
  if (have_header && !trajectory.header.scope_recorded) {
    // Only a compile-only submission is answered with class `compiled`: a full-scope one that
    // compiles goes on to its evaluate job (docs/architecture.md, "The life of a submission").
    const bool compile_only =
        std::any_of(trajectory.turns.begin(), trajectory.turns.end(), [](const TurnRecord& t) {
          return t.verdict.has_value() && t.verdict->verdict_class == VerdictClass::kCompiled &&
                 !t.verdict->runtime_unverified;
        });
    trajectory.header.run.scope =
        compile_only ? v1::EVALUATION_SCOPE_COMPILE_ONLY : v1::EVALUATION_SCOPE_FULL;
  }
  if (!have_header) {
    return absl::DataLossError(absl::StrCat(
        path, ": no complete header line",
        trajectory.torn_line > 0 ? " (line 1 torn by an interrupted write)" : " (empty file)"));
  }
  return trajectory;
}

TrajectoryWriter::TrajectoryWriter(TrajectoryWriter&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      charged_turns_(other.charged_turns_),
      ended_(other.ended_) {}

TrajectoryWriter& TrajectoryWriter::operator=(TrajectoryWriter&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    charged_turns_ = other.charged_turns_;
    ended_ = other.ended_;
  }
  return *this;
}

TrajectoryWriter::~TrajectoryWriter() {
  if (fd_ >= 0) close(fd_);
}

absl::StatusOr<TrajectoryWriter> TrajectoryWriter::Create(const std::string& path,
                                                          const TrajectoryHeader& header) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    if (ec) {
      return absl::InternalError(
          absl::StrCat("cannot create ", parent.string(), ": ", ec.message()));
    }
  }
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  }
  TrajectoryWriter writer(path, fd, 0);
  RETURN_IF_ERROR(writer.AppendLine(HeaderJson(header)));
  SyncDirectory(parent.empty() ? std::filesystem::path(".") : parent);
  return writer;
}

absl::StatusOr<TrajectoryWriter> TrajectoryWriter::Resume(const Trajectory& trajectory) {
  if (trajectory.finished()) {
    return absl::FailedPreconditionError(
        absl::StrCat(trajectory.path, ": the trajectory is finished (it has its end record)"));
  }
  int fd = open(trajectory.path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("cannot open ", trajectory.path, ": ", std::strerror(errno)));
  }
  TrajectoryWriter writer(trajectory.path, fd, trajectory.charged_turns());
  if (trajectory.torn_line > 0) {
    // Cut the file back to its last newline, so the next record starts on a line of its own.
    ASSIGN_OR_RETURN(const std::string text, ReadFileToString(trajectory.path, "the trajectory",
                                                              {.max_bytes = kMaxTrajectoryBytes}));
    const size_t keep = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
    if (ftruncate(fd, static_cast<off_t>(keep)) != 0 || fsync(fd) != 0) {
      return absl::InternalError(absl::StrCat("cannot cut the torn line of ", trajectory.path, ": ",
                                              std::strerror(errno)));
    }
  }
  return writer;
}

absl::Status TrajectoryWriter::AppendLine(const json& record) {
  if (fd_ < 0) return absl::FailedPreconditionError("trajectory writer is closed");
  // One write() of the whole line: an interruption can only leave a prefix of it, which the
  // reader recognises by the missing newline. Invalid UTF-8 in model replies is replaced, not
  // fatal: a reply must never stop the run.
  const std::string line =
      record.dump(-1, ' ', /*ensure_ascii=*/false, json::error_handler_t::replace) + "\n";
  RETURN_IF_ERROR(WriteAll(fd_, line));
  if (fsync(fd_) != 0) {
    return absl::InternalError(absl::StrCat("fsync ", path_, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status TrajectoryWriter::AppendTurn(const TurnRecord& turn) {
  if (ended_) return absl::FailedPreconditionError(absl::StrCat(path_, ": already ended"));
  if (turn.turn != charged_turns_ + 1) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": turn ", turn.turn, " after ",
                                                   charged_turns_, " charged turns; expected ",
                                                   charged_turns_ + 1));
  }
  RETURN_IF_ERROR(AppendLine(TurnJson(turn)));
  if (!turn.infra_failed) ++charged_turns_;
  return absl::OkStatus();
}

absl::Status TrajectoryWriter::AppendEnd(const TrajectoryEnd& end) {
  if (ended_) return absl::FailedPreconditionError(absl::StrCat(path_, ": already ended"));
  RETURN_IF_ERROR(AppendLine(EndJson(end)));
  ended_ = true;
  return absl::OkStatus();
}

std::string ModelSlug(const std::string& model) {
  std::string slug = model;
  for (char& c : slug) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-';
    if (!keep) c = '_';
  }
  return slug.empty() ? "_" : slug;
}

std::string TrajectoryPath(const std::string& run_dir, const RunConfig& run) {
  return absl::StrFormat("%s/%s/%s/%s/%s/traj-%02d.jsonl", run_dir, ModelSlug(run.model), run.task,
                         run.arch, run.knowledge, run.trajectory_index);
}

absl::StatusOr<std::vector<std::string>> FindTrajectoryFiles(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat(dir, ": not a directory"));
  }
  std::vector<std::string> files;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (it->is_regular_file() && name.rfind("traj-", 0) == 0 && name.size() > 6 &&
        name.substr(name.size() - 6) == ".jsonl") {
      files.push_back(it->path().string());
    }
  }
  if (ec) return absl::InternalError(absl::StrCat("listing ", dir, ": ", ec.message()));
  std::sort(files.begin(), files.end());
  return files;
}

absl::StatusOr<Verdict> VerdictFromWire(const v1::Verdict& wire) {
  Verdict verdict;
  ASSIGN_OR_RETURN(verdict.verdict_class,
                   ParseVerdictClass(wire::VerdictClassName(wire.verdict_class())));
  verdict.compiled = wire.compiled();
  verdict.correct = wire.correct();
  verdict.target_executed = wire.target_executed();
  verdict.tic = wire.tic();
  verdict.tic_paper = wire.tic_paper();
  // What judged it: `ptxbench export` exports a TIC turn only when this is the current harness.
  verdict.harness.engine = wire.harness().engine();
  verdict.harness.task_hash = wire.harness().task_hash();
  if (wire.has_target_work()) {
    const v1::TargetWork& work = wire.target_work();
    switch (work.strong_check()) {
      case v1::STRONG_CHECK_MADE:
        verdict.target_work.strong_check = StrongCheck::kMade;
        break;
      case v1::STRONG_CHECK_NOT_MADE:
        verdict.target_work.strong_check = StrongCheck::kNotMade;
        break;
      default:
        verdict.target_work.strong_check = StrongCheck::kNotReached;
        break;
    }
    verdict.target_work.reason = work.reason();
    verdict.target_work.share_of_task = work.share_of_task();
    verdict.target_work.share_of_executed = work.share_of_executed();
    verdict.target_work.min_share_of_task = work.min_share_of_task();
    verdict.target_work.min_share_of_executed = work.min_share_of_executed();
    verdict.target_work.other_work_over_task = work.other_work_over_task();
    verdict.target_work.max_other_work_over_task = work.max_other_work_over_task();
    verdict.target_work.path_checked = work.path_checked();
    verdict.target_work.path_agrees = work.path_agrees();
    verdict.target_work.figures =
        json::parse(work.figures_json().empty() ? "{}" : work.figures_json(), nullptr,
                    /*allow_exceptions=*/false);
    if (verdict.target_work.figures.is_discarded()) {
      return absl::InvalidArgumentError("verdict target_work.figures_json is not JSON");
    }
  }
  if (wire.has_sampling()) {
    const v1::Sampling& s = wire.sampling();
    verdict.sampling = Sampling{s.stop_reason(),       s.converged(),        s.speedup_stable(),
                                s.candidate_scatter(), s.baseline_scatter(), s.note()};
  }
  verdict.speedup = wire.speedup();
  verdict.message = wire.message();
  verdict.runtime_unverified = wire.runtime_unverified();
  for (const v1::StageResult& result : wire.stages()) {
    StageReport stage;
    ASSIGN_OR_RETURN(stage.stage, ParseStage(wire::StageName(result.stage())));
    stage.ok = result.ok();
    stage.summary = result.summary();
    stage.seconds = result.seconds();
    stage.detail = json::parse(result.detail_json().empty() ? "{}" : result.detail_json(), nullptr,
                               /*allow_exceptions=*/false);
    if (stage.detail.is_discarded()) {
      return absl::InvalidArgumentError(
          absl::StrCat("stage ", wire::StageName(result.stage()), ": detail_json is not JSON"));
    }
    verdict.stages.push_back(std::move(stage));
  }
  verdict.report = json::parse(wire.report_json().empty() ? "{}" : wire.report_json(), nullptr,
                               /*allow_exceptions=*/false);
  if (verdict.report.is_discarded()) {
    return absl::InvalidArgumentError("verdict report_json is not JSON");
  }
  return verdict;
}

std::string NowRfc3339() {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone());
}

}  // namespace ptxbench::client
