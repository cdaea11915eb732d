-- 0001_initial: the scheduler's tables: tenants, API tokens, task versions, sources,
-- workers, submissions, the job queue, stage events and verdicts.
--
-- Conventions (server/store/store.h says why): enumerations are lower-case text guarded by
-- CHECK constraints, so psql and Grafana read plainly and a bad value fails at the row that
-- carries it; identifiers of submissions, jobs and workers are random UUIDs (gen_random_uuid
-- is built into PostgreSQL 13+), so ids leak nothing about volume and can be minted anywhere.
--
-- Locking protocol, relied on by server/store/queries.cc: every change of a job's state holds
-- the row lock of its submission first (LeaseJob takes both with SKIP LOCKED). One lock order
-- (submission, then job) means cancellation, completion and the reaper never deadlock.

CREATE TABLE tenants (
  name text PRIMARY KEY CONSTRAINT tenants_name_format CHECK (name ~ '^[a-z0-9_-]{1,64}$'),
  submissions_per_minute integer NOT NULL DEFAULT 0 CHECK (submissions_per_minute >= 0),
  max_queued integer NOT NULL DEFAULT 0 CHECK (max_queued >= 0),
  created_at timestamptz NOT NULL DEFAULT now()
);

-- Secrets are never stored: only the lower-case hex sha256 of the secret. A token of the
-- vendor role belongs to a tenant; worker and admin tokens may belong to none.
CREATE TABLE api_tokens (
  token_id text PRIMARY KEY
    CONSTRAINT api_tokens_id_format CHECK (token_id ~ '^[A-Za-z0-9_-]{1,64}$'),
  tenant text REFERENCES tenants (name),
  role text NOT NULL CHECK (role IN ('vendor', 'worker', 'admin')),
  description text NOT NULL DEFAULT '',
  secret_sha256 text NOT NULL CONSTRAINT api_tokens_secret_unique UNIQUE
    CONSTRAINT api_tokens_secret_format CHECK (secret_sha256 ~ '^[0-9a-f]{64}$'),
  revoked boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now(),
  revoked_at timestamptz,
  CONSTRAINT api_tokens_vendor_has_tenant CHECK (role <> 'vendor' OR tenant IS NOT NULL),
  CHECK (revoked = (revoked_at IS NOT NULL))
);

-- Every task version a submission was evaluated against, so a paper can list exactly which
-- task definitions its numbers come from.
CREATE TABLE tasks (
  task_id text NOT NULL CHECK (task_id <> ''),
  version_hash text NOT NULL CHECK (version_hash <> ''),
  first_seen_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (task_id, version_hash)
);

-- Sources are stored once per content hash: a repair loop resubmits near-identical kernels
-- and many models converge on the same text. The CHECK recomputes the digest, so a row can
-- never carry a hash that does not match its content.
CREATE TABLE sources (
  sha256 text PRIMARY KEY CHECK (sha256 ~ '^[0-9a-f]{64}$'),
  content text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT sources_digest_matches
    CHECK (encode(sha256(convert_to(content, 'UTF8')), 'hex') = sha256)
);

-- Re-registering with the same hostname and GPU UUID reuses the row (worker.proto).
-- Compile-only workers have no GPU: empty arch and UUID.
CREATE TABLE workers (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  hostname text NOT NULL CHECK (hostname <> ''),
  arch text NOT NULL DEFAULT '' CHECK (arch IN ('', 'sm_90a', 'sm_100a')),
  gpu_name text NOT NULL DEFAULT '',
  gpu_uuid text NOT NULL DEFAULT '',
  compile_only boolean NOT NULL DEFAULT false,
  identity jsonb NOT NULL DEFAULT '{}',
  state text NOT NULL DEFAULT 'active'
    CHECK (state IN ('active', 'draining', 'unhealthy', 'offline')),
  health_detail text NOT NULL DEFAULT '',
  registered_at timestamptz NOT NULL DEFAULT now(),
  last_seen timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT workers_host_gpu_unique UNIQUE (hostname, gpu_uuid),
  CONSTRAINT workers_gpu_has_arch CHECK (compile_only OR arch <> '')
);

CREATE TABLE submissions (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  -- Arrival order: the queue serves submissions first come, first served, and listing pages
  -- by it (created_at ties within one transaction; seq never does).
  seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  tenant text NOT NULL REFERENCES tenants (name),
  task_id text NOT NULL,
  task_version_hash text NOT NULL,
  arch text NOT NULL CHECK (arch IN ('sm_90a', 'sm_100a')),
  language text NOT NULL CHECK (language IN ('cuda', 'ptx')),
  source_sha256 text NOT NULL REFERENCES sources (sha256),
  launch_plan jsonb,  -- NULL when the plan is in the source.
  model text NOT NULL DEFAULT '',
  session_id text NOT NULL DEFAULT '',
  turn_index integer NOT NULL DEFAULT 0 CHECK (turn_index >= 0),
  knowledge_level text NOT NULL CHECK (knowledge_level IN ('none', 'templates', 'contract')),
  scope text NOT NULL CHECK (scope IN ('full', 'compile_only')),
  idempotency_key text CHECK (idempotency_key <> ''),  -- NULL: none (NULLs never collide).
  state text NOT NULL DEFAULT 'queued'
    CHECK (state IN ('queued', 'running', 'finished', 'cancelled')),
  stage text NOT NULL DEFAULT 'queued'
    CHECK (stage IN ('queued', 'compile', 'correctness', 'target_instructions', 'timing', 'done')),
  last_event_seq bigint NOT NULL DEFAULT 0,  -- Counter for stage_events.seq.
  created_at timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz,
  FOREIGN KEY (task_id, task_version_hash) REFERENCES tasks (task_id, version_hash),
  CONSTRAINT submissions_idempotency_unique UNIQUE (tenant, idempotency_key),
  CHECK ((state IN ('finished', 'cancelled')) = (finished_at IS NOT NULL))
);
-- ListSubmissions pages newest first by seq within a tenant (optionally a session or task).
CREATE INDEX submissions_by_tenant ON submissions (tenant, seq DESC);
CREATE INDEX submissions_by_session ON submissions (tenant, session_id, seq DESC);
-- CountRecentSubmissions (rate limit) and CountUnfinishedSubmissions (queue cap) run on every
-- Submit.
CREATE INDEX submissions_recent ON submissions (tenant, created_at);
CREATE INDEX submissions_unfinished ON submissions (tenant) WHERE state IN ('queued', 'running');

-- The queue. A job is one unit of work for one worker: the compile job of every submission,
-- then an evaluate job for a full-scope submission that compiled.
CREATE TABLE jobs (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  submission_id uuid NOT NULL REFERENCES submissions (id),
  submission_seq bigint NOT NULL,  -- Copied from the submission: the FIFO key of the lease query.
  tenant text NOT NULL REFERENCES tenants (name),  -- Copied: the fair-share key.
  kind text NOT NULL CHECK (kind IN ('compile', 'evaluate')),
  arch text NOT NULL CHECK (arch IN ('sm_90a', 'sm_100a')),
  state text NOT NULL DEFAULT 'queued'
    CHECK (state IN ('queued', 'leased', 'done', 'failed', 'cancelled')),
  -- Number of times leased. Every lease gets a new number, so a fence on
  -- (id, worker_id, attempt) can never match an earlier lease of the same job, even one held
  -- by the same worker.
  attempt integer NOT NULL DEFAULT 0 CHECK (attempt >= 0),
  worker_id uuid REFERENCES workers (id),  -- The current or last holder.
  leased_at timestamptz,
  lease_expires_at timestamptz,
  not_before timestamptz NOT NULL DEFAULT now(),  -- Backoff after an infrastructure failure.
  infrastructure_attempts integer NOT NULL DEFAULT 0 CHECK (infrastructure_attempts >= 0),
  last_error text NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz,
  CONSTRAINT jobs_one_per_kind UNIQUE (submission_id, kind),
  CHECK (state <> 'leased' OR (worker_id IS NOT NULL AND lease_expires_at IS NOT NULL))
);
-- The lease query reads only queued jobs of one arch (GPU workers) or one kind (compile-only
-- workers) in FIFO order; partial indexes stay as small as the queue, not as the history.
CREATE INDEX jobs_queued_by_arch ON jobs (arch, submission_seq) WHERE state = 'queued';
CREATE INDEX jobs_queued_by_kind ON jobs (kind, submission_seq) WHERE state = 'queued';
-- Fair share counts leased jobs per tenant; the reaper scans leases by expiry; heartbeats and
-- ListWorkers look leases up by worker.
CREATE INDEX jobs_leased_by_tenant ON jobs (tenant) WHERE state = 'leased';
CREATE INDEX jobs_leased_by_expiry ON jobs (lease_expires_at) WHERE state = 'leased';
CREATE INDEX jobs_leased_by_worker ON jobs (worker_id) WHERE state = 'leased';

-- Stage events, for WatchSubmission replay: seq increases by one per submission with no gaps,
-- so a watcher that reconnects asks for "after seq N" and misses nothing.
CREATE TABLE stage_events (
  submission_id uuid NOT NULL REFERENCES submissions (id),
  seq bigint NOT NULL CHECK (seq > 0),
  kind text NOT NULL CHECK (kind IN ('stage', 'notice')),
  stage text NOT NULL
    CHECK (stage IN ('queued', 'compile', 'correctness', 'target_instructions', 'timing', 'done')),
  payload jsonb NOT NULL DEFAULT '{}',
  at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (submission_id, seq)
);

-- One verdict per submission (the primary key makes "exactly once" a property of the schema).
-- The JSON is the complete verdict; the key columns are copies for queries and indexes.
CREATE TABLE verdicts (
  submission_id uuid PRIMARY KEY REFERENCES submissions (id),
  job_id uuid REFERENCES jobs (id),  -- NULL when the scheduler decided (cancellation).
  verdict_class text NOT NULL CHECK (verdict_class IN (
    'pass', 'compile_error', 'plan_invalid', 'runtime_error', 'timeout', 'wrong_result',
    'target_not_executed', 'input_mutated', 'impossible_time', 'compiled',
    'infrastructure_failure', 'cancelled')),
  compiled boolean NOT NULL,
  correct boolean NOT NULL,
  target_executed boolean NOT NULL,
  tic boolean NOT NULL,
  speedup double precision NOT NULL DEFAULT 0 CHECK (speedup >= 0 AND speedup < 'Infinity'),
  runtime_unverified boolean NOT NULL DEFAULT false,
  message text NOT NULL DEFAULT '',
  verdict jsonb NOT NULL,
  finished_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX verdicts_by_class ON verdicts (verdict_class);

-- NOTIFY wakes leasers (WaitForQueueChange) when a job becomes leasable and watchers
-- (WaitForEvents) when an event is appended. Triggers rather than statements in the store, so
-- no code path that queues a job can forget to wake anyone. Notifications are delivered at
-- commit and only then, so a woken reader always finds the row.
CREATE FUNCTION notify_job_queued() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('ptxbench_queue', NEW.arch || ':' || NEW.kind);
  RETURN NULL;
END
$$;
CREATE TRIGGER jobs_notify_insert AFTER INSERT ON jobs
  FOR EACH ROW WHEN (NEW.state = 'queued') EXECUTE FUNCTION notify_job_queued();
CREATE TRIGGER jobs_notify_requeue AFTER UPDATE OF state ON jobs
  FOR EACH ROW WHEN (NEW.state = 'queued' AND OLD.state <> 'queued')
  EXECUTE FUNCTION notify_job_queued();

CREATE FUNCTION notify_stage_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('ptxbench_events', NEW.submission_id::text);
  RETURN NULL;
END
$$;
CREATE TRIGGER stage_events_notify AFTER INSERT ON stage_events
  FOR EACH ROW EXECUTE FUNCTION notify_stage_event();
