#include "client/run/evaluation_client.h"

#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/command_support.h"
#include "ptxbench/v1/vendor.grpc.pb.h"

namespace ptxbench::client::run {
namespace {

absl::Status FromGrpc(const grpc::Status& status, const std::string& what) {
  if (status.error_code() == grpc::StatusCode::CANCELLED) {
    // This client cancels no call of its own: CANCELLED is a server that stopped while the
    // call was in flight (Shutdown cuts open calls), and the same call to the restarted
    // server succeeds. Retryable, like a server that cannot be reached.
    return absl::UnavailableError(
        absl::StrCat(what, ": cancelled by the server (stopping?): ", status.error_message()));
  }
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(what, ": ", status.error_message()));
}

// Only the server's "retry shortly" refusals are retried here (a full admission lane, too
// many token lookups at once: RESOURCE_EXHAUSTED with a pushback), within `budget`; they are
// no failure of the turn. UNAVAILABLE and the rest go back to the run loop, which retries
// them per turn and records each in the trajectory.
CallRetry RefusalRetry(absl::Duration budget) {
  CallRetry retry;
  retry.max_attempts = 8;
  retry.first_wait = absl::Milliseconds(100);
  retry.max_wait = absl::Seconds(5);
  retry.retry_unavailable = false;
  retry.budget = budget;
  return retry;
}

class GrpcEvaluationClient : public EvaluationClient {
 public:
  GrpcEvaluationClient(const std::shared_ptr<grpc::Channel>& channel, Connection connection)
      : stub_(v1::SubmissionService::NewStub(channel)), connection_(std::move(connection)) {}

  absl::StatusOr<std::vector<std::string>> TaskIds() override {
    v1::ListTasksResponse response;
    grpc::Status status = Call(absl::Seconds(30), "ListTasks", [&](grpc::ClientContext* context) {
      return stub_->ListTasks(context, v1::ListTasksRequest(), &response);
    });
    if (!status.ok()) return FromGrpc(status, "ListTasks");
    std::vector<std::string> ids;
    for (const v1::TaskSummary& task : response.tasks()) ids.push_back(task.id());
    return ids;
  }

  absl::StatusOr<TaskPrompt> GetTask(const std::string& task, v1::Arch arch,
                                     v1::KnowledgeLevel knowledge) override {
    v1::GetTaskRequest request;
    request.set_task_id(task);
    request.set_arch(arch);
    request.set_knowledge_level(knowledge);
    v1::GetTaskResponse response;
    grpc::Status status = Call(absl::Seconds(60), "GetTask", [&](grpc::ClientContext* context) {
      return stub_->GetTask(context, request, &response);
    });
    if (!status.ok()) return FromGrpc(status, absl::StrCat("GetTask ", task));
    return TaskPrompt{response.prompt(), response.task().version_hash()};
  }

  absl::StatusOr<EvaluationOutcome> Evaluate(const SubmitSpec& spec,
                                             absl::Duration verdict_timeout) override {
    v1::SubmitRequest request;
    request.set_task_id(spec.task);
    request.set_arch(spec.arch);
    request.set_knowledge_level(spec.knowledge);
    request.set_language(spec.language == "ptx" ? v1::SOURCE_LANGUAGE_PTX
                                                : v1::SOURCE_LANGUAGE_CUDA);
    request.set_source(spec.source);
    request.set_model(spec.model);
    request.set_session_id(spec.session_id);
    request.set_turn_index(spec.turn_index);
    request.set_scope(spec.compile_only ? v1::EVALUATION_SCOPE_COMPILE_ONLY
                                        : v1::EVALUATION_SCOPE_FULL);
    request.set_idempotency_key(spec.idempotency_key);
    EvaluationOutcome outcome;
    if (!spec.launch_plan_json.empty()) {
      auto parsed = google::protobuf::util::JsonStringToMessage(spec.launch_plan_json,
                                                                request.mutable_launch_plan());
      if (!parsed.ok()) {
        outcome.rejected = true;
        outcome.rejection =
            absl::StrCat("the launch plan JSON block is not a launch plan: ", parsed.ToString());
        return outcome;
      }
    }
    {
      v1::SubmitResponse response;
      grpc::Status status = Call(absl::Seconds(60), "Submit", [&](grpc::ClientContext* context) {
        return stub_->Submit(context, request, &response);
      });
      if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
        outcome.rejected = true;
        outcome.rejection = status.error_message();
        return outcome;
      }
      if (!status.ok()) return FromGrpc(status, "Submit");
      outcome.submission_id = response.submission().id();
    }
    const auto deadline = std::chrono::system_clock::now() +
                          std::chrono::milliseconds(absl::ToInt64Milliseconds(verdict_timeout));
    {
      v1::WatchSubmissionRequest watch;
      watch.set_submission_id(outcome.submission_id);
      bool done = false;
      std::ostringstream ignored_notes;  // The run's progress shows retries of whole turns.
      grpc::Status status = CallWithRetries(
          [&](grpc::ClientContext* context) {
            Authorize(context, connection_.token);
            context->set_deadline(deadline);
            auto reader = stub_->WatchSubmission(context, watch);
            v1::StageEvent event;
            while (reader->Read(&event)) done = done || event.has_verdict();
            return reader->Finish();
          },
          RefusalRetry(verdict_timeout), "WatchSubmission", ignored_notes);
      if (!status.ok()) {
        return FromGrpc(status, absl::StrCat("watching submission ", outcome.submission_id));
      }
      if (!done) {
        return absl::UnavailableError(
            absl::StrCat("the watch of ", outcome.submission_id, " ended without a verdict"));
      }
    }
    v1::GetSubmissionRequest get;
    get.set_submission_id(outcome.submission_id);
    v1::Submission submission;
    grpc::Status status =
        Call(absl::Seconds(60), "GetSubmission", [&](grpc::ClientContext* context) {
          return stub_->GetSubmission(context, get, &submission);
        });
    if (!status.ok()) return FromGrpc(status, "GetSubmission");
    if (submission.state() == v1::SUBMISSION_STATE_CANCELLED) {
      return absl::AbortedError(
          absl::StrCat("submission ", outcome.submission_id, " was cancelled"));
    }
    if (submission.state() != v1::SUBMISSION_STATE_FINISHED) {
      return absl::UnavailableError(
          absl::StrCat("submission ", outcome.submission_id, " has no verdict yet"));
    }
    outcome.verdict = submission.verdict();
    return outcome;
  }

 private:
  // One unary call, authorised, each attempt with `timeout` as its deadline; the server's
  // "retry shortly" refusals retried within `timeout` (RefusalRetry).
  grpc::Status Call(absl::Duration timeout, const std::string& what,
                    const std::function<grpc::Status(grpc::ClientContext*)>& call) {
    std::ostringstream ignored_notes;  // The run's progress shows retries of whole turns.
    return CallWithRetries(
        [&](grpc::ClientContext* context) {
          Authorize(context, connection_.token);
          context->set_deadline(std::chrono::system_clock::now() +
                                absl::ToChronoNanoseconds(timeout));
          return call(context);
        },
        RefusalRetry(timeout), what, ignored_notes);
  }

  std::unique_ptr<v1::SubmissionService::Stub> stub_;
  Connection connection_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<EvaluationClient>> EvaluationClient::Connect(
    const Connection& connection) {
  auto channel = Dial(connection.dial);
  if (!channel.ok()) return channel.status();
  return std::unique_ptr<EvaluationClient>(new GrpcEvaluationClient(*channel, connection));
}

}  // namespace ptxbench::client::run
