-- Messages of the in-process bus that failed every delivery (packages/jobs/src/ports.ts,
-- InProcessBus): parked here for an operator (`npm run admin -- dead-letters`) after the
-- subscription's dead-letter handler answered their work another way. The cluster profile parks
-- them on the Kafka topic `dead-letters` instead.
CREATE TABLE dead_letters (
  id bigserial PRIMARY KEY,
  topic text NOT NULL,
  key text NOT NULL,
  -- the message as JSON text, as the bus held it (JSON escapes any NUL, so it fits a text column)
  message text NOT NULL,
  error text NOT NULL,
  attempts integer NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX dead_letters_created ON dead_letters (created_at);

-- A dead-lettered job row is answered `unknown`, reason `processing_failed`, validation_layer
-- `processing` (no layer answered), and is a decision like any other.
ALTER TABLE validation_decisions DROP CONSTRAINT validation_decisions_layer_check;
ALTER TABLE validation_decisions ADD CONSTRAINT validation_decisions_layer_check CHECK (layer IN ('syntax', 'dns', 'smtp', 'catchall', 'suppression', 'processing'));
