-- Asynchronous validation jobs (spec core 2.2, 3.1; DESIGN 4 and 6). The same SQL runs on PGlite
-- and Postgres.
--
-- A job's input rows live in the blob store (input_key), written before the job row commits; the
-- request path writes nothing per row here. job_results gets one row per unique email of the job,
-- written by the aggregator idempotently (job_id, idx); the counters on jobs advance in the same
-- transaction, by exactly the rows that statement inserted or finished.

CREATE TABLE jobs (
  id text PRIMARY KEY,
  account_id text NOT NULL REFERENCES accounts(id),
  status text NOT NULL CHECK (status IN ('awaiting_upload', 'queued', 'processing', 'completed', 'failed', 'canceled')),
  source text NOT NULL CHECK (source IN ('json', 'csv')),
  filename text,
  webhook_url text,
  email_column text,
  total_rows integer NOT NULL DEFAULT 0 CHECK (total_rows >= 0),
  unique_emails integer NOT NULL DEFAULT 0 CHECK (unique_emails >= 0 AND unique_emails <= total_rows),
  -- the hold of credit_reservations (purpose 'job'): NULL until credits are reserved
  reservation_id text REFERENCES credit_reservations(id),
  credits_reserved integer NOT NULL DEFAULT 0 CHECK (credits_reserved >= 0),
  -- unique emails with a final result (a greylisted one waiting for its re-probe is not processed)
  processed integer NOT NULL DEFAULT 0 CHECK (processed >= 0 AND processed <= unique_emails),
  -- the `results` counters of spec core 2.2, over unique emails
  valid integer NOT NULL DEFAULT 0,
  valid_role_based integer NOT NULL DEFAULT 0,
  invalid integer NOT NULL DEFAULT 0,
  risky integer NOT NULL DEFAULT 0,
  unknown integer NOT NULL DEFAULT 0,
  role_based integer NOT NULL DEFAULT 0,
  high_value integer NOT NULL DEFAULT 0,
  catch_all integer NOT NULL DEFAULT 0,
  -- set once, when the reservation is settled (finalized): charged + refunded = reserved
  credits_charged integer NOT NULL DEFAULT 0 CHECK (credits_charged >= 0),
  credits_refunded integer NOT NULL DEFAULT 0 CHECK (credits_refunded >= 0),
  finalized boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now(),
  started_at timestamptz,
  completed_at timestamptz,
  error text,
  input_key text,
  results_key text,
  CHECK (NOT finalized OR credits_charged + credits_refunded = credits_reserved),
  CHECK (valid + valid_role_based + invalid + risky + unknown = processed)
);
-- GET /v1/csv/jobs: newest first, keyset pagination on (created_at, id)
CREATE INDEX jobs_account_created ON jobs (account_id, created_at DESC, id DESC);
-- restart recovery: the jobs still running
CREATE INDEX jobs_unfinished ON jobs (created_at) WHERE status IN ('queued', 'processing');

CREATE TABLE job_results (
  job_id text NOT NULL REFERENCES jobs(id),
  -- the index of the unique email in the job (first-occurrence order of the input)
  idx integer NOT NULL CHECK (idx >= 0),
  email text NOT NULL,
  -- the priced validation result (spec core 2.1 with credits_charged and charge_reason)
  verdict jsonb NOT NULL,
  chargeable boolean NOT NULL,
  -- probes made for this email (a greylisted answer is re-probed later, up to a bound)
  attempts integer NOT NULL DEFAULT 1 CHECK (attempts >= 1),
  state text NOT NULL CHECK (state IN ('done', 'deferred')),
  -- when a deferred email is probed again (the durable side of the Scheduler port)
  next_attempt_at timestamptz,
  -- a scheduler took the re-probe of this deferred email and has it in flight until then; past
  -- it (the process died), the email is due again
  leased_until timestamptz,
  PRIMARY KEY (job_id, idx),
  CHECK ((state = 'deferred') = (next_attempt_at IS NOT NULL))
);
-- the scheduler's question: which deferred emails are due?
CREATE INDEX job_results_deferred_due ON job_results (next_attempt_at) WHERE state = 'deferred';
CREATE INDEX job_results_deferred_leased ON job_results (leased_until) WHERE state = 'deferred' AND leased_until IS NOT NULL;

-- Settings the service generates for itself on first start (e.g. the HMAC secret for signed URLs
-- when SVC_SECRET is not set), shared by every process on the store.
CREATE TABLE service_settings (
  name text PRIMARY KEY,
  value text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
