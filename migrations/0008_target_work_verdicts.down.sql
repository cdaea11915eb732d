-- Reverts 0008: fails, as it should, while a verdict of one of the two classes is stored.
ALTER TABLE verdicts DROP CONSTRAINT verdicts_verdict_class_check;
ALTER TABLE verdicts ADD CONSTRAINT verdicts_verdict_class_check CHECK (verdict_class IN (
  'pass', 'compile_error', 'plan_invalid', 'runtime_error', 'timeout', 'wrong_result',
  'target_not_executed', 'input_mutated', 'impossible_time', 'compiled',
  'infrastructure_failure', 'cancelled'));
