// Hosted MCP, end to end with the official SDK's own client: dynamic client
// registration, PKCE through the consent page (signed in with an API key), the seven svc_* tools
// with their exact answers and credit movements, refresh, expiry and revocation; then each
// refusal with its code. Runs in both profiles (TEST_PROFILE).

import { createHash, randomBytes } from 'node:crypto';
import net from 'node:net';
import t, { type Test as Tap } from 'tap';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { auth, type OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { BOOTSTRAP_KEY, makeKey, startStack, type Stack } from '../helpers/stack.ts';

/** A port free now: the service's public URL must name the port it listens on (the SDK client checks the resource). */
async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const port = (srv.address() as net.AddressInfo).port;
  await new Promise((resolve) => srv.close(resolve));
  return port;
}

const port = await freePort();
const TTL_S = 900;
// The sim's websites (company data) are on loopback: outbound HTTP may reach it.
const stack: Stack = await startStack({ env: { PORT: String(port), SVC_PUBLIC_URL: `http://127.0.0.1:${port}`, SVC_MCP_ACCESS_TOKEN_TTL_S: String(TTL_S), SVC_OUTBOUND_ALLOW_NETWORKS: '127.0.0.0/8' } });
t.teardown(() => stack.close());
const base = stack.url;
const mcpUrl = `${base}/mcp`;
t.equal(base, `http://127.0.0.1:${port}`, 'the service listens at its public URL');

const REDIRECT = 'http://127.0.0.1:33418/callback';
const STATE = 'state-from-the-agent';

const unescapeHtml = (s: string): string => s.replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');

/** The hidden fields of the consent form. */
function hiddenFields(html: string): Record<string, string> {
  return Object.fromEntries([...html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)].map((m) => [m[1]!, unescapeHtml(m[2]!)]));
}

/** The person at the consent page: GET it, sign in with `apiKey`, tick `scopes`, POST; the 302 it answers. */
async function consent(authorizationUrl: URL | string, apiKey: string, scopes: string[], extra: Record<string, string> = {}): Promise<{ status: number; location: string | null; html: string }> {
  const page = await fetch(authorizationUrl, { redirect: 'manual' });
  if (page.status !== 200) return { status: page.status, location: page.headers.get('location'), html: await page.text() };
  const html = await page.text();
  const form = new URLSearchParams({ ...hiddenFields(html), api_key: apiKey, decision: 'allow', ...extra });
  for (const s of scopes) form.append('scopes', s);
  const res = await fetch(`${base}/oauth/authorize`, { method: 'POST', body: form, redirect: 'manual' });
  return { status: res.status, location: res.headers.get('location'), html: await res.text() };
}

/** An agent's OAuth state, kept in memory; its "browser" is consent() with the given key and scopes. */
class Agent implements OAuthClientProvider {
  info?: OAuthClientInformationMixed;
  saved?: OAuthTokens;
  verifier?: string;
  code?: string;
  redirectedTo?: URL;
  constructor(
    readonly apiKey: string,
    readonly scopes: string[],
  ) {}
  get redirectUrl(): string {
    return REDIRECT;
  }
  get clientMetadata(): OAuthClientMetadata {
    return { client_name: 'tap <test> agent', redirect_uris: [REDIRECT], grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none' };
  }
  state(): string {
    return STATE;
  }
  clientInformation() {
    return this.info;
  }
  saveClientInformation(info: OAuthClientInformationMixed) {
    this.info = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens;
  }
  async redirectToAuthorization(url: URL): Promise<void> {
    this.redirectedTo = url;
    const r = await consent(url, this.apiKey, this.scopes);
    if (r.status !== 302 || !r.location) throw new Error(`consent answered ${r.status}: ${r.html.slice(0, 300)}`);
    const back = new URL(r.location);
    if (back.searchParams.get('state') !== STATE) throw new Error(`state not returned: ${r.location}`);
    this.code = back.searchParams.get('code') ?? undefined;
  }
  saveCodeVerifier(v: string) {
    this.verifier = v;
  }
  codeVerifier(): string {
    return this.verifier!;
  }
}

/** The SDK's flow: connect (401 → register → consent → REDIRECT), finishAuth(code), connect again. */
async function connectAgent(t: Tap, agent: Agent): Promise<Client> {
  const first = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: agent });
  const client = new Client({ name: 'tap-agent', version: '1.0.0' });
  await t.rejects(client.connect(first), { message: 'Unauthorized' }, 'the first connection needs authorization (UnauthorizedError)');
  if (!agent.code) throw new Error('no authorization code');
  await first.finishAuth(agent.code);
  await first.close();
  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: agent });
  const connected = new Client({ name: 'tap-agent', version: '1.0.0' });
  await connected.connect(transport);
  return connected;
}

type Rpc = { status: number; headers: Headers; body: any };
let rpcId = 0;
/** One raw JSON-RPC request to /mcp (stateless: no initialize needed). */
async function rpc(method: string, params: unknown, headers: Record<string, string>): Promise<Rpc> {
  const res = await fetch(mcpUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify({ jsonrpc: '2.0', id: ++rpcId, method, params }),
  });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, headers: res.headers, body };
}
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const callTool = (token: string, name: string, args: Record<string, unknown> = {}) => rpc('tools/call', { name, arguments: args }, bearer(token));
/** A refused tool call's error body (docs/errors.md), from its text. */
const toolErrorBody = (result: any): any => (result.isError === true ? JSON.parse(result.content[0].text) : { not_an_error: result });

const WWW = `Bearer error="invalid_token", error_description="`;
const resourceMetadata = `resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"`;

/** PKCE by hand, for the refusal tests. */
function pkce(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

async function register(redirectUris = [REDIRECT]): Promise<string> {
  const r = await fetch(`${base}/oauth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ client_name: 'raw client', redirect_uris: redirectUris, token_endpoint_auth_method: 'none' }) });
  t.equal(r.status, 201, 'registered');
  return ((await r.json()) as { client_id: string }).client_id;
}

function authorizeUrl(clientId: string, challenge: string, extra: Record<string, string> = {}): string {
  const q = new URLSearchParams({ response_type: 'code', client_id: clientId, redirect_uri: REDIRECT, code_challenge: challenge, code_challenge_method: 'S256', state: 's1', scope: 'credits:read email:validate:single email:validate:bulk', ...extra });
  return `${base}/oauth/authorize?${q}`;
}

async function tokenRequest(params: Record<string, string>): Promise<{ status: number; body: any }> {
  const r = await fetch(`${base}/oauth/token`, { method: 'POST', body: new URLSearchParams(params) });
  return { status: r.status, body: await r.json() };
}

/** A code for `clientId` through the consent page, by hand. */
async function codeFor(clientId: string, challenge: string, apiKey: string, scopes: string[]): Promise<string> {
  const r = await consent(authorizeUrl(clientId, challenge), apiKey, scopes);
  t.equal(r.status, 302, 'consent redirects');
  const back = new URL(r.location!);
  t.equal(back.searchParams.get('state'), 's1');
  return back.searchParams.get('code')!;
}

t.test('metadata documents (RFC 8414, RFC 9728)', async (t) => {
  const as = await (await fetch(`${base}/.well-known/oauth-authorization-server`)).json();
  t.strictSame(as, {
    issuer: base,
    authorization_endpoint: `${base}/oauth/authorize`,
    token_endpoint: `${base}/oauth/token`,
    registration_endpoint: `${base}/oauth/register`,
    revocation_endpoint: `${base}/oauth/revoke`,
    scopes_supported: ['credits:read', 'email:validate:single', 'email:validate:bulk', 'data:company:read', 'email:find'],
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    grant_types_supported: ['authorization_code', 'refresh_token'],
    token_endpoint_auth_methods_supported: ['none'],
    revocation_endpoint_auth_methods_supported: ['none'],
    code_challenge_methods_supported: ['S256'],
  });
  const prm = { resource: mcpUrl, authorization_servers: [base], scopes_supported: ['credits:read', 'email:validate:single', 'email:validate:bulk', 'data:company:read', 'email:find'], bearer_methods_supported: ['header'], resource_name: 'Email validation service (hosted MCP)' };
  t.strictSame(await (await fetch(`${base}/.well-known/oauth-protected-resource/mcp`)).json(), prm);
  t.strictSame(await (await fetch(`${base}/.well-known/oauth-protected-resource`)).json(), prm);
  const none = await rpc('tools/list', {}, {});
  t.equal(none.status, 401);
  t.strictSame(none.body, { error: 'Unauthorized', message: 'The access token is missing, unknown or revoked', code: 'invalid_access_token' });
  t.equal(none.headers.get('www-authenticate'), `${WWW}The access token is missing, unknown or revoked", ${resourceMetadata}`);
  // CORS for browser-based clients: any origin may read the API answers (bearer tokens, no cookies).
  t.equal(none.headers.get('access-control-allow-origin'), '*');
  t.match(none.headers.get('access-control-expose-headers'), /WWW-Authenticate/);
  const preflight = await fetch(`${base}/oauth/token`, { method: 'OPTIONS', headers: { origin: 'https://inspector.example', 'access-control-request-method': 'POST' } });
  t.equal(preflight.status, 204);
  t.equal(preflight.headers.get('access-control-allow-origin'), '*');
  t.equal(preflight.headers.get('access-control-allow-methods'), 'GET, POST');
  t.equal((await fetch(`${base}/.well-known/oauth-authorization-server`)).headers.get('access-control-allow-origin'), '*');
  t.equal((await fetch(`${base}/oauth/authorize`)).headers.get('access-control-allow-origin'), null, 'not the consent page');
});

t.test('an agent registers, is authorized through the consent page, and uses every tool', async (t) => {
  const { key, accountId } = await makeKey(stack, { credits: 50 });
  const agent = new Agent(key, ['credits:read', 'email:validate:single', 'email:validate:bulk']);
  const client = await connectAgent(t, agent);
  t.teardown(() => client.close());
  // Registration and the authorization request the SDK made.
  t.match(agent.info, { client_id: /^mcpc_[0-9a-f]{32}$/, client_name: 'tap <test> agent', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none' });
  const asked = agent.redirectedTo!;
  t.equal(`${asked.origin}${asked.pathname}`, `${base}/oauth/authorize`);
  t.equal(asked.searchParams.get('code_challenge_method'), 'S256');
  t.equal(asked.searchParams.get('scope'), 'credits:read email:validate:single email:validate:bulk data:company:read email:find', 'the scopes of the resource metadata');
  t.equal(asked.searchParams.get('resource'), mcpUrl);
  // The tokens: opaque, short-lived, with the chosen scopes; stored hashed only.
  const tokens = agent.saved!;
  t.match(tokens, { token_type: 'Bearer', expires_in: TTL_S, scope: 'credits:read email:validate:single email:validate:bulk' });
  t.match(tokens.access_token, /^mcp_at_[A-Za-z0-9_-]{43}$/);
  t.match(tokens.refresh_token, /^mcp_rt_[A-Za-z0-9_-]{43}$/);
  const rows = await stack.db.query<{ token_hash: string; kind: string; ttl: number }>(`SELECT token_hash, kind, round(extract(epoch FROM expires_at - created_at))::int AS ttl FROM oauth_tokens ORDER BY kind`);
  const sha = (s: string) => createHash('sha256').update(s).digest('hex');
  t.strictSame(rows.map((r) => [r.kind, r.token_hash, r.ttl]), [['access', sha(tokens.access_token), TTL_S], ['refresh', sha(tokens.refresh_token!), 30 * 86_400]], 'SHA-256 hashes only; the configured TTL');

  // The nine tools, each with an input and an output schema.
  const listed = await client.listTools();
  t.strictSame(listed.tools.map((x) => x.name).sort(), ['svc_create_validation_job', 'svc_enrich_company', 'svc_find_email', 'svc_get_credits', 'svc_get_job', 'svc_get_job_download_url', 'svc_list_jobs', 'svc_validate_bulk', 'svc_validate_email']);
  for (const tool of listed.tools) {
    t.equal(tool.inputSchema.type, 'object', `${tool.name}: input schema`);
    t.equal(tool.outputSchema?.type, 'object', `${tool.name}: output schema`);
  }
  const byName = Object.fromEntries(listed.tools.map((x) => [x.name, x]));
  t.strictSame(byName.svc_validate_email!.inputSchema.required, ['email']);
  t.strictSame(byName.svc_create_validation_job!.inputSchema.required, ['emails']);
  t.notOk('email' in (byName.svc_create_validation_job!.outputSchema!.properties ?? {}), 'no CSV content in any output');

  // Credits: the REST body.
  const credits = await client.callTool({ name: 'svc_get_credits', arguments: {} });
  t.strictSame(credits.structuredContent, { account_id: accountId, balance: 50, reserved: 0, available: 50, subscription_status: 'active', current_period_end: null, cancel_at_period_end: false });
  t.strictSame(credits.structuredContent, (await stack.call('GET', '/v1/credits', { key })).body, 'structuredContent is the REST body');
  t.strictSame(JSON.parse((credits.content as Array<{ text: string }>)[0]!.text), credits.structuredContent, 'and the same as text');

  // One address: a High-Value Validation costs exactly 1 credit.
  const one = await client.callTool({ name: 'svc_validate_email', arguments: { email: ' jane.doe@accept.test ' } });
  t.notOk(one.isError);
  t.match(one.structuredContent, { email: 'jane.doe@accept.test', result: 'valid', reason_code: 'accepted', b2b_outbound_quality: 'high', credits_charged: 1, charge_reason: 'high_value_validation', validation_layer: 'smtp', smtp_response: '250 2.1.5 Accepted' });
  t.equal((await stack.store.ledger.balance(accountId))!.balance, 49, 'charged exactly 1');
  const rest = await stack.call('POST', '/v1/validate', { key, body: { email: 'jane.doe@accept.test' } });
  t.strictSame(one.structuredContent, rest.body, 'the REST body, field for field');
  t.equal((await stack.store.ledger.balance(accountId))!.balance, 48);

  // Up to 100: role-based, invalid and catch-all are free; the duplicate mailbox is charged once.
  const bulk = await client.callTool({ name: 'svc_validate_bulk', arguments: { emails: ['info@accept.test', 'no.such.user@accept.test', 'john.smith@catchall.test', 'john.smith@accept.test', 'john.smith@ACCEPT.test'] } });
  const results = (bulk.structuredContent as any).results as any[];
  t.strictSame(results.map((r) => [r.result, r.credits_charged, r.charge_reason]), [
    ['valid_role_based', 0, 'role_based_not_charged'],
    ['invalid', 0, 'invalid_not_charged'],
    ['risky', 0, 'catchall_not_charged'],
    ['valid', 1, 'high_value_validation'],
    ['valid', 0, 'duplicate_in_request'],
  ]);
  t.strictSame((bulk.structuredContent as any).summary, { total: 5, valid: 2, valid_role_based: 1, risky: 1, invalid: 1, unknown: 0, credits_charged: 1 });
  t.equal((await stack.store.ledger.balance(accountId))!.balance, 47);

  // A job: reserve, poll, finalize; the results only behind the signed URL.
  const created = await client.callTool({ name: 'svc_create_validation_job', arguments: { emails: ['jane.doe@accept.test', 'info@accept.test', 'jane.doe@ACCEPT.test', 'no.such.user@accept.test'] } });
  t.notOk(created.isError, JSON.stringify(created.content));
  const job = created.structuredContent as any;
  t.match(job, { id: /^job_/, status: 'queued', total_rows: 4, unique_emails: 3, credits_reserved: 3 });
  t.strictSame(Object.keys(job).sort(), ['created_at', 'credits_reserved', 'id', 'status', 'total_rows', 'unique_emails']);
  const tooEarly = await client.callTool({ name: 'svc_get_job_download_url', arguments: { job_id: job.id } });
  // Either still running (invalid_job_state) or, on a fast machine, already completed.
  if (tooEarly.isError) t.equal(toolErrorBody(tooEarly).code, 'invalid_job_state');
  let status: any;
  for (let i = 0; i < 300; i++) {
    status = (await client.callTool({ name: 'svc_get_job', arguments: { job_id: job.id } })).structuredContent;
    if (status.status === 'completed') break;
    await new Promise((r) => setTimeout(r, 50));
  }
  t.equal(status.status, 'completed');
  t.match(status.results, { total_rows: 4, unique_emails: 3, valid: 1, valid_role_based: 1, invalid: 1, high_value: 1, credits_reserved: 3, credits_charged: 1, credits_refunded: 2 });
  t.strictSame(status, (await stack.call('GET', `/v1/csv/jobs/${job.id}`, { key })).body, 'the REST status resource');
  t.equal((await stack.store.ledger.balance(accountId))!.balance, 46, 'the job charged its one High-Value Validation');
  const listedJobs = await client.callTool({ name: 'svc_list_jobs', arguments: { limit: 5 } });
  t.strictSame(listedJobs.structuredContent, (await stack.call('GET', '/v1/csv/jobs?limit=5', { key })).body);
  t.equal((listedJobs.structuredContent as any).jobs[0].id, job.id);
  const link = await client.callTool({ name: 'svc_get_job_download_url', arguments: { job_id: job.id } });
  const url = (link.structuredContent as any).url as string;
  t.ok(url.startsWith(`${base}/v1/csv/jobs/${job.id}/results.csv?`), url);
  t.strictSame(Object.keys(link.structuredContent!).sort(), ['expires_at', 'url']);
  const csv = await (await fetch(url)).text();
  t.equal(csv.split('\r\n')[1]!.split(',').slice(0, 2).join(','), 'jane.doe@accept.test,valid', 'the signed URL serves the CSV');
  const unknownJob = await client.callTool({ name: 'svc_get_job', arguments: { job_id: 'job_000000000000000000000000' } });
  t.equal(unknownJob.isError, true);
  t.strictSame(toolErrorBody(unknownJob), { error: 'Not Found', message: 'Job not found', code: 'job_not_found' });

  // Expiry: the access token is refused with access_token_expired; the SDK client refreshes by itself.
  const expired = agent.saved!.access_token;
  await stack.db.query(`UPDATE oauth_tokens SET expires_at = now() - interval '1 second' WHERE token_hash = $1`, [sha(expired)]);
  const refused = await callTool(expired, 'svc_get_credits');
  t.equal(refused.status, 401);
  t.strictSame(refused.body, { error: 'Unauthorized', message: 'The access token has expired; refresh it', code: 'access_token_expired' });
  t.equal(refused.headers.get('www-authenticate'), `${WWW}The access token has expired; refresh it", ${resourceMetadata}`);
  const oldRefresh = agent.saved!.refresh_token!;
  const again = await client.callTool({ name: 'svc_get_credits', arguments: {} });
  t.equal((again.structuredContent as any).balance, 46, 'answered after a transparent refresh');
  t.not(agent.saved!.access_token, expired, 'a new access token');
  t.not(agent.saved!.refresh_token, oldRefresh, 'and a new refresh token (rotation)');

  // Refresh through the SDK's auth(): rotates again; the spent refresh token is refused.
  const before = agent.saved!;
  t.equal(await auth(agent, { serverUrl: mcpUrl }), 'AUTHORIZED');
  t.not(agent.saved!.refresh_token, before.refresh_token);
  const clientId = agent.info!.client_id;
  t.equal((await callTool(before.access_token, 'svc_get_credits')).status, 200, 'the previous access token lives until its expiry');

  // Revocation (RFC 7009): the grant ends; its tokens are refused with invalid_access_token.
  const now = agent.saved!;
  const rv = await fetch(`${base}/oauth/revoke`, { method: 'POST', body: new URLSearchParams({ token: now.refresh_token!, client_id: clientId, token_type_hint: 'refresh_token' }) });
  t.equal(rv.status, 200);
  for (const tok of [now.access_token, before.access_token]) {
    const r = await callTool(tok, 'svc_get_credits');
    t.equal(r.status, 401);
    t.equal(r.body.code, 'invalid_access_token');
  }
  t.same((await tokenRequest({ grant_type: 'refresh_token', refresh_token: now.refresh_token!, client_id: clientId })).body.error, 'invalid_grant', 'the revoked refresh token too');
  const unknown = await fetch(`${base}/oauth/revoke`, { method: 'POST', body: new URLSearchParams({ token: 'mcp_at_nothing', client_id: clientId }) });
  t.equal(unknown.status, 200, 'an unknown token is answered like a known one (RFC 7009 §2.2)');
});

t.test('the data tools: the product gate, company data and the email finder as REST answers them', async (t) => {
  const { key, accountId } = await makeKey(stack, { credits: 10 });
  const agent = new Agent(key, ['data:company:read', 'email:find']);
  const client = await connectAgent(t, agent);
  t.teardown(() => client.close());
  const before = await client.callTool({ name: 'svc_enrich_company', arguments: { domain: 'acme-robotics.test' } });
  t.strictSame(toolErrorBody(before), { error: 'Forbidden', message: 'The data product is not enabled for this account', code: 'product_not_enabled' });
  await stack.store.accounts.setDataProduct(accountId, true);
  const missing = await client.callTool({ name: 'svc_enrich_company', arguments: {} });
  t.strictSame(toolErrorBody(missing), { error: 'Bad Request', message: 'domain is required', code: 'domain_required' });
  const company = await client.callTool({ name: 'svc_enrich_company', arguments: { domain: 'acme-robotics.test' } });
  t.notOk(company.isError);
  t.match(company.structuredContent, { domain: 'acme-robotics.test', company_name: 'Acme Robotics', found: true, credits_charged: 1, linkedin_url: 'https://www.linkedin.com/company/acme-robotics' });
  t.equal((await stack.store.ledger.balance(accountId))!.balance, 9);
  const rest = await stack.call('POST', '/v1/company/enrich', { key, body: { domain: 'acme-robotics.test' } });
  const { latency_ms: _a, ...restBody } = rest.body;
  const { latency_ms: _b, cache_hit: _c, ...toolBody } = company.structuredContent as Record<string, unknown>;
  t.strictSame({ ...toolBody, cache_hit: true }, restBody, 'the REST body, field for field (the REST call was a cache hit)');
  const found = await client.callTool({ name: 'svc_find_email', arguments: { first_name: 'Maria', last_name: 'Garcia', domain: 'people.test' } });
  t.match(found.structuredContent, { id: '0', email: 'mgarcia@people.test', confidence: 95, source_provider: 'smtp', pattern: '{f}{last}', not_found: false, credits_charged: 1 });
  const noName = await client.callTool({ name: 'svc_find_email', arguments: { first_name: 'Maria', domain: 'people.test' } });
  t.strictSame(toolErrorBody(noName), { error: 'Bad Request', message: 'last_name is required', code: 'invalid_request' });
  t.equal((await stack.store.ledger.balance(accountId))!.balance, 7, 'one credit for the REST call, one for the find');
  const validation = await client.callTool({ name: 'svc_validate_email', arguments: { email: 'jane.doe@accept.test' } });
  t.equal(toolErrorBody(validation).code, 'insufficient_scope', 'a data-only grant cannot validate');
});

t.test('the token endpoint: a wrong verifier, a reused code, another client, refresh replay', async (t) => {
  const { key } = await makeKey(stack, { credits: 5 });
  const clientId = await register();
  const other = await register();
  const { verifier, challenge } = pkce();
  const code = await codeFor(clientId, challenge, key, ['credits:read']);
  const exchange = (v: string, extra: Record<string, string> = {}) => tokenRequest({ grant_type: 'authorization_code', code, code_verifier: v, redirect_uri: REDIRECT, client_id: clientId, ...extra });

  // An unknown client is refused before the code is looked at: the code stays good.
  t.strictSame((await exchange(verifier, { client_id: 'mcpc_unknown' })), { status: 401, body: { error: 'invalid_client', error_description: 'unknown client_id' } });
  t.strictSame((await exchange(verifier, { client_id: `mcpc_${'0'.repeat(32)}` })), { status: 401, body: { error: 'invalid_client', error_description: 'unknown client_id' } });
  t.strictSame((await tokenRequest({ grant_type: 'password', client_id: clientId })).body.error, 'unsupported_grant_type');

  // A refused redemption spends the code: whoever holds it gets one try.
  const wrong = await exchange(pkce().verifier);
  t.equal(wrong.status, 400);
  t.strictSame(wrong.body, { error: 'invalid_grant', error_description: 'code_verifier does not match the code_challenge' });
  t.strictSame((await exchange(verifier)).body, { error: 'invalid_grant', error_description: 'the authorization code was used already; the tokens issued from it are revoked' }, 'the right verifier after a wrong one: the code is spent');
  const fresh = async (extra: Record<string, string>) => {
    const c = await codeFor(clientId, challenge, key, ['credits:read']);
    const refused = await tokenRequest({ grant_type: 'authorization_code', code: c, code_verifier: verifier, redirect_uri: REDIRECT, client_id: clientId, ...extra });
    const after = await tokenRequest({ grant_type: 'authorization_code', code: c, code_verifier: verifier, redirect_uri: REDIRECT, client_id: clientId });
    return [refused.body, after.body.error_description];
  };
  t.strictSame(await fresh({ client_id: other }), [{ error: 'invalid_grant', error_description: 'the code was issued to another client' }, 'the authorization code was used already; the tokens issued from it are revoked']);
  t.strictSame(await fresh({ redirect_uri: `${REDIRECT}/other` }), [{ error: 'invalid_grant', error_description: 'redirect_uri does not match the authorization request' }, 'the authorization code was used already; the tokens issued from it are revoked']);

  // A code redeemed right the first time gets the tokens.
  const good = await codeFor(clientId, challenge, key, ['credits:read']);
  const exchangeGood = (v: string) => tokenRequest({ grant_type: 'authorization_code', code: good, code_verifier: v, redirect_uri: REDIRECT, client_id: clientId });
  const ok = await exchangeGood(verifier);
  t.equal(ok.status, 200);
  t.match(ok.body, { token_type: 'Bearer', expires_in: TTL_S, scope: 'credits:read' });
  t.equal((await callTool(ok.body.access_token, 'svc_get_credits')).status, 200);

  // The same code again: invalid_grant, and the tokens issued from it are revoked.
  const reused = await exchangeGood(verifier);
  t.equal(reused.status, 400);
  t.strictSame(reused.body, { error: 'invalid_grant', error_description: 'the authorization code was used already; the tokens issued from it are revoked' });
  const after = await callTool(ok.body.access_token, 'svc_get_credits');
  t.equal(after.status, 401);
  t.equal(after.body.code, 'invalid_access_token');
  t.equal((await tokenRequest({ grant_type: 'refresh_token', refresh_token: ok.body.refresh_token, client_id: clientId })).body.error, 'invalid_grant');

  // An expired code.
  const late = pkce();
  const lateCode = await codeFor(clientId, late.challenge, key, ['credits:read']);
  await stack.db.query(`UPDATE oauth_codes SET expires_at = now() - interval '1 second' WHERE code_hash = $1`, [createHash('sha256').update(lateCode).digest('hex')]);
  t.strictSame((await tokenRequest({ grant_type: 'authorization_code', code: lateCode, code_verifier: late.verifier, redirect_uri: REDIRECT, client_id: clientId })).body, { error: 'invalid_grant', error_description: 'the code has expired' });

  // Rotation: a refresh token works once; presented again, the whole grant ends.
  const p = pkce();
  const first = (await tokenRequest({ grant_type: 'authorization_code', code: await codeFor(clientId, p.challenge, key, ['credits:read']), code_verifier: p.verifier, redirect_uri: REDIRECT, client_id: clientId })).body;
  const second = await tokenRequest({ grant_type: 'refresh_token', refresh_token: first.refresh_token, client_id: clientId });
  t.equal(second.status, 200);
  t.not(second.body.refresh_token, first.refresh_token);
  t.strictSame((await tokenRequest({ grant_type: 'refresh_token', refresh_token: second.body.refresh_token, client_id: clientId, scope: 'credits:read email:validate:bulk' })).body, { error: 'invalid_scope', error_description: 'a refresh cannot add scopes the grant does not have' });
  const replay = await tokenRequest({ grant_type: 'refresh_token', refresh_token: first.refresh_token, client_id: clientId });
  t.strictSame(replay.body, { error: 'invalid_grant', error_description: 'the refresh token was used already; every token of this grant is revoked' });
  t.equal((await callTool(second.body.access_token, 'svc_get_credits')).body.code, 'invalid_access_token', 'the grant ended');
  t.equal((await tokenRequest({ grant_type: 'refresh_token', refresh_token: second.body.refresh_token, client_id: clientId })).body.error, 'invalid_grant');
});

t.test('the authorization request: PKCE S256 only, exact redirect URIs, consent among the key’s scopes', async (t) => {
  const clientId = await register();
  const { challenge } = pkce();
  // `plain` (and no PKCE at all) go back to the client as invalid_request, with its state.
  for (const [extra, description] of [
    [{ code_challenge_method: 'plain' }, 'code_challenge_method must be S256, not plain'],
    [{ code_challenge_method: '' }, 'code_challenge_method must be S256'],
    [{ code_challenge: '' }, 'code_challenge is required (PKCE, S256)'],
  ] as const) {
    const r = await fetch(authorizeUrl(clientId, challenge, extra), { redirect: 'manual' });
    t.equal(r.status, 302);
    const back = new URL(r.headers.get('location')!);
    t.equal(`${back.origin}${back.pathname}`, REDIRECT);
    t.strictSame(Object.fromEntries(back.searchParams), { error: 'invalid_request', error_description: description, state: 's1' });
  }
  const badScope = new URL((await fetch(authorizeUrl(clientId, challenge, { scope: 'email:outcomes:read' }), { redirect: 'manual' })).headers.get('location')!);
  t.equal(badScope.searchParams.get('error'), 'invalid_scope');
  // An unknown client or a redirect URI it did not register: shown to the person, never redirected.
  for (const [extra, message] of [
    [{ redirect_uri: `${REDIRECT}/x` }, 'The redirect URI is not one this application registered.'],
    [{ redirect_uri: 'http://127.0.0.1:33418/Callback' }, 'The redirect URI is not one this application registered.'],
    [{ client_id: 'mcpc_nobody' }, 'This application is not registered here (unknown client_id).'],
  ] as const) {
    const r = await fetch(authorizeUrl(clientId, challenge, extra), { redirect: 'manual' });
    t.equal(r.status, 400);
    t.equal(r.headers.get('location'), null);
    t.ok((await r.text()).includes(message), message);
  }

  // The consent page: framed by nobody, every value escaped.
  const page = await fetch(authorizeUrl(clientId, challenge, { state: '"><script>x</script>' }));
  t.equal(page.status, 200);
  t.equal(page.headers.get('x-frame-options'), 'DENY');
  const html = await page.text();
  t.notOk(html.includes('<script>'), 'the state is escaped');
  t.equal(hiddenFields(html).state, '"><script>x</script>');

  // A key with credits:read only: ticking more is refused on the page; a wrong key too.
  const narrow = await makeKey(stack, { credits: 3, scopes: ['credits:read'] });
  const more = await consent(authorizeUrl(clientId, challenge), narrow.key, ['credits:read', 'email:validate:bulk']);
  t.equal(more.status, 403);
  t.ok(more.html.includes('This API key lacks email:validate:bulk; choose only permissions the key has.'));
  const badKey = await consent(authorizeUrl(clientId, challenge), 'svc_test_notAKeyOfAnyAccount000', ['credits:read']);
  t.equal(badKey.status, 401);
  t.ok(badKey.html.includes('This API key is not valid.'));
  const none = await consent(authorizeUrl(clientId, challenge), narrow.key, []);
  t.equal(none.status, 400);
  t.ok(none.html.includes('Choose at least one of the listed permissions.'));
  const unasked = await consent(authorizeUrl(clientId, challenge, { scope: 'credits:read' }), BOOTSTRAP_KEY, ['credits:read', 'email:validate:single']);
  t.equal(unasked.status, 400, 'only scopes the client asked for can be granted');
  const denied = await consent(authorizeUrl(clientId, challenge), narrow.key, ['credits:read'], { decision: 'deny' });
  t.equal(denied.status, 302);
  t.strictSame(Object.fromEntries(new URL(denied.location!).searchParams), { error: 'access_denied', error_description: 'the account holder denied access', state: 's1' });

  // Registration refusals (RFC 7591 §3.2.2).
  for (const uris of [['http://agent.example.com/callback'], ['javascript:alert(1)'], ['https://agent.example.com/cb#frag'], []]) {
    const r = await fetch(`${base}/oauth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ redirect_uris: uris }) });
    t.equal(r.status, 400, JSON.stringify(uris));
    t.equal(((await r.json()) as { error: string }).error, 'invalid_redirect_uri');
  }
});

t.test('credentials in the wrong place, and the tools’ gates', async (t) => {
  const narrow = await makeKey(stack, { credits: 0, scopes: ['credits:read', 'email:validate:single'] });
  const clientId = await register();
  const p = pkce();
  const tokens = (await tokenRequest({ grant_type: 'authorization_code', code: await codeFor(clientId, p.challenge, narrow.key, ['credits:read', 'email:validate:single']), code_verifier: p.verifier, redirect_uri: REDIRECT, client_id: clientId })).body;
  t.equal(tokens.scope, 'credits:read email:validate:single');
  const token = tokens.access_token as string;

  // An API key on MCP; an MCP token on the public API.
  for (const headers of [{ 'x-api-key': BOOTSTRAP_KEY }, { 'x-api-key': narrow.key, ...bearer(token) }]) {
    const r = await rpc('tools/list', {}, headers);
    t.equal(r.status, 401);
    t.strictSame(r.body, { error: 'Unauthorized', message: 'API keys are not accepted on MCP; complete the OAuth flow', code: 'api_key_not_accepted' });
    t.equal(r.headers.get('www-authenticate'), `${WWW}API keys are not accepted on MCP; complete the OAuth flow", ${resourceMetadata}`);
  }
  for (const auth of [token, 'mcp_at_whatever']) {
    const r = await stack.call('GET', '/v1/credits', { key: null, headers: { authorization: `Bearer ${auth}` } });
    t.equal(r.status, 401);
    t.strictSame(r.body, { error: 'Unauthorized', message: 'MCP access tokens are not accepted on the public API; use an API key', code: 'mcp_token_not_accepted' });
  }
  t.equal((await stack.call('GET', '/v1/credits', { key: narrow.key, headers: bearer(token) })).status, 200, 'a key is a key, whatever else comes with it');
  const unknown = await callTool('mcp_at_unknown', 'svc_get_credits');
  t.equal(unknown.status, 401);
  t.equal(unknown.body.code, 'invalid_access_token');

  // A scope the token lacks: a tool error with the stable code.
  const bulk = await callTool(token, 'svc_validate_bulk', { emails: ['jane.doe@accept.test'] });
  t.equal(bulk.status, 200);
  t.equal(bulk.body.result.isError, true);
  t.strictSame(toolErrorBody(bulk.body.result), { error: 'Forbidden', message: 'The access token lacks the email:validate:bulk scope', code: 'insufficient_scope', required_scope: 'email:validate:bulk' });
  t.notOk('structuredContent' in bulk.body.result);
  const job = await callTool(token, 'svc_create_validation_job', { emails: ['jane.doe@accept.test'] });
  t.equal(toolErrorBody(job.body.result).code, 'insufficient_scope');

  // Credits: the REST refusal, with required and available; nothing is taken.
  const poor = await callTool(token, 'svc_validate_email', { email: 'john.smith@accept.test' });
  t.strictSame(toolErrorBody(poor.body.result), { error: 'Payment Required', message: 'This request needs up to 1 credits; 0 available', code: 'insufficient_credits', required: 1, available: 0 });
  // A free answer needs no credit.
  const free = await callTool(token, 'svc_validate_email', { email: 'info@accept.test' });
  t.match(free.body.result.structuredContent, { result: 'valid_role_based', credits_charged: 0 });
  const empty = await callTool(token, 'svc_validate_email', { email: '   ' });
  t.equal(toolErrorBody(empty.body.result).code, 'email_required');
  // Arguments the input schema refuses (checked before the tool runs, before its scope): the code
  // REST gives the same mistake, in the catalogue's body.
  const refusals: Array<[string, Record<string, unknown>, string]> = [
    ['svc_validate_email', {}, 'email_required'],
    ['svc_validate_email', { email: 42 }, 'invalid_email_type'],
    ['svc_validate_bulk', { emails: Array(101).fill('jane.doe@accept.test') }, 'too_many_emails'],
    ['svc_validate_bulk', { emails: [] }, 'emails_required'],
    ['svc_validate_bulk', {}, 'emails_required'],
    ['svc_validate_bulk', { emails: 'jane.doe@accept.test' }, 'invalid_request'],
    ['svc_validate_bulk', { emails: ['jane.doe@accept.test', 1] }, 'invalid_email_type'],
    ['svc_create_validation_job', { emails: ['jane.doe@accept.test', null] }, 'invalid_emails'],
    ['svc_list_jobs', { limit: 1000 }, 'invalid_request'],
  ];
  for (const [tool, args, code] of refusals) {
    const r = await callTool(token, tool, args);
    const body = toolErrorBody(r.body.result);
    t.strictSame([r.status, body.code, body.error], [200, code, 'Bad Request'], `${tool} ${JSON.stringify(args).slice(0, 40)}: ${code}`);
    t.match(body.message, `Invalid arguments for tool ${tool}`);
  }

  // An ended subscription blocks validation (402 on REST), not the balance.
  await stack.db.query(`UPDATE accounts SET subscription_status = 'canceled' WHERE id = $1`, [narrow.accountId]);
  const blocked = await callTool(token, 'svc_validate_email', { email: 'info@accept.test' });
  t.strictSame(toolErrorBody(blocked.body.result), { error: 'Payment Required', message: 'Subscription has ended; validation is blocked', code: 'subscription_inactive' });
  t.equal((await callTool(token, 'svc_get_credits')).body.result.structuredContent.subscription_status, 'canceled');
  await stack.db.query(`UPDATE accounts SET subscription_status = 'active' WHERE id = $1`, [narrow.accountId]);

  // The API key that signed in is revoked: its grants end with it.
  await stack.store.keys.setState(narrow.id, 'revoked');
  const gone = await callTool(token, 'svc_get_credits');
  t.equal(gone.status, 401);
  t.strictSame(gone.body, { error: 'Unauthorized', message: 'The API key that authorized this token is no longer usable', code: 'invalid_access_token' });
  t.strictSame((await tokenRequest({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: clientId })).body.error, 'invalid_grant');

  // Stateless transport: no stream to open, no session to end.
  const getRes = await fetch(mcpUrl, { headers: { accept: 'text/event-stream', ...bearer('mcp_at_unknown') } });
  t.equal(getRes.status, 401);
});

t.test('the per-key rate limit of the REST gates counts MCP requests too', async (t) => {
  const { key, id } = await makeKey(stack, { credits: 1, scopes: ['credits:read'] });
  const clientId = await register();
  const p = pkce();
  const token = (await tokenRequest({ grant_type: 'authorization_code', code: await codeFor(clientId, p.challenge, key, ['credits:read']), code_verifier: p.verifier, redirect_uri: REDIRECT, client_id: clientId })).body.access_token as string;
  const first = await callTool(token, 'svc_get_credits');
  t.equal(first.status, 200);
  t.equal(first.headers.get('ratelimit-limit'), '1000', 'the tighter of the address and key limits, as on REST');
  // The key's minute is used up by 9,999 more requests (as if through REST)…
  const limiter = stack.svc.services.rateLimiter;
  for (let i = 1; i < 10_000; i += 500) await Promise.all(Array.from({ length: Math.min(500, 10_000 - i) }, () => limiter.hit(`key:${id}`, 10_000, 60_000)));
  // …so the next MCP request is refused, with the REST body and headers.
  const over = await callTool(token, 'svc_get_credits');
  t.equal(over.status, 429);
  t.strictSame(over.body, { error: 'Too Many Requests', message: 'You have exceeded the rate limit', code: 'rate_limited', retry_after: 60 });
  t.equal(over.headers.get('retry-after'), '60');
  t.equal(over.headers.get('ratelimit-limit'), '10000');
  t.equal(over.headers.get('ratelimit-remaining'), '0');
  t.equal((await stack.call('GET', '/v1/credits', { key })).status, 429, 'and so is REST with the key');
});

t.test('stateless transport, request ids, and the sweep of expired codes and tokens', async (t) => {
  const { key } = await makeKey(stack, { credits: 1, scopes: ['credits:read'] });
  const clientId = await register();
  const p = pkce();
  const tokens = (await tokenRequest({ grant_type: 'authorization_code', code: await codeFor(clientId, p.challenge, key, ['credits:read']), code_verifier: p.verifier, redirect_uri: REDIRECT, client_id: clientId })).body;
  const ok = await callTool(tokens.access_token, 'svc_get_credits');
  t.match(ok.headers.get('x-request-id'), /^req_[0-9a-f]{32}$/, 'the request id reaches the hijacked response');
  t.equal(ok.headers.get('content-type'), 'application/json', 'a JSON answer, not a stream');
  for (const method of ['GET', 'DELETE']) {
    const r = await fetch(mcpUrl, { method, headers: { accept: 'text/event-stream', ...bearer(tokens.access_token) } });
    t.equal(r.status, 405, method);
    t.equal(r.headers.get('allow'), 'POST');
  }
  // Expired more than a day ago: deleted by the minute's sweep; the token is then simply unknown.
  const sha = (s: string) => createHash('sha256').update(s).digest('hex');
  await stack.db.query(`UPDATE oauth_tokens SET expires_at = now() - interval '25 hours' WHERE token_hash IN ($1, $2)`, [sha(tokens.access_token), sha(tokens.refresh_token)]);
  await stack.db.query(`UPDATE oauth_codes SET expires_at = now() - interval '25 hours' WHERE grant_id = (SELECT grant_id FROM oauth_tokens WHERE token_hash = $1)`, [sha(tokens.access_token)]);
  const grant = (await stack.db.query<{ grant_id: string }>('SELECT grant_id FROM oauth_tokens WHERE token_hash = $1', [sha(tokens.access_token)]))[0]!.grant_id;
  // (The service's own sweep runs every minute too: the rows are checked, not only the count.)
  t.ok((await stack.store.oauth.sweepExpired()) <= 3);
  const left = await stack.db.query<{ n: number }>('SELECT (SELECT count(*) FROM oauth_tokens WHERE grant_id = $1) + (SELECT count(*) FROM oauth_codes WHERE grant_id = $1) AS n', [grant]);
  t.equal(Number(left[0]!.n), 0, 'its code and both tokens are gone');
  t.equal(await stack.store.oauth.sweepExpired(), 0);
  t.equal((await callTool(tokens.access_token, 'svc_get_credits')).body.code, 'invalid_access_token');
  t.strictSame((await tokenRequest({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: clientId })).body, { error: 'invalid_grant', error_description: 'unknown refresh token' });
});

t.test('one code redeemed by concurrent requests issues one pair of tokens, and the replays revoke it', async (t) => {
  const { key } = await makeKey(stack, { credits: 1, scopes: ['credits:read'] });
  const clientId = await register();
  const p = pkce();
  const code = await codeFor(clientId, p.challenge, key, ['credits:read']);
  const answers = await Promise.all(Array.from({ length: 6 }, () => tokenRequest({ grant_type: 'authorization_code', code, code_verifier: p.verifier, redirect_uri: REDIRECT, client_id: clientId })));
  const issued = answers.filter((a) => a.status === 200);
  t.equal(issued.length, 1, 'exactly one exchange succeeds');
  t.strictSame(answers.filter((a) => a.status !== 200).map((a) => [a.status, a.body.error]), Array.from({ length: 5 }, () => [400, 'invalid_grant']));
  t.equal((await callTool(issued[0]!.body.access_token, 'svc_get_credits')).body.code, 'invalid_access_token', 'the replays ended the grant');
  const rows = await stack.db.query<{ n: number }>('SELECT count(*)::int AS n FROM oauth_tokens t JOIN oauth_codes c ON c.grant_id = t.grant_id WHERE c.code_hash = $1', [createHash('sha256').update(code).digest('hex')]);
  t.equal(rows[0]!.n, 2, 'one access and one refresh token were ever stored');
});
