// GET /v1/credits: the balance of the key's account (fields per DESIGN 6).

import type { FastifyPluginAsync } from 'fastify';
import { ServiceError } from '@svc/contracts';
import type { ApiServices } from '../types.ts';
import { gatedErrors } from '../schemas.ts';

export const creditRoutes: FastifyPluginAsync<{ services: ApiServices }> = async (app, { services }) => {
  app.get(
    '/v1/credits',
    {
      config: { scope: 'credits:read' },
      schema: {
        summary: 'Credit balance of the key’s account',
        description: '`available` = `balance` − `reserved` (credits held by work in progress).',
        tags: ['credits'],
        security: [{ apiKey: [] }],
        response: { 200: { $ref: 'CreditBalance#' }, ...gatedErrors },
      },
    },
    async (req) => {
      const b = await services.store.ledger.balance(req.principal!.accountId);
      if (!b) throw new ServiceError('invalid_api_key');
      return b;
    },
  );
};
