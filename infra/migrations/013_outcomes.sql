-- Delivery outcomes (spec outcomes 1-3, DESIGN 6; issue 8): the append-only event log, the
-- account's suppression list, and the sender-platform connector credentials.
--
-- outcome_events: one row per accepted event, never updated or deleted. (account_id, source,
-- external_id) is the event's identity: a retried row with the same fingerprint is a duplicate, one
-- with other content an event_identity_conflict; the stored event wins. The raw diagnostic text is
-- never stored, only what was derived from it (label, enhanced code, issuer).
CREATE TABLE outcome_events (
  id text PRIMARY KEY,
  seq bigserial NOT NULL,
  account_id text NOT NULL REFERENCES accounts(id),
  source text NOT NULL,
  external_id text NOT NULL,
  fingerprint text NOT NULL,
  email text NOT NULL,
  mailbox text NOT NULL,
  email_hash text NOT NULL,
  domain text NOT NULL,
  outcome text NOT NULL,
  label text NOT NULL CHECK (label IN ('delivered', 'bounced_hard', 'bounced_soft', 'blocked_policy', 'unknown')),
  signal text CHECK (signal IN ('open', 'sent')),
  action text,
  smtp_enhanced_code text,
  issuer text,
  evidence text NOT NULL,
  occurred_at text,
  occurred_at_us bigint,
  local_zone_unknown boolean NOT NULL DEFAULT false,
  -- the suppression this event applied (null: none, or a stale one that was skipped)
  suppressed text CHECK (suppressed IN ('hard_bounce', 'complaint', 'unsubscribed')),
  imported_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (account_id, source, external_id)
);
-- one address's events, newest first (GET /v1/outcomes/email/events?email=)
CREATE INDEX outcome_events_mailbox ON outcome_events (account_id, mailbox, seq DESC);
-- the account's events, newest first
CREATE INDEX outcome_events_account ON outcome_events (account_id, seq DESC);

-- The account's suppressed mailboxes (the verifier's key: exact local part, lower-case ASCII
-- domain). Validations of these answer without probing and charge 0. A mailbox has one row: a
-- later suppression replaces it only when it is stronger (hard_bounce over complaint over
-- unsubscribed), so a hard bounce keeps answering `invalid` after an unsubscribe.
CREATE TABLE suppressions (
  account_id text NOT NULL REFERENCES accounts(id),
  mailbox text NOT NULL,
  kind text NOT NULL CHECK (kind IN ('hard_bounce', 'complaint', 'unsubscribed')),
  event_id text NOT NULL,
  suppressed_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, mailbox)
);

-- Whether an account may use sender-platform connectors (spec outcomes 3: `connector_unavailable`).
ALTER TABLE accounts ADD COLUMN connectors_enabled boolean NOT NULL DEFAULT true;

-- One credential per (account, platform). The webhook URL's secret is shown once; only its
-- SHA-256 is kept, unique across the table so the inbound route finds its connector by it.
-- Creating again replaces the hash (the previous URL stops working at once); revoking clears it.
CREATE TABLE outcome_connectors (
  account_id text NOT NULL REFERENCES accounts(id),
  platform text NOT NULL,
  secret_hash text UNIQUE,
  status text NOT NULL CHECK (status IN ('active', 'revoked')),
  created_at timestamptz NOT NULL,
  revoked_at timestamptz,
  last_event_at timestamptz,
  events_received bigint NOT NULL DEFAULT 0,
  events_ignored bigint NOT NULL DEFAULT 0,
  sent_events bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (account_id, platform)
);

-- A validation answered from the account's suppression list has validation_layer `suppression`.
ALTER TABLE validation_decisions DROP CONSTRAINT validation_decisions_layer_check;
ALTER TABLE validation_decisions ADD CONSTRAINT validation_decisions_layer_check CHECK (layer IN ('syntax', 'dns', 'smtp', 'catchall', 'suppression'));
