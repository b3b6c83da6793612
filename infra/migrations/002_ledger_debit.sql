-- A 'debit' is a charge taken without a reservation: used when the cost of a request is known
-- before any work (every verdict came from the cache), so one statement moves the money.
ALTER TABLE credit_ledger DROP CONSTRAINT credit_ledger_kind_check;
ALTER TABLE credit_ledger ADD CONSTRAINT credit_ledger_kind_check CHECK (kind IN ('grant', 'reserve', 'charge', 'release', 'debit'));
