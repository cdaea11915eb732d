-- Reverts 0009_rejudge to 0008's state exactly: the views as 0004/0005 created them, the
-- one-job-per-kind constraint, no round or hacked columns. Refused while a submission has
-- been re-judged (its later rounds' jobs cannot fit one job per kind, and its current verdict
-- references one of them) or is marked hacked (the mark would be lost silently, and the
-- submission would be ranked again): dump superseded_verdicts and the marks, and decide.
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM submissions WHERE judging_round > 0 OR hacked_at IS NOT NULL) THEN
    RAISE EXCEPTION '0009_rejudge cannot be reverted: re-judged or hacked submissions exist'
      USING ERRCODE = 'object_in_use';
  END IF;
END
$$;

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
       -- When the trajectory started: the dashboards' time filter takes or leaves a trajectory
       -- whole, turns included (benchmark_trajectories.started_at is the same moment).
       min(s.created_at) OVER (PARTITION BY s.tenant, coalesce(nullif(s.session_id, ''), s.id::text))
         AS trajectory_started_at
FROM submissions s
JOIN verdicts v ON v.submission_id = s.id
WHERE v.verdict_class NOT IN ('infrastructure_failure', 'cancelled');

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
WHERE v.verdict_class <> 'cancelled';

DROP FUNCTION harness_older_than(text, text);
DROP FUNCTION verdict_harness_engine(jsonb);
DROP TRIGGER submissions_audit_hacked ON submissions;
DROP FUNCTION audit_submission_hacked();
ALTER TABLE submissions DROP CONSTRAINT submissions_hacked_whole,
  DROP COLUMN hacked_by, DROP COLUMN hacked_at, DROP COLUMN hacked_reason,
  DROP COLUMN rejudge_reason, DROP COLUMN judging_round;
ALTER TABLE jobs DROP CONSTRAINT jobs_one_per_kind_and_round;
ALTER TABLE jobs ADD CONSTRAINT jobs_one_per_kind UNIQUE (submission_id, kind);
ALTER TABLE jobs DROP COLUMN round;
ALTER TABLE verdicts DROP COLUMN round;
DROP TABLE superseded_verdicts;
