-- Claims held by a live process are leases it renews (SVC_CLAIM_LEASE_MS), so another process can
-- tell a claim whose holder died from one that is merely slow, within seconds rather than minutes:
--
-- * An Idempotency-Key in progress names the request that holds it (`owner`, random per request)
--   and when that request last renewed it (`heartbeat_at`). A claim not renewed for a lease is
--   taken over by the next request with the key; the request that lost it can no longer complete
--   it (its completion names the owner), so its charge or job rolls back and only one counts.
-- * A job whose work is not on the bus yet (work_published_at NULL) is being published by the
--   process that holds `publish_claimed_until`; a worker takes over a job whose lease ran out (its
--   front died mid-publish) and publishes what is missing.
ALTER TABLE idempotency_keys ADD COLUMN owner text;
ALTER TABLE idempotency_keys ADD COLUMN heartbeat_at timestamptz NOT NULL DEFAULT now();
CREATE INDEX idempotency_keys_heartbeat ON idempotency_keys (heartbeat_at) WHERE status = 'in_progress';
ALTER TABLE jobs ADD COLUMN publish_claimed_until timestamptz;
CREATE INDEX jobs_unpublished ON jobs (publish_claimed_until) WHERE work_published_at IS NULL AND status IN ('queued', 'processing');
