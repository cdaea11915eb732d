-- 0003_lease_indexes: indexes that let the lease query (server/store/queries.cc, kLeaseJob)
-- find the fair-share tenant and that tenant's oldest job without sorting the queue.
--
-- Measured (bench/scheduler_bench, 5,000 queued jobs, 2-core machine): the 0001 lease query
-- sorted every eligible queued job on each lease, 8.5-9.9 ms of PostgreSQL time per lease,
-- 230-298 leases/s. With these indexes each step is a short index scan: 0.6-0.8 ms for the
-- whole lease statement (EXPLAIN ANALYZE, generic plan), independent of the queue length.
--
-- Both are partial (state = 'queued'), so they stay as small as the queue, not the history.
-- The key order is the lease order within a tenant (submission_seq, then kind), after the
-- routing key: GPU workers take jobs of one arch, compile-only workers compile jobs of any
-- arch. They replace 0001's (arch, submission_seq) and (kind, submission_seq) indexes, which
-- no statement needs any more: every index is one more insertion per job state change.
--
-- CREATE INDEX (not CONCURRENTLY: migrations run in a transaction) blocks writes to jobs
-- while it reads the table; on a large history, run it at a quiet time.
CREATE INDEX jobs_queued_gpu_route ON jobs (arch, tenant, submission_seq, kind)
  WHERE state = 'queued';
CREATE INDEX jobs_queued_compile_route ON jobs (tenant, submission_seq)
  WHERE state = 'queued' AND kind = 'compile';
DROP INDEX jobs_queued_by_arch;
DROP INDEX jobs_queued_by_kind;
