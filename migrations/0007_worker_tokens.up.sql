-- 0007_worker_tokens: a worker's identity belongs to the token that registered it.
--
-- Before, worker ids were not tied to tokens: any worker token could lease, heartbeat and
-- complete as any worker id it learned (issue: a worker token could store any verdict). Now
-- the registering token is recorded; WorkerService refuses every call about a worker id from
-- another token, and a registration under an existing (hostname, gpu_uuid) from another live
-- token. NULL: registered without a token (the loopback bootstrap) or before this migration;
-- such a worker is claimed by the next token that registers it, as is one whose token was
-- revoked (a rotated token takes its workers over).
ALTER TABLE workers ADD COLUMN token_id text REFERENCES api_tokens (token_id);
