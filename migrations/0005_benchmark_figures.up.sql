-- 0005_benchmark_figures: the benchmark's figures per trajectory, the one SQL definition that
-- every figure panel of the Grafana leaderboard reads (deploy/grafana/dashboards/
-- ptxbench-leaderboard.json; docs/metrics.md, "The same figures in SQL"). They are the figures
-- of `ptxbench report` (client/report/metrics.cc) computed from what the server stores, and
-- tests/deploy/dashboard_figures_test.cc checks that both give the same numbers for one run.
--
-- 0004's per-submission rates (leaderboard, leaderboard_by_turn_limit, leaderboard_daily) are
-- dropped: a rate over submissions is not the benchmark's figure (a model that passes at turn
-- 8 shows 1/8 TIC there and 100 % TIC@8 here), and its turn limits counted from 0.
-- leaderboard_results stays for the operational panels (verdicts by class, recent verdicts).

DROP VIEW leaderboard_daily;
DROP VIEW leaderboard_by_turn_limit;
DROP VIEW leaderboard;

-- A TIC verdict's fraction of the speed of light: the timed workload's roofline floor over the
-- candidate's median time, both from the timing stage's detail (docs/api.md, "Stage details";
-- docs/measurement.md, "Impossible times"). NULL when there is no timing stage, when the figures
-- are missing, not numbers or not positive, or when the fraction exceeds 1 (a time below the
-- floor is impossible_time). detail_json is a worker's text, not checked as JSON by the API:
-- whatever it holds must never make a dashboard query fail, hence the exception handler.
-- client/trajectory.cc SpeedOfLight is the same rule on the trajectory's verdict.
CREATE FUNCTION benchmark_speed_of_light(verdict jsonb) RETURNS double precision
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  detail jsonb;
  floor_ms double precision;
  median_ms double precision;
BEGIN
  SELECT (stage ->> 'detail_json')::jsonb INTO detail
  FROM jsonb_array_elements(verdict -> 'stages') AS stage
  WHERE stage ->> 'stage' = 'STAGE_TIMING'
  LIMIT 1;
  IF jsonb_typeof(detail -> 'roofline_floor_ms') <> 'number'
     OR jsonb_typeof(detail #> '{timing,result,candidate,median_ms}') <> 'number' THEN
    RETURN NULL;
  END IF;
  floor_ms := (detail ->> 'roofline_floor_ms')::double precision;
  median_ms := (detail #>> '{timing,result,candidate,median_ms}')::double precision;
  IF floor_ms > 0 AND median_ms > 0 AND floor_ms <= median_ms THEN
    RETURN floor_ms / median_ms;
  END IF;
  RETURN NULL;
EXCEPTION WHEN others THEN
  RETURN NULL;
END
$$;

-- "Within turn limit L" for a 1-based first turn (NULL: never): the one rule behind TIC@L,
-- correct@L and compiled@L in the views below.
CREATE FUNCTION benchmark_within(first_turn integer, turn_limit integer) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$ SELECT coalesce(first_turn <= turn_limit, false) $$;

-- fast_p for a trajectory's best TIC speedup (NULL: no timed TIC turn): inclusive threshold.
CREATE FUNCTION benchmark_fast(best_tic_speedup double precision, p double precision)
RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$ SELECT coalesce(best_tic_speedup >= p, false) $$;

-- One row per charged, evaluated turn: a submission whose final verdict says something about
-- the kernel. Infrastructure failures and cancellations are not charged (the client retries
-- them as the same turn: docs/client.md, "Infrastructure failures are never charged"). `turn` is
-- the 1-based charged turn of the trajectory files (the client sends turn_index = turn - 1).
-- runtime_unverified verdicts are never correct or TIC, whatever their other columns say.
CREATE VIEW benchmark_turns AS
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

-- One row per trajectory (the submissions of one tenant with one session id; a submission
-- without one is a trajectory of its own), with the figures that do not depend on a turn
-- limit. The figure of a set of trajectories is the mean of a boolean column over them; the
-- speedup geometric mean over the TIC turns of a set is exp(sum(tic_log_speedup_sum) /
-- sum(tic_speedups)), and the same for the speed of light. Full-scope figures are NULL for
-- compile-only trajectories and compile-only figures NULL for full-scope ones, so that an
-- average never mixes the two.
CREATE VIEW benchmark_trajectories AS
WITH per_trajectory AS (
  SELECT tenant, model, task_id, arch, knowledge_level, scope, trajectory,
         min(created_at) AS started_at,
         max(finished_at) AS finished_at,
         count(*) AS evaluated_turns,
         max(turn) AS last_turn,
         min(turn) FILTER (WHERE compiled) AS first_compiled_turn,
         min(turn) FILTER (WHERE correct) AS first_correct_turn,
         min(turn) FILTER (WHERE tic) AS first_tic_turn,
         max(speedup) FILTER (WHERE tic AND speedup > 0) AS best_tic_speedup,
         count(*) FILTER (WHERE tic AND speedup > 0) AS tic_speedups,
         coalesce(sum(ln(speedup)) FILTER (WHERE tic AND speedup > 0), 0) AS tic_log_speedup_sum,
         max(speed_of_light) AS best_speed_of_light,
         count(speed_of_light) AS tic_speeds_of_light,
         coalesce(sum(ln(speed_of_light)), 0) AS tic_log_speed_of_light_sum,
         count(*) FILTER (WHERE runtime_unverified) AS runtime_unverified_turns
  FROM benchmark_turns
  GROUP BY tenant, model, task_id, arch, knowledge_level, scope, trajectory
)
SELECT t.*,
       t.scope = 'compile_only' AS compile_only,
       t.first_compiled_turn IS NOT NULL AS compiled,
       CASE WHEN t.scope = 'full' THEN benchmark_within(t.first_tic_turn, 1) END AS tic_at_1,
       CASE WHEN t.scope = 'full' THEN benchmark_within(t.first_tic_turn, 4) END AS tic_at_4,
       CASE WHEN t.scope = 'full' THEN benchmark_within(t.first_tic_turn, 8) END AS tic_at_8,
       CASE WHEN t.scope = 'full' THEN t.first_correct_turn IS NOT NULL END AS correct,
       CASE WHEN t.scope = 'full' THEN benchmark_fast(t.best_tic_speedup, 0.5) END AS fast_0_5,
       CASE WHEN t.scope = 'full' THEN benchmark_fast(t.best_tic_speedup, 1.0) END AS fast_1_0,
       CASE WHEN t.scope = 'full' THEN benchmark_fast(t.best_tic_speedup, 1.2) END AS fast_1_2,
       CASE WHEN t.scope = 'compile_only'
            THEN benchmark_within(t.first_compiled_turn, 1) END AS compiled_at_1,
       CASE WHEN t.scope = 'compile_only'
            THEN benchmark_within(t.first_compiled_turn, 4) END AS compiled_at_4,
       CASE WHEN t.scope = 'compile_only'
            THEN benchmark_within(t.first_compiled_turn, 8) END AS compiled_at_8,
       -- Among trajectories whose first turn did not compile (NULL for the others): did a
       -- later turn repair it?
       CASE WHEN t.scope = 'compile_only' AND t.first_compiled_turn IS DISTINCT FROM 1
            THEN t.first_compiled_turn IS NOT NULL END AS compile_repaired
FROM per_trajectory t;

-- Every trajectory at every turn limit 1 .. the largest turn any submission has (at least 8):
-- the TIC-rate curve. A trajectory with no turn within the limit counts as a miss at it; one
-- that stopped early (TIC at turn 2) counts as a hit at every larger limit.
CREATE VIEW benchmark_turn_limits AS
SELECT t.tenant, t.model, t.task_id, t.arch, t.knowledge_level, t.scope, t.trajectory,
       t.started_at,
       l.turn_limit,
       CASE WHEN t.scope = 'full' THEN benchmark_within(t.first_tic_turn, l.turn_limit) END AS tic,
       CASE WHEN t.scope = 'full'
            THEN benchmark_within(t.first_correct_turn, l.turn_limit) END AS correct,
       benchmark_within(t.first_compiled_turn, l.turn_limit) AS compiled
FROM benchmark_trajectories t
CROSS JOIN generate_series(1, (SELECT greatest(8, coalesce(max(turn_index), 0) + 1)
                               FROM submissions)) AS l(turn_limit);
