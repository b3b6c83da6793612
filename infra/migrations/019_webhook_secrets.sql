-- Each account's webhook signing secrets (packages/store/src/webhook-secrets.ts). The plain
-- secret is kept: the service signs every delivery with it (HMAC-SHA256), so a hash would not do;
-- the API shows it once, when it is made (POST /v1/webhooks/secret/rotate), and afterwards only
-- its first characters. A rotation makes a new secret and gives the ones still current a grace
-- period (expires_at): until then deliveries carry one signature per current secret.
CREATE TABLE webhook_secrets (
  id text PRIMARY KEY,
  account_id text NOT NULL REFERENCES accounts(id),
  secret text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  -- NULL: the newest, current until the next rotation; else it signs until then
  expires_at timestamptz
);
CREATE INDEX webhook_secrets_account ON webhook_secrets (account_id, created_at);
