-- Analytics in the embedded profile (DESIGN 3, 4; issue 7 item 4): every validation decision,
-- written in batches by SqlAnalytics (packages/store/src/analytics.ts); the cluster profile keeps
-- the same rows in ClickHouse. Outcome reports join outcomes to these decisions by
-- (account_id, email_hash), the decision made before the outcome.
--
-- `id` is the decision's own id: a redelivered decision (a retried batch whose first write did
-- land) is inserted with ON CONFLICT (id) DO NOTHING and counted once. The address itself is never
-- stored, only the hex SHA-256 of its normalized form. No foreign key to accounts: analytics must
-- not refuse or block on anything in the transactional schema. The checks mirror what
-- checkDecision() refuses before a row is buffered; reason_code is not checked here, so a reason
-- code added to the vocabulary needs no migration.
CREATE TABLE validation_decisions (
  id text PRIMARY KEY,
  account_id text NOT NULL,
  email_hash text NOT NULL CHECK (email_hash ~ '^[0-9a-f]{64}$'),
  domain text NOT NULL,
  result text NOT NULL CHECK (result IN ('valid', 'valid_role_based', 'risky', 'invalid', 'unknown')),
  reason_code text NOT NULL,
  layer text NOT NULL CHECK (layer IN ('syntax', 'dns', 'smtp', 'catchall')),
  mx_host text,
  latency_ms integer NOT NULL CHECK (latency_ms >= 0),
  job_id text,
  source text NOT NULL CHECK (source IN ('single', 'bulk', 'job', 'mcp')),
  credits_charged integer NOT NULL CHECK (credits_charged >= 0),
  decided_at timestamptz NOT NULL,
  recorded_at timestamptz NOT NULL DEFAULT now()
);
-- reports over a time window (counts per result, per domain)
CREATE INDEX validation_decisions_account_time ON validation_decisions (account_id, decided_at);
-- one address's decisions, latest first (and the outcome join)
CREATE INDEX validation_decisions_account_email ON validation_decisions (account_id, email_hash, decided_at DESC);
