-- validation_decisions keyed for appends (docs/decisions/storage-and-cluster.md, "Decision rows
-- keyed for appends"). The primary key was the decision id alone: a random request id (`req_` +
-- 32 hex digits), so every row's key went to a random page of its index, beside a second B-tree
-- of the account's time. Now the key is (account_id, decided_at, id): an account's new decisions
-- go to the end of it, and it is the index of the time-window reports, so the separate time index
-- goes. A decision is still counted once however often it is delivered, because a delivery carries
-- the decision as it was first made, its time included (a sync request's decisions are built
-- once; a job's once, in the transaction that marks their rows done, and resent from the outbox as
-- stored). One address's decisions keep their index (account, hash, time).
ALTER TABLE validation_decisions DROP CONSTRAINT validation_decisions_pkey;
ALTER TABLE validation_decisions ADD PRIMARY KEY (account_id, decided_at, id);
DROP INDEX validation_decisions_account_time;
