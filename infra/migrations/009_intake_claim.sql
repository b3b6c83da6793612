-- A CSV batch's start-processing claims the batch in the database before it reads the upload, so
-- two fronts (or two requests) never run its intake at once: the loser gets 409 at once instead of
-- writing the same input blobs and deleting them on its way out. The claim is a lease, renewed
-- while the intake runs; a process killed mid-intake leaves it to expire.
ALTER TABLE jobs ADD COLUMN intake_claimed_until timestamptz;
