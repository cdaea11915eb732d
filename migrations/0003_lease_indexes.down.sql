-- Reverts 0003_lease_indexes: back to 0001's queue indexes.
CREATE INDEX jobs_queued_by_arch ON jobs (arch, submission_seq) WHERE state = 'queued';
CREATE INDEX jobs_queued_by_kind ON jobs (kind, submission_seq) WHERE state = 'queued';
DROP INDEX jobs_queued_compile_route;
DROP INDEX jobs_queued_gpu_route;
