-- Outcome facts for the accuracy reports (issue 8), in the embedded profile's analytics tables;
-- the cluster profile keeps the same rows in ClickHouse. One row per accepted outcome event,
-- written in batches by SqlAnalytics like validation_decisions (idempotent by id, no foreign
-- keys, never the address: its hash). Reports join each fact to the account's latest decision
-- for the same hash made at or before the fact's time.
CREATE TABLE outcome_facts (
  id text PRIMARY KEY,
  account_id text NOT NULL,
  email_hash text NOT NULL CHECK (email_hash ~ '^[0-9a-f]{64}$'),
  domain text NOT NULL,
  outcome text NOT NULL,
  label text NOT NULL CHECK (label IN ('delivered', 'bounced_hard', 'bounced_soft', 'blocked_policy', 'unknown')),
  signal text CHECK (signal IN ('open', 'sent')),
  source text NOT NULL,
  occurred_at timestamptz NOT NULL,
  recorded_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX outcome_facts_account_time ON outcome_facts (account_id, occurred_at);
