-- The dashboard's sign-in (docs/decisions/dashboard.md): people who belong to an account, their
-- server-side sessions, and the single-use links that create a sign-in (the owner's, printed at
-- first start, and invitations). Secrets are stored as SHA-256 hashes only, like API keys:
-- session ids and link tokens exist in plain once, in the response (or the terminal) that hands
-- them out; passwords as scrypt hashes (packages/accounts/src/passwords.ts).

CREATE TABLE users (
  id text PRIMARY KEY,
  account_id text NOT NULL REFERENCES accounts(id),
  -- lower-cased; one sign-in per address across the service
  email text NOT NULL,
  -- scrypt$N$r$p$salt$hash (base64url)
  password_hash text NOT NULL,
  role text NOT NULL CHECK (role IN ('owner', 'member')),
  -- the service's own operators (accounts, credits, the data product): granted only by the admin CLI
  operator boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now(),
  removed_at timestamptz
);
CREATE UNIQUE INDEX users_email ON users (email) WHERE removed_at IS NULL;
CREATE INDEX users_account ON users (account_id);

-- A session ends at expires_at (absolute), after SVC_SESSION_IDLE_S without a request
-- (last_seen_at, refreshed at most once a minute), at sign-out, or when its user is removed.
CREATE TABLE user_sessions (
  id_hash text PRIMARY KEY,
  user_id text NOT NULL REFERENCES users(id),
  created_at timestamptz NOT NULL DEFAULT now(),
  last_seen_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  revoked_at timestamptz
);
CREATE INDEX user_sessions_user ON user_sessions (user_id);

-- Single use: used_at is set by the one redemption that succeeds, in the transaction that creates
-- the user.
CREATE TABLE user_links (
  token_hash text PRIMARY KEY,
  kind text NOT NULL CHECK (kind IN ('owner_setup', 'invite')),
  account_id text NOT NULL REFERENCES accounts(id),
  role text NOT NULL CHECK (role IN ('owner', 'member')),
  created_by text REFERENCES users(id),
  expires_at timestamptz NOT NULL,
  used_at timestamptz,
  used_by text REFERENCES users(id),
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX user_links_account ON user_links (account_id);
