-- The webhook outbox (DESIGN 6 "Job webhook", issue 6 item 5). The job finalizer inserts an event
-- in the same transaction as the job's completion; a dispatcher claims due events and POSTs them.
-- `payload` is the exact JSON body, fixed at enqueue, so every retry sends the same bytes; `id`
-- (also the X-Webhook-Id header) is derived from the job id and the event, so a finalizer that
-- runs twice after a crash inserts nothing the second time.
-- job_id carries no foreign key: the outbox outlives nothing it points to, and it must not depend
-- on the jobs table's shape.
CREATE TABLE webhook_events (
  id text PRIMARY KEY,
  account_id text NOT NULL REFERENCES accounts(id),
  job_id text NOT NULL,
  url text NOT NULL,
  event text NOT NULL CHECK (event IN ('job.completed', 'job.failed')),
  payload text NOT NULL,
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
  -- deliveries started (counted when claimed, so a crash mid-request still counts)
  attempts integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  -- when a pending event may be claimed; a claim moves it a lease ahead, so an event whose
  -- dispatcher died is claimed again once the lease has passed
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  -- what went wrong last (status code, error code, refused address): never the URL or a secret
  last_error text,
  created_at timestamptz NOT NULL DEFAULT now(),
  delivered_at timestamptz,
  CHECK ((status = 'delivered') = (delivered_at IS NOT NULL))
);
CREATE INDEX webhook_events_due ON webhook_events (status, next_attempt_at);
CREATE INDEX webhook_events_job ON webhook_events (job_id);
