#include "client/submission_commands.h"

#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cli.h"
#include "client/command_support.h"
#include "client/connection.h"
#include "client/enums.h"
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

// Follows a submission to its end and returns the process exit code.
int Follow(v1::SubmissionService::Stub& stub, const ConnectionOptions& connection,
           const std::string& submission_id, bool json, std::ostream& out, std::ostream& err) {
  {
    grpc::ClientContext context;
    Authorize(&context, connection);
    v1::WatchSubmissionRequest request;
    request.set_submission_id(submission_id);
    auto reader = stub.WatchSubmission(&context, request);
    v1::StageEvent event;
    while (reader->Read(&event)) {
      if (!json) PrintEvent(event, out);
    }
    grpc::Status status = reader->Finish();
    if (!status.ok()) {
      err << "ptxbench: watching " << submission_id << ": " << RpcError(status) << "\n";
      return kExitInfrastructure;
    }
  }
  grpc::ClientContext context;
  Authorize(&context, connection);
  v1::GetSubmissionRequest request;
  request.set_submission_id(submission_id);
  v1::Submission submission;
  grpc::Status status = stub.GetSubmission(&context, request, &submission);
  if (!status.ok()) {
    err << "ptxbench: " << RpcError(status) << "\n";
    return kExitInfrastructure;
  }
  if (json) out << ToJson(submission) << "\n";
  if (submission.state() != v1::SUBMISSION_STATE_FINISHED) return kExitVerdictFailed;
  if (submission.verdict().verdict_class() == v1::VERDICT_CLASS_INFRASTRUCTURE_FAILURE) {
    return kExitInfrastructure;
  }
  return Passed(submission) ? kExitPass : kExitVerdictFailed;
}

}  // namespace

int SubmitCommand(const std::vector<std::string>& raw, std::ostream& out, std::ostream& err) {
  const std::vector<FlagSpec> specs = WithConnectionFlags({
      {"task", true, "task id, e.g. gemm_n7168_k5120"},
      {"arch", true, "sm_90a or sm_100a"},
      {"language", true, "cuda or ptx (default: from the file extension)"},
      {"plan", true, "launch plan JSON file (default: the PTXBENCH_PLAN block in SOURCE)"},
      {"model", true, "model name recorded with the submission", "manual"},
      {"session", true, "session id grouping the turns of one trajectory"},
      {"turn", true, "turn index within the session", "0"},
      {"knowledge", true, "knowledge level: none, templates or contract", "none"},
      {"compile-only", false, "ask for the compile stage only (no GPU needed)"},
      {"idempotency-key", true, "a retried submit with the same key creates nothing new"},
      {"wait", false, "stream stage events; exit 0 only for a passing verdict"},
      {"json", false, "print the final submission as JSON"},
  });
  auto args = ParseArgs(raw, specs);
  if (!args.ok()) {
    err << "ptxbench submit: " << args.status().message() << "\n"
        << "usage: ptxbench submit --task ID --arch ARCH [flags] SOURCE\n"
        << FlagHelp(specs);
    return kExitUsage;
  }
  if (args->positional().size() != 1) {
    err << "ptxbench submit: exactly one SOURCE file is needed (or - for stdin)\n";
    return kExitUsage;
  }
  const std::string path = args->positional()[0];
  v1::SubmitRequest request;
  request.set_task_id(args->Get("task"));
  if (request.task_id().empty()) {
    err << "ptxbench submit: --task is required\n";
    return kExitUsage;
  }
  auto arch = ParseArch(args->Get("arch"));
  auto knowledge = ParseKnowledgeLevel(args->Get("knowledge"));
  auto turn = args->GetInt("turn", 0);
  for (const absl::Status& s : {arch.status(), knowledge.status(), turn.status()}) {
    if (!s.ok()) {
      err << "ptxbench submit: " << s.message() << "\n";
      return kExitUsage;
    }
  }
  auto source = ReadFile(path);
  if (!source.ok()) {
    err << "ptxbench submit: " << source.status().message() << "\n";
    return kExitUsage;
  }
  std::string language = args->Get("language");
  if (language.empty()) language = absl::EndsWith(path, ".ptx") ? "ptx" : "cuda";
  if (language != "cuda" && language != "ptx") {
    err << "ptxbench submit: --language: '" << language << "' is not cuda or ptx\n";
    return kExitUsage;
  }
  if (args->Has("plan")) {
    auto plan_text = ReadFile(args->Get("plan"));
    if (!plan_text.ok()) {
      err << "ptxbench submit: --plan: " << plan_text.status().message() << "\n";
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
  request.set_language(language == "ptx" ? v1::SOURCE_LANGUAGE_PTX : v1::SOURCE_LANGUAGE_CUDA);
  request.set_source(*source);
  request.set_model(args->Get("model"));
  request.set_session_id(args->Get("session"));
  request.set_turn_index(static_cast<int32_t>(*turn));
  request.set_scope(args->GetBool("compile-only") ? v1::EVALUATION_SCOPE_COMPILE_ONLY
                                                  : v1::EVALUATION_SCOPE_FULL);
  request.set_idempotency_key(args->Get("idempotency-key"));

  const ConnectionOptions connection = ConnectionFrom(*args);
  auto channel = Dial(connection);
  if (!channel.ok()) {
    err << "ptxbench submit: " << channel.status().message() << "\n";
    return kExitUsage;
  }
  auto stub = v1::SubmissionService::NewStub(*channel);
  grpc::ClientContext context;
  Authorize(&context, connection);
  v1::SubmitResponse response;
  grpc::Status status = stub->Submit(&context, request, &response);
  if (!status.ok()) {
    err << "ptxbench submit: " << RpcError(status) << "\n";
    return status.error_code() == grpc::StatusCode::INVALID_ARGUMENT ? kExitUsage
                                                                     : kExitInfrastructure;
  }
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
  return Follow(*stub, connection, id, args->GetBool("json"), out, err);
}

int WatchCommand(const std::vector<std::string>& raw, std::ostream& out, std::ostream& err) {
  const std::vector<FlagSpec> specs =
      WithConnectionFlags({{"json", false, "print the final submission as JSON"}});
  auto args = ParseArgs(raw, specs);
  if (!args.ok() || args->positional().size() != 1) {
    err << "ptxbench watch: "
        << (args.ok() ? "exactly one SUBMISSION_ID is needed"
                      : std::string(args.status().message()))
        << "\nusage: ptxbench watch [flags] SUBMISSION_ID\n"
        << FlagHelp(specs);
    return kExitUsage;
  }
  const ConnectionOptions connection = ConnectionFrom(*args);
  auto channel = Dial(connection);
  if (!channel.ok()) {
    err << "ptxbench watch: " << channel.status().message() << "\n";
    return kExitUsage;
  }
  auto stub = v1::SubmissionService::NewStub(*channel);
  return Follow(*stub, connection, args->positional()[0], args->GetBool("json"), out, err);
}

int TasksCommand(const std::vector<std::string>& raw, std::ostream& out, std::ostream& err) {
  const std::vector<FlagSpec> specs = WithConnectionFlags({
      {"json", false, "print JSON"},
      {"prompt", true, "print the prompt of this task id"},
      {"arch", true, "arch of the prompt", "sm_90a"},
      {"knowledge", true, "knowledge level of the prompt", "none"},
  });
  auto args = ParseArgs(raw, specs);
  if (!args.ok()) {
    err << "ptxbench tasks: " << args.status().message() << "\n" << FlagHelp(specs);
    return kExitUsage;
  }
  const ConnectionOptions connection = ConnectionFrom(*args);
  auto channel = Dial(connection);
  if (!channel.ok()) {
    err << "ptxbench tasks: " << channel.status().message() << "\n";
    return kExitUsage;
  }
  auto stub = v1::SubmissionService::NewStub(*channel);
  grpc::ClientContext context;
  Authorize(&context, connection);
  if (args->Has("prompt")) {
    auto arch = ParseArch(args->Get("arch"));
    auto knowledge = ParseKnowledgeLevel(args->Get("knowledge"));
    if (!arch.ok() || !knowledge.ok()) {
      err << "ptxbench tasks: "
          << (arch.ok() ? knowledge.status().message() : arch.status().message()) << "\n";
      return kExitUsage;
    }
    v1::GetTaskRequest request;
    request.set_task_id(args->Get("prompt"));
    request.set_arch(*arch);
    request.set_knowledge_level(*knowledge);
    v1::GetTaskResponse response;
    grpc::Status status = stub->GetTask(&context, request, &response);
    if (!status.ok()) {
      err << "ptxbench tasks: " << RpcError(status) << "\n";
      return kExitInfrastructure;
    }
    out << (args->GetBool("json") ? ToJson(response) : response.prompt()) << "\n";
    return kExitPass;
  }
  v1::ListTasksResponse response;
  grpc::Status status = stub->ListTasks(&context, v1::ListTasksRequest(), &response);
  if (!status.ok()) {
    err << "ptxbench tasks: " << RpcError(status) << "\n";
    return kExitInfrastructure;
  }
  if (args->GetBool("json")) {
    out << ToJson(response) << "\n";
    return kExitPass;
  }
  for (const v1::TaskSummary& task : response.tasks()) {
    std::string arches;
    for (int a : task.arches()) {
      absl::StrAppend(&arches, arches.empty() ? "" : ",", ArchName(static_cast<v1::Arch>(a)));
    }
    out << absl::StrFormat("%-28s %-16s %s  %s\n", task.id(), arches,
                           task.version_hash().substr(0, 12), task.title());
  }
  return kExitPass;
}

}  // namespace ptxbench::client
