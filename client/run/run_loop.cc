#include "client/run/run_loop.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/run/extract.h"
#include "client/run/feedback.h"
#include "client/trajectory.h"
#include "common/sha256.h"
#include "common/status.h"
#include "proto/wire_names.h"

namespace ptxbench::client::run {
namespace {

struct TaskInfo {
  std::string id;
  std::string prompt;
  std::string version_hash;
};

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Full jitter on an exponential schedule, so that trajectories that failed together (one
// 429 burst) do not retry together; a Retry-After hint from the API is honoured up to 10 min.
void Backoff(const RetryPolicy& policy, int failures, const absl::Status& error) {
  thread_local std::mt19937_64 random(std::random_device{}());
  double delay = std::min(policy.max_seconds, policy.base_seconds * std::pow(2.0, failures - 1));
  delay *= std::uniform_real_distribution<double>(0.5, 1.0)(random);
  if (std::optional<double> hint = RetryAfterSeconds(error)) {
    delay = std::max(delay, std::min(*hint, 600.0));
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(delay));
}

std::string Describe(const absl::Status& status) { return std::string(status.message()); }

// An earlier reply as the next prompt shows it: without its <think> sections. Reasoning is
// never sent back (docs/client.md, "Reasoning"): the APIs that return it apart (OpenAI's
// reasoning models, DeepSeek, vLLM and SGLang reasoning parsers, Anthropic without tool use)
// document that earlier turns' reasoning is not to be passed in, and resending it would grow
// every prompt by the longest part of each reply.
std::string ReplyToResend(const std::string& reply) {
  if (reply.find("think>") == std::string::npos) return reply;
  return std::string(absl::StripLeadingAsciiWhitespace(SplitThinking(reply).answer));
}

class Runner {
 public:
  Runner(const RunOptions& options, ModelProvider& provider, EvaluationClient& evaluator,
         Progress& progress)
      : options_(options), provider_(provider), evaluator_(evaluator), progress_(progress) {}

  absl::Status LoadTasks() {
    ASSIGN_OR_RETURN(v1::Arch arch, wire::ParseArch(options_.arch));
    ASSIGN_OR_RETURN(v1::KnowledgeLevel knowledge, wire::ParseKnowledgeLevel(options_.knowledge));
    arch_ = arch;
    knowledge_ = knowledge;
    for (const std::string& id : options_.tasks) {
      absl::StatusOr<TaskPrompt> prompt;
      for (int failures = 0;;) {
        prompt = evaluator_.GetTask(id, arch, knowledge);
        if (prompt.ok() || !IsTransient(prompt.status())) break;
        if (++failures >= options_.retry.max_attempts) break;
        Backoff(options_.retry, failures, prompt.status());
      }
      if (!prompt.ok()) {
        return absl::Status(
            prompt.status().code(),
            absl::StrCat("task '", id, "' for ", options_.arch, ": ", prompt.status().message()));
      }
      tasks_.push_back({id, prompt->prompt, prompt->version_hash});
    }
    return absl::OkStatus();
  }

  RunSummary Run() {
    std::vector<std::pair<size_t, int>> work;
    for (size_t t = 0; t < tasks_.size(); ++t) {
      for (int i = 0; i < options_.trajectories; ++i) work.push_back({t, i});
    }
    std::atomic<size_t> next{0};
    auto drain = [&] {
      for (size_t at = next++; at < work.size(); at = next++) {
        RunTrajectory(tasks_[work[at].first], work[at].second);
      }
    };
    const int threads = std::max(1, std::min(options_.concurrency, static_cast<int>(work.size())));
    std::vector<std::thread> pool;
    pool.reserve(static_cast<size_t>(threads));
    for (int i = 0; i < threads; ++i) pool.emplace_back(drain);
    for (std::thread& thread : pool) thread.join();
    return summary_;
  }

 private:
  void Problem(const std::string& line) {
    std::lock_guard<std::mutex> lock(mutex_);
    summary_.problems.push_back(line);
  }

  bool Interrupted() const {
    return options_.interrupted != nullptr && options_.interrupted->load();
  }

  void Count(const std::string& task, TrajectoryOutcome outcome, int charged_turns) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++summary_.trajectories;
      switch (outcome) {
        case TrajectoryOutcome::kTic:
          ++summary_.tic;
          break;
        case TrajectoryOutcome::kCorrect:
          ++summary_.correct;
          break;
        case TrajectoryOutcome::kFailed:
          ++summary_.failed;
          break;
        case TrajectoryOutcome::kCompiled:
          ++summary_.compiled;
          break;
        case TrajectoryOutcome::kNotCompiled:
          ++summary_.not_compiled;
          break;
        case TrajectoryOutcome::kInfrastructure:
          ++summary_.infrastructure_stopped;
          break;
        case TrajectoryOutcome::kSkipped:
          --summary_.trajectories;
          ++summary_.skipped;
          break;
      }
    }
    progress_.Finished(task, outcome, charged_turns);
  }

  // What the log line says a turn came to.
  static std::string TurnOutcome(const TurnRecord& record, bool rejected) {
    if (!record.extracted) return "no kernel in the reply";
    if (rejected) return "refused by the server";
    if (!record.verdict.has_value()) return "no verdict";
    return VerdictClassName(record.verdict->verdict_class);
  }

  RunConfig ConfigFor(const TaskInfo& task, int index) const {
    RunConfig config;
    config.model = options_.model;
    config.provider = provider_.kind();
    config.task = task.id;
    config.task_version = task.version_hash;
    config.arch = options_.arch;
    config.knowledge = options_.knowledge;
    config.trajectory_index = index;
    config.context_policy = ContextPolicyName(options_.context);
    config.turns = options_.turns;
    config.target_speedup = options_.target_speedup;
    // -1: the provider's own default temperature was used.
    config.temperature = options_.temperature.value_or(-1);
    config.max_tokens = options_.max_tokens;
    config.scope =
        options_.compile_only ? v1::EVALUATION_SCOPE_COMPILE_ONLY : v1::EVALUATION_SCOPE_FULL;
    config.server = options_.server_label;
    config.client_version = options_.client_version;
    return config;
  }

  // Why an existing trajectory cannot be resumed by this command ("" when it can).
  static std::string Mismatch(const RunConfig& have, const RunConfig& want) {
    auto differs = [](const char* what, const std::string& a, const std::string& b) {
      return a == b ? std::string() : absl::StrCat(what, " '", a, "' (this run: '", b, "')");
    };
    for (const std::string& d :
         {differs("model", have.model, want.model),
          differs("task version", have.task_version, want.task_version),
          differs("context", have.context_policy, want.context_policy),
          differs("scope", wire::ScopeName(have.scope), wire::ScopeName(want.scope)),
          differs("target speedup", absl::StrCat(have.target_speedup),
                  absl::StrCat(want.target_speedup))}) {
      if (!d.empty()) return d;
    }
    return "";
  }

  TrajectoryOutcome OutcomeOf(bool tic, bool correct, bool compiled) const {
    if (options_.compile_only) {
      return compiled ? TrajectoryOutcome::kCompiled : TrajectoryOutcome::kNotCompiled;
    }
    return tic ? TrajectoryOutcome::kTic
               : (correct ? TrajectoryOutcome::kCorrect : TrajectoryOutcome::kFailed);
  }

  void RunTrajectory(const TaskInfo& task, int index) {
    progress_.Started(task.id);
    const RunConfig config = ConfigFor(task, index);
    const std::string path = TrajectoryPath(options_.out_dir, config);
    const std::string name = absl::StrFormat("%s traj-%02d", task.id, index);
    Trajectory trajectory;
    std::optional<TrajectoryWriter> writer;
    absl::StatusOr<Trajectory> existing = ReadTrajectory(path);
    if (existing.ok()) {
      const std::string mismatch = Mismatch(existing->header.run, config);
      if (!mismatch.empty()) {
        Problem(absl::StrCat(name, ": ", path, " was written with another ", mismatch,
                             "; use another --out or remove it"));
        Count(task.id, TrajectoryOutcome::kInfrastructure, 0);
        return;
      }
      trajectory = *existing;
    } else if (!absl::IsNotFound(existing.status()) && !absl::IsDataLoss(existing.status())) {
      Problem(absl::StrCat(name, ": ", Describe(existing.status())));
      Count(task.id, TrajectoryOutcome::kInfrastructure, 0);
      return;
    }
    bool tic = false;
    bool correct = false;
    bool compiled = false;
    std::vector<PastTurn> past;
    for (const TurnRecord& turn : trajectory.turns) {
      if (turn.infra_failed) continue;
      tic = tic || IsTic(turn);
      correct = correct || IsCorrect(turn);
      compiled = compiled || IsCompiled(turn);
      past.push_back({ReplyToResend(turn.reply), turn.source, turn.feedback});
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      summary_.turns_resumed += static_cast<int>(past.size());
    }
    if (!past.empty()) progress_.Resumed(task.id, static_cast<int>(past.size()));
    if (existing.ok() && trajectory.finished()) {
      Count(task.id, OutcomeOf(tic, correct, compiled), static_cast<int>(past.size()));
      return;
    }
    if (existing.ok()) {
      absl::StatusOr<TrajectoryWriter> resumed = TrajectoryWriter::Resume(trajectory);
      if (!resumed.ok()) {
        Problem(absl::StrCat(name, ": ", Describe(resumed.status())));
        Count(task.id, TrajectoryOutcome::kInfrastructure, static_cast<int>(past.size()));
        return;
      }
      writer.emplace(std::move(*resumed));
    } else {
      trajectory.header.run = config;
      trajectory.header.started_at = NowRfc3339();
      absl::StatusOr<TrajectoryWriter> created = TrajectoryWriter::Create(path, trajectory.header);
      if (!created.ok()) {
        Problem(absl::StrCat(name, ": ", Describe(created.status())));
        Count(task.id, TrajectoryOutcome::kInfrastructure, static_cast<int>(past.size()));
        return;
      }
      writer.emplace(std::move(*created));
    }
    const std::string relative =
        std::filesystem::path(path).lexically_relative(options_.out_dir).string();
    const std::string session = SessionId(relative, trajectory.header.started_at);

    std::optional<TrajectoryEnd> end;
    for (int turn = static_cast<int>(past.size()) + 1; turn <= options_.turns; ++turn) {
      if (Interrupted()) return;
      TurnRecord record;
      record.turn = turn;
      record.prompt_messages = BuildMessages(task.prompt, past, options_.context, options_.arch);
      const CallContext context{task.id, options_.arch, options_.knowledge, index, turn};

      const auto model_start = std::chrono::steady_clock::now();
      absl::StatusOr<ModelReply> reply;
      int attempts = 0;
      for (;;) {
        ++attempts;
        reply = provider_.Complete(record.prompt_messages, context);
        if (reply.ok() || !IsTransient(reply.status())) break;
        if (attempts >= options_.retry.max_attempts || Interrupted()) break;
        record.infra_failures.push_back({Describe(reply.status()), attempts});
        progress_.Retried(task.id);
        Backoff(options_.retry, attempts, reply.status());
      }
      record.model_seconds = SecondsSince(model_start);
      if (Interrupted()) return;
      if (!reply.ok()) {
        if (absl::IsOutOfRange(reply.status()) &&
            absl::StartsWith(reply.status().message(), kReplayExhausted)) {
          if (trajectory.turns.empty() && turn == 1) {
            // The replay has no such trajectory at all: no file, rather than an empty
            // trajectory that a report would count as a failure.
            writer.reset();
            std::error_code ignored;
            std::filesystem::remove(path, ignored);
            Count(task.id, TrajectoryOutcome::kSkipped, 0);
            return;
          }
          // The replayed trajectory has no more turns: its own turn limit.
          end = TrajectoryEnd{EndReason::kTurnLimit, "", NowRfc3339()};
          break;
        }
        record.infra_failed = true;
        record.infra_failures.push_back(
            {absl::StrCat("model: ", Describe(reply.status())), attempts});
        record.finished_at = NowRfc3339();
        (void)writer->AppendTurn(record);
        Problem(absl::StrCat(name, " turn ", turn, ": model call failed after ", attempts,
                             " attempts (not charged): ", Describe(reply.status())));
        Count(task.id, TrajectoryOutcome::kInfrastructure, static_cast<int>(past.size()));
        return;
      }
      record.reply = reply->text;
      record.stop_reason = reply->stop_reason;
      record.usage = reply->usage;
      // Reasoning the API returned apart, else what the model wrote inside <think> tags.
      record.reasoning =
          !reply->reasoning.empty() ? reply->reasoning : SplitThinking(reply->text).reasoning;

      const ExtractedSource extracted = ExtractSource(reply->text);
      std::optional<v1::Verdict> wire_verdict;
      bool rejected = false;
      if (!extracted.ok) {
        record.feedback = extracted.problem;
      } else {
        record.extracted = true;
        record.source = extracted.source;
        record.language = extracted.language;
        record.source_sha256 = Sha256Hex(extracted.source);
        const auto eval_start = std::chrono::steady_clock::now();
        absl::StatusOr<EvaluationOutcome> outcome = Evaluate(task, record, extracted, session);
        record.eval_seconds = SecondsSince(eval_start);
        if (Interrupted()) return;
        if (!outcome.ok()) {
          record.infra_failed = true;
          record.finished_at = NowRfc3339();
          (void)writer->AppendTurn(record);
          Problem(absl::StrCat(name, " turn ", turn,
                               ": evaluation failed (not charged): ", Describe(outcome.status())));
          Count(task.id, TrajectoryOutcome::kInfrastructure, static_cast<int>(past.size()));
          return;
        }
        record.submission_id = outcome->submission_id;
        rejected = outcome->rejected;
        if (outcome->rejected) {
          record.feedback = RejectedSubmissionFeedback(outcome->rejection);
        } else {
          wire_verdict = outcome->verdict;
          FeedbackOptions feedback_options;
          feedback_options.target_speedup = options_.target_speedup;
          feedback_options.compile_only = options_.compile_only;
          record.feedback = VerdictFeedback(outcome->verdict, feedback_options);
          absl::StatusOr<Verdict> verdict = VerdictFromWire(outcome->verdict);
          if (verdict.ok()) {
            record.verdict = std::move(*verdict);
          } else {
            Problem(absl::StrCat(name, " turn ", turn,
                                 ": verdict not recorded: ", Describe(verdict.status())));
          }
        }
      }
      record.finished_at = NowRfc3339();
      absl::Status appended = writer->AppendTurn(record);
      if (!appended.ok()) {
        Problem(absl::StrCat(name, " turn ", turn, ": ", Describe(appended)));
        Count(task.id, TrajectoryOutcome::kInfrastructure, static_cast<int>(past.size()));
        return;
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ++summary_.turns_run;
      }
      progress_.TurnDone(task.id, TurnNote{index, turn, TurnOutcome(record, rejected)});
      past.push_back({ReplyToResend(record.reply), record.source, record.feedback});
      const bool turn_tic = IsTic(record);
      tic = tic || turn_tic;
      correct = correct || IsCorrect(record);
      compiled = compiled || IsCompiled(record);
      if (!options_.compile_only && turn_tic && wire_verdict.has_value() &&
          SpeedupReachesTarget(*wire_verdict, options_.target_speedup)) {
        end = TrajectoryEnd{EndReason::kTicReached, "", NowRfc3339()};
        break;
      }
    }
    if (!end.has_value()) end = TrajectoryEnd{EndReason::kTurnLimit, "", NowRfc3339()};
    absl::Status ended = writer->AppendEnd(*end);
    if (!ended.ok()) Problem(absl::StrCat(name, ": ", Describe(ended)));
    Count(task.id, OutcomeOf(tic, correct, compiled), static_cast<int>(past.size()));
  }

  // Submits and waits, retrying what is not the kernel's fault. The idempotency key is fixed
  // for one submission, so a Submit retried after a lost answer creates nothing new; it
  // changes only when a verdict was infrastructure_failure (or the submission was cancelled)
  // and a fresh evaluation is needed.
  absl::StatusOr<EvaluationOutcome> Evaluate(const TaskInfo& task, TurnRecord& record,
                                             const ExtractedSource& extracted,
                                             const std::string& session) {
    SubmitSpec spec;
    spec.task = task.id;
    spec.arch = arch_;
    spec.knowledge = knowledge_;
    spec.language = extracted.language;
    spec.source = extracted.source;
    spec.launch_plan_json = extracted.launch_plan_json;
    spec.model = options_.model;
    spec.session_id = session;
    spec.turn_index = record.turn - 1;
    spec.compile_only = options_.compile_only;
    const absl::Duration timeout = absl::Seconds(options_.verdict_timeout_seconds);
    int resubmissions = 0;
    for (int attempts = 1;; ++attempts) {
      spec.idempotency_key = absl::StrCat(
          "ptxbench-run:", Sha256Hex(absl::StrCat(session, "|", record.turn, "|",
                                                  record.source_sha256, "|", resubmissions))
                               .substr(0, 40));
      absl::StatusOr<EvaluationOutcome> outcome = evaluator_.Evaluate(spec, timeout);
      absl::Status failure;
      if (outcome.ok() && !outcome->rejected &&
          outcome->verdict.verdict_class() == v1::VERDICT_CLASS_INFRASTRUCTURE_FAILURE) {
        failure = absl::UnavailableError(
            absl::StrCat("submission ", outcome->submission_id,
                         ": infrastructure_failure: ", outcome->verdict.message()));
        ++resubmissions;
      } else if (outcome.ok()) {
        return outcome;
      } else if (absl::IsAborted(outcome.status())) {
        failure = outcome.status();
        ++resubmissions;
      } else if (IsTransient(outcome.status())) {
        failure = outcome.status();
      } else {
        record.infra_failures.push_back(
            {absl::StrCat("server: ", Describe(outcome.status())), attempts});
        return outcome.status();
      }
      record.infra_failures.push_back({absl::StrCat("server: ", Describe(failure)), attempts});
      if (attempts >= options_.retry.max_attempts || Interrupted()) return failure;
      progress_.Retried(task.id);
      Backoff(options_.retry, attempts, failure);
    }
  }

  const RunOptions& options_;
  ModelProvider& provider_;
  EvaluationClient& evaluator_;
  Progress& progress_;
  v1::Arch arch_ = v1::ARCH_UNSPECIFIED;
  v1::KnowledgeLevel knowledge_ = v1::KNOWLEDGE_LEVEL_UNSPECIFIED;
  std::vector<TaskInfo> tasks_;
  std::mutex mutex_;
  RunSummary summary_;
};

}  // namespace

std::string SessionId(const std::string& relative_path, const std::string& started_at) {
  std::string id = absl::StrCat(relative_path, "@", started_at);
  // SubmitRequest.session_id holds at most 256 bytes; a long model name keeps the hash only.
  if (id.size() > 256) id = absl::StrCat("run-", Sha256Hex(id));
  return id;
}

absl::StatusOr<RunSummary> RunTrajectories(const RunOptions& options, ModelProvider& provider,
                                           EvaluationClient& evaluator, Progress& progress) {
  Runner runner(options, provider, evaluator, progress);
  RETURN_IF_ERROR(runner.LoadTasks());
  return runner.Run();
}

}  // namespace ptxbench::client::run
