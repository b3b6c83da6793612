-- Job decisions on their way to analytics (packages/jobs/src/decision-relay.ts): written in the
-- transaction that records the job results they describe, so a decision exists exactly when its
-- result does, whatever process dies when; a relay in every worker writes them to analytics
-- (idempotent by id: a row sent twice after a crash is counted once) and deletes them. A relay
-- leases the rows it sends (no transaction is held across the analytics write: the embedded
-- profile's analytics is this same database); a lease that runs out makes them takeable again.
CREATE TABLE decision_outbox (
  seq bigserial PRIMARY KEY,
  id text NOT NULL UNIQUE,
  -- the Decision (packages/store/src/analytics.ts) as JSON, decided_at as ISO 8601
  decision jsonb NOT NULL,
  leased_until timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
