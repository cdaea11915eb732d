// Internal to server/store: the name of every SQL statement the store runs. The SQL itself,
// with a comment per statement saying why it is written that way, is in queries.cc. Every
// pooled connection prepares all of them (libpqxx prepares lazily, on first use), so each
// operation parses and plans its SQL once per connection, not once per call.
#ifndef PTXBENCH_SERVER_STORE_QUERIES_H_
#define PTXBENCH_SERVER_STORE_QUERIES_H_

#include <string>
#include <vector>

namespace ptxbench::store::internal {

struct NamedStatement {
  std::string name;
  std::string sql;
};

// All statements, each name once.
const std::vector<NamedStatement>& AllStatements();

// Sessions and migrations.
inline constexpr char kSetActor[] = "set_actor";
inline constexpr char kPing[] = "ping";
inline constexpr char kMigrationLock[] = "migration_lock";
inline constexpr char kMigrationCreateTable[] = "migration_create_table";
inline constexpr char kMigrationApplied[] = "migration_applied";
inline constexpr char kMigrationChecksum[] = "migration_checksum";
inline constexpr char kMigrationRecord[] = "migration_record";
inline constexpr char kMigrationForget[] = "migration_forget";
inline constexpr char kSchemaMigrationsExists[] = "schema_migrations_exists";
inline constexpr char kSchemaVersion[] = "schema_version";

// Tenants and tokens.
inline constexpr char kCreateTenant[] = "create_tenant";
inline constexpr char kListTenants[] = "list_tenants";
inline constexpr char kGetTenant[] = "get_tenant";
inline constexpr char kCreateToken[] = "create_token";
inline constexpr char kFindTokenBySecret[] = "find_token_by_secret";
inline constexpr char kRevokeToken[] = "revoke_token";
inline constexpr char kCountTokens[] = "count_tokens";

// Submissions and stage events.
inline constexpr char kUpsertTask[] = "upsert_task";
inline constexpr char kStoreSource[] = "store_source";
inline constexpr char kInsertSubmission[] = "insert_submission";
inline constexpr char kFindSubmissionByIdempotencyKey[] = "find_submission_by_idempotency_key";
inline constexpr char kInsertJob[] = "insert_job";
inline constexpr char kAppendStageEvent[] = "append_stage_event";
inline constexpr char kGetSubmission[] = "get_submission";
inline constexpr char kListSubmissions[] = "list_submissions";
inline constexpr char kCountRecentSubmissions[] = "count_recent_submissions";
inline constexpr char kCountUnfinishedSubmissions[] = "count_unfinished_submissions";
inline constexpr char kLockSubmission[] = "lock_submission";
inline constexpr char kCancelJobs[] = "cancel_jobs";
inline constexpr char kFinishWithVerdict[] = "finish_with_verdict";
inline constexpr char kListStageEvents[] = "list_stage_events";
inline constexpr char kLatestEventMatches[] = "latest_event_matches";

// Workers.
inline constexpr char kRegisterWorker[] = "register_worker";
inline constexpr char kListWorkers[] = "list_workers";
inline constexpr char kGetWorker[] = "get_worker";
inline constexpr char kSetWorkerState[] = "set_worker_state";
inline constexpr char kCountCapableWorkers[] = "count_capable_workers";
inline constexpr char kHeartbeatWorker[] = "heartbeat_worker";
inline constexpr char kExtendLeases[] = "extend_leases";
inline constexpr char kMarkSilentWorkersOffline[] = "mark_silent_workers_offline";

// The queue.
inline constexpr char kLeaseJob[] = "lease_job";
inline constexpr char kLockSubmissionOfJob[] = "lock_submission_of_job";
inline constexpr char kCheckLease[] = "check_lease";
inline constexpr char kDescribeJob[] = "describe_job";
inline constexpr char kFinishLeasedJob[] = "finish_leased_job";
inline constexpr char kLockAndFinishLeasedJob[] = "lock_and_finish_leased_job";
inline constexpr char kRetryLeasedJob[] = "retry_leased_job";
inline constexpr char kFindExpiredLeases[] = "find_expired_leases";
inline constexpr char kReapExpiredLease[] = "reap_expired_lease";
inline constexpr char kLockLiveness[] = "lock_liveness";
inline constexpr char kGrantOutageGrace[] = "grant_outage_grace";
inline constexpr char kMarkSchedulerAlive[] = "mark_scheduler_alive";
inline constexpr char kListLeasesOfWorker[] = "list_leases_of_worker";
inline constexpr char kQueueDepths[] = "queue_depths";
inline constexpr char kListJobs[] = "list_jobs";
inline constexpr char kListAuditLog[] = "list_audit_log";

// Compile artifacts and distrusted workers (migrations/0010_compile_artifacts).
inline constexpr char kInsertCompileArtifact[] = "insert_compile_artifact";
inline constexpr char kCompileArtifactOfJob[] = "compile_artifact_of_job";
inline constexpr char kRecordArtifactUse[] = "record_artifact_use";
inline constexpr char kReleaseCompileArtifact[] = "release_compile_artifact";
inline constexpr char kDistrustWorker[] = "distrust_worker";
inline constexpr char kVerdictsFromDistrustedArtifacts[] = "verdicts_from_distrusted_artifacts";

// Re-judging and hacked marks.
inline constexpr char kRejudge[] = "rejudge";
inline constexpr char kMarkHacked[] = "mark_hacked";
inline constexpr char kUnmarkHacked[] = "unmark_hacked";
inline constexpr char kListSupersededVerdicts[] = "list_superseded_verdicts";

}  // namespace ptxbench::store::internal

#endif  // PTXBENCH_SERVER_STORE_QUERIES_H_
