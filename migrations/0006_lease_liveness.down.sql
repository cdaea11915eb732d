-- Reverts 0006_lease_liveness: the fence goes back to (job, worker, attempt) only.
DROP FUNCTION lease_is_live(timestamptz);
DROP TABLE scheduler_liveness;
