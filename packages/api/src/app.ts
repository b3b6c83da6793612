// The thin Fastify front: request ids, the auth gates, one error handler, OpenAPI, and one plugin
// per resource. It receives its services and settings; it never reads the environment.

import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import swagger from '@fastify/swagger';
import type { DestinationStream } from 'pino';
import { ServiceError } from '@svc/contracts';
import { httpServerFactory } from './http-server.ts';
import { documentRoute } from './openapi.ts';
import { nextRequestId } from './request-id.ts';
import { auth } from './plugins/auth.ts';
import { registerErrorHandling } from './plugins/errors.ts';
import { sharedSchemas } from './schemas.ts';
import { webhookSecretRoutes } from './routes/webhook-secrets.ts';
import { creditRoutes } from './routes/credits.ts';
import { healthRoutes } from './routes/health.ts';
import { csvUploadRoutes } from './routes/csv-upload.ts';
import { jobRoutes } from './routes/jobs.ts';
import { validateRoutes } from './routes/validate.ts';
import { outcomeRoutes } from './routes/outcomes.ts';
import { reportRoutes } from './routes/reports.ts';
import { mcpRoutes } from './routes/mcp.ts';
import { subscriptionRoutes } from './routes/subscriptions.ts';
import { dataRoutes } from './routes/data.ts';
import type { ApiServices, ApiSettings } from './types.ts';

export type { ApiServices, ApiSettings };

/**
 * What a log line says about a request (Fastify's default serializer, without the query string:
 * a key passed as `?api_key=…` must never reach a log). Runs only when the line is written.
 */
function requestForLog(req: FastifyRequest) {
  const url = req.url;
  const q = url.indexOf('?');
  return { method: req.method, url: q === -1 ? url : `${url.slice(0, q)}?[redacted]`, host: req.host, remoteAddress: req.ip, remotePort: req.socket?.remotePort };
}

export interface BuildOptions {
  /** Where log lines go (default: stdout). Tests read them from here. */
  logStream?: DestinationStream;
}

/** Methods no route of the service takes a body with. */
const BODYLESS_METHODS = new Set(['GET', 'HEAD', 'DELETE', 'OPTIONS']);

/** Whether the request announces no body: `Content-Length: 0`, or neither a length nor chunks. */
function emptyBody(h: Record<string, string | string[] | undefined>): boolean {
  return h['content-length'] === '0' || (h['content-length'] === undefined && h['transfer-encoding'] === undefined);
}

export async function buildApp(services: ApiServices, settings: ApiSettings, options: BuildOptions = {}): Promise<FastifyInstance> {
  const app: FastifyInstance = Fastify({
    logger: {
      level: settings.logLevel,
      redact: { paths: ['req.headers["x-api-key"]', 'req.headers.authorization', 'headers["x-api-key"]'], censor: '[redacted]' },
      serializers: { req: requestForLog },
      ...(options.logStream && { stream: options.logStream }),
    },
    // The HTTP/1 server: what never reaches a route (parser errors, a missing Host, another
    // HTTP version) is answered there with the catalogue body and a request id. Its listener
    // replaces Fastify's clientErrorHandler, which would otherwise answer too.
    // Nothing is logged at `silent` (the level is fixed at start): every request shares the one
    // logger instead of building a child of its own (pino stringifies a child's bindings).
    ...(settings.logLevel === 'silent' && { childLoggerFactory: (logger: FastifyBaseLogger) => logger }),
    serverFactory: httpServerFactory(() => app.log),
    clientErrorHandler: () => {},
    bodyLimit: settings.bodyLimitBytes,
    genReqId: nextRequestId,
    requestIdHeader: false,
    trustProxy: settings.trustProxy,
    // Draining is answered by the gate, with the error body and X-Request-ID.
    return503OnClosing: false,
    // A request must arrive whole within 30 s (a client that stalls mid-body holds nothing).
    requestTimeout: 30_000,
    // Malformed URLs and the like, answered with the catalogue's body instead of Fastify's.
    frameworkErrors: (err, req, reply) => {
      const e = new ServiceError('invalid_request', `Bad request: ${err.message}`);
      void (reply as FastifyReply).header('X-Request-ID', req.id).status(e.status).send(e.body());
    },
    ajv: { customOptions: { allErrors: false, coerceTypes: false, removeAdditional: false } },
  });

  // Bodies are JSON only (docs/api.md): without this, Fastify would take text/plain as a string.
  app.removeContentTypeParser('text/plain');
  for (const s of sharedSchemas) app.addSchema(s);
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'Email validation service', version: '1.0.0', description: 'Four-layer email validation (syntax, DNS, SMTP, catch-all) with credits charged only for High-Value Validations.' },
      servers: [{ url: settings.publicUrl }],
      components: { securitySchemes: { apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' } } },
    },
    // Each route's documented responses: its error codes per status, and its headers.
    transform: documentRoute,
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => String(json.$id ?? `def-${i}`) },
  });

  // Draining (SIGTERM): in-flight requests finish, and their keep-alive connections close as
  // soon as their response is written instead of holding the shutdown open until the keep-alive
  // timeout (Node reads keepAliveTimeout each time a socket turns idle).
  let draining = false;
  app.addHook('preClose', async () => {
    draining = true;
    app.server.keepAliveTimeout = 1;
  });

  // Every response carries the request id, error or not (`x-request-id`: in lower case, as
  // Fastify stores every header name, so it is not lowered again per request).
  app.addHook('onRequest', (req, reply, done) => {
    reply.header('x-request-id', req.id);
    // A request that takes no body ignores an empty one, whatever Content-Type it names (many
    // HTTP clients send `Content-Type: application/json` on every GET and DELETE): an empty
    // body is not parsed, so it is not an `invalid_json`.
    if (req.headers['content-type'] !== undefined && (BODYLESS_METHODS.has(req.method) || req.routeOptions.config?.noBody) && emptyBody(req.headers)) delete req.headers['content-type'];
    done();
  });
  await app.register(auth, {
    keys: services.store.keys,
    rateLimiter: services.rateLimiter,
    rateLimitPerIp: settings.rateLimitPerIp,
    rateLimitPerKey: settings.rateLimitPerKey,
    isDraining: () => draining,
    touch: (id) => void services.store.keys.touch(id).catch((err: unknown) => app.log.warn({ err }, 'could not record when a key was last used')),
  });
  registerErrorHandling(app);

  await app.register(healthRoutes, { services });
  await app.register(validateRoutes, { services });
  await app.register(creditRoutes, { services });
  if (services.jobs) await app.register(jobRoutes, { services, settings });
  if (services.jobs) await app.register(webhookSecretRoutes, { services });
  if (services.jobs && services.csvJobs) await app.register(csvUploadRoutes, { services });
  if (services.outcomes) await app.register(outcomeRoutes, { services: { ...services, outcomes: services.outcomes } });
  if (services.reports) await app.register(reportRoutes, { analytics: services.reports });
  if (services.subscriptions) await app.register(subscriptionRoutes, { services: { ...services, subscriptions: services.subscriptions } });
  if (services.data) await app.register(dataRoutes, { services: { ...services, data: services.data } });
  if (services.mcp) {
    const { rateLimiter, mcp } = services;
    await app.register(mcpRoutes, { mcp, rateLimiter, rateLimitPerIp: settings.rateLimitPerIp, rateLimitPerKey: settings.rateLimitPerKey, isDraining: () => draining });
  }
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  // The document is built (and cached) at start: a route whose declared responses and codes
  // disagree (openapi.ts) fails start-up rather than the first GET /openapi.json.
  app.addHook('onReady', async () => {
    app.swagger();
  });

  return app;
}
