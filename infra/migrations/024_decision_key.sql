-- validation_decisions: the primary key is (account_id, decided_at, id), and the separate
-- (account_id, decided_at) index is gone. The key serves the reports' time windows as that index
-- did, and still makes a redelivered decision (the same row again: same id, account and time)
-- insert nothing. One B-tree less for every row: on the embedded profile, where every answered
-- validation writes a row, a row cost Postgres-in-WASM ~71 µs with three B-trees and ~56 µs with
-- two (docs/decisions/storage-and-cluster.md, "Analytics on the request path").
ALTER TABLE validation_decisions DROP CONSTRAINT validation_decisions_pkey;
ALTER TABLE validation_decisions ADD CONSTRAINT validation_decisions_pkey PRIMARY KEY (account_id, decided_at, id);
DROP INDEX validation_decisions_account_time;
