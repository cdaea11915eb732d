-- 0011_unstable_speedups: an unstable speedup is not a speedup in the rankings (issue 11: a
-- submission whose timing samples scatter far more than the library's "does not get a clean
-- speedup"; docs/metrics.md, "Unstable speedups").
--
-- Why a column: the verdict's sampling.speedup_stable (common/verdict.h Sampling) reached the
-- database only inside the verdict's JSON, which the server writes as protobuf JSON
-- (server/api/convert.cc): a false boolean is left out there, so
-- `verdict #>> '{sampling,speedup_stable}'` is NULL both for an unstable speedup and for a
-- verdict that has no sampling, and every reader would have to know that. The flag is now a
-- column that the database generates from the stored JSON: every verdict CompleteJob stores
-- (queries.cc finish_with_verdict, also on a re-judge's ON CONFLICT update) gets it, the rows
-- already stored get it here, and it can never disagree with the JSON GetSubmission serves. A
-- verdict without sampling (not timed, or from a worker before verdicts carried it) is stable:
-- nothing says its speedup is unclean. superseded_verdicts (LIKE verdicts) gets the same column,
-- so that an old round reads like a current one.
ALTER TABLE verdicts ADD COLUMN speedup_stable boolean NOT NULL
  GENERATED ALWAYS AS (
    jsonb_typeof(verdict -> 'sampling') IS DISTINCT FROM 'object'
    OR coalesce(verdict #> '{sampling,speedup_stable}' = 'true'::jsonb, false)) STORED;
ALTER TABLE superseded_verdicts ADD COLUMN speedup_stable boolean NOT NULL
  GENERATED ALWAYS AS (
    jsonb_typeof(verdict -> 'sampling') IS DISTINCT FROM 'object'
    OR coalesce(verdict #> '{sampling,speedup_stable}' = 'true'::jsonb, false)) STORED;

-- The ranking views read an unstable speedup as no speedup (NULL): the turn stays what it is
-- (TIC, correct, compiled), but it is in no speedup figure, never fast_p (benchmark_fast of a
-- NULL best), and has no speed of light (the candidate's median time is the unstable figure).
-- benchmark_trajectories and benchmark_turn_limits read benchmark_turns and keep only speedups
-- > 0, so they follow with no change of their own. CREATE OR REPLACE keeps every view's columns;
-- only these expressions change, and 0011's down restores 0009's text.
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
       CASE WHEN v.speedup_stable THEN v.speedup END AS speedup,
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
       CASE WHEN v.speedup_stable THEN v.speedup END AS speedup,
       CASE WHEN v.verdict_class = 'pass' AND v.tic AND NOT v.runtime_unverified
                 AND v.speedup_stable
            THEN benchmark_speed_of_light(v.verdict) END AS speed_of_light,
       v.runtime_unverified,
       s.created_at,
       v.finished_at,
       min(s.created_at) OVER (PARTITION BY s.tenant, coalesce(nullif(s.session_id, ''), s.id::text))
         AS trajectory_started_at
FROM submissions s
JOIN verdicts v ON v.submission_id = s.id
WHERE v.verdict_class NOT IN ('infrastructure_failure', 'cancelled') AND s.hacked_at IS NULL;
