-- 0006_lease_liveness: a lease is fenced on its expiry, except where the service was down.
--
-- Before this migration the fence checked (job, worker, attempt) but not expiry, so a lease
-- that had expired but was not yet reaped still accepted heartbeats (reviving it) and a late
-- Complete (storing a result the reaper was about to hand to someone else). Fencing on expiry
-- alone would be wrong the other way: while the server is restarting or the database is
-- down, no worker can heartbeat, and a lease that expires then belongs to a worker that was
-- alive all along (measured in a chaos run: workers reconnected 9-20 s after a server
-- restart, longer than short leases).
--
-- The rule, in one place (lease_is_live): a lease is live until lease_expires_at, and, when
-- the scheduler was down since before it expired, until the scheduler has been back for a
-- lease period. "Down" is read from scheduler_liveness: every reaper pass (each server runs
-- one, every few seconds) stamps alive_at; a gap longer than outage_after (which the reaper
-- writes too: a few of its intervals) means nobody could serve. The first pass after such a
-- gap extends every lease that was live when the gap began to a full lease from now
-- (server/store/queries.cc, grant_outage_grace), and only leases that had already expired
-- before the gap are reaped.
CREATE TABLE scheduler_liveness (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  alive_at timestamptz NOT NULL DEFAULT now(),
  outage_after interval NOT NULL DEFAULT interval '15 seconds' CHECK (outage_after > interval '0')
);
INSERT INTO scheduler_liveness DEFAULT VALUES;

-- STABLE: one snapshot's now() and liveness row per statement, so every row of a statement is
-- judged by the same clock.
CREATE FUNCTION lease_is_live(expires timestamptz) RETURNS boolean LANGUAGE sql STABLE AS $$
  SELECT expires > now() OR EXISTS (
    SELECT 1 FROM scheduler_liveness l
    WHERE now() - l.alive_at > l.outage_after AND expires >= l.alive_at)
$$;
