-- Validation decisions in packs (docs/decisions/storage-and-cluster.md, "Decisions in packs").
--
-- The embedded profile writes a row of analytics for every validation it answers, on the one
-- connection and thread the requests' debits and the jobs' results also use. A row of
-- validation_decisions cost that thread ~25-45 µs (its COPY parsed, the heap tuple, a primary key
-- of three columns and the email_key index updated, slower as the table outgrew the buffer pool):
-- on a cached, charged validation the largest single piece of work after the request itself.
--
-- A pack holds up to 100 decisions of one account as one row: their times' bounds, their
-- addresses' keys (email_key: the first 64 bits of email_hash, as a bigint, for one address's
-- decisions through the GIN index), and the decisions themselves as JSON text, one array per
-- decision:
--   [id, email_hash, domain, result, reason_code, layer, mx_host, latency_ms, job_id, source,
--    credits_charged, decided_at as milliseconds since the epoch]
-- and what an outcome report reads of each decision without parsing the body, in the body's order:
-- `heads`, its time in ms (13 digits, zero-padded) and its result as one letter (v valid,
-- r valid_role_based, k risky, i invalid, u unknown), 14 characters a decision; `hashes`, its
-- email_hash as 32 bytes. Writing a pack costs ~14-24 µs a decision. The body is stored out of line
-- and uncompressed (STORAGE EXTERNAL: compressing it cost more on the write than the space it
-- saved is worth here); the rest stays in the row (STORAGE MAIN, a row of up to ~5 KB under a
-- toast_tuple_target of 8160), so that a report reads it without a TOAST fetch.
--
-- Idempotency moves from the write to the read, as in ClickHouse's table: a redelivered decision
-- (the same id, its account and time as first made) is written again, and every report counts
-- distinct ids. No foreign key to accounts, as before: analytics never blocks on the
-- transactional schema.
CREATE TABLE decision_packs (
  account_id text NOT NULL,
  first_at timestamptz NOT NULL,
  last_at timestamptz NOT NULL,
  email_keys bigint[] NOT NULL,
  body text NOT NULL,
  heads text NOT NULL,
  hashes bytea NOT NULL,
  CHECK (first_at <= last_at)
) WITH (toast_tuple_target = 8160);
ALTER TABLE decision_packs ALTER COLUMN body SET STORAGE EXTERNAL;
ALTER TABLE decision_packs ALTER COLUMN heads SET STORAGE MAIN;
ALTER TABLE decision_packs ALTER COLUMN hashes SET STORAGE MAIN;
ALTER TABLE decision_packs ALTER COLUMN email_keys SET STORAGE MAIN;
-- reports over a time window: an account's packs that end at or after the window's start
CREATE INDEX decision_packs_account_time ON decision_packs (account_id, last_at);
-- one address's decisions (the outcome reports' join, decisionsFor). Without GIN's pending list
-- (fastupdate): with it, each write was cheaper until the list passed its 4 MB and one write then
-- merged it into the index, holding the one connection (and every debit behind it) 0.7 s.
CREATE INDEX decision_packs_email_keys ON decision_packs USING gin (email_keys) WITH (fastupdate = off);

-- The decisions written before this migration, in packs of 100 per account in time order.
INSERT INTO decision_packs (account_id, first_at, last_at, email_keys, body, heads, hashes)
SELECT account_id, min(decided_at), max(decided_at), array_agg(email_key ORDER BY decided_at, id),
       json_agg(json_build_array(id, email_hash, domain, result, reason_code, layer, mx_host, latency_ms, job_id, source, credits_charged, ms)
                ORDER BY decided_at, id)::text,
       string_agg(lpad(ms::text, 13, '0')
                  || CASE result WHEN 'valid' THEN 'v' WHEN 'valid_role_based' THEN 'r' WHEN 'risky' THEN 'k' WHEN 'invalid' THEN 'i' ELSE 'u' END,
                  '' ORDER BY decided_at, id),
       decode(string_agg(email_hash, '' ORDER BY decided_at, id), 'hex')
  FROM (SELECT *, floor(extract(epoch FROM decided_at) * 1000)::bigint AS ms,
               (row_number() OVER (PARTITION BY account_id ORDER BY decided_at, id) - 1) / 100 AS pack
          FROM validation_decisions) r
 GROUP BY account_id, pack;
DROP TABLE validation_decisions;

-- The decisions one row each, every decision once, with the columns the table had (for operators'
-- own queries; the adapter's reports read the packs with their windows' bounds). A filter on
-- account_id reaches the packs' index.
CREATE VIEW validation_decisions AS
SELECT DISTINCT ON (p.account_id, e->>0)
       e->>0 AS id, p.account_id, e->>1 AS email_hash, e->>2 AS domain, e->>3 AS result, e->>4 AS reason_code,
       e->>5 AS layer, e->>6 AS mx_host, (e->>7)::int AS latency_ms, e->>8 AS job_id, e->>9 AS source,
       (e->>10)::int AS credits_charged, timestamptz 'epoch' + (e->>11)::bigint * interval '1 millisecond' AS decided_at
  FROM decision_packs p CROSS JOIN LATERAL jsonb_array_elements(p.body::jsonb) e
 ORDER BY p.account_id, e->>0;
