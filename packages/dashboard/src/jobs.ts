// One address, the account's jobs and a CSV list, for anyone signed in: the REST API's use cases
// (billing's validateAndCharge, @svc/jobs' JobsService and CsvJobs), so the rules and the answers
// are the API's own.

import type { FastifyInstance } from 'fastify';
import { JOB_STATES, ServiceError, type JobState } from '@svc/contracts';
import { bodyOf, hide, hideNoBody, requireBillable, text, type DashboardContext } from './context.ts';

export async function jobRoutes(app: FastifyInstance, { store, opts, guard }: DashboardContext): Promise<void> {
  // ---- One address, for anyone signed in: the API's own use case and answer, charged the same.

  if (opts.validate) {
  const validate = opts.validate;
  // The API's response schema (shared by the app): the same fields, serialized the same way.
  app.post(`/validate`, { schema: { hide: true, response: { 200: { $ref: 'ValidationResult#' } } } }, async (req) => {
    const s = await guard(req, 'session');
    const raw = bodyOf(req).email;
    if (raw !== undefined && typeof raw !== 'string') throw new ServiceError('invalid_email_type');
    const email = (raw ?? '').trim();
    if (!email) throw new ServiceError('email_required');
    await requireBillable(store, s.user.account_id);
    return validate(s.user.account_id, email, String(req.id));
  });
  }

  // ---- Jobs, for anyone signed in: the REST routes' use cases (list, cancel, a signed download URL).

  if (opts.jobs) {
  const jobs = opts.jobs;
  app.get<{ Querystring: { limit?: string; cursor?: string; status?: string } }>(`/jobs`, hide, async (req) => {
    const s = await guard(req, 'session');
    const { limit: rawLimit, cursor, status } = req.query;
    if (status !== undefined && !(JOB_STATES as readonly string[]).includes(status)) throw new ServiceError('invalid_request', `status must be one of ${JOB_STATES.join(', ')}`);
    if (cursor !== undefined && (typeof cursor !== 'string' || cursor.length > 200)) throw new ServiceError('invalid_request', 'cursor is not a cursor of this list');
    const page = await jobs.list(s.user.account_id, { ...(rawLimit !== undefined && { limit: Number(rawLimit) }), ...(cursor !== undefined && { cursor }), ...(status !== undefined && { status: status as JobState }) });
    return { jobs: page.jobs.map((j) => jobs.status(j)), next_cursor: page.next_cursor };
  });
  app.get<{ Params: { id: string } }>(`/jobs/:id`, hide, async (req) => {
    const s = await guard(req, 'session');
    return jobs.status(await jobs.get(s.user.account_id, req.params.id));
  });
  app.post<{ Params: { id: string } }>(`/jobs/:id/cancel`, hideNoBody, async (req) => {
    const s = await guard(req, 'session');
    return jobs.status(await jobs.cancel(s.user.account_id, req.params.id));
  });
  app.get<{ Params: { id: string }; Querystring: { segment?: string } }>(`/jobs/:id/download`, hide, async (req) => {
    const s = await guard(req, 'session');
    const segment = typeof req.query.segment === 'string' ? req.query.segment : undefined;
    return jobs.downloadLink(s.user.account_id, req.params.id, segment);
  });
  }

  // ---- A list: the CSV batch of the REST API (prepare, the page PUTs the file to the signed URL, start).

  if (opts.csv && opts.jobs) {
  const { csv, jobs } = opts;
  app.post(`/csv/prepare`, hide, async (req, reply) => {
    const s = await guard(req, 'session');
    const body = bodyOf(req);
    const webhook = body.webhook_url;
    if (webhook !== undefined && webhook !== null && typeof webhook !== 'string') throw new ServiceError('invalid_webhook_url', 'webhook_url must be a URL');
    await requireBillable(store, s.user.account_id);
    const { upload } = await csv.prepare(s.user.account_id, { filename: body.filename as string, webhookUrl: webhook === '' ? null : ((webhook as string | null | undefined) ?? null) });
    reply.status(201);
    // The signed URL's path and query: the page PUTs to its own origin (SVC_PUBLIC_URL may name another).
    const u = new URL(upload.upload_url);
    return { batch_id: upload.batch_id, upload_path: `${u.pathname}${u.search}`, expires_at: upload.expires_at, max_bytes: upload.max_bytes };
  });
  app.post(`/csv/start`, hide, async (req, reply) => {
    const s = await guard(req, 'session');
    const body = bodyOf(req);
    const batch = text(body, 'batch_id', 100);
    const column = text(body, 'email_column', 1024);
    await requireBillable(store, s.user.account_id);
    const job = await csv.start(s.user.account_id, batch, column);
    reply.status(202);
    return jobs.status(job);
  });
  }
}
