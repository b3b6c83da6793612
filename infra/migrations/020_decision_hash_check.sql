-- validation_decisions.email_hash: its CHECK is a length instead of a regular expression. The
-- regex cost Postgres-in-WASM ~15 µs for every row written, a third of a decision row's cost on
-- the embedded profile, where every validation answered writes one (docs/decisions/
-- storage-and-cluster.md, "Analytics on the request path"). The one writer, SqlAnalytics, takes
-- only rows that checkDecision() passed, which checks the full form (64 lower-case hex digits).
ALTER TABLE validation_decisions DROP CONSTRAINT validation_decisions_email_hash_check;
ALTER TABLE validation_decisions ADD CONSTRAINT validation_decisions_email_hash_check CHECK (octet_length(email_hash) = 64);
