// GET /v1/credits: the balance of the key's account (docs/api.md).

import type { FastifyPluginAsync } from 'fastify';
import { ServiceError } from '@svc/contracts';
import type { ApiServices } from '../types.ts';
import { errorResponses, type RouteErrors } from '../schemas.ts';

// The handler's own codes: the key's account vanished, or the balance read failed.
const config = { scope: 'credits:read', errors: ['invalid_api_key', 'internal_error'] } as const satisfies RouteErrors;

export const creditRoutes: FastifyPluginAsync<{ services: ApiServices }> = async (app, { services }) => {
  app.get(
    '/v1/credits',
    {
      config,
      schema: {
        summary: 'Credit balance of the key’s account',
        description: '`available` = `balance` − `reserved` (credits held by work in progress).',
        tags: ['credits'],
        security: [{ apiKey: [] }],
        response: { 200: { $ref: 'CreditBalance#' }, ...errorResponses(config) },
      },
    },
    async (req) => {
      const b = await services.store.ledger.balance(req.principal!.accountId);
      if (!b) throw new ServiceError('invalid_api_key');
      return b;
    },
  );
};
