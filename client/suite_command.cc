#include "client/suite_command.h"

#include <google/protobuf/struct.pb.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/command_support.h"
#include "client/enums.h"
#include "client/exit_codes.h"
#include "common/build_info.h"
#include "common/files.h"
#include "common/task.h"
#include "ptxbench/v1/vendor.grpc.pb.h"

namespace ptxbench::client {
namespace {

struct Row {
  std::string task;
  std::string arch;
  std::string path;
  bool full = false;
  std::string expect;
  std::string submission_id;
  std::string got;
  bool tic = false;
  double speedup = 0;
  bool runtime_unverified = false;
  std::string message;
  bool ok = false;
  double seconds_to_verdict = 0;  // From the first submission to this verdict's arrival.
  std::vector<v1::StageResult> stages;
};

// One JSON object with every row (`--json`), for scripts such as scripts/device-e2e.
std::string RowsJson(const std::vector<Row>& rows, bool all_ok, double seconds) {
  google::protobuf::Struct report;
  auto& fields = *report.mutable_fields();
  google::protobuf::ListValue* list = fields["rows"].mutable_list_value();
  int passed = 0;
  for (const Row& row : rows) {
    passed += row.ok ? 1 : 0;
    auto& f = *list->add_values()->mutable_struct_value()->mutable_fields();
    f["task"].set_string_value(row.task);
    f["arch"].set_string_value(row.arch);
    f["source"].set_string_value(row.path);
    f["scope"].set_string_value(row.full ? "full" : "compile");
    f["expected"].set_string_value(row.expect);
    f["got"].set_string_value(row.got);
    f["ok"].set_bool_value(row.ok);
    f["tic"].set_bool_value(row.tic);
    f["speedup"].set_number_value(row.speedup);
    f["runtime_unverified"].set_bool_value(row.runtime_unverified);
    f["message"].set_string_value(row.message);
    f["submission_id"].set_string_value(row.submission_id);
    f["seconds_to_verdict"].set_number_value(row.seconds_to_verdict);
    google::protobuf::ListValue* stages = f["stages"].mutable_list_value();
    for (const v1::StageResult& stage : row.stages) {
      auto& s = *stages->add_values()->mutable_struct_value()->mutable_fields();
      s["stage"].set_string_value(StageText(stage.stage()));
      s["ok"].set_bool_value(stage.ok());
      s["seconds"].set_number_value(stage.seconds());
      s["summary"].set_string_value(stage.summary());
    }
  }
  fields["passed"].set_number_value(passed);
  fields["total"].set_number_value(static_cast<double>(rows.size()));
  fields["ok"].set_bool_value(all_ok);
  fields["seconds"].set_number_value(seconds);
  return ToJson(report);
}

}  // namespace

std::string ExpectedUnderCompileOnly(const std::string& expect) {
  if (expect == "compile_error" || expect == "plan_invalid") return expect;
  return "compiled";
}

int SuiteCommand(const std::vector<std::string>& raw, std::ostream& out, std::ostream& err) {
  static const auto* verb = new Verb{
      "suite",
      "",
      "Submits every reference solution and decoy of the tasks and checks each verdict against "
      "the one its task expects; exit 0 only when all match.",
      {
          {"tasks-dir", true, "task definitions to validate (default: ./tasks or the source tree)"},
          {"task", true, "only this task id"},
          {"full-arches", true,
           "comma-separated arches evaluated fully (a GPU worker of each must be registered); "
           "the others get the compile stage only"},
          {"model", true, "model name recorded with the submissions", "reference-suite"},
          {"json", false, "print one JSON object with every row instead of the table"},
          {"timeout-seconds", true,
           "give up waiting for verdicts after this long (0: wait forever); sources left "
           "without a verdict count as mismatches",
           "0"},
      },
      /*connects=*/true};
  int exit_code = 0;
  std::optional<ParsedArgs> args = ParseVerb(*verb, raw, out, err, &exit_code);
  if (!args.has_value()) return exit_code;
  if (!args->positional().empty()) {
    return UsageError(*verb, absl::StrCat("unexpected argument '", args->positional()[0], "'"),
                      err);
  }
  auto catalog =
      TaskCatalog::Load(args->Has("tasks-dir") ? args->Get("tasks-dir") : SourceTreeDir("tasks"));
  if (!catalog.ok()) {
    err << "ptxbench suite: " << catalog.status().message() << "\n";
    return kExitUsage;
  }
  if (args->Has("task") && catalog->Find(args->Get("task")) == nullptr) {
    std::vector<std::string> ids;
    for (const Task& task : catalog->tasks()) ids.push_back(task.id);
    err << "ptxbench suite: --task: unknown task '" << args->Get("task")
        << "'\nhint: the tasks are " << absl::StrJoin(ids, ", ") << "\n";
    return kExitUsage;
  }
  std::set<std::string> full_arches;
  for (absl::string_view arch : absl::StrSplit(args->Get("full-arches"), ',', absl::SkipEmpty())) {
    full_arches.insert(std::string(arch));
  }
  auto timeout_seconds = args->GetInt("timeout-seconds", 0);
  if (!timeout_seconds.ok() || *timeout_seconds < 0) {
    return UsageError(*verb, "--timeout-seconds: a whole number >= 0", err);
  }
  const auto started = std::chrono::steady_clock::now();
  // gRPC deadlines take the system clock.
  const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(*timeout_seconds);
  absl::StatusOr<Connection> connection_or = ConnectionOf(*args, err);
  if (!connection_or.ok()) {
    return UsageError(*verb, std::string(connection_or.status().message()), err);
  }
  const Connection connection = *connection_or;
  auto channel = Dial(connection.dial);
  if (!channel.ok()) return UsageError(*verb, std::string(channel.status().message()), err);
  auto stub = v1::SubmissionService::NewStub(*channel);
  const CallRetry retry;
  auto failed = [&](const std::string& what, const grpc::Status& status) {
    const CallFailure failure = DescribeCallFailure(status, connection);
    err << "ptxbench suite: " << what << ": " << failure.message << "\n";
    return failure.exit_code;
  };

  // Submit everything first so that workers evaluate in parallel, then collect.
  std::vector<Row> rows;
  for (const Task& task : catalog->tasks()) {
    if (args->Has("task") && task.id != args->Get("task")) continue;
    std::vector<SourceRef> sources = task.solutions;
    sources.insert(sources.end(), task.decoys.begin(), task.decoys.end());
    for (const SourceRef& source : sources) {
      Row row;
      row.task = task.id;
      row.arch = source.arch;
      row.path = source.path;
      row.full = full_arches.count(source.arch) > 0 && source.scope != "compile_only";
      row.expect = row.full ? source.expect : ExpectedUnderCompileOnly(source.expect);
      auto text = ReadFileToString(task.dir + "/" + source.path, "the task's source");
      auto arch = ParseArch(source.arch);
      if (!text.ok() || !arch.ok()) {
        err << "ptxbench suite: " << task.id << "/" << source.path << ": "
            << (text.ok() ? arch.status().message() : text.status().message()) << "\n";
        return kExitUsage;
      }
      v1::SubmitRequest request;
      request.set_task_id(task.id);
      request.set_arch(*arch);
      request.set_language(source.path.size() > 4 &&
                                   source.path.compare(source.path.size() - 4, 4, ".ptx") == 0
                               ? v1::SOURCE_LANGUAGE_PTX
                               : v1::SOURCE_LANGUAGE_CUDA);
      request.set_source(*text);
      request.set_model(args->Get("model"));
      request.set_knowledge_level(v1::KNOWLEDGE_LEVEL_NONE);
      request.set_scope(row.full ? v1::EVALUATION_SCOPE_FULL : v1::EVALUATION_SCOPE_COMPILE_ONLY);
      request.set_idempotency_key(NewIdempotencyKey());
      v1::SubmitResponse response;
      grpc::Status status = CallWithRetries(
          [&](grpc::ClientContext* context) {
            Authorize(context, connection.token);
            return stub->Submit(context, request, &response);
          },
          retry, "ptxbench suite: Submit", err);
      if (!status.ok()) {
        return failed(absl::StrCat("submitting ", task.id, "/", source.path), status);
      }
      row.submission_id = response.submission().id();
      rows.push_back(row);
    }
  }

  bool all_ok = true;
  for (Row& row : rows) {
    {
      grpc::ClientContext context;
      Authorize(&context, connection.token);
      if (*timeout_seconds > 0) context.set_deadline(deadline);
      v1::WatchSubmissionRequest request;
      request.set_submission_id(row.submission_id);
      auto reader = stub->WatchSubmission(&context, request);
      v1::StageEvent event;
      while (reader->Read(&event)) {
      }
      grpc::Status status = reader->Finish();
      if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
        // A verdict that never came is a mismatch, and the rows that did finish still print.
        row.got = "no_verdict_in_time";
        row.message = absl::StrFormat("no verdict within --timeout-seconds %d",
                                      static_cast<int>(*timeout_seconds));
        all_ok = false;
        continue;
      }
      if (!status.ok()) return failed(absl::StrCat("watching ", row.submission_id), status);
    }
    v1::Submission submission;
    grpc::Status status = CallWithRetries(
        [&](grpc::ClientContext* context) {
          Authorize(context, connection.token);
          v1::GetSubmissionRequest request;
          request.set_submission_id(row.submission_id);
          return stub->GetSubmission(context, request, &submission);
        },
        retry, "ptxbench suite: GetSubmission", err);
    if (!status.ok()) return failed(absl::StrCat("reading ", row.submission_id), status);
    const v1::Verdict& verdict = submission.verdict();
    row.got = VerdictClassText(verdict.verdict_class());
    row.tic = verdict.tic();
    row.speedup = verdict.speedup();
    row.runtime_unverified = verdict.runtime_unverified();
    row.message = verdict.message();
    row.stages.assign(verdict.stages().begin(), verdict.stages().end());
    row.seconds_to_verdict =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    row.ok = row.got == row.expect;
    all_ok = all_ok && row.ok;
  }

  if (args->GetBool("json")) {
    out << RowsJson(
               rows, all_ok,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count())
        << "\n";
    return all_ok ? kExitPass : kExitVerdictFailed;
  }
  // Columns as wide as their longest entry: task ids and paths are never cut (two attention
  // tasks differ only in a "_causal" suffix).
  int task_width = 4;
  int path_width = 6;
  for (const Row& row : rows) {
    task_width = std::max(task_width, static_cast<int>(row.task.size()));
    path_width = std::max(path_width, static_cast<int>(row.path.size()));
  }
  out << absl::StrFormat("%-*s %-8s %-*s %-8s %-20s %-20s %-4s %-8s\n", task_width, "task", "arch",
                         path_width, "source", "scope", "expected", "got", "tic", "speedup");
  for (const Row& row : rows) {
    out << absl::StrFormat("%-*s %-8s %-*s %-8s %-20s %-20s %-4s %-8s%s\n", task_width, row.task,
                           row.arch, path_width, row.path, row.full ? "full" : "compile",
                           row.expect, row.got, row.tic ? "yes" : "no",
                           row.speedup > 0 ? absl::StrFormat("%.3f", row.speedup) : "-",
                           row.ok ? "" : "   <-- MISMATCH");
  }
  for (const Row& row : rows) {
    if (!row.ok) out << "\n" << row.task << "/" << row.path << ": " << row.message << "\n";
  }
  out << absl::StrFormat(
      "\n%d of %d sources got their expected verdict\n",
      static_cast<int>(std::count_if(rows.begin(), rows.end(), [](const Row& r) { return r.ok; })),
      static_cast<int>(rows.size()));
  return all_ok ? kExitPass : kExitVerdictFailed;
}

}  // namespace ptxbench::client
