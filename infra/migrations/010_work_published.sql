-- When a job's work was published on the bus. With a durable bus (Kafka) a worker that starts does
-- not publish again the work of jobs whose work is already there (every worker start used to
-- re-send all unfinished work of every running job); a job whose intake died before publishing
-- (NULL here) is still published by the next start.
ALTER TABLE jobs ADD COLUMN work_published_at timestamptz;
