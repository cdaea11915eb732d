-- Reverts 0007_worker_tokens: worker ids are no longer tied to tokens.
ALTER TABLE workers DROP COLUMN token_id;
