-- 0008_target_work_verdicts: the verdicts table accepts the strong-TIC verdict classes.
--
-- Issue 11 added two verdict classes (common/verdict.h, proto VerdictClass 13 and 14):
-- target_work_insufficient (the target families ran but did too little of the task's work, as
-- hardware counters on the timed path showed) and profiled_path_differs (the instrumented run's
-- target work differs from the timed path's). 0001's CHECK lists the classes a verdict may
-- have, so without this migration the first such verdict would fail to store and its job would
-- be retried until it ended as an infrastructure failure.
ALTER TABLE verdicts DROP CONSTRAINT verdicts_verdict_class_check;
ALTER TABLE verdicts ADD CONSTRAINT verdicts_verdict_class_check CHECK (verdict_class IN (
  'pass', 'compile_error', 'plan_invalid', 'runtime_error', 'timeout', 'wrong_result',
  'target_not_executed', 'input_mutated', 'impossible_time', 'compiled',
  'infrastructure_failure', 'cancelled', 'target_work_insufficient', 'profiled_path_differs'));
