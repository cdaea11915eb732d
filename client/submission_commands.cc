#include "client/submission_commands.h"

#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/command_support.h"
#include "client/enums.h"
#include "client/exit_codes.h"
#include "common/cli_args.h"
#include "ptxbench/v1/vendor.grpc.pb.h"

namespace ptxbench::client {
namespace {

// A verdict passes when it is PASS, or COMPILED for a compile-only submission.
bool Passed(const v1::Submission& submission) {
  const v1::VerdictClass c = submission.verdict().verdict_class();
  if (submission.scope() == v1::EVALUATION_SCOPE_COMPILE_ONLY) {
    return c == v1::VERDICT_CLASS_COMPILED;
  }
  return c == v1::VERDICT_CLASS_PASS;
}

void PrintEvent(const v1::StageEvent& event, std::ostream& out) {
  if (!event.notice().empty()) {
    out << "  notice: " << event.notice() << "\n";
  }
  if (event.has_result()) {
    const v1::StageResult& r = event.result();
    out << absl::StrFormat("  %-20s %-4s %s (%.2f s)\n", StageText(r.stage()),
                           r.ok() ? "ok" : "FAIL", r.summary(), r.seconds());
  } else if (event.stage() == v1::STAGE_QUEUED) {
    out << "  queued\n";
  }
  if (event.has_verdict()) {
    const v1::Verdict& v = event.verdict();
    out << absl::StrFormat("verdict: %s  tic=%s correct=%s speedup=%.3f%s\n",
                           VerdictClassText(v.verdict_class()), v.tic() ? "yes" : "no",
                           v.correct() ? "yes" : "no", v.speedup(),
                           v.runtime_unverified() ? "  (runtime unverified)" : "");
    if (!v.message().empty()) out << "  " << v.message() << "\n";
  }
  // A person watches this live, often through a pipe: show each event as it arrives.
  out.flush();
}

// The server's task ids, for a hint after an unknown one ("" when they cannot be had).
std::string KnownTaskIds(v1::SubmissionService::Stub& stub, const Connection& connection) {
  grpc::ClientContext context;
  Authorize(&context, connection.token);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ListTasksResponse response;
  if (!stub.ListTasks(&context, v1::ListTasksRequest(), &response).ok()) return "";
  std::vector<std::string> ids;
  for (const v1::TaskSummary& task : response.tasks()) ids.push_back(task.id());
  return absl::StrJoin(ids, ", ");
}

// Prints a failed call as "ptxbench VERB: WHAT: message" with its hint; returns the exit code.
int ReportFailure(const std::string& verb, const std::string& what, const grpc::Status& status,
                  const Connection& connection, v1::SubmissionService::Stub& stub,
                  std::ostream& err) {
  const CallFailure failure = DescribeCallFailure(status, connection);
  err << "ptxbench " << verb << ": " << what << ": " << failure.message << "\n";
  if (absl::StrContains(status.error_message(), "unknown task")) {
    const std::string ids = KnownTaskIds(stub, connection);
    if (!ids.empty()) err << "hint: the server's tasks are " << ids << "\n";
  }
  return failure.exit_code;
}

// Follows a submission to its end and returns the process exit code. A watch cut by a server
// restart is opened again; the server replays the stored events, so those already printed are
// skipped.
int Follow(v1::SubmissionService::Stub& stub, const Connection& connection,
           const std::string& submission_id, bool json, const CallRetry& retry, std::ostream& out,
           std::ostream& err) {
  size_t printed = 0;
  grpc::Status watched = CallWithRetries(
      [&](grpc::ClientContext* context) {
        Authorize(context, connection.token);
        v1::WatchSubmissionRequest request;
        request.set_submission_id(submission_id);
        auto reader = stub.WatchSubmission(context, request);
        v1::StageEvent event;
        size_t seen = 0;
        while (reader->Read(&event)) {
          if (++seen <= printed) continue;
          printed = seen;
          if (!json) PrintEvent(event, out);
        }
        return reader->Finish();
      },
      retry, absl::StrCat("ptxbench: watching ", submission_id), err);
  if (!watched.ok()) {
    return ReportFailure("watch", absl::StrCat("watching ", submission_id), watched, connection,
                         stub, err);
  }
  v1::Submission submission;
  grpc::Status status = CallWithRetries(
      [&](grpc::ClientContext* context) {
        Authorize(context, connection.token);
        v1::GetSubmissionRequest request;
        request.set_submission_id(submission_id);
        return stub.GetSubmission(context, request, &submission);
      },
      retry, "ptxbench: GetSubmission", err);
  if (!status.ok()) {
    return ReportFailure("watch", absl::StrCat("reading ", submission_id), status, connection, stub,
                         err);
  }
  if (json) out << ToJson(submission) << "\n";
  if (submission.state() != v1::SUBMISSION_STATE_FINISHED) return kExitVerdictFailed;
  if (submission.verdict().verdict_class() == v1::VERDICT_CLASS_INFRASTRUCTURE_FAILURE) {
    return kExitInfrastructure;
  }
  return Passed(submission) ? kExitPass : kExitVerdictFailed;
}

CallRetry RetryFrom(int64_t attempts) {
  CallRetry retry;
  retry.max_attempts = static_cast<int>(attempts);
  return retry;
}

const FlagSpec kRetriesFlag{"retries", true,
                            "attempts of a call the server could not answer (unreachable or "
                            "restarting) before giving up",
                            "6"};

const Verb& SubmitVerb() {
  static const auto* verb = new Verb{
      "submit",
      "--task ID --arch ARCH SOURCE",
      "Sends one kernel source for evaluation and prints its submission id (--wait: its stages "
      "and verdict).",
      {
          {"task", true, "task id, e.g. gemm_n7168_k5120 (`ptxbench tasks` lists them)"},
          {"arch", true, "sm_90a or sm_100a"},
          {"language", true, "cuda or ptx (default: from the file extension)"},
          {"plan", true, "launch plan JSON file (default: the PTXBENCH_PLAN block in SOURCE)"},
          {"model", true, "model name recorded with the submission", "manual"},
          {"session", true, "session id grouping the turns of one trajectory"},
          {"turn", true, "turn index within the session", "0"},
          {"knowledge", true, "knowledge level: none, templates or contract", "none"},
          {"compile-only", false, "ask for the compile stage only (no GPU needed)"},
          {"idempotency-key", true,
           "key of this submission: a submit retried with the same key returns the first one "
           "(default: a fresh random key, reused by this command's own retries)"},
          kRetriesFlag,
          {"wait", false, "stream stage events; exit 0 only for a passing verdict"},
          {"json", false, "print the final submission as JSON"},
      },
      /*connects=*/true};
  return *verb;
}

}  // namespace

int SubmitCommand(const std::vector<std::string>& raw, std::ostream& out, std::ostream& err) {
  const Verb& verb = SubmitVerb();
  int exit_code = 0;
  std::optional<ParsedArgs> args = ParseVerb(verb, raw, out, err, &exit_code);
  if (!args.has_value()) return exit_code;
  if (args->positional().size() != 1) {
    return UsageError(verb, "exactly one SOURCE file is needed (or - for stdin)", err);
  }
  const std::string path = args->positional()[0];
  v1::SubmitRequest request;
  request.set_task_id(args->Get("task"));
  if (request.task_id().empty()) return UsageError(verb, "--task is required", err);
  if (!args->Has("arch")) return UsageError(verb, "--arch is required (sm_90a or sm_100a)", err);
  auto arch = ParseArch(args->Get("arch"));
  auto knowledge = ParseKnowledgeLevel(args->Get("knowledge"));
  auto turn = args->GetInt("turn", 0);
  auto retries = args->GetInt("retries", 6);
  for (const absl::Status& s :
       {arch.status(), knowledge.status(), turn.status(), retries.status()}) {
    if (!s.ok()) return UsageError(verb, std::string(s.message()), err);
  }
  if (*retries < 1) return UsageError(verb, "--retries: at least 1", err);
  auto source = ReadInputFile(path, "the source");
  if (!source.ok()) {
    err << "ptxbench submit: " << source.status().message() << "\n";
    return kExitUsage;
  }
  absl::StatusOr<std::string> language = SourceLanguage(args->Get("language"), path);
  if (!language.ok()) return UsageError(verb, std::string(language.status().message()), err);
  if (args->Has("plan")) {
    auto plan_text = ReadInputFile(args->Get("plan"), "--plan");
    if (!plan_text.ok()) {
      err << "ptxbench submit: " << plan_text.status().message() << "\n";
      return kExitUsage;
    }
    auto parsed =
        google::protobuf::util::JsonStringToMessage(*plan_text, request.mutable_launch_plan());
    if (!parsed.ok()) {
      err << "ptxbench submit: --plan: not a launch plan: " << parsed.ToString() << "\n";
      return kExitUsage;
    }
  }
  request.set_arch(*arch);
  request.set_knowledge_level(*knowledge);
  request.set_language(*language == "ptx" ? v1::SOURCE_LANGUAGE_PTX : v1::SOURCE_LANGUAGE_CUDA);
  request.set_source(*source);
  request.set_model(args->Get("model"));
  request.set_session_id(args->Get("session"));
  request.set_turn_index(static_cast<int32_t>(*turn));
  request.set_scope(args->GetBool("compile-only") ? v1::EVALUATION_SCOPE_COMPILE_ONLY
                                                  : v1::EVALUATION_SCOPE_FULL);
  // Always a key: without one, a Submit whose reply was lost (server killed right after the
  // commit) cannot be told from one never stored, and the retry below would evaluate twice.
  request.set_idempotency_key(args->Has("idempotency-key") ? args->Get("idempotency-key")
                                                           : NewIdempotencyKey());

  absl::StatusOr<Connection> connection = ConnectionOf(*args, err);
  if (!connection.ok()) return UsageError(verb, std::string(connection.status().message()), err);
  auto channel = Dial(connection->dial);
  if (!channel.ok()) return UsageError(verb, std::string(channel.status().message()), err);
  auto stub = v1::SubmissionService::NewStub(*channel);
  const CallRetry retry = RetryFrom(*retries);
  v1::SubmitResponse response;
  grpc::Status status = CallWithRetries(
      [&](grpc::ClientContext* context) {
        Authorize(context, connection->token);
        context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
        return stub->Submit(context, request, &response);
      },
      retry, "ptxbench submit", err);
  if (!status.ok()) return ReportFailure("submit", "Submit", status, *connection, *stub, err);
  const std::string id = response.submission().id();
  if (!args->GetBool("wait")) {
    if (args->GetBool("json")) {
      out << ToJson(response.submission()) << "\n";
    } else {
      out << id << "\n";
    }
    return kExitPass;
  }
  if (!args->GetBool("json")) out << "submission " << id << std::endl;
  return Follow(*stub, *connection, id, args->GetBool("json"), retry, out, err);
}

int WatchCommand(const std::vector<std::string>& raw, std::ostream& out, std::ostream& err) {
  static const auto* verb =
      new Verb{"watch",
               "SUBMISSION_ID",
               "Follows a submission's stage events until its verdict; exit 0 only for a pass.",
               {{"json", false, "print the final submission as JSON"}, kRetriesFlag},
               /*connects=*/true};
  int exit_code = 0;
  std::optional<ParsedArgs> args = ParseVerb(*verb, raw, out, err, &exit_code);
  if (!args.has_value()) return exit_code;
  if (args->positional().size() != 1) {
    return UsageError(*verb, "exactly one SUBMISSION_ID is needed", err);
  }
  const std::string id = args->positional()[0];
  if (!IsSubmissionId(id)) {
    return UsageError(
        *verb,
        absl::StrCat("'", id.substr(0, 64),
                     "' is not a submission id (a UUID, as `ptxbench submit` prints)"),
        err);
  }
  auto retries = args->GetInt("retries", 6);
  if (!retries.ok() || *retries < 1) return UsageError(*verb, "--retries: at least 1", err);
  absl::StatusOr<Connection> connection = ConnectionOf(*args, err);
  if (!connection.ok()) return UsageError(*verb, std::string(connection.status().message()), err);
  auto channel = Dial(connection->dial);
  if (!channel.ok()) return UsageError(*verb, std::string(channel.status().message()), err);
  auto stub = v1::SubmissionService::NewStub(*channel);
  return Follow(*stub, *connection, id, args->GetBool("json"), RetryFrom(*retries), out, err);
}

int CancelCommand(const std::vector<std::string>& raw, std::ostream& out, std::ostream& err) {
  static const auto* verb =
      new Verb{"cancel",
               "SUBMISSION_ID",
               "Cancels a submission that has no verdict yet; prints its state afterwards.",
               {{"json", false, "print the submission as JSON"}, kRetriesFlag},
               /*connects=*/true};
  int exit_code = 0;
  std::optional<ParsedArgs> args = ParseVerb(*verb, raw, out, err, &exit_code);
  if (!args.has_value()) return exit_code;
  if (args->positional().size() != 1) {
    return UsageError(*verb, "exactly one SUBMISSION_ID is needed", err);
  }
  const std::string id = args->positional()[0];
  if (!IsSubmissionId(id)) {
    return UsageError(
        *verb,
        absl::StrCat("'", id.substr(0, 64),
                     "' is not a submission id (a UUID, as `ptxbench submit` prints)"),
        err);
  }
  auto retries = args->GetInt("retries", 6);
  if (!retries.ok() || *retries < 1) return UsageError(*verb, "--retries: at least 1", err);
  absl::StatusOr<Connection> connection = ConnectionOf(*args, err);
  if (!connection.ok()) return UsageError(*verb, std::string(connection.status().message()), err);
  auto channel = Dial(connection->dial);
  if (!channel.ok()) return UsageError(*verb, std::string(channel.status().message()), err);
  auto stub = v1::SubmissionService::NewStub(*channel);
  v1::Submission submission;
  // Cancelling twice is harmless, so a cancel cut by a restart is simply sent again.
  grpc::Status status = CallWithRetries(
      [&](grpc::ClientContext* context) {
        Authorize(context, connection->token);
        v1::CancelSubmissionRequest request;
        request.set_submission_id(id);
        return stub->CancelSubmission(context, request, &submission);
      },
      RetryFrom(*retries), "ptxbench cancel", err);
  if (!status.ok()) {
    return ReportFailure("cancel", absl::StrCat("cancelling ", id), status, *connection, *stub,
                         err);
  }
  if (args->GetBool("json")) {
    out << ToJson(submission) << "\n";
  } else if (submission.state() == v1::SUBMISSION_STATE_CANCELLED) {
    out << "cancelled " << id << "\n";
  } else {
    // Finished before the cancel arrived: the verdict stands.
    out << id << " was already finished: " << VerdictClassText(submission.verdict().verdict_class())
        << "\n";
  }
  return kExitPass;
}

int TasksCommand(const std::vector<std::string>& raw, std::ostream& out, std::ostream& err) {
  static const auto* verb = new Verb{
      "tasks",
      "",
      "Lists the server's tasks with their arches and target families, or prints one task's "
      "prompt (--prompt ID).",
      {
          {"json", false, "print JSON"},
          {"prompt", true, "print the prompt of this task id"},
          {"arch", true, "arch of the prompt", "sm_90a"},
          {"knowledge", true, "knowledge level of the prompt", "none"},
      },
      /*connects=*/true};
  int exit_code = 0;
  std::optional<ParsedArgs> args = ParseVerb(*verb, raw, out, err, &exit_code);
  if (!args.has_value()) return exit_code;
  if (!args->positional().empty()) {
    return UsageError(*verb, absl::StrCat("unexpected argument '", args->positional()[0], "'"),
                      err);
  }
  absl::StatusOr<Connection> connection = ConnectionOf(*args, err);
  if (!connection.ok()) return UsageError(*verb, std::string(connection.status().message()), err);
  auto channel = Dial(connection->dial);
  if (!channel.ok()) return UsageError(*verb, std::string(channel.status().message()), err);
  auto stub = v1::SubmissionService::NewStub(*channel);
  const CallRetry retry;
  if (args->Has("prompt")) {
    auto arch = ParseArch(args->Get("arch"));
    auto knowledge = ParseKnowledgeLevel(args->Get("knowledge"));
    if (!arch.ok() || !knowledge.ok()) {
      return UsageError(
          *verb, std::string(arch.ok() ? knowledge.status().message() : arch.status().message()),
          err);
    }
    v1::GetTaskRequest request;
    request.set_task_id(args->Get("prompt"));
    request.set_arch(*arch);
    request.set_knowledge_level(*knowledge);
    v1::GetTaskResponse response;
    grpc::Status status = CallWithRetries(
        [&](grpc::ClientContext* context) {
          Authorize(context, connection->token);
          return stub->GetTask(context, request, &response);
        },
        retry, "ptxbench tasks", err);
    if (!status.ok()) {
      return ReportFailure("tasks", absl::StrCat("task '", request.task_id(), "'"), status,
                           *connection, *stub, err);
    }
    out << (args->GetBool("json") ? ToJson(response) : response.prompt()) << "\n";
    return kExitPass;
  }
  v1::ListTasksResponse response;
  grpc::Status status = CallWithRetries(
      [&](grpc::ClientContext* context) {
        Authorize(context, connection->token);
        return stub->ListTasks(context, v1::ListTasksRequest(), &response);
      },
      retry, "ptxbench tasks", err);
  if (!status.ok()) return ReportFailure("tasks", "ListTasks", status, *connection, *stub, err);
  if (args->GetBool("json")) {
    out << ToJson(response) << "\n";
    return kExitPass;
  }
  for (const v1::TaskSummary& task : response.tasks()) {
    // "sm_90a: wgmma,tma  sm_100a: tcgen05,tma": what TIC needs differs per arch.
    std::vector<std::string> per_arch;
    for (const v1::ArchTargets& targets : task.arch_targets()) {
      per_arch.push_back(absl::StrCat(ArchName(targets.arch()), ": ",
                                      absl::StrJoin(targets.target_families(), ",")));
    }
    out << absl::StrFormat("%-28s %s  %s\n    %s\n", task.id(), task.version_hash().substr(0, 12),
                           task.title(), absl::StrJoin(per_arch, "  "));
  }
  return kExitPass;
}

}  // namespace ptxbench::client
