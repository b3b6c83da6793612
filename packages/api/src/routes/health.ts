// /health, /live and /ready (docs/api.md). No key: load balancers and orchestrators call them.

import type { FastifyPluginAsync } from 'fastify';
import type { ApiServices } from '../types.ts';

const ts = { type: 'string', format: 'date-time' } as const;

export const healthRoutes: FastifyPluginAsync<{ services: ApiServices }> = async (app, { services }) => {
  app.get(
    '/health',
    { schema: { summary: 'Legacy health probe', tags: ['health'], response: { 200: { type: 'object', required: ['status', 'timestamp'], properties: { status: { type: 'string', enum: ['healthy'] }, timestamp: ts } } } } },
    async () => ({ status: 'healthy', timestamp: new Date().toISOString() }),
  );
  app.get(
    '/live',
    { schema: { summary: 'Liveness: the process answers; no dependency is checked', tags: ['health'], response: { 200: { type: 'object', required: ['status', 'timestamp'], properties: { status: { type: 'string', enum: ['alive'] }, timestamp: ts } } } } },
    async () => ({ status: 'alive', timestamp: new Date().toISOString() }),
  );
  const checks = { type: 'object', additionalProperties: { type: 'string', enum: ['ok', 'failed'] } } as const;
  const readyBody = {
    type: 'object',
    required: ['status', 'checks', 'timestamp'],
    properties: { status: { type: 'string', enum: ['ready'] }, checks, timestamp: ts },
  } as const;
  // The readiness body (docs/api.md), with the catalogue's code.
  const notReadyBody = {
    type: 'object',
    required: ['status', 'code', 'checks', 'errors', 'timestamp'],
    properties: {
      status: { type: 'string', enum: ['not_ready'] },
      code: { type: 'string', enum: ['not_ready'] },
      checks,
      errors: { type: 'array', items: { type: 'string' } },
      timestamp: ts,
    },
  } as const;
  app.get(
    '/ready',
    { schema: { summary: 'Readiness: cache, database, DNS and outbound SMTP (checked every 30 s in the background)', tags: ['health'], response: { 200: readyBody, 503: notReadyBody } } },
    async (_req, reply) => {
      const s = services.readiness.state;
      const timestamp = new Date().toISOString();
      if (s.ready) return { status: 'ready', checks: s.checks, timestamp };
      return reply.status(503).send({ status: 'not_ready', code: 'not_ready', checks: s.checks, errors: s.errors, timestamp });
    },
  );
};
