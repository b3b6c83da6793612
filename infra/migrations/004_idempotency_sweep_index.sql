-- The one-minute sweep deletes idempotency records past their 24 h (expires_at < now()), and
-- start-up releases claims left in progress (status, created_at): without these, both scan the
-- whole table, which on PGlite holds the one connection while requests wait.
CREATE INDEX idempotency_keys_expires ON idempotency_keys (expires_at);
CREATE INDEX idempotency_keys_in_progress ON idempotency_keys (created_at) WHERE status = 'in_progress';
