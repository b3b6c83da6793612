-- Accounts, API keys, the credit ledger and idempotency records.
-- The same SQL runs on PGlite (embedded) and Postgres (cluster).

CREATE TABLE accounts (
  id text PRIMARY KEY,
  name text NOT NULL DEFAULT '',
  -- balance and reserved are the running totals of credit_ledger, kept in the same transaction
  -- as every ledger row so a conditional UPDATE can reserve atomically.
  balance bigint NOT NULL DEFAULT 0 CHECK (balance >= 0),
  reserved bigint NOT NULL DEFAULT 0 CHECK (reserved >= 0),
  subscription_status text NOT NULL DEFAULT 'active',
  subscription_id text,
  current_period_end timestamptz,
  cancel_at_period_end boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now(),
  CHECK (reserved <= balance)
);

CREATE TABLE api_keys (
  id text PRIMARY KEY,
  account_id text NOT NULL REFERENCES accounts(id),
  -- SHA-256 (hex) of the whole key: the key itself is shown once and never stored.
  key_hash text NOT NULL UNIQUE,
  -- 'svc_live_ab12' style: enough to recognise a key in a list, never enough to use it.
  display_prefix text NOT NULL,
  kind text NOT NULL CHECK (kind IN ('test', 'live')),
  -- comma-separated scopes; NULL = unrestricted (legacy) key
  scopes text,
  state text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'inactive', 'revoked')),
  expires_at timestamptz,
  name text NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL DEFAULT now(),
  revoked_at timestamptz
);
CREATE INDEX api_keys_account ON api_keys (account_id);

CREATE TABLE credit_reservations (
  id text PRIMARY KEY,
  account_id text NOT NULL REFERENCES accounts(id),
  amount bigint NOT NULL CHECK (amount > 0),
  charged bigint CHECK (charged >= 0 AND charged <= amount),
  status text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'settled')),
  purpose text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  settled_at timestamptz
);
CREATE INDEX credit_reservations_open ON credit_reservations (status, created_at);

-- Append-only: rows are inserted, never updated or deleted (see the trigger below).
-- grant (+balance), reserve (+reserved), charge (-balance, -reserved), release (-reserved).
CREATE TABLE credit_ledger (
  id bigserial PRIMARY KEY,
  account_id text NOT NULL REFERENCES accounts(id),
  kind text NOT NULL CHECK (kind IN ('grant', 'reserve', 'charge', 'release')),
  amount bigint NOT NULL CHECK (amount > 0),
  reservation_id text REFERENCES credit_reservations(id),
  note text NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX credit_ledger_account ON credit_ledger (account_id, id);

CREATE FUNCTION credit_ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'credit_ledger is append-only';
END;
$$;
CREATE TRIGGER credit_ledger_no_update BEFORE UPDATE OR DELETE ON credit_ledger
  FOR EACH ROW EXECUTE FUNCTION credit_ledger_append_only();

CREATE TABLE idempotency_keys (
  account_id text NOT NULL REFERENCES accounts(id),
  key text NOT NULL,
  route text NOT NULL,
  request_hash text NOT NULL,
  status text NOT NULL CHECK (status IN ('in_progress', 'done')),
  response_status integer,
  response_body text,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (account_id, key)
);
