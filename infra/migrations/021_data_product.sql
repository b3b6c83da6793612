-- The data product (the data endpoints: company and people data, the email finder) is outside
-- the generally available catalogue: an account reaches those routes only once an operator turns
-- it on (`npm run admin -- account data --account ID --enable`). Without it they answer 403
-- product_not_enabled (docs/api.md, "Data endpoints").
ALTER TABLE accounts ADD COLUMN data_product boolean NOT NULL DEFAULT false;

-- The data endpoints' answers, one row per (endpoint, normalised input): the lower-case punycode
-- domain, the canonical LinkedIn URL, ... `value` is the answer as the endpoint returns it
-- (without the per-request fields: credits, cache_hit, latency); `found` false rows remember a
-- miss for the same time-to-live. Reads take a row only while `fetched_at` is within the
-- endpoint's time-to-live; `force_refresh` skips the read and rewrites the row.
CREATE TABLE enrich_cache (
  endpoint text NOT NULL,
  key text NOT NULL,
  found boolean NOT NULL,
  value text NOT NULL,
  source_provider text,
  fetched_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (endpoint, key)
);
CREATE INDEX enrich_cache_fetched ON enrich_cache (fetched_at);
