-- Catch-all recovery (issue 8 item 7; DESIGN 6): one recovery per job. The unique job_id is the
-- claim: a second request for the same job finds the first (and answers it) instead of charging
-- again. A claim whose process died (still 'running' past its lease) may be taken over; its
-- reservation is released by the stale sweep (purpose 'recovery').
CREATE TABLE catchall_recoveries (
  id text PRIMARY KEY,
  job_id text NOT NULL UNIQUE REFERENCES jobs(id),
  account_id text NOT NULL REFERENCES accounts(id),
  status text NOT NULL CHECK (status IN ('running', 'completed')),
  rows integer NOT NULL DEFAULT 0,
  upgraded integer NOT NULL DEFAULT 0,
  downgraded integer NOT NULL DEFAULT 0,
  credits_reserved integer NOT NULL DEFAULT 0,
  credits_charged integer NOT NULL DEFAULT 0,
  reservation_id text,
  lease_until timestamptz NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  completed_at timestamptz
);

-- The rows a recovery changed, with the evidence that decided each.
CREATE TABLE catchall_recovery_rows (
  recovery_id text NOT NULL REFERENCES catchall_recoveries(id),
  idx integer NOT NULL,
  email text NOT NULL,
  previous_result text NOT NULL,
  result text NOT NULL,
  reason_code text NOT NULL,
  evidence jsonb NOT NULL,
  PRIMARY KEY (recovery_id, idx)
);
