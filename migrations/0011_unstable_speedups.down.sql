-- Reverts 0011_unstable_speedups to 0010's state exactly: the ranking views as 0009_rejudge
-- defined them (an unstable speedup counted like any other), then the generated columns,
-- which the views no longer read. Nothing is lost: the flag is generated from the verdict's
-- JSON, which stays.
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

ALTER TABLE superseded_verdicts DROP COLUMN speedup_stable;
ALTER TABLE verdicts DROP COLUMN speedup_stable;
