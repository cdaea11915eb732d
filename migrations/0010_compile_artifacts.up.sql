-- 0010_compile_artifacts: a compile job's compiled module, handed to the GPU worker of the
-- submission's evaluate job so that it need not compile the source again (issue 16; 0.4-1.0 s
-- per evaluation on the H200), and the distrust of a worker whose module failed verification
-- (docs/architecture.md, "Compile artifact reuse").
--
-- Why this shape:
-- - One artifact per (submission, judging round), the primary key. A round has one compile job
--   (jobs_one_per_kind_and_round, 0009), and Store::CompleteJob stores the artifact in the
--   transaction that marks that job done under its lease's fence; the evaluate lease reads the
--   artifact of its own job's round, so a re-judge round (a new number) never finds the
--   previous round's.
-- - No CHECK ties the bytes to their SHA-256s: the server checks them when the artifact
--   arrives, and the GPU worker checks them again before it uses a byte. The database is not
--   trusted more than the wire (tests/integration/pipeline_test alters the bytes in place and
--   expects the GPU worker to refuse them).
-- - The bytes are needed only until the round's evaluate job completes; its completion clears
--   them (released_at) and keeps the hashes, versions and producer as evidence. Kept, a
--   compiled GEMM's ~120 KiB of cubin and PTX per submission would outgrow every other table.
CREATE TABLE compile_artifacts (
  submission_id uuid NOT NULL REFERENCES submissions (id),
  round integer NOT NULL CHECK (round >= 0),
  job_id uuid NOT NULL REFERENCES jobs (id),        -- The compile job that produced it.
  worker_id uuid NOT NULL REFERENCES workers (id),  -- The worker that held that job's lease.
  cubin bytea,
  ptx bytea,
  compile_event text,  -- As the compile process sent it, module paths cleared.
  cubin_sha256 text NOT NULL CHECK (cubin_sha256 ~ '^[0-9a-f]{64}$'),
  ptx_sha256 text NOT NULL CHECK (ptx_sha256 ~ '^[0-9a-f]{64}$'),
  nvrtc_version text NOT NULL,
  ptxas_version text NOT NULL,
  harness_version text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  released_at timestamptz,  -- When the bytes were cleared (the evaluate job completed).
  PRIMARY KEY (submission_id, round),
  CONSTRAINT compile_artifacts_released_whole CHECK (
    (released_at IS NULL) = (cubin IS NOT NULL) AND (cubin IS NULL) = (ptx IS NULL)
    AND (ptx IS NULL) = (compile_event IS NULL))
);
CREATE INDEX compile_artifacts_by_worker ON compile_artifacts (worker_id);

-- What the GPU worker of each evaluate job that was handed an artifact did with it: used it,
-- compiled itself and found the same module (verified_match) or another (mismatch), or refused
-- it (other toolchain, bytes that do not hash to their SHA-256s). The producer is the
-- artifact's, as the server stored it, never as the reporting worker names it. Evidence:
-- append-only, like superseded_verdicts.
CREATE TABLE artifact_uses (
  job_id uuid PRIMARY KEY REFERENCES jobs (id),  -- The evaluate job; it completes once.
  submission_id uuid NOT NULL,
  round integer NOT NULL,
  producer_worker_id uuid NOT NULL REFERENCES workers (id),
  reporter_worker_id uuid NOT NULL REFERENCES workers (id),
  outcome text NOT NULL
    CHECK (outcome IN ('none', 'used', 'verified_match', 'mismatch', 'refused')),
  detail text NOT NULL DEFAULT '',
  at timestamptz NOT NULL DEFAULT now(),
  FOREIGN KEY (submission_id, round) REFERENCES compile_artifacts (submission_id, round)
);
-- A mismatch re-judges the verdicts that used the producer's artifacts unverified.
CREATE INDEX artifact_uses_used_by_producer ON artifact_uses (producer_worker_id)
  WHERE outcome = 'used';
CREATE TRIGGER artifact_uses_append_only BEFORE UPDATE OR DELETE ON artifact_uses
  FOR EACH ROW EXECUTE FUNCTION audit_log_forbid_change();
CREATE TRIGGER artifact_uses_no_truncate BEFORE TRUNCATE ON artifact_uses
  FOR EACH STATEMENT EXECUTE FUNCTION audit_log_forbid_change();

-- A worker whose artifact failed verification: none of its artifacts is handed out again. The
-- mark survives re-registration (the upsert of register_worker leaves these columns alone);
-- lifting it is an operator's UPDATE, audited like the mark.
ALTER TABLE workers
  ADD COLUMN distrusted_at timestamptz,
  ADD COLUMN distrust_reason text CHECK (distrust_reason <> ''),
  ADD COLUMN distrust_detail jsonb,
  ADD CONSTRAINT workers_distrust_whole CHECK (
    (distrusted_at IS NULL) = (distrust_reason IS NULL)
    AND (distrust_reason IS NULL) = (distrust_detail IS NULL));

CREATE FUNCTION audit_worker_distrust() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO audit_log (actor, entity, entity_id, old_state, new_state, detail)
  VALUES (audit_actor(), 'worker', NEW.id::text, NEW.state, NEW.state,
          jsonb_build_object('distrusted', NEW.distrusted_at IS NOT NULL,
                             'reason', coalesce(NEW.distrust_reason, OLD.distrust_reason))
            || coalesce(NEW.distrust_detail, '{}'::jsonb));
  RETURN NULL;
END
$$;
CREATE TRIGGER workers_audit_distrust AFTER UPDATE ON workers
  FOR EACH ROW WHEN (OLD.distrusted_at IS DISTINCT FROM NEW.distrusted_at)
  EXECUTE FUNCTION audit_worker_distrust();
