// Hosted MCP for AI agents (docs/api.md, docs/decisions/mcp.md): the OAuth 2.1
// endpoints (RFC 8414 and RFC 9728 metadata, RFC 7591 registration, the consent page, the token
// endpoint, RFC 7009 revocation) and the Streamable HTTP endpoint `/mcp`. The rules live in
// @svc/mcp; these routes translate HTTP to them and back. They are not part of the
// public REST API's OpenAPI document: MCP clients discover them through the metadata documents.
//
// `/mcp` takes only the bearer tokens issued here (an X-API-Key is refused: api_key_not_accepted),
// and its 401s carry `WWW-Authenticate: Bearer error="invalid_token", …, resource_metadata="…"`
// (RFC 6750 §3, RFC 9728 §5.1) so a client can find the authorization server. The transport runs
// stateless: a new MCP server and transport per request, handed the raw request, response and the
// body Fastify parsed.

import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { ServiceError } from '@svc/contracts';
import { consentPage, errorPage, MCP_PATH, OAUTH_PATHS, type AccessContext, type HostedMcp, type Outcome } from '@svc/mcp';
import type { RateDecision, RateLimiterPort } from '@svc/store';
import { MINUTE_MS, rateLimited, setRateHeaders } from '../plugins/auth.ts';

export interface McpRoutesOptions {
  mcp: HostedMcp;
  rateLimiter: RateLimiterPort;
  rateLimitPerIp: number;
  rateLimitPerKey: number;
  isDraining: () => boolean;
}

/** Form bodies (consent, token, revocation) are small. */
const FORM_LIMIT = 16 * 1024;
const hide = { schema: { hide: true } } as const;

/** The consent page may not be framed (clickjacking) and runs no script. */
const PAGE_HEADERS = {
  'Content-Type': 'text/html; charset=utf-8',
  'Cache-Control': 'no-store',
  'X-Frame-Options': 'DENY',
  'Content-Security-Policy': "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
  'Referrer-Policy': 'no-referrer',
} as const;

export const mcpRoutes: FastifyPluginAsync<McpRoutesOptions> = async (app, opts) => {
  const { mcp, rateLimiter, rateLimitPerIp, rateLimitPerKey, isDraining } = opts;
  const oauth = mcp.oauth;

  // OAuth requests are forms (RFC 6749 §4.1.3, RFC 7009 §2.1); only in this plugin.
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: FORM_LIMIT }, (_req, body, done) => done(null, new URLSearchParams(body as string)));
  const form = (req: FastifyRequest): URLSearchParams => (req.body instanceof URLSearchParams ? req.body : new URLSearchParams());

  /** Abuse protection of the unauthenticated endpoints: the per-address limit of the REST gates. */
  const ipGate = async (req: FastifyRequest, reply: FastifyReply): Promise<RateDecision> => {
    const d = await rateLimiter.hit(`ip:${req.ip}`, rateLimitPerIp, MINUTE_MS);
    setRateHeaders(reply, d);
    if (isDraining()) throw new ServiceError('service_unavailable');
    if (!d.allowed) throw rateLimited();
    return d;
  };

  const send = <T>(reply: FastifyReply, r: Outcome<T>, ok: (v: T) => unknown) => {
    void reply.header('Cache-Control', 'no-store').header('Pragma', 'no-cache');
    if (!r.ok) {
      // RFC 6749 §5.2: a failed client authentication is 401 with WWW-Authenticate.
      if (r.status === 401) void reply.header('WWW-Authenticate', 'Basic realm="oauth"');
      return reply.status(r.status).send(r.body);
    }
    return ok(r.value);
  };

  // Browser-based MCP clients (an inspector, a web agent) call these from another origin. They
  // carry bearer tokens, never cookies, so any origin may read the answers; the consent page is
  // not among them (it is a page, not an API).
  const CORS_PATHS = [
    OAUTH_PATHS.authorizationServerMetadata,
    OAUTH_PATHS.protectedResourceMetadata,
    `${OAUTH_PATHS.protectedResourceMetadata}${MCP_PATH}`,
    OAUTH_PATHS.register,
    OAUTH_PATHS.token,
    OAUTH_PATHS.revoke,
    MCP_PATH,
  ];
  app.addHook('onRequest', async (req, reply) => {
    if (!CORS_PATHS.includes(req.routeOptions.url ?? '')) return;
    void reply.header('Access-Control-Allow-Origin', '*').header('Access-Control-Expose-Headers', 'WWW-Authenticate, Mcp-Session-Id, X-Request-ID, Retry-After');
  });
  for (const path of CORS_PATHS) {
    app.options(path, hide, async (_req, reply) =>
      reply
        .status(204)
        .header('Access-Control-Allow-Methods', path === MCP_PATH ? 'GET, POST, DELETE' : 'GET, POST')
        .header('Access-Control-Allow-Headers', 'Authorization, Content-Type, Accept, Mcp-Protocol-Version, Mcp-Session-Id, Last-Event-ID')
        .header('Access-Control-Max-Age', '600')
        .send(),
    );
  }

  // Metadata (RFC 8414 §3; RFC 9728 §3: the path-aware document of /mcp and the root one).
  app.get(OAUTH_PATHS.authorizationServerMetadata, hide, async () => oauth.authorizationServerMetadata());
  app.get(OAUTH_PATHS.protectedResourceMetadata, hide, async () => oauth.protectedResourceMetadata());
  app.get(`${OAUTH_PATHS.protectedResourceMetadata}${MCP_PATH}`, hide, async () => oauth.protectedResourceMetadata());

  app.post(OAUTH_PATHS.register, { ...hide, onRequest: ipGate }, async (req, reply) => send(reply, await oauth.register(req.body), (v) => reply.status(201).send(v)));

  app.get<{ Querystring: Record<string, string> }>(OAUTH_PATHS.authorize, { ...hide, onRequest: ipGate }, async (req, reply) => {
    const q = new URLSearchParams(req.query);
    const check = await oauth.checkAuthorization(q);
    if (check.kind === 'redirect') return reply.redirect(check.location, 302);
    void reply.headers(PAGE_HEADERS);
    if (check.kind === 'page') return reply.status(check.status).send(errorPage(check.message));
    return reply.send(consentPage(check.request, OAUTH_PATHS.authorize));
  });

  app.post(OAUTH_PATHS.authorize, { ...hide, onRequest: ipGate }, async (req, reply) => {
    const f = form(req);
    // The request is checked again: the form's hidden fields came back through the browser.
    const check = await oauth.checkAuthorization(f);
    if (check.kind === 'redirect') return reply.redirect(check.location, 302);
    void reply.headers(PAGE_HEADERS);
    if (check.kind === 'page') return reply.status(check.status).send(errorPage(check.message));
    const r = await oauth.consent(check.request, { decision: f.get('decision'), apiKey: f.get('api_key'), scopes: f.getAll('scopes') });
    if (r.kind === 'redirect') return reply.redirect(r.location, 302);
    return reply.status(r.status).send(consentPage(r.request, OAUTH_PATHS.authorize, r.problem));
  });

  app.post(OAUTH_PATHS.token, { ...hide, onRequest: ipGate }, async (req, reply) => send(reply, await oauth.token(form(req)), (v) => reply.send(v)));

  app.post(OAUTH_PATHS.revoke, { ...hide, onRequest: ipGate }, async (req, reply) => send(reply, await oauth.revoke(form(req)), () => reply.status(200).send({})));

  /** A 401 of /mcp: the catalogue body, and where to find the authorization server. */
  const unauthorized = (e: ServiceError): ServiceError => {
    const www = `Bearer error="invalid_token", error_description="${e.message.replace(/["\\]/g, '')}", resource_metadata="${oauth.resourceMetadataUrl}"`;
    return new ServiceError(e.code, e.message, e.extra, { ...e.headers, 'WWW-Authenticate': www });
  };

  /** The gates of /mcp, in order: address rate limit, draining, credential, key rate limit. */
  const authenticate = async (req: FastifyRequest, reply: FastifyReply): Promise<AccessContext> => {
    const ip = await ipGate(req, reply);
    if (req.headers['x-api-key'] !== undefined) throw unauthorized(new ServiceError('api_key_not_accepted'));
    const m = /^Bearer +([^\s]+) *$/i.exec(req.headers.authorization ?? '');
    if (!m) throw unauthorized(new ServiceError('invalid_access_token'));
    let access: AccessContext;
    try {
      access = await oauth.verifyAccessToken(m[1]!);
    } catch (err) {
      throw err instanceof ServiceError && err.status === 401 ? unauthorized(err) : err;
    }
    // The key's own limit, shared with its REST requests; its counts are reported once they are the tighter.
    const k = await rateLimiter.hit(`key:${access.keyId}`, rateLimitPerKey, MINUTE_MS);
    if (k.remaining < ip.remaining) setRateHeaders(reply, k);
    if (!k.allowed) throw rateLimited();
    const log = req.log as unknown as import('pino').Logger;
    if (log.isLevelEnabled('error')) log.setBindings({ key: access.keyPrefix, account: access.accountId, mcp_client: access.clientId });
    return access;
  };

  app.post(MCP_PATH, hide, async (req, reply) => {
    const access = await authenticate(req, reply);
    const server = mcp.server({ access, requestId: String(req.id), log: req.log });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    // The headers set so far (request id, rate limits) go out with the transport's own response.
    for (const [h, v] of Object.entries(reply.getHeaders())) if (v !== undefined) reply.raw.setHeader(h, v as string | number | string[]);
    reply.hijack();
    reply.raw.on('close', () => {
      void transport.close();
      void server.close();
    });
    try {
      await server.connect(transport);
      await transport.handleRequest(req.raw, reply.raw, req.body);
    } catch (err) {
      req.log.error({ err }, 'MCP request failed');
      if (!reply.raw.headersSent) {
        reply.raw.writeHead(500, { 'Content-Type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32603, message: 'Internal error' }, id: null }));
      }
    }
  });

  // Stateless: no server-initiated stream (GET) and no session to end (DELETE).
  const notAllowed = async (req: FastifyRequest, reply: FastifyReply) => {
    await authenticate(req, reply);
    return reply.status(405).header('Allow', 'POST').send({ jsonrpc: '2.0', error: { code: -32000, message: 'Method not allowed: this MCP endpoint is stateless; POST JSON-RPC requests' }, id: null });
  };
  app.get(MCP_PATH, hide, notAllowed);
  app.delete(MCP_PATH, hide, notAllowed);
};
