-- Subscriptions (issue 9; spec core 2.4, 3.2): plans as data, the account's subscription as the
-- payment processor reports it, the processor's events (applied once each, by their id), and
-- the ledger's `expire` kind (the credits a subscription's end sets to 0).
-- `accounts.subscription_status`, `current_period_end` and `cancel_at_period_end` stay the mirror
-- the gates and GET /v1/credits read; they are written in the same transaction as subscriptions.

ALTER TABLE credit_ledger DROP CONSTRAINT credit_ledger_kind_check;
ALTER TABLE credit_ledger ADD CONSTRAINT credit_ledger_kind_check CHECK (kind IN ('grant', 'reserve', 'charge', 'release', 'debit', 'expire'));

CREATE TABLE plans (
  id text PRIMARY KEY,
  name text NOT NULL,
  price_cents bigint NOT NULL CHECK (price_cents >= 0),
  currency text NOT NULL DEFAULT 'usd',
  credits_per_period bigint NOT NULL CHECK (credits_per_period >= 0),
  period_days integer NOT NULL CHECK (period_days > 0),
  created_at timestamptz NOT NULL DEFAULT now()
);

INSERT INTO plans (id, name, price_cents, credits_per_period, period_days) VALUES
  ('starter', 'Starter', 1900, 2000, 30),
  ('growth', 'Growth', 7900, 10000, 30),
  ('scale', 'Scale', 29900, 50000, 30);

CREATE TABLE subscriptions (
  -- The processor's identifier (`sub_local_…` for the local processor, Stripe's `sub_…`).
  id text PRIMARY KEY,
  account_id text NOT NULL REFERENCES accounts(id),
  processor text NOT NULL CHECK (processor IN ('local', 'stripe')),
  plan_id text NOT NULL REFERENCES plans(id),
  -- The processor's status words (Stripe's: active, trialing, past_due, unpaid, canceled, …).
  status text NOT NULL,
  cancel_at_period_end boolean NOT NULL DEFAULT false,
  current_period_start timestamptz NOT NULL,
  current_period_end timestamptz NOT NULL,
  ended_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
-- At most one subscription of an account that has not ended.
CREATE UNIQUE INDEX subscriptions_one_live ON subscriptions (account_id) WHERE status <> 'canceled';

-- Every processor event seen, once: a retried delivery (same id) changes nothing.
CREATE TABLE subscription_events (
  id text PRIMARY KEY,
  processor text NOT NULL,
  type text NOT NULL,
  subscription_id text,
  -- What applying it did: `applied`, or why it was ignored.
  result text NOT NULL,
  received_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX subscription_events_subscription ON subscription_events (subscription_id, received_at);
