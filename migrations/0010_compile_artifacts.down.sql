-- Reverts 0010_compile_artifacts to 0009's state exactly. Refused while a worker is
-- distrusted: the mark would be lost silently and that worker's artifacts trusted again by a
-- server that re-applies 0010 later. Lift or record the marks first (docs/operations.md).
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM workers WHERE distrusted_at IS NOT NULL) THEN
    RAISE EXCEPTION '0010_compile_artifacts cannot be reverted: distrusted workers exist'
      USING ERRCODE = 'object_in_use';
  END IF;
END
$$;

DROP TRIGGER workers_audit_distrust ON workers;
DROP FUNCTION audit_worker_distrust();
ALTER TABLE workers DROP CONSTRAINT workers_distrust_whole,
  DROP COLUMN distrust_detail, DROP COLUMN distrust_reason, DROP COLUMN distrusted_at;
DROP TABLE artifact_uses;
DROP TABLE compile_artifacts;
