// @svc/jobs: job intake (JSON, CSV), dedupe, reservation, aggregation, finalization, result CSV, webhooks.
