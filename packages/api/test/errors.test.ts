// The error catalogue is a contract: every code has a status, a retry class and a line in
// docs/errors.md that agrees with it, and the codes the spec names all exist.

import { readFileSync } from 'node:fs';
import t from 'tap';
import { ERRORS } from '../src/errors.ts';

const doc = readFileSync(new URL('../../../docs/errors.md', import.meta.url), 'utf8');
const rows = new Map<string, { status: number; retry: boolean }>();
for (const m of doc.matchAll(/^\| `([a-z_]+)` \| (\d{3}) \| (yes|no) \|/gm)) rows.set(m[1]!, { status: Number(m[2]), retry: m[3] === 'yes' });

t.test('every code is documented with the same status and retry class', async (t) => {
  for (const [code, spec] of Object.entries(ERRORS)) {
    const row = rows.get(code);
    t.ok(row, `${code} has a line in docs/errors.md`);
    if (row) t.same(row, { status: spec.status, retry: spec.retry }, code);
  }
});

t.test('the document lists no code the service lacks', async (t) => {
  for (const code of rows.keys()) t.ok(code in ERRORS, code);
  t.equal(rows.size, Object.keys(ERRORS).length);
});

t.test('codes named by spec core 7 exist with their statuses', async (t) => {
  const named: Record<string, number> = {
    insufficient_credits: 402,
    validation_upstream_failed: 503,
    idempotency_key_conflict: 409,
    idempotency_request_in_progress: 409,
    control_plane_route_misconfigured: 500,
    job_not_found: 404,
    invalid_job_state: 409,
    api_key_expired: 401,
    api_key_inactive: 401,
    api_key_revoked: 401,
    invalid_json: 400,
    payload_too_large: 413,
  };
  for (const [code, status] of Object.entries(named)) t.equal(ERRORS[code as keyof typeof ERRORS]?.status, status, code);
});

t.test('retry classes follow spec core 7', async (t) => {
  for (const [code, spec] of Object.entries(ERRORS)) {
    const shouldRetry = spec.status === 429 || spec.status >= 500 ? code !== 'control_plane_route_misconfigured' : code === 'idempotency_request_in_progress';
    t.equal(spec.retry, shouldRetry, code);
  }
});
