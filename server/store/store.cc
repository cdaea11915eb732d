// The Store: a transaction runner that maps every libpqxx exception to an absl::Status, and the
// operations of store.h. The SQL is in queries.cc, the connection pool in connection_pool.cc,
// the shared LISTEN connection in notify_listener.cc and the migrations in
// migration_runner.cc; this file decides which statements run in which transaction and
// validates input before it reaches PostgreSQL, so that bad input is INVALID_ARGUMENT naming
// the field.
#include "server/store/store.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <pqxx/pqxx>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status.h"
#include "server/store/connection_pool.h"
#include "server/store/conninfo.h"
#include "server/store/database.h"
#include "server/store/migration_runner.h"
#include "server/store/notify_listener.h"
#include "server/store/pg_error.h"
#include "server/store/queries.h"

namespace ptxbench::store {
namespace {

using internal::ClassifyCurrentException;
using internal::ConnectionPool;
using internal::NotifyListener;
using internal::PgFailure;
namespace q = internal;

// Serialization failures and deadlocks are retried this often (with a short jittered sleep)
// before ABORTED. Under READ COMMITTED and the single lock order they are rare; four tries
// turn a transient conflict into a success without hiding a systematic one.
constexpr int kMaxTransactionAttempts = 4;
// Infrastructure-retry backoff never exceeds this, whatever the base and attempt.
constexpr absl::Duration kMaxRetryBackoff = absl::Minutes(10);
// The type URL of the payload that marks a fence refusal (LeaseLostError).
constexpr char kLeaseLostPayload[] = "type.ptxbench.dev/ptxbench.store.LeaseLost";
// Longest a page of ListSubmissions may be; larger requests are clamped.
constexpr int kMaxPageSize = 500;
constexpr int kDefaultPageSize = 50;

// ---------------------------------------------------------------------------------------
// Enums as text: the only place they are. The wire's enums take their names from
// proto/wire_names.h; the store's own (store.h) from the tables below.

template <typename Enum>
struct NamedValue {
  Enum value;
  const char* name;
};

constexpr NamedValue<JobState> kJobStateNames[] = {{JobState::kQueued, "queued"},
                                                   {JobState::kLeased, "leased"},
                                                   {JobState::kDone, "done"},
                                                   {JobState::kFailed, "failed"},
                                                   {JobState::kCancelled, "cancelled"}};
constexpr NamedValue<EventKind> kEventKindNames[] = {{EventKind::kStage, "stage"},
                                                     {EventKind::kNotice, "notice"}};
constexpr NamedValue<AuditEntity> kAuditEntityNames[] = {{AuditEntity::kTenant, "tenant"},
                                                         {AuditEntity::kToken, "token"},
                                                         {AuditEntity::kWorker, "worker"},
                                                         {AuditEntity::kSubmission, "submission"},
                                                         {AuditEntity::kJob, "job"}};
constexpr NamedValue<LeaseLostReason> kLeaseLostReasonNames[] = {
    {LeaseLostReason::kNoSuchJob, "no_such_job"},
    {LeaseLostReason::kLeasedAgain, "leased_again"},
    {LeaseLostReason::kExpired, "expired"},
    {LeaseLostReason::kCancelled, "cancelled"},
    {LeaseLostReason::kFinished, "finished"}};

template <typename Enum, size_t N>
std::string NameIn(const NamedValue<Enum> (&table)[N], Enum value) {
  for (const auto& entry : table) {
    if (entry.value == value) return entry.name;
  }
  return "";
}

template <typename Enum, size_t N>
absl::StatusOr<Enum> ValueIn(const NamedValue<Enum> (&table)[N], const std::string& name,
                             const char* what) {
  for (const auto& entry : table) {
    if (name == entry.name) return entry.value;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown ", what, " '", name, "'"));
}

// Text(value): the stored name; "" for a value without one (UNSPECIFIED, out of range).
std::string Text(v1::Arch value) { return wire::ArchName(value); }
std::string Text(v1::JobKind value) { return wire::JobKindName(value); }
std::string Text(v1::EvaluationScope value) { return wire::ScopeName(value); }
std::string Text(v1::KnowledgeLevel value) { return wire::KnowledgeLevelName(value); }
std::string Text(v1::SourceLanguage value) { return wire::LanguageName(value); }
std::string Text(v1::Role value) { return wire::RoleName(value); }
std::string Text(v1::SubmissionState value) { return wire::SubmissionStateName(value); }
std::string Text(v1::WorkerState value) { return wire::WorkerStateName(value); }
std::string Text(v1::Stage value) { return wire::StageName(value); }
std::string Text(v1::VerdictClass value) { return wire::VerdictClassName(value); }
std::string Text(v1::ArtifactOutcome value) { return wire::ArtifactOutcomeName(value); }
std::string Text(JobState value) { return NameIn(kJobStateNames, value); }
std::string Text(EventKind value) { return NameIn(kEventKindNames, value); }
std::string Text(AuditEntity value) { return NameIn(kAuditEntityNames, value); }

// FromText(name, tag): the enum a stored name stands for. The tag picks the enum type.
absl::StatusOr<v1::Arch> FromText(const std::string& name, v1::Arch*) {
  return wire::ParseArch(name);
}
absl::StatusOr<v1::JobKind> FromText(const std::string& name, v1::JobKind*) {
  return wire::ParseJobKind(name);
}
absl::StatusOr<v1::EvaluationScope> FromText(const std::string& name, v1::EvaluationScope*) {
  return wire::ParseScope(name);
}
absl::StatusOr<v1::KnowledgeLevel> FromText(const std::string& name, v1::KnowledgeLevel*) {
  return wire::ParseKnowledgeLevel(name);
}
absl::StatusOr<v1::SourceLanguage> FromText(const std::string& name, v1::SourceLanguage*) {
  return wire::ParseLanguage(name);
}
absl::StatusOr<v1::Role> FromText(const std::string& name, v1::Role*) {
  return wire::ParseRole(name);
}
absl::StatusOr<v1::SubmissionState> FromText(const std::string& name, v1::SubmissionState*) {
  return wire::ParseSubmissionState(name);
}
absl::StatusOr<v1::WorkerState> FromText(const std::string& name, v1::WorkerState*) {
  return wire::ParseWorkerState(name);
}
absl::StatusOr<v1::Stage> FromText(const std::string& name, v1::Stage*) {
  return wire::ParseStage(name);
}
absl::StatusOr<v1::VerdictClass> FromText(const std::string& name, v1::VerdictClass*) {
  return wire::ParseVerdictClass(name);
}
absl::StatusOr<JobState> FromText(const std::string& name, JobState*) {
  return ValueIn(kJobStateNames, name, "job state");
}
absl::StatusOr<EventKind> FromText(const std::string& name, EventKind*) {
  return ValueIn(kEventKindNames, name, "event kind");
}
absl::StatusOr<AuditEntity> FromText(const std::string& name, AuditEntity*) {
  return ValueIn(kAuditEntityNames, name, "audit entity");
}

// A column holding an enum's name. The schema's CHECK constraints admit only known names, so
// an unknown one means a newer schema or a damaged row: a conversion error, which the
// transaction runner reports as INTERNAL ("unexpected value from PostgreSQL").
template <typename Enum>
Enum EnumColumn(const pqxx::row& row, const char* column) {
  const std::string text = row[column].as<std::string>();
  absl::StatusOr<Enum> value = FromText(text, static_cast<Enum*>(nullptr));
  if (!value.ok()) {
    throw pqxx::conversion_error(absl::StrCat("column ", column, ": ", value.status().message()));
  }
  return *value;
}

// workers.arch: '' for compile-only workers.
v1::Arch WorkerArchColumn(const pqxx::row& row) {
  if (row["arch"].as<std::string>().empty()) return v1::ARCH_UNSPECIFIED;
  return EnumColumn<v1::Arch>(row, "arch");
}

// The stored name of an input enum, or INVALID_ARGUMENT naming the field.
template <typename Enum>
absl::StatusOr<std::string> RequireText(const char* field, Enum value) {
  std::string text = Text(value);
  if (text.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", static_cast<int>(value),
                                                   " is not a value the store accepts here"));
  }
  return text;
}

bool IsReportableStage(v1::Stage stage) {
  return stage == v1::STAGE_COMPILE || stage == v1::STAGE_CORRECTNESS ||
         stage == v1::STAGE_TARGET_INSTRUCTIONS || stage == v1::STAGE_TIMING;
}

// A kernel failure without a verdict ends the submission with one of these.
bool IsKernelFailureClass(v1::VerdictClass verdict_class) {
  switch (verdict_class) {
    case v1::VERDICT_CLASS_COMPILE_ERROR:
    case v1::VERDICT_CLASS_PLAN_INVALID:
    case v1::VERDICT_CLASS_RUNTIME_ERROR:
    case v1::VERDICT_CLASS_TIMEOUT:
    case v1::VERDICT_CLASS_WRONG_RESULT:
    case v1::VERDICT_CLASS_TARGET_NOT_EXECUTED:
    case v1::VERDICT_CLASS_INPUT_MUTATED:
    case v1::VERDICT_CLASS_IMPOSSIBLE_TIME:
      return true;
    default:
      return false;
  }
}

bool IsUuid(const std::string& text) {
  if (text.size() != 36) return false;
  for (size_t i = 0; i < text.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? text[i] != '-' : !std::isxdigit(static_cast<unsigned char>(text[i]))) {
      return false;
    }
  }
  return true;
}

absl::Status CheckUuid(const char* field, const std::string& value) {
  if (IsUuid(value)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, " '", value, "' is not a UUID (8-4-4-4-12 hex digits)"));
}

absl::Status CheckLeaseRef(const LeaseRef& lease) {
  RETURN_IF_ERROR(CheckUuid("job_id", lease.job_id));
  RETURN_IF_ERROR(CheckUuid("worker_id", lease.worker_id));
  if (lease.attempt <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "attempt ", lease.attempt, " is not a lease attempt (leases are numbered from 1)"));
  }
  return absl::OkStatus();
}

bool MatchesPattern(const std::string& text, size_t max_size, bool allow_upper) {
  if (text.empty() || text.size() > max_size) return false;
  for (char c : text) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
                    (allow_upper && c >= 'A' && c <= 'Z');
    if (!ok) return false;
  }
  return true;
}

absl::Status CheckTenantName(const std::string& name) {
  if (MatchesPattern(name, 64, false)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("tenant name '", name, "' must match [a-z0-9_-]{1,64}"));
}

// Accepts the sha256 of a secret as 64 hex digits (either case) or as 32 raw bytes and
// returns lower-case hex, the stored form. Both are accepted because both are natural outputs
// of a sha256 routine, and neither can be mistaken for the other (different lengths).
absl::StatusOr<std::string> NormalizeSha256(const std::string& digest) {
  static constexpr char kHex[] = "0123456789abcdef";
  if (digest.size() == 32) {
    std::string hex;
    for (unsigned char c : digest) {
      hex += kHex[c >> 4];
      hex += kHex[c & 15];
    }
    return hex;
  }
  if (digest.size() == 64) {
    std::string hex;
    for (char c : digest) {
      if (!std::isxdigit(static_cast<unsigned char>(c))) break;
      hex += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    if (hex.size() == 64) return hex;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("secret_sha256 must be a sha256 digest: 64 hex digits or 32 bytes (got ",
                   digest.size(), " bytes)"));
}

int64_t Micros(absl::Duration duration) { return absl::ToInt64Microseconds(duration); }

absl::Time TimeFromMicros(const pqxx::field& field) {
  return absl::FromUnixMicros(field.as<int64_t>());
}

std::string Actor(const std::string& given, const std::string& fallback) {
  return given.empty() ? fallback : given;
}

std::string WorkerActor(const std::string& worker_id) { return "worker:" + worker_id; }

// A JSON string literal (for the store's own notice payloads).
std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          static constexpr char kHex[] = "0123456789abcdef";
          out += "\\u00";
          out += kHex[(c >> 4) & 15];
          out += kHex[c & 15];
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string NoticeJson(const std::string& notice) {
  return absl::StrCat("{\"notice\": ", JsonString(notice), "}");
}

// ---------------------------------------------------------------------------------------
// Row conversion.

// The verdict columns shared by verdicts and superseded_verdicts (get_submission and
// list_superseded_verdicts); the round is `round_column` (the submission query renames it).
VerdictRow VerdictColumns(const pqxx::row& row, const char* round_column = "round") {
  VerdictRow verdict;
  verdict.verdict_class = EnumColumn<v1::VerdictClass>(row, "verdict_class");
  verdict.compiled = row["compiled"].as<bool>();
  verdict.correct = row["correct"].as<bool>();
  verdict.target_executed = row["target_executed"].as<bool>();
  verdict.tic = row["tic"].as<bool>();
  verdict.speedup = row["speedup"].as<double>();
  verdict.runtime_unverified = row["runtime_unverified"].as<bool>();
  verdict.message = row["message"].as<std::string>();
  verdict.verdict_json = row["verdict_json"].as<std::string>();
  verdict.finished_at = TimeFromMicros(row["verdict_finished_us"]);
  verdict.round = row[round_column].as<int>();
  return verdict;
}

SubmissionRow SubmissionFromRow(const pqxx::row& row) {
  SubmissionRow out;
  out.id = row["id"].as<std::string>();
  out.tenant = row["tenant"].as<std::string>();
  out.task_id = row["task_id"].as<std::string>();
  out.task_version_hash = row["task_version_hash"].as<std::string>();
  out.arch = EnumColumn<v1::Arch>(row, "arch");
  out.language = EnumColumn<v1::SourceLanguage>(row, "language");
  out.source_sha256 = row["source_sha256"].as<std::string>();
  out.model = row["model"].as<std::string>();
  out.session_id = row["session_id"].as<std::string>();
  out.turn_index = row["turn_index"].as<int>();
  out.knowledge_level = EnumColumn<v1::KnowledgeLevel>(row, "knowledge_level");
  out.scope = EnumColumn<v1::EvaluationScope>(row, "scope");
  out.state = EnumColumn<v1::SubmissionState>(row, "state");
  out.stage = EnumColumn<v1::Stage>(row, "stage");
  out.created_at = TimeFromMicros(row["created_us"]);
  if (!row["verdict_class"].is_null()) out.verdict = VerdictColumns(row, "verdict_round");
  out.judging_round = row["judging_round"].as<int>();
  if (!row["hacked_us"].is_null()) {
    HackedMark mark;
    mark.reason = row["hacked_reason"].as<std::string>();
    mark.by = row["hacked_by"].as<std::string>();
    mark.at = TimeFromMicros(row["hacked_us"]);
    out.hacked = std::move(mark);
  }
  out.superseded_verdicts = row["superseded_count"].as<int>();
  return out;
}

// A dotted numeric version ("0.9.1"): what harness_older_than (migrations/0009_rejudge)
// compares part by part. Anything else would make that comparison fail, which the SQL
// function treats as "older", so a typo would re-judge every verdict: refused here instead.
bool IsDottedVersion(const std::string& version) {
  if (version.empty() || version.size() > 64) return false;
  bool digit_before = false;
  for (const char c : version) {
    if (c >= '0' && c <= '9') {
      digit_before = true;
    } else if (c == '.' && digit_before) {
      digit_before = false;
    } else {
      return false;
    }
  }
  return digit_before;
}

std::string JsonArray(const std::vector<std::string>& items) {
  std::vector<std::string> quoted;
  quoted.reserve(items.size());
  for (const std::string& item : items) quoted.push_back(JsonString(item));
  return absl::StrCat("[", absl::StrJoin(quoted, ","), "]");
}

// The filter of a re-judge checked (INVALID_ARGUMENT naming the field), and its task version
// hashes as the JSON object kRejudge reads ($5).
absl::StatusOr<std::string> CheckedRejudgeHashes(const RejudgeFilter& filter) {
  if (filter.task_ids.empty()) {
    return absl::InvalidArgumentError("task_ids: name at least one task to re-judge");
  }
  std::string hashes = "{";
  for (const std::string& task_id : filter.task_ids) {
    if (task_id.empty()) return absl::InvalidArgumentError("task_ids: a task id is empty");
    auto hash = filter.task_version_hashes.find(task_id);
    if (hash == filter.task_version_hashes.end() || hash->second.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("task_version_hashes: no current version hash for task '", task_id, "'"));
    }
    absl::StrAppend(&hashes, hashes.size() > 1 ? ", " : "", JsonString(task_id), ": ",
                    JsonString(hash->second));
  }
  hashes += "}";
  if (!filter.harness_older_than.empty() && !IsDottedVersion(filter.harness_older_than)) {
    return absl::InvalidArgumentError(
        absl::StrCat("harness_older_than '", filter.harness_older_than,
                     "' is not a dotted numeric version such as 0.9.1"));
  }
  for (const std::string& id : filter.submission_ids) {
    RETURN_IF_ERROR(CheckUuid("submission_ids", id));
  }
  return hashes;
}

// Opens the new judging rounds of a checked filter in the caller's transaction; the ids
// re-queued, in arrival order.
std::vector<std::string> RejudgeIn(pqxx::work& tx, const RejudgeFilter& filter,
                                   const std::string& hashes) {
  for (const std::string& task_id : filter.task_ids) {
    tx.exec_prepared(q::kUpsertTask, task_id, filter.task_version_hashes.at(task_id));
  }
  std::vector<std::string> ids;
  for (const pqxx::row& row :
       tx.exec_prepared(q::kRejudge, JsonArray(filter.task_ids), filter.harness_older_than,
                        JsonArray(filter.submission_ids), filter.reason, hashes)) {
    ids.push_back(row["id"].as<std::string>());
  }
  return ids;
}

bool IsSha256Hex(const std::string& text) {
  return text.size() == 64 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// A compile artifact the store can keep: its digests well-formed and its versions named (the
// API checked that the bytes hash to the digests).
absl::Status CheckArtifactRow(const CompileArtifactRow& artifact, const VerdictRow& verdict) {
  if (verdict.verdict_class != v1::VERDICT_CLASS_COMPILED) {
    return absl::InvalidArgumentError(
        absl::StrCat("artifact: only a compile job whose verdict is compiled carries one (the "
                     "verdict is ",
                     Text(verdict.verdict_class), ")"));
  }
  if (!IsSha256Hex(artifact.cubin_sha256)) {
    return absl::InvalidArgumentError("artifact.cubin_sha256: not 64 lower-case hex digits");
  }
  if (!IsSha256Hex(artifact.ptx_sha256)) {
    return absl::InvalidArgumentError("artifact.ptx_sha256: not 64 lower-case hex digits");
  }
  for (const auto& [field, value] :
       {std::pair<const char*, const std::string*>{"nvrtc_version", &artifact.nvrtc_version},
        {"ptxas_version", &artifact.ptxas_version},
        {"harness_version", &artifact.harness_version},
        {"compile_event_json", &artifact.compile_event_json}}) {
    if (value->empty())
      return absl::InvalidArgumentError(absl::StrCat("artifact.", field, ": empty"));
  }
  return absl::OkStatus();
}

CompileArtifactRow CompileArtifactFromRow(const pqxx::row& row) {
  CompileArtifactRow out;
  out.cubin = pqxx::binarystring(row["cubin"]).str();
  out.ptx = pqxx::binarystring(row["ptx"]).str();
  out.compile_event_json = row["compile_event"].as<std::string>();
  out.cubin_sha256 = row["cubin_sha256"].as<std::string>();
  out.ptx_sha256 = row["ptx_sha256"].as<std::string>();
  out.nvrtc_version = row["nvrtc_version"].as<std::string>();
  out.ptxas_version = row["ptxas_version"].as<std::string>();
  out.harness_version = row["harness_version"].as<std::string>();
  out.producer_job_id = row["producer_job_id"].as<std::string>();
  out.producer_worker_id = row["producer_worker_id"].as<std::string>();
  return out;
}

WorkerRow WorkerFromRow(const pqxx::row& row) {
  WorkerRow out;
  out.worker_id = row["worker_id"].as<std::string>();
  out.registration.hostname = row["hostname"].as<std::string>();
  out.registration.arch = WorkerArchColumn(row);
  out.registration.gpu_name = row["gpu_name"].as<std::string>();
  out.registration.gpu_uuid = row["gpu_uuid"].as<std::string>();
  out.registration.compile_only = row["compile_only"].as<bool>();
  out.registration.identity_json = row["identity_json"].as<std::string>();
  out.registration.token_id = row["token_id"].as<std::string>();
  out.state = EnumColumn<v1::WorkerState>(row, "state");
  out.health_detail = row["health_detail"].as<std::string>();
  out.last_seen = TimeFromMicros(row["last_seen_us"]);
  out.jobs_held = row["jobs_held"].as<int>();
  return out;
}

TenantRow TenantFromRow(const pqxx::row& row) {
  TenantRow out;
  out.name = row["name"].as<std::string>();
  out.submissions_per_minute = row["submissions_per_minute"].as<int>();
  out.max_queued = row["max_queued"].as<int>();
  out.created_at = TimeFromMicros(row["created_us"]);
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------

class Store::Impl {
 public:
  Impl(const StoreOptions& options, const std::string& conninfo)
      : options_(options),
        pool_(conninfo, ConnectionPool::Options{options.pool_size}),
        listener_(conninfo) {}

  const StoreOptions& options() const { return options_; }
  NotifyListener& listener() { return listener_; }
  ConnectionPool& pool() { return pool_; }

  // Runs `fn(tx)` in one READ COMMITTED transaction on a pooled connection and commits when
  // it returns OK (rolls back otherwise). `actor` is recorded by the audit triggers.
  // Serialization failures and deadlocks rerun the whole function (so `fn` must assign its
  // outputs, not append to them); a connection that broke while BEGIN was being sent is
  // replaced and the transaction rerun once, since nothing can have happened yet (the common
  // case after a database restart: every idle pooled connection is dead).
  template <typename Fn>
  absl::Status Transact(const std::string& operation, const std::string& actor, Fn&& fn) {
    return Run<pqxx::work>(operation, actor, std::forward<Fn>(fn));
  }

  // Runs `fn(tx)` without BEGIN/COMMIT: each statement is its own implicit transaction. Only
  // for operations of ONE statement, which PostgreSQL then runs atomically in a single round
  // trip instead of three (BEGIN, statement, COMMIT), or four with the actor. Writes that need
  // an audit actor set it inside the statement (see kLeaseJob). A connection found dead is
  // replaced and the operation rerun once even if the statement may have run: reads are
  // idempotent, and a lease taken by a statement whose answer was lost expires and is
  // requeued by the reaper like any lost lease.
  template <typename Fn>
  absl::Status AutoCommit(const std::string& operation, Fn&& fn) {
    return Run<pqxx::nontransaction>(operation, "", std::forward<Fn>(fn));
  }

  // Transact and AutoCommit: the retry loop, for either kind of pqxx transaction.
  template <typename Tx, typename Fn>
  absl::Status Run(const std::string& operation, const std::string& actor, Fn&& fn) {
    constexpr bool kExplicitTransaction = std::is_same_v<Tx, pqxx::work>;
    bool replaced_dead_connection = false;
    for (int attempt = 1;; ++attempt) {
      auto connection = pool_.Acquire();
      if (!connection.ok()) return Annotate(connection.status(), operation);
      absl::Status status;
      PgFailure failure;
      bool began = false;
      try {
        Tx tx(connection->get());
        began = kExplicitTransaction;
        if (!actor.empty()) tx.exec_prepared(q::kSetActor, actor);
        status = fn(tx);
        if (status.ok()) tx.commit();
      } catch (...) {
        failure = ClassifyCurrentException(operation);
        status = failure.status;
      }
      const bool lost = failure.connection_lost || !connection->is_open();
      if (lost) {
        connection->Discard(status);
        if (!began && !replaced_dead_connection) {
          replaced_dead_connection = true;
          --attempt;
          continue;
        }
      } else {
        pool_.RecordReachable();
      }
      if (failure.retryable && attempt < kMaxTransactionAttempts) {
        thread_local std::minstd_rand random(std::random_device{}());
        std::this_thread::sleep_for(
            std::chrono::milliseconds(int64_t{5} * attempt + random() % 20));
        continue;
      }
      if (failure.retryable) {
        return absl::AbortedError(absl::StrCat(status.message(), " (gave up after ",
                                               kMaxTransactionAttempts, " attempts)"));
      }
      return status;
    }
  }

  // The fence's refusal (LeaseLostError): its typed reason for the caller, and a message
  // that starts with "lease lost" and says what happened, so that a worker's log explains
  // itself.
  absl::Status LeaseLost(pqxx::work& tx, const LeaseRef& lease) {
    pqxx::result job = tx.exec_prepared(q::kDescribeJob, lease.job_id);
    if (job.empty()) {
      return LeaseLostError(LeaseLostReason::kNoSuchJob,
                            absl::StrCat("lease lost: job ", lease.job_id, " does not exist"));
    }
    const JobState state = EnumColumn<JobState>(job[0], "state");
    const int attempt = job[0]["attempt"].as<int>();
    const std::string holder = job[0]["worker_id"].as<std::string>();
    LeaseLostReason reason;
    std::string why;
    if (attempt != lease.attempt || holder != lease.worker_id) {
      reason = LeaseLostReason::kLeasedAgain;
      why = absl::StrCat("the job was leased again (attempt ", attempt, ", worker ", holder, ")");
    } else if (state == JobState::kCancelled) {
      reason = LeaseLostReason::kCancelled;
      why = "its submission was cancelled";
    } else if (state == JobState::kQueued) {
      reason = LeaseLostReason::kExpired;
      why = "the lease expired and the job was queued again";
    } else if (state == JobState::kLeased) {
      reason = LeaseLostReason::kExpired;
      why = absl::StrCat("the lease expired ",
                         absl::FormatDuration(absl::Seconds(job[0]["expired_s"].as<double>())),
                         " ago and was not renewed in time");
    } else {
      reason = LeaseLostReason::kFinished;
      why = absl::StrCat("the job is already ", Text(state));
    }
    return LeaseLostError(reason,
                          absl::StrCat("lease lost: job ", lease.job_id, " attempt ", lease.attempt,
                                       " of worker ", lease.worker_id, ": ", why));
  }

  // Finishes a locked, unfinished submission: state, verdict row and "done" event, in the
  // caller's transaction. `finished`, when not null, receives the submission's labels.
  absl::Status FinishWithVerdict(pqxx::work& tx, const std::string& submission_id,
                                 const std::string& job_id, const VerdictRow& verdict,
                                 v1::SubmissionState state,
                                 std::optional<FinishedSubmission>* finished = nullptr) {
    pqxx::result rows = tx.exec_prepared(
        q::kFinishWithVerdict, submission_id, Text(state), job_id, Text(verdict.verdict_class),
        verdict.compiled, verdict.correct, verdict.target_executed, verdict.tic, verdict.speedup,
        verdict.runtime_unverified, verdict.message, verdict.verdict_json);
    if (rows.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("submission ", submission_id, " has already finished"));
    }
    if (finished != nullptr) {
      FinishedSubmission& out = finished->emplace();
      out.id = rows[0]["id"].as<std::string>();
      out.tenant = rows[0]["tenant"].as<std::string>();
      out.model = rows[0]["model"].as<std::string>();
      out.task_id = rows[0]["task_id"].as<std::string>();
      out.arch = EnumColumn<v1::Arch>(rows[0], "arch");
      out.verdict_class = verdict.verdict_class;
      out.speedup = verdict.speedup;
    }
    return absl::OkStatus();
  }

  // The retry decision of retry_leased_job / reap_expired_lease, applied: a notice for a
  // retry, an infrastructure_failure verdict when the cap is reached. Returns whether the job
  // will run again.
  absl::StatusOr<bool> AfterInfrastructureFailure(pqxx::work& tx, const pqxx::row& job,
                                                  const std::string& submission_id,
                                                  const std::string& job_id,
                                                  const std::string& reason) {
    const int failures = job["infrastructure_attempts"].as<int>();
    const int cap = options_.max_infrastructure_attempts;
    if (EnumColumn<JobState>(job, "state") == JobState::kQueued) {
      tx.exec_prepared1(q::kAppendStageEvent, submission_id, Text(EventKind::kNotice), "",
                        NoticeJson(absl::StrCat("infrastructure failure (", failures, " of ", cap,
                                                "): ", reason, "; the job will be retried")));
      return true;
    }
    VerdictRow verdict;
    verdict.verdict_class = v1::VERDICT_CLASS_INFRASTRUCTURE_FAILURE;
    verdict.compiled = EnumColumn<v1::JobKind>(job, "kind") == v1::JOB_KIND_EVALUATE;
    verdict.message =
        absl::StrCat("gave up after ", failures, " infrastructure failures; the last: ", reason);
    RETURN_IF_ERROR(
        FinishWithVerdict(tx, submission_id, job_id, verdict, v1::SUBMISSION_STATE_FINISHED));
    return false;
  }

  // An evaluate job's completion, for the artifact of its round (CompleteJob): the worker's
  // report recorded, the bytes released, the producer distrusted on a MISMATCH, and while the
  // producer is distrusted the verdicts that used its artifacts unverified re-judged.
  // `use_outcome`: the report's stored name, empty without a report.
  absl::Status SettleArtifact(pqxx::work& tx, const LeaseRef& lease,
                              const std::string& submission_id, const JobCompletion& completion,
                              const std::string& use_outcome, CompletionResult* result) {
    std::string producer;
    if (completion.artifact_use.has_value()) {
      const ArtifactUseReport& use = *completion.artifact_use;
      pqxx::result recorded = tx.exec_prepared(q::kRecordArtifactUse, lease.job_id, lease.worker_id,
                                               use_outcome, use.detail);
      if (!recorded.empty()) {
        producer = recorded[0]["producer_worker_id"].as<std::string>();
      } else if (use.outcome != v1::ARTIFACT_OUTCOME_NONE) {
        return absl::InvalidArgumentError(
            absl::StrCat("artifact_use: reports ", use_outcome,
                         ", but no compile artifact of this job's judging round was stored"));
      }
    }
    tx.exec_prepared(q::kReleaseCompileArtifact, lease.job_id);
    if (producer.empty()) return absl::OkStatus();
    if (completion.artifact_use->outcome == v1::ARTIFACT_OUTCOME_MISMATCH) {
      const std::string reason =
          absl::StrCat("its compile artifact failed verification: worker ", lease.worker_id,
                       " compiled submission ", submission_id, " itself (evaluate job ",
                       lease.job_id, ") and got another module");
      const std::string detail =
          absl::StrCat("{\"evaluate_job_id\": ", JsonString(lease.job_id),
                       ", \"submission_id\": ", JsonString(submission_id),
                       ", \"reporter_worker_id\": ", JsonString(lease.worker_id),
                       ", \"report\": ", JsonString(completion.artifact_use->detail), "}");
      if (!tx.exec_prepared(q::kDistrustWorker, producer, reason, detail).empty()) {
        result->distrusted_worker_id = producer;
      }
    }
    pqxx::result tainted = tx.exec_prepared(q::kVerdictsFromDistrustedArtifacts, producer);
    if (tainted.empty() || !completion.current_task_version) return absl::OkStatus();
    RejudgeFilter filter;
    filter.reason = absl::StrCat("the compile artifacts of worker ", producer,
                                 " are distrusted; verdicts that used one unverified are judged "
                                 "again");
    for (const pqxx::row& row : tainted) {
      const std::string id = row["id"].as<std::string>();
      const std::string task_id = row["task_id"].as<std::string>();
      const std::string hash = completion.current_task_version(task_id);
      if (hash.empty()) {
        result->not_rejudged_submission_ids.push_back(id);
        continue;
      }
      if (filter.task_version_hashes.emplace(task_id, hash).second) {
        filter.task_ids.push_back(task_id);
      }
      filter.submission_ids.push_back(id);
    }
    if (filter.submission_ids.empty()) return absl::OkStatus();
    ASSIGN_OR_RETURN(const std::string hashes, CheckedRejudgeHashes(filter));
    result->rejudged_submission_ids = RejudgeIn(tx, filter, hashes);
    return absl::OkStatus();
  }

 private:
  const StoreOptions options_;
  ConnectionPool pool_;
  NotifyListener listener_;
};

Store::Store(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Store::~Store() = default;

std::string JobStateName(JobState state) { return Text(state); }
std::string EventKindName(EventKind kind) { return Text(kind); }
std::string AuditEntityName(AuditEntity entity) { return Text(entity); }
std::string LeaseLostReasonName(LeaseLostReason reason) {
  return NameIn(kLeaseLostReasonNames, reason);
}

absl::Status LeaseLostError(LeaseLostReason reason, const std::string& message) {
  absl::Status status = absl::FailedPreconditionError(message);
  status.SetPayload(kLeaseLostPayload, absl::Cord(LeaseLostReasonName(reason)));
  return status;
}

std::optional<LeaseLostReason> LeaseLostReasonOf(const absl::Status& status) {
  if (!absl::IsFailedPrecondition(status)) return std::nullopt;
  auto payload = status.GetPayload(kLeaseLostPayload);  // absl::optional here.
  if (!payload.has_value()) return std::nullopt;
  absl::StatusOr<LeaseLostReason> reason =
      ValueIn(kLeaseLostReasonNames, std::string(*payload), "lease lost reason");
  if (!reason.ok()) return std::nullopt;
  return *reason;
}

bool IsLeaseLost(const absl::Status& status) { return LeaseLostReasonOf(status).has_value(); }

bool IsCommitOutcomeUnknown(const absl::Status& status) {
  return absl::IsUnknown(status) && status.GetPayload(internal::kOutcomeUnknownPayload).has_value();
}

absl::StatusOr<std::unique_ptr<Store>> Store::Connect(const StoreOptions& options) {
  if (options.pool_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("pool_size must be at least 1 (got ", options.pool_size, ")"));
  }
  if (options.lease_duration < absl::Milliseconds(1)) {
    return absl::InvalidArgumentError("lease_duration must be at least 1 ms");
  }
  if (options.max_infrastructure_attempts < 1) {
    return absl::InvalidArgumentError("max_infrastructure_attempts must be at least 1");
  }
  if (options.outage_threshold < absl::Milliseconds(1)) {
    return absl::InvalidArgumentError("outage_threshold must be at least 1 ms");
  }
  if (options.retry_backoff_base < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("retry_backoff_base must not be negative");
  }
  // fallback_application_name names our sessions in pg_stat_activity unless the URL names
  // them; connect_timeout bounds a connection attempt to an unreachable host, which libpq
  // would otherwise wait on for as long as the kernel's TCP timeout (minutes). The keepalive
  // settings make a peer that vanished without closing the connection (a crashed database
  // host) an error within about a minute instead of the kernel's default two hours: the
  // listening connection only ever reads, and would otherwise wait on a dead socket.
  ASSIGN_OR_RETURN(std::string conninfo,
                   internal::RewriteConninfo(options.database_url,
                                             {{"fallback_application_name", "ptxbench-server"},
                                              {"connect_timeout", "10", true},
                                              {"keepalives_idle", "30", true},
                                              {"keepalives_interval", "10", true},
                                              {"keepalives_count", "3", true}}));
  auto impl = std::make_unique<Impl>(options, conninfo);
  // Fail fast on a wrong URL or an unreachable server: one connection now, kept in the pool.
  RETURN_IF_ERROR(impl->pool().Acquire().status());
  return std::unique_ptr<Store>(new Store(std::move(impl)));
}

// ---------------------------------------------------------------------------------------
// Migrations (migration_runner.cc).

absl::Status Store::MigrateUp(const std::string& migrations_dir) {
  return internal::MigrationRunner(&impl_->pool()).Up(migrations_dir);
}

absl::Status Store::MigrateDown(const std::string& migrations_dir, int steps) {
  return internal::MigrationRunner(&impl_->pool()).Down(migrations_dir, steps);
}

absl::StatusOr<int> Store::SchemaVersion() {
  return internal::MigrationRunner(&impl_->pool()).Version();
}

// ---------------------------------------------------------------------------------------
// Tenants and tokens.

absl::Status Store::CreateTenant(const TenantRow& tenant, const std::string& actor) {
  RETURN_IF_ERROR(CheckTenantName(tenant.name));
  if (tenant.submissions_per_minute < 0 || tenant.max_queued < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("tenant '", tenant.name,
                     "': submissions_per_minute and max_queued must be >= 0 (0 = default)"));
  }
  return impl_->Transact("CreateTenant", Actor(actor, "admin"), [&](pqxx::work& tx) {
    tx.exec_prepared(q::kCreateTenant, tenant.name, tenant.submissions_per_minute,
                     tenant.max_queued);
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<TenantRow>> Store::ListTenants() {
  std::vector<TenantRow> tenants;
  RETURN_IF_ERROR(impl_->Transact("ListTenants", "", [&](pqxx::work& tx) {
    tenants.clear();
    for (const pqxx::row& row : tx.exec_prepared(q::kListTenants)) {
      tenants.push_back(TenantFromRow(row));
    }
    return absl::OkStatus();
  }));
  return tenants;
}

absl::StatusOr<TenantRow> Store::GetTenant(const std::string& name) {
  TenantRow tenant;
  RETURN_IF_ERROR(impl_->Transact("GetTenant", "", [&](pqxx::work& tx) {
    pqxx::result rows = tx.exec_prepared(q::kGetTenant, name);
    if (rows.empty()) {
      return absl::NotFoundError(absl::StrCat("tenant '", name, "' does not exist"));
    }
    tenant = TenantFromRow(rows[0]);
    return absl::OkStatus();
  }));
  return tenant;
}

absl::Status Store::CreateToken(const TokenRow& token, const std::string& secret_sha256,
                                const std::string& actor) {
  if (!MatchesPattern(token.token_id, 64, true)) {
    return absl::InvalidArgumentError(
        absl::StrCat("token_id '", token.token_id, "' must match [A-Za-z0-9_-]{1,64}"));
  }
  ASSIGN_OR_RETURN(const std::string role, RequireText("role", token.role));
  if (token.role == v1::ROLE_VENDOR && token.tenant.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("token '", token.token_id, "': a vendor token needs a tenant"));
  }
  if (token.revoked) {
    return absl::InvalidArgumentError(
        absl::StrCat("token '", token.token_id, "': cannot create a revoked token"));
  }
  ASSIGN_OR_RETURN(std::string digest, NormalizeSha256(secret_sha256));
  return impl_->Transact("CreateToken", Actor(actor, "admin"), [&](pqxx::work& tx) {
    if (!token.tenant.empty() && tx.exec_prepared(q::kGetTenant, token.tenant).empty()) {
      return absl::NotFoundError(
          absl::StrCat("token '", token.token_id, "': tenant '", token.tenant, "' does not exist"));
    }
    tx.exec_prepared(q::kCreateToken, token.token_id, token.tenant, role, token.description,
                     digest);
    return absl::OkStatus();
  });
}

absl::StatusOr<TokenRow> Store::FindTokenBySecretHash(const std::string& secret_sha256) {
  ASSIGN_OR_RETURN(std::string digest, NormalizeSha256(secret_sha256));
  TokenRow token;
  RETURN_IF_ERROR(impl_->AutoCommit("FindTokenBySecretHash", [&](pqxx::nontransaction& tx) {
    pqxx::result rows = tx.exec_prepared(q::kFindTokenBySecret, digest);
    if (rows.empty()) return absl::NotFoundError("no active token has this secret");
    token.token_id = rows[0]["token_id"].as<std::string>();
    token.tenant = rows[0]["tenant"].as<std::string>();
    token.role = EnumColumn<v1::Role>(rows[0], "role");
    token.description = rows[0]["description"].as<std::string>();
    token.revoked = rows[0]["revoked"].as<bool>();
    return absl::OkStatus();
  }));
  return token;
}

absl::Status Store::RevokeToken(const std::string& token_id, const std::string& actor) {
  return impl_->Transact("RevokeToken", Actor(actor, "admin"), [&](pqxx::work& tx) {
    if (tx.exec_prepared(q::kRevokeToken, token_id).empty()) {
      return absl::NotFoundError(absl::StrCat("token '", token_id, "' does not exist"));
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<int64_t> Store::CountTokens() {
  int64_t count = 0;
  RETURN_IF_ERROR(impl_->Transact("CountTokens", "", [&](pqxx::work& tx) {
    count = tx.exec_prepared1(q::kCountTokens)[0].as<int64_t>();
    return absl::OkStatus();
  }));
  return count;
}

// ---------------------------------------------------------------------------------------
// Submissions.

absl::StatusOr<SubmissionRow> Store::CreateSubmission(const NewSubmission& submission) {
  RETURN_IF_ERROR(CheckTenantName(submission.tenant));
  if (submission.task_id.empty() || submission.task_version_hash.empty()) {
    return absl::InvalidArgumentError("task_id and task_version_hash are required");
  }
  ASSIGN_OR_RETURN(const std::string arch, RequireText("arch", submission.arch));
  ASSIGN_OR_RETURN(const std::string language, RequireText("language", submission.language));
  ASSIGN_OR_RETURN(const std::string knowledge_level,
                   RequireText("knowledge_level", submission.knowledge_level));
  // types.proto: EVALUATION_SCOPE_UNSPECIFIED is treated as FULL (wire::ScopeName).
  ASSIGN_OR_RETURN(const std::string scope, RequireText("scope", submission.scope));
  if (submission.source.empty()) return absl::InvalidArgumentError("source is empty");
  if (submission.source.find('\0') != std::string::npos) {
    // PostgreSQL text cannot hold NUL; neither NVRTC nor ptxas would accept it either.
    return absl::InvalidArgumentError("source contains a NUL byte");
  }
  if (submission.turn_index < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("turn_index must be >= 0 (got ", submission.turn_index, ")"));
  }
  if (submission.idempotency_key.size() > 256) {
    return absl::InvalidArgumentError("idempotency_key is longer than 256 bytes");
  }
  const std::string actor = "tenant:" + submission.tenant;
  SubmissionRow row;
  RETURN_IF_ERROR(impl_->Transact("CreateSubmission", actor, [&](pqxx::work& tx) {
    if (tx.exec_prepared(q::kGetTenant, submission.tenant).empty()) {
      return absl::NotFoundError(absl::StrCat("tenant '", submission.tenant, "' does not exist"));
    }
    tx.exec_prepared(q::kUpsertTask, submission.task_id, submission.task_version_hash);
    std::string source_sha256;
    try {
      source_sha256 = tx.exec_prepared1(q::kStoreSource, submission.source)[0].as<std::string>();
    } catch (const pqxx::data_exception& e) {
      return absl::InvalidArgumentError(absl::StrCat("source is not valid UTF-8 text: ", e.what()));
    }
    pqxx::result inserted;
    try {
      inserted = tx.exec_prepared(q::kInsertSubmission, submission.tenant, submission.task_id,
                                  submission.task_version_hash, arch, language, source_sha256,
                                  submission.launch_plan_json, submission.model,
                                  submission.session_id, submission.turn_index, knowledge_level,
                                  scope, submission.idempotency_key);
    } catch (const pqxx::data_exception& e) {
      return absl::InvalidArgumentError(
          absl::StrCat("launch_plan_json is not valid JSON: ", e.what()));
    }
    std::string id;
    if (inserted.empty()) {
      // The idempotency key was used before: return that submission, provided this request
      // is the same one (a reused key with different content is a client bug that would
      // otherwise silently drop a kernel).
      pqxx::row first = tx.exec_prepared1(q::kFindSubmissionByIdempotencyKey, submission.tenant,
                                          submission.idempotency_key);
      id = first["id"].as<std::string>();
      if (first["task_id"].as<std::string>() != submission.task_id ||
          first["task_version_hash"].as<std::string>() != submission.task_version_hash ||
          first["arch"].as<std::string>() != arch ||
          first["source_sha256"].as<std::string>() != source_sha256 ||
          first["scope"].as<std::string>() != scope) {
        return absl::AlreadyExistsError(absl::StrCat(
            "idempotency key '", submission.idempotency_key, "' was already used by submission ",
            id, " for a different task, arch, source or scope"));
      }
    } else {
      id = inserted[0][0].as<std::string>();
      tx.exec_prepared1(q::kInsertJob, id, Text(v1::JOB_KIND_COMPILE));
      tx.exec_prepared1(q::kAppendStageEvent, id, Text(EventKind::kStage), Text(v1::STAGE_QUEUED),
                        "{}");
    }
    row = SubmissionFromRow(tx.exec_prepared1(q::kGetSubmission, id, ""));
    return absl::OkStatus();
  }));
  return row;
}

absl::StatusOr<int64_t> Store::CountRecentSubmissions(const std::string& tenant,
                                                      absl::Duration window) {
  int64_t count = 0;
  RETURN_IF_ERROR(impl_->AutoCommit("CountRecentSubmissions", [&](pqxx::nontransaction& tx) {
    count = tx.exec_prepared1(q::kCountRecentSubmissions, tenant, Micros(window))[0].as<int64_t>();
    return absl::OkStatus();
  }));
  return count;
}

absl::StatusOr<int64_t> Store::CountUnfinishedSubmissions(const std::string& tenant) {
  int64_t count = 0;
  RETURN_IF_ERROR(impl_->AutoCommit("CountUnfinishedSubmissions", [&](pqxx::nontransaction& tx) {
    count = tx.exec_prepared1(q::kCountUnfinishedSubmissions, tenant)[0].as<int64_t>();
    return absl::OkStatus();
  }));
  return count;
}

absl::StatusOr<SubmissionRow> Store::GetSubmission(const std::string& id,
                                                   const std::string& tenant) {
  RETURN_IF_ERROR(CheckUuid("submission id", id));
  SubmissionRow row;
  RETURN_IF_ERROR(impl_->AutoCommit("GetSubmission", [&](pqxx::nontransaction& tx) {
    pqxx::result rows = tx.exec_prepared(q::kGetSubmission, id, tenant);
    if (rows.empty()) return absl::NotFoundError(absl::StrCat("submission ", id, " not found"));
    row = SubmissionFromRow(rows[0]);
    return absl::OkStatus();
  }));
  return row;
}

absl::StatusOr<SubmissionPage> Store::ListSubmissions(const SubmissionFilter& filter) {
  if (filter.tenant.empty()) {
    return absl::InvalidArgumentError("ListSubmissions needs a tenant");
  }
  const int page_size =
      filter.page_size <= 0 ? kDefaultPageSize : std::min(filter.page_size, kMaxPageSize);
  int64_t before_seq = std::numeric_limits<int64_t>::max();
  if (!filter.page_token.empty() &&
      (!absl::SimpleAtoi(filter.page_token, &before_seq) || before_seq <= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_token '", filter.page_token, "' is not a token this server issued"));
  }
  SubmissionPage page;
  RETURN_IF_ERROR(impl_->Transact("ListSubmissions", "", [&](pqxx::work& tx) {
    page = SubmissionPage();
    // One row more than asked tells whether another page exists.
    pqxx::result rows = tx.exec_prepared(q::kListSubmissions, filter.tenant, filter.session_id,
                                         filter.task_id, before_seq, page_size + 1);
    for (int i = 0; i < static_cast<int>(rows.size()) && i < page_size; ++i) {
      page.submissions.push_back(SubmissionFromRow(rows[i]));
    }
    if (static_cast<int>(rows.size()) > page_size) {
      page.next_page_token = rows[page_size - 1]["seq"].as<std::string>();
    }
    return absl::OkStatus();
  }));
  return page;
}

absl::StatusOr<SubmissionRow> Store::CancelSubmission(const std::string& id,
                                                      const std::string& tenant,
                                                      const std::string& actor) {
  RETURN_IF_ERROR(CheckUuid("submission id", id));
  const std::string who = Actor(actor, tenant.empty() ? "admin" : "tenant:" + tenant);
  SubmissionRow row;
  RETURN_IF_ERROR(impl_->Transact("CancelSubmission", who, [&](pqxx::work& tx) {
    pqxx::result locked = tx.exec_prepared(q::kLockSubmission, id, tenant);
    if (locked.empty()) {
      return absl::NotFoundError(absl::StrCat("submission ", id, " not found"));
    }
    const v1::SubmissionState state = EnumColumn<v1::SubmissionState>(locked[0], "state");
    // A re-judge is not cancelled (Store::Rejudge): its current verdict is the previous
    // round's, which the submitter would otherwise keep out of the new harness's reach.
    const bool rejudging = locked[0]["judging_round"].as<int>() > 0;
    if (!rejudging &&
        (state == v1::SUBMISSION_STATE_QUEUED || state == v1::SUBMISSION_STATE_RUNNING)) {
      tx.exec_prepared(q::kCancelJobs, id);
      VerdictRow verdict;
      verdict.verdict_class = v1::VERDICT_CLASS_CANCELLED;
      verdict.message = absl::StrCat("cancelled by ", who, " before a verdict");
      RETURN_IF_ERROR(
          impl_->FinishWithVerdict(tx, id, "", verdict, v1::SUBMISSION_STATE_CANCELLED));
    }
    row = SubmissionFromRow(tx.exec_prepared1(q::kGetSubmission, id, tenant));
    return absl::OkStatus();
  }));
  return row;
}

absl::StatusOr<std::vector<StageEventRow>> Store::ListStageEvents(const std::string& submission_id,
                                                                  int64_t after_seq) {
  RETURN_IF_ERROR(CheckUuid("submission id", submission_id));
  std::vector<StageEventRow> events;
  RETURN_IF_ERROR(impl_->AutoCommit("ListStageEvents", [&](pqxx::nontransaction& tx) {
    events.clear();
    pqxx::result rows = tx.exec_prepared(q::kListStageEvents, submission_id, after_seq);
    if (rows.empty()) {
      return absl::NotFoundError(absl::StrCat("submission ", submission_id, " not found"));
    }
    for (const pqxx::row& row : rows) {
      if (row["seq"].is_null()) continue;  // Known submission, no new events.
      StageEventRow& event = events.emplace_back();
      event.seq = row["seq"].as<int64_t>();
      event.submission_id = submission_id;
      event.kind = EnumColumn<EventKind>(row, "kind");
      event.stage = EnumColumn<v1::Stage>(row, "stage");
      event.payload_json = row["payload_json"].as<std::string>();
      event.at = TimeFromMicros(row["at_us"]);
    }
    return absl::OkStatus();
  }));
  return events;
}

absl::Status Store::AppendNotice(const std::string& submission_id, const std::string& notice_json) {
  RETURN_IF_ERROR(CheckUuid("submission id", submission_id));
  if (notice_json.empty()) return absl::InvalidArgumentError("notice_json is empty");
  return impl_->Transact("AppendNotice", "system:notice", [&](pqxx::work& tx) {
    pqxx::result locked = tx.exec_prepared(q::kLockSubmission, submission_id, "");
    if (locked.empty()) {
      return absl::NotFoundError(absl::StrCat("submission ", submission_id, " not found"));
    }
    const v1::SubmissionState state = EnumColumn<v1::SubmissionState>(locked[0], "state");
    if (state != v1::SUBMISSION_STATE_QUEUED && state != v1::SUBMISSION_STATE_RUNNING) {
      return absl::OkStatus();
    }
    try {
      pqxx::result latest = tx.exec_prepared(q::kLatestEventMatches, submission_id,
                                             Text(EventKind::kNotice), notice_json);
      if (!latest.empty() && latest[0]["same"].as<bool>()) return absl::OkStatus();
    } catch (const pqxx::data_exception& e) {
      return absl::InvalidArgumentError(absl::StrCat("notice_json is not valid JSON: ", e.what()));
    }
    tx.exec_prepared1(q::kAppendStageEvent, submission_id, Text(EventKind::kNotice), "",
                      notice_json);
    return absl::OkStatus();
  });
}

// ---------------------------------------------------------------------------------------
// Workers.

absl::StatusOr<WorkerRow> Store::RegisterWorker(const WorkerRegistration& registration) {
  if (registration.hostname.empty()) {
    return absl::InvalidArgumentError("worker hostname is required");
  }
  std::string arch;  // '' for a compile-only worker (workers.arch).
  if (registration.arch != v1::ARCH_UNSPECIFIED) {
    ASSIGN_OR_RETURN(arch, RequireText("arch", registration.arch));
  }
  if (!registration.compile_only && arch.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker '", registration.hostname, "' has a GPU (compile_only is false) but no arch"));
  }
  WorkerRow row;
  RETURN_IF_ERROR(
      impl_->Transact("RegisterWorker", "worker:" + registration.hostname, [&](pqxx::work& tx) {
        pqxx::result rows;
        try {
          rows = tx.exec_prepared(q::kRegisterWorker, registration.hostname, arch,
                                  registration.gpu_name, registration.gpu_uuid,
                                  registration.compile_only, registration.identity_json,
                                  registration.token_id, Micros(impl_->options().lease_duration));
        } catch (const pqxx::data_exception& e) {
          return absl::InvalidArgumentError(
              absl::StrCat("identity_json is not valid JSON: ", e.what()));
        }
        if (rows.empty()) {
          // ABORTED, not PERMISSION_DENIED: the same registration succeeds once the other
          // token's process has been silent for a lease period (a token rotation: the old
          // process was stopped), so the worker retries it (worker/daemon/worker.cc).
          return absl::AbortedError(absl::StrCat(
              "worker '", registration.hostname, "' with GPU '", registration.gpu_uuid,
              "' is registered by another token and was seen within a lease period (",
              absl::FormatDuration(impl_->options().lease_duration),
              "); a worker id belongs to the token that registered it until that token is "
              "revoked or the worker is silent for a lease period"));
        }
        row = WorkerFromRow(rows[0]);
        return absl::OkStatus();
      }));
  return row;
}

absl::StatusOr<WorkerRow> Store::GetWorker(const std::string& worker_id) {
  RETURN_IF_ERROR(CheckUuid("worker_id", worker_id));
  WorkerRow row;
  RETURN_IF_ERROR(impl_->AutoCommit("GetWorker", [&](pqxx::nontransaction& tx) {
    pqxx::result rows = tx.exec_prepared(q::kGetWorker, worker_id);
    if (rows.empty()) {
      return absl::NotFoundError(
          absl::StrCat("worker ", worker_id, " is not registered; register again"));
    }
    row = WorkerFromRow(rows[0]);
    return absl::OkStatus();
  }));
  return row;
}

absl::StatusOr<std::vector<WorkerRow>> Store::ListWorkers() {
  std::vector<WorkerRow> workers;
  RETURN_IF_ERROR(impl_->Transact("ListWorkers", "", [&](pqxx::work& tx) {
    workers.clear();
    for (const pqxx::row& row : tx.exec_prepared(q::kListWorkers)) {
      workers.push_back(WorkerFromRow(row));
    }
    return absl::OkStatus();
  }));
  return workers;
}

absl::StatusOr<WorkerRow> Store::SetWorkerState(const std::string& worker_id, v1::WorkerState state,
                                                const std::string& detail,
                                                const std::string& actor) {
  RETURN_IF_ERROR(CheckUuid("worker_id", worker_id));
  ASSIGN_OR_RETURN(const std::string state_text, RequireText("worker state", state));
  WorkerRow row;
  RETURN_IF_ERROR(impl_->Transact("SetWorkerState", Actor(actor, "admin"), [&](pqxx::work& tx) {
    pqxx::result rows = tx.exec_prepared(q::kSetWorkerState, worker_id, state_text, detail);
    if (rows.empty()) return absl::NotFoundError(absl::StrCat("worker ", worker_id, " not found"));
    row = WorkerFromRow(rows[0]);
    return absl::OkStatus();
  }));
  return row;
}

absl::StatusOr<int64_t> Store::CountCapableWorkers(v1::Arch arch, v1::JobKind kind,
                                                   absl::Duration recent) {
  ASSIGN_OR_RETURN(const std::string arch_text, RequireText("arch", arch));
  ASSIGN_OR_RETURN(const std::string kind_text, RequireText("job kind", kind));
  int64_t count = 0;
  RETURN_IF_ERROR(impl_->AutoCommit("CountCapableWorkers", [&](pqxx::nontransaction& tx) {
    count = tx.exec_prepared1(q::kCountCapableWorkers, arch_text, kind_text, Micros(recent))[0]
                .as<int64_t>();
    return absl::OkStatus();
  }));
  return count;
}

// ---------------------------------------------------------------------------------------
// The queue.

absl::StatusOr<std::optional<LeasedJobRow>> Store::LeaseJob(const std::string& worker_id) {
  RETURN_IF_ERROR(CheckUuid("worker_id", worker_id));
  std::optional<LeasedJobRow> job;
  // One statement in one round trip; it sets its audit actor itself (queries.cc, kLeaseJob).
  RETURN_IF_ERROR(impl_->AutoCommit("LeaseJob", [&](pqxx::nontransaction& tx) {
    job.reset();
    const pqxx::row row = tx.exec_prepared1(
        q::kLeaseJob, worker_id, Micros(impl_->options().lease_duration), WorkerActor(worker_id));
    if (row["job_id"].is_null()) {
      if (!row["worker_registered"].as<bool>()) {
        return absl::NotFoundError(
            absl::StrCat("worker ", worker_id, " is not registered; register again"));
      }
      return absl::OkStatus();
    }
    LeasedJobRow& leased = job.emplace();
    leased.lease.job_id = row["job_id"].as<std::string>();
    leased.lease.worker_id = worker_id;
    leased.lease.attempt = row["attempt"].as<int>();
    leased.kind = EnumColumn<v1::JobKind>(row, "kind");
    leased.submission_id = row["submission_id"].as<std::string>();
    leased.task_id = row["task_id"].as<std::string>();
    leased.task_version_hash = row["task_version_hash"].as<std::string>();
    leased.arch = EnumColumn<v1::Arch>(row, "arch");
    leased.language = EnumColumn<v1::SourceLanguage>(row, "language");
    leased.source = row["source"].as<std::string>();
    leased.launch_plan_json = row["launch_plan_json"].as<std::string>();
    leased.lease_expires_at = TimeFromMicros(row["expires_us"]);
    return absl::OkStatus();
  }));
  if (!job.has_value() || job->kind != v1::JOB_KIND_EVALUATE) return job;
  // The artifact of the job's round, read after the lease (queries.cc, compile_artifact_of_job).
  // Only an optimisation: when it cannot be read the job goes out without it and its worker
  // compiles, rather than the lease being lost with the error.
  absl::Status read = impl_->AutoCommit("CompileArtifactOfJob", [&](pqxx::nontransaction& tx) {
    job->artifact.reset();
    pqxx::result rows = tx.exec_prepared(q::kCompileArtifactOfJob, job->lease.job_id);
    if (!rows.empty()) job->artifact = CompileArtifactFromRow(rows[0]);
    return absl::OkStatus();
  });
  if (!read.ok()) job->artifact.reset();
  return job;
}

absl::StatusOr<HeartbeatResult> Store::Heartbeat(const std::string& worker_id,
                                                 const std::vector<LeaseRef>& leases, bool healthy,
                                                 const std::string& health_detail) {
  RETURN_IF_ERROR(CheckUuid("worker_id", worker_id));
  // A lease that names another worker or is malformed cannot be held by this worker; it is
  // reported lost without asking the database.
  std::vector<LeaseRef> checkable;
  std::vector<LeaseRef> malformed;
  for (const LeaseRef& lease : leases) {
    if (lease.worker_id == worker_id && CheckLeaseRef(lease).ok()) {
      checkable.push_back(lease);
    } else {
      malformed.push_back(lease);
    }
  }
  std::vector<std::string> ids;
  std::vector<std::string> attempts;
  for (const LeaseRef& lease : checkable) {
    ids.push_back(lease.job_id);
    attempts.push_back(absl::StrCat(lease.attempt));
  }
  // Array literals: the ids are validated UUIDs and the attempts integers, so no quoting is
  // needed.
  const std::string id_array = absl::StrCat("{", absl::StrJoin(ids, ","), "}");
  const std::string attempt_array = absl::StrCat("{", absl::StrJoin(attempts, ","), "}");
  HeartbeatResult result;
  RETURN_IF_ERROR(impl_->Transact("Heartbeat", WorkerActor(worker_id), [&](pqxx::work& tx) {
    result = HeartbeatResult();
    result.lost = malformed;
    pqxx::result worker = tx.exec_prepared(q::kHeartbeatWorker, worker_id, healthy, health_detail);
    if (worker.empty()) {
      return absl::NotFoundError(
          absl::StrCat("worker ", worker_id, " is not registered; register again"));
    }
    result.drain = EnumColumn<v1::WorkerState>(worker[0], "state") == v1::WORKER_STATE_DRAINING;
    if (checkable.empty()) return absl::OkStatus();
    pqxx::result rows = tx.exec_prepared(q::kExtendLeases, worker_id, id_array, attempt_array,
                                         Micros(impl_->options().lease_duration));
    for (size_t i = 0; i < rows.size(); ++i) {
      if (rows[i]["extended"].as<bool>()) continue;
      if (rows[i]["cancelled"].as<bool>()) {
        result.cancelled_job_ids.push_back(rows[i]["job_id"].as<std::string>());
      } else {
        result.lost.push_back(checkable[i]);
      }
    }
    return absl::OkStatus();
  }));
  return result;
}

absl::Status Store::ReportStage(const LeaseRef& lease, v1::Stage stage,
                                const std::string& result_json) {
  RETURN_IF_ERROR(CheckLeaseRef(lease));
  if (!IsReportableStage(stage)) {
    return absl::InvalidArgumentError(
        absl::StrCat("stage: ", Text(stage).empty() ? absl::StrCat(stage) : Text(stage),
                     " is not one a worker reports (compile, correctness, "
                     "target_instructions, timing)"));
  }
  const std::string payload = result_json.empty() ? "{}" : result_json;
  // No actor for Transact: kLockSubmissionOfJob, the first statement, sets it.
  return impl_->Transact("ReportStage", "", [&](pqxx::work& tx) {
    pqxx::result locked =
        tx.exec_prepared(q::kLockSubmissionOfJob, lease.job_id, WorkerActor(lease.worker_id));
    if (locked.empty()) return impl_->LeaseLost(tx, lease);
    if (tx.exec_prepared(q::kCheckLease, lease.job_id, lease.worker_id, lease.attempt).empty()) {
      return impl_->LeaseLost(tx, lease);
    }
    const std::string submission_id = locked[0]["submission_id"].as<std::string>();
    try {
      tx.exec_prepared1(q::kAppendStageEvent, submission_id, Text(EventKind::kStage), Text(stage),
                        payload);
    } catch (const pqxx::data_exception& e) {
      return absl::InvalidArgumentError(absl::StrCat("result_json is not valid JSON: ", e.what()));
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<RejudgeResult> Store::Rejudge(const RejudgeFilter& filter,
                                             const std::string& actor) {
  ASSIGN_OR_RETURN(const std::string hashes, CheckedRejudgeHashes(filter));
  RejudgeResult result;
  RETURN_IF_ERROR(impl_->Transact("Rejudge", Actor(actor, "admin"), [&](pqxx::work& tx) {
    result.submission_ids = RejudgeIn(tx, filter, hashes);
    return absl::OkStatus();
  }));
  return result;
}

absl::StatusOr<SubmissionRow> Store::MarkHacked(const std::string& id, const std::string& reason,
                                                const std::string& by) {
  RETURN_IF_ERROR(CheckUuid("submission id", id));
  if (reason.empty()) return absl::InvalidArgumentError("reason: say why it is hacked");
  if (by.empty()) return absl::InvalidArgumentError("by: name who marks it");
  SubmissionRow row;
  RETURN_IF_ERROR(impl_->Transact("MarkHacked", by, [&](pqxx::work& tx) {
    const bool marked = !tx.exec_prepared(q::kMarkHacked, id, reason, by).empty();
    pqxx::result rows = tx.exec_prepared(q::kGetSubmission, id, "");
    if (rows.empty()) return absl::NotFoundError(absl::StrCat("submission ", id, " not found"));
    row = SubmissionFromRow(rows[0]);
    if (!marked) {
      return absl::AlreadyExistsError(
          absl::StrCat("submission ", id, " is already marked hacked by ", row.hacked->by, " at ",
                       absl::FormatTime(row.hacked->at), ": ", row.hacked->reason));
    }
    return absl::OkStatus();
  }));
  return row;
}

absl::StatusOr<SubmissionRow> Store::UnmarkHacked(const std::string& id, const std::string& by) {
  RETURN_IF_ERROR(CheckUuid("submission id", id));
  if (by.empty()) return absl::InvalidArgumentError("by: name who lifts the mark");
  SubmissionRow row;
  RETURN_IF_ERROR(impl_->Transact("UnmarkHacked", by, [&](pqxx::work& tx) {
    const bool unmarked = !tx.exec_prepared(q::kUnmarkHacked, id).empty();
    pqxx::result rows = tx.exec_prepared(q::kGetSubmission, id, "");
    if (rows.empty()) return absl::NotFoundError(absl::StrCat("submission ", id, " not found"));
    row = SubmissionFromRow(rows[0]);
    if (!unmarked) {
      return absl::FailedPreconditionError(
          absl::StrCat("submission ", id, " is not marked hacked"));
    }
    return absl::OkStatus();
  }));
  return row;
}

absl::StatusOr<std::vector<SupersededVerdictRow>> Store::ListSupersededVerdicts(
    const std::string& id) {
  RETURN_IF_ERROR(CheckUuid("submission id", id));
  std::vector<SupersededVerdictRow> out;
  RETURN_IF_ERROR(impl_->Transact("ListSupersededVerdicts", "", [&](pqxx::work& tx) {
    out.clear();
    if (tx.exec_prepared(q::kGetSubmission, id, "").empty()) {
      return absl::NotFoundError(absl::StrCat("submission ", id, " not found"));
    }
    for (const pqxx::row& row : tx.exec_prepared(q::kListSupersededVerdicts, id)) {
      SupersededVerdictRow& superseded = out.emplace_back();
      superseded.verdict = VerdictColumns(row);
      superseded.superseded_by_round = row["superseded_by_round"].as<int>();
      superseded.rejudge_reason = row["rejudge_reason"].as<std::string>();
      superseded.superseded_at = TimeFromMicros(row["superseded_us"]);
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::Status Store::CompleteJob(const LeaseRef& lease, const VerdictRow& verdict) {
  return CompleteJob(lease, verdict, nullptr);
}

absl::Status Store::CompleteJob(const LeaseRef& lease, const VerdictRow& verdict,
                                std::optional<FinishedSubmission>* finished) {
  return CompleteJob(lease, verdict, finished, nullptr);
}

absl::Status Store::CompleteJob(const LeaseRef& lease, const VerdictRow& verdict,
                                std::optional<FinishedSubmission>* finished,
                                const ResultCheck& check) {
  if (finished != nullptr) finished->reset();
  JobCompletion completion;
  completion.verdict = verdict;
  completion.check = check;
  ASSIGN_OR_RETURN(CompletionResult result, CompleteJob(lease, completion));
  if (finished != nullptr) *finished = std::move(result.finished);
  return absl::OkStatus();
}

absl::StatusOr<CompletionResult> Store::CompleteJob(const LeaseRef& lease,
                                                    const JobCompletion& completion) {
  const VerdictRow& verdict = completion.verdict;
  RETURN_IF_ERROR(CheckLeaseRef(lease));
  if (verdict.verdict_class == v1::VERDICT_CLASS_INFRASTRUCTURE_FAILURE) {
    return absl::InvalidArgumentError(
        "verdict class infrastructure_failure is the scheduler's to decide: report it with "
        "FailJob(kind INFRASTRUCTURE) so the job is retried");
  }
  if (verdict.verdict_class == v1::VERDICT_CLASS_CANCELLED) {
    return absl::InvalidArgumentError(
        "verdict class cancelled is the scheduler's to decide (CancelSubmission)");
  }
  RETURN_IF_ERROR(RequireText("verdict_class", verdict.verdict_class).status());
  if (!std::isfinite(verdict.speedup) || verdict.speedup < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("speedup must be a finite number >= 0 (got ", verdict.speedup, ")"));
  }
  if (completion.artifact.has_value()) {
    RETURN_IF_ERROR(CheckArtifactRow(*completion.artifact, verdict));
  }
  std::string use_outcome;  // The report's stored name; empty without a report.
  if (completion.artifact_use.has_value()) {
    ASSIGN_OR_RETURN(use_outcome,
                     RequireText("artifact_use.outcome", completion.artifact_use->outcome));
  }
  absl::Status refusal;  // Set when `check` refused the result.
  CompletionResult result;
  // No actor for Transact: kLockSubmissionOfJob, the first statement, sets it.
  absl::Status completed = impl_->Transact("CompleteJob", "", [&](pqxx::work& tx) {
    result = CompletionResult();
    refusal = absl::OkStatus();
    // Lock, fence and mark the job done in one statement (queries.cc); a refusal below
    // rolls the whole transaction back.
    pqxx::result locked =
        tx.exec_prepared(q::kLockAndFinishLeasedJob, lease.job_id, lease.worker_id, lease.attempt,
                         WorkerActor(lease.worker_id));
    if (locked.empty() || !locked[0]["fenced_in"].as<bool>()) return impl_->LeaseLost(tx, lease);
    const std::string submission_id = locked[0]["submission_id"].as<std::string>();
    const v1::JobKind kind = EnumColumn<v1::JobKind>(locked[0], "kind");
    const v1::EvaluationScope scope = EnumColumn<v1::EvaluationScope>(locked[0], "scope");
    if (completion.check) {
      CompletingJob job;
      job.kind = kind;
      job.scope = scope;
      job.task_id = locked[0]["task_id"].as<std::string>();
      job.task_version_hash = locked[0]["task_version_hash"].as<std::string>();
      job.arch = EnumColumn<v1::Arch>(locked[0], "arch");
      refusal = completion.check(job);
      if (!refusal.ok()) return refusal;  // Rolls back the job's 'done'.
    }
    const bool compiled_class = verdict.verdict_class == v1::VERDICT_CLASS_COMPILED;
    if (kind == v1::JOB_KIND_EVALUATE && compiled_class) {
      return absl::InvalidArgumentError(
          "an evaluate job cannot end with verdict class compiled: it runs every stage");
    }
    if (completion.artifact.has_value() && kind != v1::JOB_KIND_COMPILE) {
      return absl::InvalidArgumentError(
          "artifact: only a compile job's completion carries one; this is an evaluate job");
    }
    if (completion.artifact_use.has_value() && kind != v1::JOB_KIND_EVALUATE) {
      return absl::InvalidArgumentError(
          "artifact_use: only an evaluate job's completion carries one; this is a compile job");
    }
    if (kind == v1::JOB_KIND_COMPILE && compiled_class && scope == v1::EVALUATION_SCOPE_FULL) {
      // The compile stage passed on a CPU; the rest needs a GPU of the submission's arch.
      tx.exec_prepared1(q::kInsertJob, submission_id, Text(v1::JOB_KIND_EVALUATE));
      if (completion.artifact.has_value()) {
        const CompileArtifactRow& a = *completion.artifact;
        tx.exec_prepared0(q::kInsertCompileArtifact, lease.job_id, lease.worker_id,
                          pqxx::binarystring(a.cubin), pqxx::binarystring(a.ptx),
                          a.compile_event_json, a.cubin_sha256, a.ptx_sha256, a.nvrtc_version,
                          a.ptxas_version, a.harness_version);
        result.artifact_stored = true;
      }
      return absl::OkStatus();
    }
    try {
      RETURN_IF_ERROR(impl_->FinishWithVerdict(tx, submission_id, lease.job_id, verdict,
                                               v1::SUBMISSION_STATE_FINISHED, &result.finished));
    } catch (const pqxx::data_exception& e) {
      return absl::InvalidArgumentError(absl::StrCat("verdict_json is not valid JSON: ", e.what()));
    }
    if (kind != v1::JOB_KIND_EVALUATE) return absl::OkStatus();
    return impl_->SettleArtifact(tx, lease, submission_id, completion, use_outcome, &result);
  });
  if (refusal.ok()) {
    RETURN_IF_ERROR(completed);
    return result;
  }
  // The result cannot be right: nothing of it was stored. The job runs again (elsewhere, if
  // other workers are free) and the reason stays in its audit row (last_error).
  const std::string reason = absl::StrCat("result refused: ", refusal.message());
  absl::StatusOr<bool> requeued = FailJob(lease, v1::FAILURE_KIND_INFRASTRUCTURE, reason);
  if (!requeued.ok() && !IsLeaseLost(requeued.status())) return requeued.status();
  return absl::InvalidArgumentError(reason);
}

absl::StatusOr<bool> Store::FailJob(const LeaseRef& lease, v1::FailureKind kind,
                                    const std::string& reason,
                                    v1::VerdictClass kernel_verdict_class) {
  RETURN_IF_ERROR(CheckLeaseRef(lease));
  if (kind != v1::FAILURE_KIND_KERNEL && kind != v1::FAILURE_KIND_INFRASTRUCTURE) {
    return absl::InvalidArgumentError(
        absl::StrCat("failure kind ", kind, " is not one of kernel, infrastructure"));
  }
  if (kind == v1::FAILURE_KIND_KERNEL && kernel_verdict_class != v1::VERDICT_CLASS_UNSPECIFIED &&
      !IsKernelFailureClass(kernel_verdict_class)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kernel failure verdict class ", Text(kernel_verdict_class),
        " is not one of compile_error, plan_invalid, runtime_error, timeout, wrong_result, "
        "target_not_executed, input_mutated, impossible_time"));
  }
  bool will_retry = false;
  // No actor for Transact: kLockSubmissionOfJob, the first statement, sets it.
  RETURN_IF_ERROR(impl_->Transact("FailJob", "", [&](pqxx::work& tx) {
    will_retry = false;
    pqxx::result locked =
        tx.exec_prepared(q::kLockSubmissionOfJob, lease.job_id, WorkerActor(lease.worker_id));
    if (locked.empty()) return impl_->LeaseLost(tx, lease);
    const std::string submission_id = locked[0]["submission_id"].as<std::string>();
    if (kind == v1::FAILURE_KIND_KERNEL) {
      pqxx::result job = tx.exec_prepared(q::kFinishLeasedJob, lease.job_id, lease.worker_id,
                                          lease.attempt, Text(JobState::kFailed), reason);
      if (job.empty()) return impl_->LeaseLost(tx, lease);
      const v1::JobKind job_kind = EnumColumn<v1::JobKind>(job[0], "kind");
      VerdictRow verdict;
      verdict.verdict_class = kernel_verdict_class != v1::VERDICT_CLASS_UNSPECIFIED
                                  ? kernel_verdict_class
                              : job_kind == v1::JOB_KIND_COMPILE ? v1::VERDICT_CLASS_COMPILE_ERROR
                                                                 : v1::VERDICT_CLASS_RUNTIME_ERROR;
      verdict.compiled = job_kind == v1::JOB_KIND_EVALUATE;
      verdict.message = reason;
      return impl_->FinishWithVerdict(tx, submission_id, lease.job_id, verdict,
                                      v1::SUBMISSION_STATE_FINISHED);
    }
    pqxx::result job =
        tx.exec_prepared(q::kRetryLeasedJob, lease.job_id, lease.worker_id, lease.attempt, reason,
                         impl_->options().max_infrastructure_attempts,
                         Micros(impl_->options().retry_backoff_base), Micros(kMaxRetryBackoff));
    if (job.empty()) return impl_->LeaseLost(tx, lease);
    ASSIGN_OR_RETURN(will_retry, impl_->AfterInfrastructureFailure(tx, job[0], submission_id,
                                                                   lease.job_id, reason));
    return absl::OkStatus();
  }));
  return will_retry;
}

// Takes leases back as infrastructure attempts, one transaction per job: one job's trouble
// does not hold back the others (the first error is returned after all were tried), and each
// takes its submission's lock like every other job state change. `worker_id` non-empty fences
// by that worker too; `only_if_expired` leaves live leases alone (the reaper). Returns how
// many were taken back (a lease extended or finished meanwhile is skipped).
absl::StatusOr<int> Store::TakeBackLeases(const std::vector<TakeBack>& leases,
                                          const std::string& worker_id, bool only_if_expired,
                                          const std::string& actor) {
  int taken = 0;
  absl::Status first_error = absl::OkStatus();
  const StoreOptions& options = impl_->options();
  for (const TakeBack& job : leases) {
    bool taken_back = false;
    absl::Status status = impl_->Transact("TakeBackLease", actor, [&](pqxx::work& tx) {
      taken_back = false;
      tx.exec_prepared(q::kLockSubmission, job.submission_id, "");
      pqxx::result rows =
          tx.exec_prepared(q::kReapExpiredLease, job.job_id, job.attempt, job.reason,
                           options.max_infrastructure_attempts, Micros(options.retry_backoff_base),
                           Micros(kMaxRetryBackoff), worker_id, only_if_expired);
      if (rows.empty()) return absl::OkStatus();
      taken_back = true;
      return impl_
          ->AfterInfrastructureFailure(tx, rows[0], job.submission_id, job.job_id, job.reason)
          .status();
    });
    if (status.ok() && taken_back) ++taken;
    if (!status.ok() && first_error.ok()) first_error = status;
  }
  RETURN_IF_ERROR(first_error);
  return taken;
}

absl::StatusOr<int> Store::ReapExpiredLeases(ReapReport* report) {
  const StoreOptions& options = impl_->options();
  ReapReport pass;
  // First, was the scheduler down? (migrations/0006_lease_liveness.up.sql.)
  RETURN_IF_ERROR(impl_->Transact("ReapExpiredLeases", "system:reaper", [&](pqxx::work& tx) {
    pass = ReapReport();
    const pqxx::row mark = tx.exec_prepared1(q::kLockLiveness, Micros(options.outage_threshold));
    pass.gap = absl::Seconds(mark["gap_s"].as<double>());
    if (mark["was_down"].as<bool>()) {
      pass.outage = true;
      pass.graced = static_cast<int>(
          tx.exec_prepared(q::kGrantOutageGrace, Micros(options.lease_duration)).size());
    }
    tx.exec_prepared(q::kMarkSchedulerAlive, Micros(options.outage_threshold));
    return absl::OkStatus();
  }));
  std::vector<TakeBack> expired;
  RETURN_IF_ERROR(impl_->Transact("ReapExpiredLeases", "", [&](pqxx::work& tx) {
    expired.clear();
    for (const pqxx::row& row : tx.exec_prepared(q::kFindExpiredLeases)) {
      expired.push_back(
          {row["job_id"].as<std::string>(), row["attempt"].as<int>(),
           row["submission_id"].as<std::string>(),
           absl::StrCat("lease expired: worker ", row["worker_id"].as<std::string>(),
                        " sent no heartbeat for ", absl::FormatDuration(options.lease_duration))});
    }
    return absl::OkStatus();
  }));
  absl::StatusOr<int> reaped = TakeBackLeases(expired, "", true, "system:reaper");
  // After an outage every worker looks silent; their next heartbeat says otherwise.
  if (!pass.outage) {
    RETURN_IF_ERROR(impl_->Transact("ReapExpiredLeases", "system:reaper", [&](pqxx::work& tx) {
      tx.exec_prepared(q::kMarkSilentWorkersOffline, Micros(options.lease_duration));
      return absl::OkStatus();
    }));
  }
  RETURN_IF_ERROR(reaped.status());
  pass.reaped = *reaped;
  if (report != nullptr) *report = pass;
  return pass.reaped;
}

absl::StatusOr<int> Store::ReleaseWorkerLeases(const std::string& worker_id,
                                               const std::string& reason) {
  RETURN_IF_ERROR(CheckUuid("worker_id", worker_id));
  std::vector<TakeBack> held;
  RETURN_IF_ERROR(impl_->AutoCommit("ReleaseWorkerLeases", [&](pqxx::nontransaction& tx) {
    held.clear();
    for (const pqxx::row& row : tx.exec_prepared(q::kListLeasesOfWorker, worker_id)) {
      held.push_back({row["job_id"].as<std::string>(), row["attempt"].as<int>(),
                      row["submission_id"].as<std::string>(), reason});
    }
    return absl::OkStatus();
  }));
  return TakeBackLeases(held, worker_id, false, WorkerActor(worker_id));
}

absl::StatusOr<std::vector<QueueDepthRow>> Store::QueueDepths() {
  std::vector<QueueDepthRow> depths;
  RETURN_IF_ERROR(impl_->Transact("QueueDepths", "", [&](pqxx::work& tx) {
    depths.clear();
    for (const pqxx::row& row : tx.exec_prepared(q::kQueueDepths)) {
      QueueDepthRow& depth = depths.emplace_back();
      depth.arch = EnumColumn<v1::Arch>(row, "arch");
      depth.kind = EnumColumn<v1::JobKind>(row, "kind");
      depth.queued = row["queued"].as<int64_t>();
      depth.leased = row["leased"].as<int64_t>();
      depth.oldest_age_seconds = row["oldest_s"].as<double>();
    }
    return absl::OkStatus();
  }));
  return depths;
}

absl::StatusOr<std::vector<JobRow>> Store::ListJobs(const std::string& submission_id) {
  RETURN_IF_ERROR(CheckUuid("submission id", submission_id));
  std::vector<JobRow> jobs;
  RETURN_IF_ERROR(impl_->Transact("ListJobs", "", [&](pqxx::work& tx) {
    jobs.clear();
    for (const pqxx::row& row : tx.exec_prepared(q::kListJobs, submission_id)) {
      JobRow& job = jobs.emplace_back();
      job.job_id = row["job_id"].as<std::string>();
      job.submission_id = row["submission_id"].as<std::string>();
      job.kind = EnumColumn<v1::JobKind>(row, "kind");
      job.arch = EnumColumn<v1::Arch>(row, "arch");
      job.state = EnumColumn<JobState>(row, "state");
      job.attempt = row["attempt"].as<int>();
      job.worker_id = row["worker_id"].as<std::string>();
      if (!row["expires_us"].is_null()) job.lease_expires_at = TimeFromMicros(row["expires_us"]);
      job.not_before = TimeFromMicros(row["not_before_us"]);
      job.infrastructure_attempts = row["infrastructure_attempts"].as<int>();
      job.last_error = row["last_error"].as<std::string>();
      job.created_at = TimeFromMicros(row["created_us"]);
      job.round = row["round"].as<int>();
    }
    return absl::OkStatus();
  }));
  return jobs;
}

absl::StatusOr<std::vector<AuditRow>> Store::ListAuditLog(AuditEntity entity,
                                                          const std::string& entity_id) {
  ASSIGN_OR_RETURN(const std::string entity_text, RequireText("entity", entity));
  std::vector<AuditRow> rows;
  RETURN_IF_ERROR(impl_->Transact("ListAuditLog", "", [&](pqxx::work& tx) {
    rows.clear();
    for (const pqxx::row& row : tx.exec_prepared(q::kListAuditLog, entity_text, entity_id)) {
      AuditRow& audit = rows.emplace_back();
      audit.id = row["id"].as<int64_t>();
      audit.at = TimeFromMicros(row["at_us"]);
      audit.actor = row["actor"].as<std::string>();
      audit.entity = EnumColumn<AuditEntity>(row, "entity");
      audit.entity_id = row["entity_id"].as<std::string>();
      audit.old_state = row["old_state"].as<std::string>();
      audit.new_state = row["new_state"].as<std::string>();
      audit.detail_json = row["detail_json"].as<std::string>();
    }
    return absl::OkStatus();
  }));
  return rows;
}

// ---------------------------------------------------------------------------------------
// Waiting for notifications.

absl::StatusOr<bool> Store::WaitForQueueChange(absl::Duration timeout) {
  return WaitForQueueChange(QueueChangeCount(), timeout);
}

absl::StatusOr<bool> Store::WaitForEvents(absl::Duration timeout) {
  return WaitForEvents(EventsChangeCount(), timeout);
}

uint64_t Store::QueueChangeCount() { return impl_->listener().Count(NotifyListener::kQueue); }

uint64_t Store::EventsChangeCount() { return impl_->listener().Count(NotifyListener::kEvents); }

absl::StatusOr<bool> Store::WaitForQueueChange(uint64_t seen, absl::Duration timeout) {
  return impl_->listener().WaitForChange(NotifyListener::kQueue, seen, timeout);
}

absl::StatusOr<bool> Store::WaitForEvents(uint64_t seen, absl::Duration timeout) {
  return impl_->listener().WaitForChange(NotifyListener::kEvents, seen, timeout);
}

// ---------------------------------------------------------------------------------------
// Reachability.

StoreReachability Store::Reachability() const { return impl_->pool().reachability(); }

absl::Status Store::Ping() {
  return impl_->AutoCommit("Ping", [&](pqxx::nontransaction& tx) {
    tx.exec_prepared1(q::kPing);
    return absl::OkStatus();
  });
}

void Store::Reconnect() {
  impl_->pool().DropIdle();
  impl_->listener().Reconnect();
}

}  // namespace ptxbench::store
