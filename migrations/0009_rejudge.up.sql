-- 0009_rejudge: re-judging under a new harness, and `hacked` marks (issue 11, "Re-judging").
--
-- Why this shape: `verdicts` stays the one CURRENT verdict per submission (its primary key keeps
-- "exactly one current verdict" a property of the schema), so every reader that joins it
-- (GetSubmission, Watch, leaderboard_results, the benchmark_* views, reports) reads the
-- current verdict with no change. Store::Rejudge opens a new judging round (new jobs, the
-- submission queued again) and leaves the current verdict in place, so a submission being
-- re-judged keeps serving its old verdict. When the new round's verdict is stored, the
-- statement that stores it (queries.cc, finish_with_verdict) first copies the current row into
-- superseded_verdicts, in the same statement, so a reader never sees a submission without a
-- verdict. superseded_verdicts is append-only (the audit log's trigger): evidence is never
-- deleted.
--
-- A hacked submission (an admin's finding that the kernel games the harness) keeps its
-- verdict, source and events; it only leaves the rankings: leaderboard_results and
-- benchmark_turns (and so benchmark_trajectories and benchmark_turn_limits, which read it)
-- skip it. Every mark and unmark is in the audit log (trigger below).

-- LIKE copies columns, NOT NULL, defaults and (INCLUDING CONSTRAINTS) the CHECKs; it does not
-- copy the primary key (that is an index: INCLUDING INDEXES), so a submission may have any
-- number of superseded rows; tests/server/store/rejudge_test.cc stores several.
CREATE TABLE superseded_verdicts (
  LIKE verdicts INCLUDING DEFAULTS INCLUDING CONSTRAINTS,
  round integer NOT NULL CHECK (round >= 0),  -- The judging round the verdict was from.
  superseded_at timestamptz NOT NULL DEFAULT now(),
  superseded_by_round integer NOT NULL CHECK (superseded_by_round > round),
  rejudge_reason text NOT NULL DEFAULT '',
  FOREIGN KEY (submission_id) REFERENCES submissions (id),
  CONSTRAINT superseded_verdicts_one_per_round UNIQUE (submission_id, round)
);
CREATE TRIGGER superseded_verdicts_append_only
  BEFORE UPDATE OR DELETE ON superseded_verdicts
  FOR EACH ROW EXECUTE FUNCTION audit_log_forbid_change();
CREATE TRIGGER superseded_verdicts_no_truncate BEFORE TRUNCATE ON superseded_verdicts
  FOR EACH STATEMENT EXECUTE FUNCTION audit_log_forbid_change();

-- The round of the current verdict (0: the first judging).
ALTER TABLE verdicts ADD COLUMN round integer NOT NULL DEFAULT 0 CHECK (round >= 0);

-- A round's jobs: one per (submission, kind, round). The fence also requires a job's round to
-- be its submission's current one (lock_and_finish_leased_job), so a result of an old round
-- can never be stored over a new one.
ALTER TABLE jobs ADD COLUMN round integer NOT NULL DEFAULT 0 CHECK (round >= 0);
ALTER TABLE jobs DROP CONSTRAINT jobs_one_per_kind;
ALTER TABLE jobs ADD CONSTRAINT jobs_one_per_kind_and_round UNIQUE (submission_id, kind, round);

ALTER TABLE submissions
  ADD COLUMN judging_round integer NOT NULL DEFAULT 0 CHECK (judging_round >= 0),
  ADD COLUMN rejudge_reason text NOT NULL DEFAULT '',
  ADD COLUMN hacked_reason text CHECK (hacked_reason <> ''),
  ADD COLUMN hacked_at timestamptz,
  ADD COLUMN hacked_by text,
  ADD CONSTRAINT submissions_hacked_whole
    CHECK ((hacked_reason IS NULL) = (hacked_at IS NULL) AND (hacked_at IS NULL) = (hacked_by IS NULL));

-- Marks are audited by a trigger, like every other change (0002): also one made in psql.
CREATE FUNCTION audit_submission_hacked() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO audit_log (actor, entity, entity_id, old_state, new_state, detail)
  VALUES (audit_actor(), 'submission', NEW.id::text, NEW.state, NEW.state,
          jsonb_build_object('hacked', NEW.hacked_reason IS NOT NULL,
                             'reason', coalesce(NEW.hacked_reason, OLD.hacked_reason),
                             'by', coalesce(NEW.hacked_by, OLD.hacked_by)));
  RETURN NULL;
END
$$;
CREATE TRIGGER submissions_audit_hacked AFTER UPDATE ON submissions
  FOR EACH ROW WHEN (OLD.hacked_reason IS DISTINCT FROM NEW.hacked_reason)
  EXECUTE FUNCTION audit_submission_hacked();

-- The harness that judged a verdict (the worker's Verdict.harness; NULL for verdicts stored
-- before workers reported it): what `rejudge --harness-older-than` compares.
CREATE FUNCTION verdict_harness_engine(verdict jsonb) RETURNS text
LANGUAGE sql IMMUTABLE AS $$ SELECT nullif(verdict #>> '{harness,engine}', '') $$;
-- Dotted numeric versions compare part by part ("0.10.0" > "0.9.1"); NULL (no harness
-- recorded) is older than every version; a stored version with a non-numeric part is not
-- comparable and counts as older (it is re-judged rather than trusted). The store checks the
-- given `version` is dotted numeric before it gets here.
CREATE FUNCTION harness_older_than(engine text, version text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF engine IS NULL THEN RETURN true; END IF;
  RETURN string_to_array(engine, '.')::int[] < string_to_array(version, '.')::int[];
EXCEPTION WHEN others THEN
  RETURN true;
END
$$;

-- The ranking views skip hacked submissions. CREATE OR REPLACE keeps each view's columns (so
-- the views that read them need no change); only the WHERE clause grows.
CREATE OR REPLACE VIEW leaderboard_results AS
SELECT s.id AS submission_id,
       s.tenant,
       s.model,
       coalesce(nullif(s.session_id, ''), s.id::text) AS trajectory,
       s.turn_index,
       s.knowledge_level,
       s.task_id,
       s.arch,
       s.language,
       s.scope,
       v.verdict_class,
       v.verdict_class = 'infrastructure_failure' AS infrastructure_failure,
       v.compiled,
       v.correct,
       v.tic,
       v.speedup,
       s.created_at,
       v.finished_at
FROM submissions s
JOIN verdicts v ON v.submission_id = s.id
WHERE v.verdict_class <> 'cancelled' AND s.hacked_at IS NULL;

CREATE OR REPLACE VIEW benchmark_turns AS
SELECT s.id AS submission_id,
       s.tenant,
       s.model,
       s.task_id,
       s.arch,
       s.knowledge_level,
       s.scope,
       coalesce(nullif(s.session_id, ''), s.id::text) AS trajectory,
       s.turn_index + 1 AS turn,
       v.verdict_class,
       v.compiled,
       v.correct AND NOT v.runtime_unverified AS correct,
       v.verdict_class = 'pass' AND v.tic AND NOT v.runtime_unverified AS tic,
       v.speedup,
       CASE WHEN v.verdict_class = 'pass' AND v.tic AND NOT v.runtime_unverified
            THEN benchmark_speed_of_light(v.verdict) END AS speed_of_light,
       v.runtime_unverified,
       s.created_at,
       v.finished_at,
       min(s.created_at) OVER (PARTITION BY s.tenant, coalesce(nullif(s.session_id, ''), s.id::text))
         AS trajectory_started_at
FROM submissions s
JOIN verdicts v ON v.submission_id = s.id
WHERE v.verdict_class NOT IN ('infrastructure_failure', 'cancelled') AND s.hacked_at IS NULL;
