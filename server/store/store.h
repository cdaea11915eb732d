// The PostgreSQL store: tenants, tokens, submissions, the job queue, stage events, verdicts,
// workers and the audit log. The only file set that includes libpqxx is server/store/*.cc;
// every libpqxx exception is caught there and mapped to an absl::Status (pg_error.h has the
// full table):
//   connection failures -> UNAVAILABLE (the broken connection is dropped and a new one opened
//   on the next call), a connection lost during COMMIT -> UNKNOWN (outcome unknown),
//   serialization failures/deadlocks -> retried inside, then ABORTED, unique violations ->
//   ALREADY_EXISTS, missing rows -> NOT_FOUND, bad input -> INVALID_ARGUMENT naming the field,
//   an unmigrated database -> FAILED_PRECONDITION, lost leases -> FAILED_PRECONDITION carrying
//   a typed LeaseLostReason (LeaseLostReasonOf; the message says it in words too).
// One named SQL statement per operation lives in queries.cc with a comment saying why it is
// written that way. Thread-safe: each call takes a connection from a pool of pool_size; the
// Wait* calls share one more, listening, connection.
#ifndef PTXBENCH_SERVER_STORE_STORE_H_
#define PTXBENCH_SERVER_STORE_STORE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/wire_names.h"

namespace ptxbench::store {

// Enumerations cross this API as enums: the wire's (ptxbench.v1: Arch, JobKind,
// EvaluationScope, KnowledgeLevel, SourceLanguage, Role, SubmissionState, WorkerState, Stage,
// VerdictClass, FailureKind) and the store's own below, for what the wire does not carry.
// They are text only inside the SQL layer, stored as their lower-case names so that the
// database reads plainly in psql and Grafana: the wire's by proto/wire_names.h, the one table
// of those names ("sm_90a", "compile_only", "wrong_result", ...); the store's by store.cc.
// An enum value the store does not know (UNSPECIFIED where a value is required, a number no
// enumerator has) is INVALID_ARGUMENT naming the field.

// The life of a job (jobs.state).
enum class JobState {
  kQueued,     // "queued": waiting for a worker, or for not_before after a retry.
  kLeased,     // "leased": a worker holds it until lease_expires_at.
  kDone,       // "done": a verdict (or the evaluate job it led to) came from it.
  kFailed,     // "failed": a kernel failure, or infrastructure failures up to the cap.
  kCancelled,  // "cancelled": its submission was cancelled.
};
// What a stage event is (stage_events.kind; see StageEventRow).
enum class EventKind {
  kStage,   // "stage"
  kNotice,  // "notice"
};
// What an audit row is about (audit_log.entity).
enum class AuditEntity {
  kTenant,      // "tenant", by name.
  kToken,       // "token", by token id.
  kWorker,      // "worker", by worker id.
  kSubmission,  // "submission", by id.
  kJob,         // "job", by id.
};
// The stored names above, for logs and messages.
std::string JobStateName(JobState state);
std::string EventKindName(EventKind kind);
std::string AuditEntityName(AuditEntity entity);

// Why the fence refused a call about a lease (Store::ReportStage, CompleteJob, FailJob, and
// the `lost` list of Heartbeat).
enum class LeaseLostReason {
  kNoSuchJob,    // The job id names no job.
  kLeasedAgain,  // Another lease (a later attempt, or another worker) holds the job now.
  kExpired,      // The lease expired: the reaper requeued the job, or it was not renewed in time.
  kCancelled,    // The job's submission was cancelled.
  kFinished,     // The job already has its result (e.g. a second completion).
};
std::string LeaseLostReasonName(LeaseLostReason reason);  // "no_such_job", "leased_again", ...

struct StoreOptions {
  std::string database_url;  // libpq connection string or URI.
  int pool_size = 8;         // Connections held open.
  absl::Duration lease_duration = absl::Seconds(60);
  int max_infrastructure_attempts = 3;  // A job failing for infrastructure this often fails.
  absl::Duration retry_backoff_base = absl::Seconds(2);  // Doubles per attempt, jittered.
  // No reaper pass for longer than this means the scheduler was down (ReapExpiredLeases): a
  // few reaper intervals (the server sets 3 x its reap interval).
  absl::Duration outage_threshold = absl::Seconds(15);
};

// What one reaper pass did (Store::ReapExpiredLeases).
struct ReapReport {
  int reaped = 0;       // Leases taken back.
  bool outage = false;  // The gap since the last pass exceeded outage_threshold.
  absl::Duration gap;   // Since the last pass (of any server).
  int graced = 0;       // Leases extended because of the outage.
};

// Whether PostgreSQL answered lately, as the store saw it: every connection opened or found
// broken, every statement that ran and every Ping records it. Reading it costs no round trip,
// so a health check or a scrape never waits on a dead database.
struct StoreReachability {
  bool reachable = false;
  absl::Time since;        // When it last became reachable (or unreachable).
  std::string last_error;  // Why it is unreachable; empty while reachable.
};

struct TenantRow {
  std::string name;
  int submissions_per_minute = 0;  // 0 = server default.
  int max_queued = 0;              // 0 = server default.
  absl::Time created_at;
};

struct TokenRow {
  std::string token_id;
  std::string tenant;
  v1::Role role = v1::ROLE_UNSPECIFIED;
  std::string description;
  bool revoked = false;
};

struct NewSubmission {
  std::string tenant;
  std::string task_id;
  std::string task_version_hash;
  v1::Arch arch = v1::ARCH_UNSPECIFIED;
  v1::SourceLanguage language = v1::SOURCE_LANGUAGE_CUDA;  // UNSPECIFIED is CUDA (types.proto).
  std::string source;            // Stored once per sha256 in the sources table.
  std::string launch_plan_json;  // Empty when the plan is in the source.
  std::string model;
  std::string session_id;
  int turn_index = 0;
  v1::KnowledgeLevel knowledge_level = v1::KNOWLEDGE_LEVEL_UNSPECIFIED;
  v1::EvaluationScope scope = v1::EVALUATION_SCOPE_FULL;  // UNSPECIFIED is FULL (types.proto).
  std::string idempotency_key;                            // Empty for none; unique per tenant.
};

// A submission that has just received its verdict: what metrics and logs label it with.
struct FinishedSubmission {
  std::string id;
  std::string tenant;
  std::string model;
  std::string task_id;
  v1::Arch arch = v1::ARCH_UNSPECIFIED;
  v1::VerdictClass verdict_class = v1::VERDICT_CLASS_UNSPECIFIED;
  double speedup = 0;
};

struct VerdictRow {
  v1::VerdictClass verdict_class = v1::VERDICT_CLASS_UNSPECIFIED;
  bool compiled = false;
  bool correct = false;
  bool target_executed = false;
  bool tic = false;
  double speedup = 0;
  bool runtime_unverified = false;
  std::string message;
  std::string verdict_json;  // The complete verdict (JSONB).
  absl::Time finished_at;
  int round = 0;  // The judging round it came from (0: the first judging).
};

// An admin's finding that a submission games the harness (Store::MarkHacked). It keeps its
// source, events and verdicts; only the rankings (leaderboard_results, benchmark_*) skip it.
struct HackedMark {
  std::string reason;
  std::string by;  // Who marked it (the audit actor, e.g. "admin:<token_id>").
  absl::Time at;
};

// A verdict that a later judging round replaced (superseded_verdicts, append-only).
struct SupersededVerdictRow {
  VerdictRow verdict;           // verdict.round: the round it came from.
  int superseded_by_round = 0;  // The round whose verdict replaced it.
  std::string rejudge_reason;   // Given to the Rejudge that opened that round.
  absl::Time superseded_at;
};

// Which finished submissions Store::Rejudge sends back to the queue.
struct RejudgeFilter {
  std::vector<std::string> task_ids;  // Required: at least one, none empty.
  // Required, one per task id: the task's CURRENT content hash (the catalog's). The new round
  // judges the submission against the task as it is now; workers refuse a job whose task
  // version they do not hold, so a round on the old hash would end as infrastructure failure.
  std::map<std::string, std::string> task_version_hashes;
  // Optional: only verdicts judged by an engine older than this dotted numeric version
  // ("0.9.1"; compared part by part); a verdict with no harness recorded counts as older.
  std::string harness_older_than;
  std::vector<std::string> submission_ids;  // Optional: only these (UUIDs).
  std::string reason;                       // Recorded with the round; may be empty.
};

struct RejudgeResult {
  std::vector<std::string> submission_ids;  // Re-queued, in arrival order.
};

struct SubmissionRow {
  std::string id;
  std::string tenant;
  std::string task_id;
  std::string task_version_hash;
  v1::Arch arch = v1::ARCH_UNSPECIFIED;
  v1::SourceLanguage language = v1::SOURCE_LANGUAGE_UNSPECIFIED;
  std::string source_sha256;
  std::string model;
  std::string session_id;
  int turn_index = 0;
  v1::KnowledgeLevel knowledge_level = v1::KNOWLEDGE_LEVEL_UNSPECIFIED;
  v1::EvaluationScope scope = v1::EVALUATION_SCOPE_UNSPECIFIED;
  v1::SubmissionState state = v1::SUBMISSION_STATE_UNSPECIFIED;
  v1::Stage stage = v1::STAGE_UNSPECIFIED;  // The latest stage reached: QUEUED ... DONE.
  absl::Time created_at;
  // The current verdict. A submission being re-judged (queued or running with
  // judging_round > 0) keeps its previous round's verdict here until the new one is stored.
  std::optional<VerdictRow> verdict;
  int judging_round = 0;  // 0: the first judging; each Rejudge adds one.
  std::optional<HackedMark> hacked;
  int superseded_verdicts = 0;  // Rows in ListSupersededVerdicts.
};

struct SubmissionFilter {
  std::string tenant;      // Required: a vendor lists only its own.
  std::string session_id;  // Optional.
  std::string task_id;     // Optional.
  int page_size = 50;
  std::string page_token;  // Opaque; from the previous page.
};

struct SubmissionPage {
  std::vector<SubmissionRow> submissions;
  std::string next_page_token;  // Empty on the last page.
};

// A stage event for watchers; seq increases by one per submission, from 1, without gaps.
// kind kStage: a stage was reached. stage QUEUED (payload {}) and DONE (payload: the verdict
//   JSON, as stored in the verdicts table) are appended by the store itself; the others
//   carry the result_json given to ReportStage.
// kind kNotice: payload is the JSON given to AppendNotice, or {"notice": "..."} for the
//   store's own notices (a retry after an infrastructure failure); stage is the submission's
//   stage at the time.
struct StageEventRow {
  int64_t seq = 0;
  std::string submission_id;
  v1::Stage stage = v1::STAGE_UNSPECIFIED;
  std::string payload_json;  // The StageResult / notice / verdict as JSON.
  absl::Time at;
  EventKind kind = EventKind::kStage;
};

struct WorkerRegistration {
  std::string hostname;
  v1::Arch arch = v1::ARCH_UNSPECIFIED;  // UNSPECIFIED only for compile-only workers.
  std::string gpu_name;
  std::string gpu_uuid;
  bool compile_only = false;
  std::string identity_json;  // The full WorkerIdentity (versions) for audit.
  // The token registering it, which the worker id then belongs to (RegisterWorker); empty
  // for a caller without a token (the loopback bootstrap).
  std::string token_id;
};

struct WorkerRow {
  std::string worker_id;
  WorkerRegistration registration;
  v1::WorkerState state = v1::WORKER_STATE_UNSPECIFIED;
  std::string health_detail;
  absl::Time last_seen;
  int jobs_held = 0;
};

// Identifies one lease of one job. Every mutation of a leased job is fenced by all three.
struct LeaseRef {
  std::string job_id;
  std::string worker_id;
  int attempt = 0;
};

// A compile job's module (migrations/0010_compile_artifacts): stored with that job's
// completion, handed out with the lease of the same round's evaluate job (docs/architecture.md,
// "Compile artifact reuse").
struct CompileArtifactRow {
  std::string cubin;
  std::string ptx;
  std::string cubin_sha256;  // 64 lower-case hex digits.
  std::string ptx_sha256;
  std::string compile_event_json;
  std::string nvrtc_version;
  std::string ptxas_version;
  std::string harness_version;
  // Read back only (the store sets them from the job): the compile job and its worker.
  std::string producer_job_id;
  std::string producer_worker_id;
};

// What the GPU worker of an evaluate job did with the artifact its lease carried.
struct ArtifactUseReport {
  v1::ArtifactOutcome outcome = v1::ARTIFACT_OUTCOME_UNSPECIFIED;
  std::string detail;
};

struct LeasedJobRow {
  LeaseRef lease;
  v1::JobKind kind = v1::JOB_KIND_UNSPECIFIED;
  std::string submission_id;
  std::string task_id;
  std::string task_version_hash;
  v1::Arch arch = v1::ARCH_UNSPECIFIED;
  v1::SourceLanguage language = v1::SOURCE_LANGUAGE_UNSPECIFIED;
  std::string source;
  std::string launch_plan_json;  // As stored (JSONB: same content, normalized spacing).
  absl::Time lease_expires_at;
  // Evaluate jobs: the compile of the job's round, unless none was stored, its bytes were
  // released or its producer is distrusted.
  std::optional<CompileArtifactRow> artifact;
};

struct HeartbeatResult {
  std::vector<LeaseRef> lost;  // No longer held by this worker.
  std::vector<std::string> cancelled_job_ids;
  bool drain = false;
};

// A job as stored, for admins and tests.
struct JobRow {
  std::string job_id;
  std::string submission_id;
  v1::JobKind kind = v1::JOB_KIND_UNSPECIFIED;
  v1::Arch arch = v1::ARCH_UNSPECIFIED;
  JobState state = JobState::kQueued;
  int attempt = 0;                             // Times leased; the current lease's number.
  std::string worker_id;                       // The current or last holder; empty if never leased.
  std::optional<absl::Time> lease_expires_at;  // Set while leased.
  absl::Time not_before;                       // Not leased before this (retry backoff).
  int infrastructure_attempts = 0;
  std::string last_error;
  absl::Time created_at;
  int round = 0;  // The judging round the job belongs to.
};

// One row of the append-only audit log (every state change of tenants, tokens, workers,
// submissions and jobs).
struct AuditRow {
  int64_t id = 0;
  absl::Time at;
  std::string actor;  // "tenant:acme", "worker:<id>", "admin", "system:reaper".
  AuditEntity entity = AuditEntity::kJob;
  std::string entity_id;
  // The entity's state names as stored (text: an audit row outlives any enum's spelling).
  std::string old_state;  // Empty when the entity was created.
  std::string new_state;
  std::string detail_json;
};

struct QueueDepthRow {
  v1::Arch arch = v1::ARCH_UNSPECIFIED;
  v1::JobKind kind = v1::JOB_KIND_UNSPECIFIED;
  int64_t queued = 0;
  int64_t leased = 0;
  double oldest_age_seconds = 0;
};

// What the store knows of a job whose result is being stored (Store::CompleteJob's check).
struct CompletingJob {
  v1::JobKind kind = v1::JOB_KIND_UNSPECIFIED;
  v1::EvaluationScope scope = v1::EVALUATION_SCOPE_UNSPECIFIED;
  std::string task_id;
  std::string task_version_hash;
  v1::Arch arch = v1::ARCH_UNSPECIFIED;
};
// OK to store the result; otherwise why the result cannot be right for that job
// (INVALID_ARGUMENT, e.g. "a compile job cannot report a speedup").
using ResultCheck = std::function<absl::Status(const CompletingJob& job)>;

// A job's result, with what it carries beside its verdict (Store::CompleteJob).
struct JobCompletion {
  VerdictRow verdict;
  ResultCheck check;  // Empty: none.
  // A compile job whose verdict is COMPILED: its module, for the evaluate job. Stored only
  // when the completion enqueues that job (full scope).
  std::optional<CompileArtifactRow> artifact;
  // An evaluate job whose lease carried an artifact: what its worker did with it.
  std::optional<ArtifactUseReport> artifact_use;
  // The catalog's current version hash of a task, "" when the catalog has none: the verdicts a
  // distrusted producer's artifacts made are re-judged against the tasks as they are now (as
  // Rejudge does; workers hold only the current task files). Unset: no re-judge.
  std::function<std::string(const std::string& task_id)> current_task_version;
};

// What a completion did beside storing its verdict.
struct CompletionResult {
  std::optional<FinishedSubmission> finished;  // When it finished its submission.
  bool artifact_stored = false;
  // The producer this completion's MISMATCH report marked distrusted (empty: none, or it was
  // distrusted before).
  std::string distrusted_worker_id;
  // When the artifact's producer is distrusted (now or before): the finished submissions whose
  // current verdict came from an evaluate job that used one of its artifacts unverified, this
  // completion's own included, re-judged in the same transaction; and those that could not be
  // (their task is no longer in the catalog), for the operator.
  std::vector<std::string> rejudged_submission_ids;
  std::vector<std::string> not_rejudged_submission_ids;
};

class Store {
 public:
  // Connects (pool) without touching the schema.
  static absl::StatusOr<std::unique_ptr<Store>> Connect(const StoreOptions& options);
  virtual ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Applies every NNNN_name.up.sql in `migrations_dir` not yet applied, in order, each in a
  // transaction, under an advisory lock so two servers starting together do not race.
  absl::Status MigrateUp(const std::string& migrations_dir);
  // Reverts the newest `steps` applied migrations with their .down.sql.
  absl::Status MigrateDown(const std::string& migrations_dir, int steps);
  absl::StatusOr<int> SchemaVersion();

  // Tenants and tokens. Secrets are never stored: only sha256(secret), passed as 64 hex digits
  // (either case) or as the 32 raw digest bytes. `actor` names who did it in the audit log
  // (e.g. "admin:<token_id>"; empty means "admin").
  absl::Status CreateTenant(const TenantRow& tenant, const std::string& actor = "");
  absl::StatusOr<std::vector<TenantRow>> ListTenants();
  absl::StatusOr<TenantRow> GetTenant(const std::string& name);
  // token.tenant may be empty for worker and admin tokens; vendor tokens need a tenant.
  absl::Status CreateToken(const TokenRow& token, const std::string& secret_sha256,
                           const std::string& actor = "");
  // Looks a token up by the sha256 of its secret; NOT_FOUND when absent or revoked.
  absl::StatusOr<TokenRow> FindTokenBySecretHash(const std::string& secret_sha256);
  absl::Status RevokeToken(const std::string& token_id, const std::string& actor = "");
  // All tokens ever created, revoked ones included (so revoking every token never makes a
  // restarted server think it is new and mint a bootstrap token).
  absl::StatusOr<int64_t> CountTokens();

  // Submissions. CreateSubmission stores the source (once per hash), the submission, its
  // first job (always a compile job; an evaluate job follows a clean compile unless the scope
  // is compile_only), a "queued" stage event and an audit row in one transaction, then
  // NOTIFYs waiting leasers. A repeated idempotency key returns the first submission.
  absl::StatusOr<SubmissionRow> CreateSubmission(const NewSubmission& submission);
  // Counts the tenant's submissions created in the last minute and those not finished.
  absl::StatusOr<int64_t> CountRecentSubmissions(const std::string& tenant, absl::Duration window);
  absl::StatusOr<int64_t> CountUnfinishedSubmissions(const std::string& tenant);
  // `tenant` empty means any tenant (admins); otherwise NOT_FOUND for other tenants' rows.
  absl::StatusOr<SubmissionRow> GetSubmission(const std::string& id, const std::string& tenant);
  absl::StatusOr<SubmissionPage> ListSubmissions(const SubmissionFilter& filter);
  // Cancels a queued or running submission: its jobs become cancelled (a worker holding one
  // sees it in its next heartbeat's cancelled_job_ids), the submission gets a verdict of
  // class "cancelled" and a "done" event. A finished or cancelled submission is returned
  // unchanged.
  absl::StatusOr<SubmissionRow> CancelSubmission(const std::string& id, const std::string& tenant,
                                                 const std::string& actor = "");
  // Re-judging (migrations/0009_rejudge). Opens a new judging round for every FINISHED
  // submission that matches `filter`, in one transaction: the submission goes back to
  // queued with judging_round + 1, a compile job of that round and a "queued" event are
  // added. Its current verdict stays and is served until the new round's verdict is stored;
  // then the old one moves to superseded_verdicts in the same statement. Results of an older
  // round's lease are refused by the fence. INVALID_ARGUMENT naming the field for an empty
  // task list, an empty task id, a harness version that is not dotted numeric, or a
  // malformed submission id. A re-judge cannot be cancelled (CancelSubmission returns it
  // unchanged): cancelling would let a submitter keep a verdict the new harness may overturn.
  absl::StatusOr<RejudgeResult> Rejudge(const RejudgeFilter& filter, const std::string& actor = "");
  // Marks a submission hacked. ALREADY_EXISTS when it is marked already (the first mark, its
  // reason and author stand), INVALID_ARGUMENT for an empty reason or `by`, NOT_FOUND for an
  // unknown id. Every mark and unmark is in the audit log (actor `by`).
  absl::StatusOr<SubmissionRow> MarkHacked(const std::string& id, const std::string& reason,
                                           const std::string& by);
  // Lifts a mark (a finding proved wrong). FAILED_PRECONDITION when it is not marked.
  absl::StatusOr<SubmissionRow> UnmarkHacked(const std::string& id, const std::string& by);
  // The verdicts later rounds replaced, oldest round first. NOT_FOUND for an unknown id.
  absl::StatusOr<std::vector<SupersededVerdictRow>> ListSupersededVerdicts(const std::string& id);

  // Events with seq > after_seq, oldest first. NOT_FOUND for an unknown submission.
  absl::StatusOr<std::vector<StageEventRow>> ListStageEvents(const std::string& submission_id,
                                                             int64_t after_seq);
  // Appends a notice event (e.g. no worker for the arch) unless an identical one is latest
  // or the submission has finished (a watcher's last event is always "done").
  absl::Status AppendNotice(const std::string& submission_id, const std::string& notice_json);

  // Workers. RegisterWorker upserts on (hostname, gpu_uuid), so a restarted worker gets its id
  // back. The id belongs to registration.token_id. Another token claims it only when it was
  // registered without a token, its token is revoked, or the worker was silent for a lease
  // period (then it holds no live lease); otherwise ABORTED (retry: a rotated worker's id
  // moves once its old process has stopped). The returned row names its token.
  absl::StatusOr<WorkerRow> RegisterWorker(const WorkerRegistration& registration);
  // NOT_FOUND for an unknown id.
  absl::StatusOr<WorkerRow> GetWorker(const std::string& worker_id);
  absl::StatusOr<std::vector<WorkerRow>> ListWorkers();
  absl::StatusOr<WorkerRow> SetWorkerState(const std::string& worker_id, v1::WorkerState state,
                                           const std::string& detail,
                                           const std::string& actor = "");
  // Number of active workers able to run a job of `kind` for `arch` (seen within `recent`).
  absl::StatusOr<int64_t> CountCapableWorkers(v1::Arch arch, v1::JobKind kind,
                                              absl::Duration recent);

  // The queue. LeaseJob takes at most one job the worker may run: compile jobs of any arch
  // for compile-only workers, compile and evaluate jobs of its own arch for GPU workers;
  // oldest first within a fair-share order across tenants (the tenant with the fewest jobs
  // currently leased goes first); FOR UPDATE SKIP LOCKED so concurrent leasers never share a
  // job; jobs whose not_before is in the future are skipped. Returns nullopt when none.
  // NOT_FOUND when the worker is not registered (it should register again).
  absl::StatusOr<std::optional<LeasedJobRow>> LeaseJob(const std::string& worker_id);
  // Extends every lease still held; reports the others in `lost` and those whose submission
  // was cancelled in `cancelled_job_ids`. Also the worker's health report: healthy=false
  // makes it "unhealthy" (no new leases), healthy=true makes an unhealthy or offline worker
  // "active" again; a drain set by an admin stays until an admin lifts it.
  absl::StatusOr<HeartbeatResult> Heartbeat(const std::string& worker_id,
                                            const std::vector<LeaseRef>& leases, bool healthy,
                                            const std::string& health_detail);
  // Fenced by the lease: FAILED_PRECONDITION with a LeaseLostReason (LeaseLostReasonOf) when
  // the lease is not held; its message starts with "lease lost" and says what happened.
  // `stage` is one of COMPILE, CORRECTNESS, TARGET_INSTRUCTIONS, TIMING; result_json is stored
  // as the event's payload ("{}" when empty).
  absl::Status ReportStage(const LeaseRef& lease, v1::Stage stage, const std::string& result_json);
  // Records the verdict of a job. For a compile job of a full-scope submission that
  // compiled, enqueues the evaluate job instead of finishing the submission. Otherwise stores
  // the verdict (exactly once: a second completion is refused by the fence) and appends the
  // "done" event. INVALID_ARGUMENT for verdict classes a worker cannot report
  // (INFRASTRUCTURE_FAILURE and CANCELLED: use FailJob / CancelSubmission) and for COMPILED
  // from an evaluate job. An empty verdict_json stores a minimal one built from the
  // key columns (ptxbench.v1.Verdict JSON).
  absl::Status CompleteJob(const LeaseRef& lease, const VerdictRow& verdict);
  // The same; when the job's completion finished its submission, `*finished` (if not null)
  // says which, with the labels the server's verdict metrics need, so that the caller needs
  // no second query (bench/scheduler_bench: one GetSubmission round trip per job).
  absl::Status CompleteJob(const LeaseRef& lease, const VerdictRow& verdict,
                           std::optional<FinishedSubmission>* finished);
  // The same, with `check` asked (under the fence, before anything is stored) whether the
  // result is one the job could have produced. A refused result stores nothing: the job is
  // requeued as an infrastructure attempt (the lease holder is not trusted with it again;
  // at the cap the submission ends infrastructure_failure), its audit row records the
  // reason, and the call returns INVALID_ARGUMENT "result refused: <reason>".
  absl::Status CompleteJob(const LeaseRef& lease, const VerdictRow& verdict,
                           std::optional<FinishedSubmission>* finished, const ResultCheck& check);
  // The same with a compile artifact or an artifact report (migrations/0010_compile_artifacts),
  // in the same transaction under the same fence. A compile job's artifact is stored for its
  // round's evaluate job; an evaluate job's report is recorded against the artifact of its round
  // and the artifact's bytes are released. A MISMATCH marks the artifact's producer distrusted
  // (audited; none of its artifacts is handed out again) and, whenever the producer is
  // distrusted, the verdicts that used its artifacts unverified are re-judged (a new judging
  // round, as Rejudge opens, reason naming the producer). INVALID_ARGUMENT naming the field: an
  // artifact from an evaluate job or with another verdict class than COMPILED, a digest that is
  // not 64 lower-case hex digits, an empty version; a report from a compile job, or one other
  // than NONE when no artifact of the job's round was stored.
  absl::StatusOr<CompletionResult> CompleteJob(const LeaseRef& lease,
                                               const JobCompletion& completion);
  // kind KERNEL: the submission finishes with a kernel verdict and is never retried: the
  // `kernel_verdict_class` given (one of COMPILE_ERROR, PLAN_INVALID, RUNTIME_ERROR, TIMEOUT,
  // WRONG_RESULT, TARGET_NOT_EXECUTED, INPUT_MUTATED, IMPOSSIBLE_TIME), or by default
  // COMPILE_ERROR for a compile job and RUNTIME_ERROR for an evaluate job.
  // kind INFRASTRUCTURE: requeued with exponential backoff until
  // max_infrastructure_attempts, then finished as INFRASTRUCTURE_FAILURE.
  // Returns whether the job will be retried.
  absl::StatusOr<bool> FailJob(
      const LeaseRef& lease, v1::FailureKind kind, const std::string& reason,
      v1::VerdictClass kernel_verdict_class = v1::VERDICT_CLASS_UNSPECIFIED);
  // Requeues every job whose lease is no longer live (counts as an infrastructure attempt,
  // with the same backoff and cap as FailJob: at the cap the submission finishes as
  // infrastructure_failure). Returns the number of leases taken back; `report`, if not null,
  // says more. Also marks workers offline that were not seen for a lease period (draining
  // ones stay draining).
  //
  // A lease is live until it expires, except where the scheduler was down: each pass stamps
  // the time, and when it finds that no pass ran for longer than options.outage_threshold
  // (a server restart, a database outage), no worker could have renewed its lease meanwhile,
  // so every lease that was live when the gap began gets a full lease period from now, and
  // only those that had expired before the gap are reaped. The fence applies the same rule
  // (migrations/0006_lease_liveness.up.sql), so a lease is refused exactly when it is
  // reapable. Call it at start and then at intervals well below outage_threshold.
  absl::StatusOr<int> ReapExpiredLeases(ReapReport* report = nullptr);
  // Requeues every job leased to `worker_id`, live or not, as an infrastructure attempt: the
  // worker registered again, so it is a new process that holds none of them. Returns how many.
  absl::StatusOr<int> ReleaseWorkerLeases(const std::string& worker_id, const std::string& reason);
  absl::StatusOr<std::vector<QueueDepthRow>> QueueDepths();
  // The jobs of one submission, compile first.
  absl::StatusOr<std::vector<JobRow>> ListJobs(const std::string& submission_id);
  // The audit log of one entity, oldest first.
  absl::StatusOr<std::vector<AuditRow>> ListAuditLog(AuditEntity entity,
                                                     const std::string& entity_id);

  // Blocks up to `timeout` for a NOTIFY on the queue channel on a dedicated connection.
  // Returns true when woken. Polling stays the source of truth; this only shortens waits.
  absl::StatusOr<bool> WaitForQueueChange(absl::Duration timeout);
  // Same for stage events of any submission (watchers re-read their submission's events).
  absl::StatusOr<bool> WaitForEvents(absl::Duration timeout);

  // Race-free variants: read the change counter BEFORE polling the database, then wait for
  // the counter to move past it. A NOTIFY that arrives between the poll and the wait is not
  // lost (with the variants above it costs one timeout). The counters also move when the
  // listening connection is re-established, since notifications may have been missed.
  //   uint64_t seen = store->QueueChangeCount();
  //   if (auto job = store->LeaseJob(id); ...) ...;
  //   store->WaitForQueueChange(seen, absl::Seconds(5));
  uint64_t QueueChangeCount();
  absl::StatusOr<bool> WaitForQueueChange(uint64_t seen, absl::Duration timeout);
  uint64_t EventsChangeCount();
  absl::StatusOr<bool> WaitForEvents(uint64_t seen, absl::Duration timeout);

  // Reachability. The store reconnects by itself: a broken pooled connection is replaced on
  // the next call and the listening connection reconnects with backoff (100 ms doubling to
  // 5 s), after which every waiter of the Wait* calls is woken, since notifications may have
  // been missed. Callers never need to reconnect it; Reconnect() only makes it sooner.
  //
  // The last record (see StoreReachability); no round trip.
  StoreReachability Reachability() const;
  // Asks the database now (one statement on a pooled connection, replaced if dead) and
  // records the answer. UNAVAILABLE when it cannot be reached.
  absl::Status Ping();
  // For a caller that knows the database was just restarted (the embedded PostgreSQL's
  // supervisor): closes every idle pooled connection and re-establishes LISTEN now instead
  // of after the backoff.
  void Reconnect();

 private:
  class Impl;
  struct TakeBack {
    std::string job_id;
    int attempt = 0;
    std::string submission_id;
    std::string reason;
  };
  explicit Store(std::unique_ptr<Impl> impl);
  absl::StatusOr<int> TakeBackLeases(const std::vector<TakeBack>& leases,
                                     const std::string& worker_id, bool only_if_expired,
                                     const std::string& actor);
  std::unique_ptr<Impl> impl_;
};

// The fence's refusal as a status: FAILED_PRECONDITION with `message`, carrying `reason` as
// a payload (which survives copies, not a rewrite of the message).
absl::Status LeaseLostError(LeaseLostReason reason, const std::string& message);
// The reason of a fence refusal; nullopt for any other status.
std::optional<LeaseLostReason> LeaseLostReasonOf(const absl::Status& status);
// Whether `status` is the fence's refusal.
bool IsLeaseLost(const absl::Status& status);
// Whether `status` says a write may or may not have committed: the connection broke while
// its COMMIT (or, outside a transaction, its statement) was in flight, as when the postmaster
// is killed under load. UNKNOWN; only a lookup after the database is back can tell.
bool IsCommitOutcomeUnknown(const absl::Status& status);

}  // namespace ptxbench::store

#endif  // PTXBENCH_SERVER_STORE_STORE_H_
