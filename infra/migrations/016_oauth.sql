-- Hosted MCP's OAuth 2.1 authorization server (docs/decisions/mcp.md):
-- dynamically registered clients (RFC 7591), grants (one consent: an account holder, signed in
-- with one of their API keys, lets one client use some of that key's scopes), authorization codes
-- and tokens. Codes and tokens are stored as SHA-256 hashes only, like API keys: the plain values
-- exist once, in the response that hands them out.

CREATE TABLE oauth_clients (
  id text PRIMARY KEY,
  client_name text NOT NULL DEFAULT '',
  -- JSON array of the registered redirect URIs, compared exactly (OAuth 2.1 §4.1.1)
  redirect_uris text NOT NULL,
  -- the registration response, as answered (RFC 7591 §3.2.1)
  metadata text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- A grant ends when it is revoked (RFC 7009, a reused code or a replayed refresh token): every
-- token issued under it is refused from then on.
CREATE TABLE oauth_grants (
  id text PRIMARY KEY,
  client_id text NOT NULL REFERENCES oauth_clients(id),
  account_id text NOT NULL REFERENCES accounts(id),
  -- the key the account holder signed in with: its revocation, deactivation or expiry ends the grant too
  key_id text NOT NULL REFERENCES api_keys(id),
  -- comma-separated, a subset of the key's scopes
  scopes text NOT NULL,
  -- the RFC 8707 resource indicator the client asked for, if any
  resource text,
  created_at timestamptz NOT NULL DEFAULT now(),
  revoked_at timestamptz
);
CREATE INDEX oauth_grants_account ON oauth_grants (account_id);

-- Single-use and short-lived: used_at is set by the one exchange that succeeds.
CREATE TABLE oauth_codes (
  code_hash text PRIMARY KEY,
  grant_id text NOT NULL REFERENCES oauth_grants(id),
  redirect_uri text NOT NULL,
  -- PKCE (RFC 7636): S256 only; BASE64URL(SHA256(code_verifier))
  code_challenge text NOT NULL,
  expires_at timestamptz NOT NULL,
  used_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX oauth_codes_grant ON oauth_codes (grant_id);

CREATE TABLE oauth_tokens (
  token_hash text PRIMARY KEY,
  grant_id text NOT NULL REFERENCES oauth_grants(id),
  kind text NOT NULL CHECK (kind IN ('access', 'refresh')),
  -- comma-separated; a refresh may narrow the grant's scopes (RFC 6749 §6)
  scopes text NOT NULL,
  expires_at timestamptz NOT NULL,
  -- refresh tokens rotate: set when one is exchanged; presenting it again revokes the grant
  used_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX oauth_tokens_grant ON oauth_tokens (grant_id);
