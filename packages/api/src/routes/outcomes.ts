// Outcome routes (docs/decisions/outcomes.md): import (JSON or CSV), the events read, the
// sender-platform connector and its inbound webhook. Each translates HTTP to @svc/outcomes'
// OutcomesService and back.

import type { FastifyPluginAsync } from 'fastify';
import { failingAs, ServiceError, type ErrorCode } from '@svc/contracts';
import { CONNECTOR_PLATFORMS, MAX_OUTCOME_ROWS, OUTCOME_BODY_LIMIT, outcomeCsvRows, type ConnectorPlatform, type OutcomesService } from '@svc/outcomes';
import { parseAddress } from '@svc/verifier';
import type { ApiServices } from '../types.ts';
import { errorResponses, type RouteErrors } from '../schemas.ts';
import { JSON_BODY_CODES } from '../plugins/errors.ts';

/** Inbound connector bodies: one platform event, or a small array of them (bounded: docs/decisions/outcomes.md). */
export const CONNECTOR_BODY_LIMIT = 1024 * 1024;

const importConfig = {
  scope: 'email:outcomes:write',
  errors: [...JSON_BODY_CODES, 'invalid_csv', 'missing_outcomes', 'too_many_outcomes', 'outcome_import_failed', 'outcome_suppression_failed'],
} as const satisfies RouteErrors;

const eventsConfig = { scope: 'email:outcomes:read', errors: ['invalid_outcome_query'] } as const satisfies RouteErrors;

const connectorCodes = (failure: ErrorCode): ErrorCode[] => ['connector_unavailable', 'connector_not_found', failure];
const createConfig = { scope: 'email:outcomes:write', noBody: true, errors: ['connector_unavailable', 'connector_create_failed'] } as const satisfies RouteErrors;
const statusConfig = { scope: 'email:outcomes:write', errors: connectorCodes('connector_status_failed') } satisfies RouteErrors;
const revokeConfig = { scope: 'email:outcomes:write', errors: connectorCodes('connector_revoke_failed') } satisfies RouteErrors;
const inboundConfig = { errors: [...JSON_BODY_CODES, 'invalid_connector_secret', 'connector_unavailable', 'outcome_import_failed', 'outcome_suppression_failed'] } as const satisfies RouteErrors;

const int = { type: 'integer' } as const;
const nullableString = { type: ['string', 'null'] } as const;

const rowErrorSchema = {
  type: 'object',
  required: ['index', 'code', 'reason'],
  properties: { index: int, code: { type: 'string', description: 'Stable row error code (docs/decisions/outcomes.md); keep unknown ones.' }, reason: { type: 'string' } },
} as const;

const importResponse = {
  type: 'object',
  additionalProperties: false,
  required: [
    'received', 'accepted', 'skipped_invalid', 'duplicates', 'suppressed', 'complaints_suppressed', 'unsubscribed_suppressed',
    'stale_suppressions_skipped', 'suppression_cache_invalidated', 'errors', 'credits_charged', 'imported_at',
  ],
  properties: {
    received: int,
    accepted: int,
    skipped_invalid: int,
    duplicates: int,
    suppressed: int,
    complaints_suppressed: int,
    unsubscribed_suppressed: int,
    stale_suppressions_skipped: int,
    suppression_cache_invalidated: int,
    errors: { type: 'array', items: rowErrorSchema },
    credits_charged: { type: 'integer', enum: [0] },
    imported_at: { type: 'string', format: 'date-time' },
  },
} as const;

const connectorStatusSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['platform', 'status', 'created_at', 'last_event_at', 'events_received', 'events_ignored', 'denominator_status'],
  properties: {
    platform: { type: 'string' },
    status: { type: 'string', enum: ['active', 'revoked'] },
    created_at: { type: 'string', format: 'date-time' },
    last_event_at: nullableString,
    events_received: int,
    events_ignored: int,
    denominator_status: { type: 'string', enum: ['ok', 'sent_event_missing'] },
  },
} as const;

const platformParams = { type: 'object', required: ['platform'], properties: { platform: { type: 'string', maxLength: 64 } } } as const;

function platformOf(p: string): ConnectorPlatform {
  if (!(CONNECTOR_PLATFORMS as readonly string[]).includes(p)) throw new ServiceError('connector_unavailable', `No connector for the platform "${p.slice(0, 64)}"; supported: ${CONNECTOR_PLATFORMS.join(', ')}`);
  return p as ConnectorPlatform;
}

/** A database failure while importing is the retryable import failure (nothing was kept). */
const storing = <T>(p: Promise<T>): Promise<T> => failingAs(p, 'outcome_import_failed');

export const outcomeRoutes: FastifyPluginAsync<{ services: ApiServices & { outcomes: OutcomesService } }> = async (app, { services }) => {
  const { outcomes } = services;
  // CSV imports (docs/decisions/outcomes.md): the body as text, for this plugin's routes only.
  app.addContentTypeParser('text/csv', { parseAs: 'string', bodyLimit: OUTCOME_BODY_LIMIT }, (_req, body, done) => done(null, body));

  app.post<{ Body: unknown }>(
    '/v1/outcomes/email/import',
    {
      config: importConfig,
      bodyLimit: OUTCOME_BODY_LIMIT,
      schema: {
        summary: 'Import delivery outcomes (JSON or CSV)',
        description: `JSON \`{"outcomes": [row, …]}\` with 1 to ${MAX_OUTCOME_ROWS.toLocaleString('en-US')} rows, or a CSV body (\`Content-Type: text/csv\`, a header row naming the fields); body up to 5 MiB. Append-only; idempotent by \`source\` + \`external_id\`; 0 credits.`,
        tags: ['outcomes'],
        security: [{ apiKey: [] }],
        response: { 200: importResponse, ...errorResponses(importConfig) },
      },
    },
    async (req) => {
      const accountId = req.principal!.accountId;
      const type = String(req.headers['content-type'] ?? '').toLowerCase();
      if (typeof req.body === 'string' && type.startsWith('text/csv')) {
        const rows = outcomeCsvRows(req.body);
        return storing(outcomes.import(accountId, rows, { defaultSource: 'csv_import' }));
      }
      const body = req.body;
      // A body with no `outcomes` array (a bare array, another value, a wrong field) is missing
      // its outcomes: one of the spec's whole-request codes, with what was wrong in the message.
      if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new ServiceError('missing_outcomes', `The body must be a JSON object {"outcomes": [...]}, not ${Array.isArray(body) ? 'an array' : body === null ? 'null' : `a ${typeof body}`}`);
      const rows = (body as { outcomes?: unknown }).outcomes;
      if (rows === undefined || rows === null || (Array.isArray(rows) && rows.length === 0)) throw new ServiceError('missing_outcomes');
      if (!Array.isArray(rows)) throw new ServiceError('missing_outcomes', '`outcomes` must be an array of rows');
      if (rows.length > MAX_OUTCOME_ROWS) throw new ServiceError('too_many_outcomes', `maximum ${MAX_OUTCOME_ROWS.toLocaleString('en-US')} outcomes per request; got ${rows.length.toLocaleString('en-US')}`);
      return storing(outcomes.import(accountId, rows));
    },
  );

  app.get<{ Querystring: { email?: string; limit?: string; cursor?: string } }>(
    '/v1/outcomes/email/events',
    {
      config: eventsConfig,
      schema: {
        summary: 'Stored outcome events, newest first (optionally of one address)',
        tags: ['outcomes'],
        security: [{ apiKey: [] }],
        querystring: {
          type: 'object',
          properties: {
            email: { type: 'string', description: 'Only this address’s events' },
            limit: { type: 'string', description: 'Events per page, 1-100 (default 20)' },
            cursor: { type: 'string', description: 'The `next_cursor` of the previous page' },
          },
        },
        response: {
          200: {
            type: 'object',
            additionalProperties: false,
            required: ['events', 'next_cursor'],
            properties: {
              events: {
                type: 'array',
                items: {
                  type: 'object',
                  additionalProperties: false,
                  required: ['email', 'outcome', 'label', 'source', 'external_id', 'occurred_at', 'action', 'smtp_enhanced_code', 'suppressed', 'imported_at'],
                  properties: {
                    email: { type: 'string' },
                    outcome: { type: 'string' },
                    label: { type: 'string' },
                    source: { type: 'string' },
                    external_id: { type: 'string' },
                    occurred_at: nullableString,
                    action: nullableString,
                    smtp_enhanced_code: nullableString,
                    suppressed: { type: 'boolean', description: 'Whether this event suppressed the address' },
                    imported_at: { type: 'string', format: 'date-time' },
                  },
                },
              },
              next_cursor: { type: ['string', 'null'] },
            },
          },
          ...errorResponses(eventsConfig),
        },
      },
    },
    async (req) => {
      const q = req.query;
      const limit = q.limit === undefined ? 20 : /^[0-9]{1,3}$/.test(q.limit) ? Number(q.limit) : NaN;
      if (!(limit >= 1 && limit <= 100)) throw new ServiceError('invalid_outcome_query', 'limit must be an integer from 1 to 100');
      let mailbox: string | undefined;
      if (q.email !== undefined) {
        const p = parseAddress(q.email.trim());
        if (!p.ok) throw new ServiceError('invalid_outcome_query', 'email is not a valid address');
        mailbox = `${p.local}@${p.asciiDomain}`;
      }
      if (q.cursor !== undefined && (q.cursor.length === 0 || q.cursor.length > 200)) throw new ServiceError('invalid_outcome_query', 'cursor is not a next_cursor of this list');
      return outcomes.events(req.principal!.accountId, { limit, ...(mailbox !== undefined && { mailbox }), ...(q.cursor !== undefined && { cursor: q.cursor }) });
    },
  );

  app.post<{ Params: { platform: string } }>(
    '/v1/outcomes/email/connectors/:platform',
    {
      config: createConfig,
      schema: {
        summary: 'Create (or re-create) the sender-platform connector; the webhook URL is shown once',
        description: 'Creating again replaces the secret: the previous URL stops working at once.',
        tags: ['outcomes'],
        security: [{ apiKey: [] }],
        params: platformParams,
        response: {
          201: {
            type: 'object',
            additionalProperties: false,
            required: ['platform', 'status', 'webhook_url', 'created_at'],
            properties: { platform: { type: 'string' }, status: { type: 'string', enum: ['active'] }, webhook_url: { type: 'string' }, created_at: { type: 'string', format: 'date-time' } },
          },
          ...errorResponses(createConfig),
        },
      },
    },
    async (req, reply) => {
      const out = await outcomes.createConnector(req.principal!.accountId, platformOf(req.params.platform));
      reply.header('Cache-Control', 'no-store');
      return reply.status(201).send(out);
    },
  );

  app.get<{ Params: { platform: string } }>(
    '/v1/outcomes/email/connectors/:platform',
    {
      config: statusConfig,
      schema: {
        summary: 'Connector status (the secret URL cannot be recovered)',
        tags: ['outcomes'],
        security: [{ apiKey: [] }],
        params: platformParams,
        response: { 200: connectorStatusSchema, ...errorResponses(statusConfig) },
      },
    },
    async (req) => outcomes.connectorStatus(req.principal!.accountId, platformOf(req.params.platform)),
  );

  app.delete<{ Params: { platform: string } }>(
    '/v1/outcomes/email/connectors/:platform',
    {
      config: revokeConfig,
      schema: {
        summary: 'Revoke the connector: its webhook URL is no longer accepted',
        tags: ['outcomes'],
        security: [{ apiKey: [] }],
        params: platformParams,
        response: {
          200: { type: 'object', additionalProperties: false, required: ['platform', 'status'], properties: { platform: { type: 'string' }, status: { type: 'string', enum: ['revoked'] } } },
          ...errorResponses(revokeConfig),
        },
      },
    },
    async (req) => outcomes.revokeConnector(req.principal!.accountId, platformOf(req.params.platform)),
  );

  app.post<{ Params: { platform: string; secret: string }; Body: unknown }>(
    '/v1/outcomes/email/connectors/:platform/events/:secret',
    {
      config: inboundConfig,
      bodyLimit: CONNECTOR_BODY_LIMIT,
      schema: {
        summary: 'The connector’s inbound webhook (the secret URL given at creation; no API key)',
        description: 'Accepts email_sent, email_opened, email_bounced, lead_replied, lead_interested and lead_unsubscribed; other events are answered 200 and counted as ignored. Retries dedupe by the scheduled-email id.',
        tags: ['outcomes'],
        params: { type: 'object', required: ['platform', 'secret'], properties: { platform: { type: 'string', maxLength: 64 }, secret: { type: 'string', maxLength: 200 } } },
        response: {
          200: {
            type: 'object',
            additionalProperties: false,
            required: ['received', 'accepted', 'duplicates', 'ignored', 'rejected', 'errors'],
            properties: { received: int, accepted: int, duplicates: int, ignored: int, rejected: int, errors: { type: 'array', items: rowErrorSchema } },
          },
          ...errorResponses(inboundConfig),
        },
      },
    },
    async (req) => {
      const platform = platformOf(req.params.platform);
      const account = await storing(outcomes.connectorAccount(platform, req.params.secret));
      if (!account) throw new ServiceError('invalid_connector_secret');
      return storing(outcomes.inbound(account, platform, req.body));
    },
  );
};
