-- 0002_audit_log: an append-only record of every state change of tenants, tokens, workers,
-- submissions and jobs, with the actor and the time.
--
-- Triggers write it, not the store's code paths: a state change made by any statement, even
-- an operator's UPDATE in psql, is recorded. The actor is the transaction-local setting
-- ptxbench.actor that the store sets at the start of every transaction ("tenant:acme",
-- "worker:<uuid>", "admin", "system:reaper"); a change made outside the store is attributed
-- to the database role ("sql:<role>").

CREATE TABLE audit_log (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at timestamptz NOT NULL DEFAULT clock_timestamp(),
  actor text NOT NULL,
  entity text NOT NULL CHECK (entity IN ('tenant', 'token', 'worker', 'submission', 'job')),
  entity_id text NOT NULL,
  old_state text,  -- NULL when the entity was created.
  new_state text NOT NULL,
  detail jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_log_by_entity ON audit_log (entity, entity_id, id);

-- Append-only. REVOKE binds ordinary roles; the trigger also binds the superuser the server
-- usually connects as (superusers bypass privileges, not triggers). Disabling the trigger
-- takes an ALTER TABLE, which itself is visible in the server log.
REVOKE UPDATE, DELETE, TRUNCATE ON audit_log FROM PUBLIC;
CREATE FUNCTION audit_log_forbid_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'audit_log is append-only: % is not allowed', TG_OP
    USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER audit_log_no_update_or_delete BEFORE UPDATE OR DELETE ON audit_log
  FOR EACH ROW EXECUTE FUNCTION audit_log_forbid_change();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
  FOR EACH STATEMENT EXECUTE FUNCTION audit_log_forbid_change();

CREATE FUNCTION audit_actor() RETURNS text LANGUAGE sql STABLE AS $$
  SELECT coalesce(nullif(current_setting('ptxbench.actor', true), ''), 'sql:' || session_user)
$$;

CREATE FUNCTION audit_tenants() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO audit_log (actor, entity, entity_id, old_state, new_state, detail)
  VALUES (audit_actor(), 'tenant', NEW.name, NULL, 'created',
          jsonb_build_object('submissions_per_minute', NEW.submissions_per_minute,
                             'max_queued', NEW.max_queued));
  RETURN NULL;
END
$$;
CREATE TRIGGER tenants_audit_insert AFTER INSERT ON tenants
  FOR EACH ROW EXECUTE FUNCTION audit_tenants();

CREATE FUNCTION audit_tokens() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO audit_log (actor, entity, entity_id, old_state, new_state, detail)
  VALUES (audit_actor(), 'token', NEW.token_id,
          CASE WHEN TG_OP = 'UPDATE' THEN
            CASE WHEN OLD.revoked THEN 'revoked' ELSE 'active' END END,
          CASE WHEN NEW.revoked THEN 'revoked' ELSE 'active' END,
          jsonb_build_object('tenant', NEW.tenant, 'role', NEW.role));
  RETURN NULL;
END
$$;
CREATE TRIGGER api_tokens_audit_insert AFTER INSERT ON api_tokens
  FOR EACH ROW EXECUTE FUNCTION audit_tokens();
CREATE TRIGGER api_tokens_audit_update AFTER UPDATE ON api_tokens
  FOR EACH ROW WHEN (OLD.revoked IS DISTINCT FROM NEW.revoked) EXECUTE FUNCTION audit_tokens();

CREATE FUNCTION audit_workers() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO audit_log (actor, entity, entity_id, old_state, new_state, detail)
  VALUES (audit_actor(), 'worker', NEW.id::text,
          CASE WHEN TG_OP = 'UPDATE' THEN OLD.state END, NEW.state,
          jsonb_build_object('hostname', NEW.hostname, 'arch', NEW.arch,
                             'gpu_uuid', NEW.gpu_uuid, 'health_detail', NEW.health_detail));
  RETURN NULL;
END
$$;
CREATE TRIGGER workers_audit_insert AFTER INSERT ON workers
  FOR EACH ROW EXECUTE FUNCTION audit_workers();
CREATE TRIGGER workers_audit_update AFTER UPDATE ON workers
  FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state) EXECUTE FUNCTION audit_workers();

CREATE FUNCTION audit_submissions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO audit_log (actor, entity, entity_id, old_state, new_state, detail)
  VALUES (audit_actor(), 'submission', NEW.id::text,
          CASE WHEN TG_OP = 'UPDATE' THEN OLD.state END, NEW.state,
          jsonb_build_object('tenant', NEW.tenant, 'stage', NEW.stage));
  RETURN NULL;
END
$$;
CREATE TRIGGER submissions_audit_insert AFTER INSERT ON submissions
  FOR EACH ROW EXECUTE FUNCTION audit_submissions();
CREATE TRIGGER submissions_audit_update AFTER UPDATE ON submissions
  FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state) EXECUTE FUNCTION audit_submissions();

-- Lease extensions by heartbeats are not state changes and are not recorded: they would make
-- the log grow with uptime instead of with work.
CREATE FUNCTION audit_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO audit_log (actor, entity, entity_id, old_state, new_state, detail)
  VALUES (audit_actor(), 'job', NEW.id::text,
          CASE WHEN TG_OP = 'UPDATE' THEN OLD.state END, NEW.state,
          jsonb_build_object('submission_id', NEW.submission_id, 'kind', NEW.kind,
                             'attempt', NEW.attempt, 'worker_id', NEW.worker_id,
                             'infrastructure_attempts', NEW.infrastructure_attempts,
                             'last_error', NEW.last_error));
  RETURN NULL;
END
$$;
CREATE TRIGGER jobs_audit_insert AFTER INSERT ON jobs
  FOR EACH ROW EXECUTE FUNCTION audit_jobs();
CREATE TRIGGER jobs_audit_update AFTER UPDATE ON jobs
  FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state) EXECUTE FUNCTION audit_jobs();
