// The account's webhook signing secrets: GET /v1/webhooks/secret (the current ones, by their
// first characters) and POST /v1/webhooks/secret/rotate (a new one, shown once; the current ones
// keep signing for a grace period). Deliveries carry one signature per current secret.

import type { FastifyPluginAsync } from 'fastify';
import { DEFAULT_SECRET_GRACE_S, listWebhookSecrets, MAX_SECRET_GRACE_S, rotateWebhookSecret } from '@svc/jobs';
import { ServiceError } from '@svc/contracts';
import type { ApiServices } from '../types.ts';
import { errorResponses, type RouteErrors } from '../schemas.ts';

const listConfig = { scope: 'email:validate:bulk', errors: ['internal_error'] } as const satisfies RouteErrors;
const rotateConfig = { scope: 'email:validate:bulk', noBody: true, errors: ['invalid_json', 'invalid_request', 'unsupported_media_type', 'payload_too_large', 'internal_error'] } as const satisfies RouteErrors;

const secretInfo = {
  type: 'object',
  required: ['id', 'secret_prefix', 'created_at', 'expires_at'],
  properties: {
    id: { type: 'string' },
    secret_prefix: { type: 'string', description: 'The first characters of the secret, then `…`' },
    created_at: { type: 'string', format: 'date-time' },
    expires_at: { type: ['string', 'null'], format: 'date-time', description: 'null: the newest, current until the next rotation; else it signs until then' },
  },
} as const;

export const webhookSecretRoutes: FastifyPluginAsync<{ services: ApiServices }> = async (app, { services }) => {
  const store = services.store;
  app.get(
    '/v1/webhooks/secret',
    {
      config: listConfig,
      schema: {
        summary: 'The account’s current webhook signing secrets (not the secrets themselves)',
        description: 'Newest first. During a rotation’s grace period there are two: each delivery carries one `v1` signature per current secret.',
        tags: ['webhooks'],
        security: [{ apiKey: [] }],
        response: { 200: { type: 'object', required: ['secrets'], properties: { secrets: { type: 'array', items: secretInfo } } }, ...errorResponses(listConfig) },
      },
    },
    async (req) => listWebhookSecrets(store, req.principal!.accountId),
  );

  app.post<{ Body: unknown }>(
    '/v1/webhooks/secret/rotate',
    {
      config: rotateConfig,
      schema: {
        summary: 'Make a new webhook signing secret (shown once); the current ones sign for a grace period',
        description: `Body (optional): \`{"grace_period_seconds": N}\`, 0-${MAX_SECRET_GRACE_S} (default ${DEFAULT_SECRET_GRACE_S}: 24 h). Until a replaced secret's \`expires_at\`, every delivery is signed with it and with the new one (\`X-Signature: t=…,v1=<new>,v1=<old>\`), so receivers can switch without missing a delivery. The secret is in this response only.`,
        tags: ['webhooks'],
        security: [{ apiKey: [] }],
        response: {
          201: {
            type: 'object',
            required: ['id', 'secret', 'created_at', 'previous'],
            properties: {
              id: { type: 'string' },
              secret: { type: 'string', description: '`whsec_…`: shown this once' },
              created_at: { type: 'string', format: 'date-time' },
              previous: { type: 'array', items: { type: 'object', required: ['id', 'expires_at'], properties: { id: { type: 'string' }, expires_at: { type: 'string', format: 'date-time' } } } },
            },
          },
          ...errorResponses(rotateConfig),
        },
      },
    },
    async (req, reply) => {
      const body = req.body;
      if (body !== undefined && body !== null && (typeof body !== 'object' || Array.isArray(body))) throw new ServiceError('invalid_request', 'The body must be a JSON object ({"grace_period_seconds": N}) or empty');
      const grace = (body as { grace_period_seconds?: unknown } | null | undefined)?.grace_period_seconds;
      const out = await rotateWebhookSecret(store, req.principal!.accountId, grace ?? DEFAULT_SECRET_GRACE_S);
      return reply.status(201).header('Cache-Control', 'no-store').send(out);
    },
  );
};
