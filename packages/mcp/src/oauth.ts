// The authorization server of hosted MCP (OAuth 2.1 draft with the MCP authorization spec):
// metadata (RFC 8414, RFC 9728), dynamic client registration (RFC 7591), the authorization code
// grant with PKCE S256 only (RFC 7636; `plain` refused), rotating refresh tokens, revocation
// (RFC 7009), and the access-token check of every MCP request. No HTTP here: the API's routes
// translate requests to these use cases and their results back. Errors of the OAuth
// endpoints are RFC 6749 §5.2 data (`error`, `error_description`), never exceptions; the access
// token check throws the catalogue's ServiceErrors (invalid_access_token, access_token_expired).

import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { notPrintable, ServiceError, type Scope } from '@svc/contracts';
import { hashKey, keyRefusal, type KeyRecord, type NewTokenPair, type OAuthCodeRecord, type OAuthTokenRecord, type Store } from '@svc/store';

/** The scopes hosted MCP can grant: those of the tools (docs/api.md). */
export const MCP_SCOPES = ['credits:read', 'email:validate:single', 'email:validate:bulk', 'data:company:read', 'email:find'] as const satisfies readonly Scope[];
export type McpScope = (typeof MCP_SCOPES)[number];
const isMcpScope = (s: string): s is McpScope => (MCP_SCOPES as readonly string[]).includes(s);

export const DEFAULT_ACCESS_TOKEN_TTL_S = 3600;
/** Refresh tokens live 30 days (each refresh replaces it with a new one). */
export const REFRESH_TOKEN_TTL_S = 30 * 86_400;
/** Authorization codes live 60 s (OAuth 2.1 §4.1.2 recommends at most 10 minutes). */
export const CODE_TTL_S = 60;

export const MCP_PATH = '/mcp';
export const PATHS = {
  authorize: '/oauth/authorize',
  token: '/oauth/token',
  register: '/oauth/register',
  revoke: '/oauth/revoke',
  authorizationServerMetadata: '/.well-known/oauth-authorization-server',
  protectedResourceMetadata: '/.well-known/oauth-protected-resource',
} as const;

/** An RFC 6749 §5.2 error (also RFC 7591 §3.2.2 and RFC 7009 §2.2.1 ones). */
export interface OAuthError {
  status: number;
  body: { error: string; error_description: string };
}
const oauthError = (error: string, description: string, status = 400): OAuthError => ({ status, body: { error, error_description: description } });

export type Outcome<T> = { ok: true; value: T } | ({ ok: false } & OAuthError);
const fail = <T>(error: string, description: string, status = 400): Outcome<T> => ({ ok: false, ...oauthError(error, description, status) });

export interface TokenResponse {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  refresh_token: string;
  scope: string;
}

/** What an MCP request may do: the token's account, key, scopes and subscription. */
export interface AccessContext {
  accountId: string;
  keyId: string;
  /** The key's display prefix (for logs). */
  keyPrefix: string;
  clientId: string;
  scopes: readonly string[];
  subscriptionStatus: string;
  expiresAt: Date;
}

/** A checked authorization request (GET or POST /oauth/authorize). */
export interface AuthorizationRequest {
  clientId: string;
  clientName: string;
  redirectUri: string;
  codeChallenge: string;
  state: string | undefined;
  /** What the client asked for (all of MCP_SCOPES when it named none). */
  scopes: McpScope[];
  resource: string | null;
}

/**
 * An authorization request's fate: `ok`; `redirect` (an error sent back to the client's redirect
 * URI, RFC 6749 §4.1.2.1); or `page` (the client or redirect URI cannot be trusted: the error is
 * shown to the person, never redirected).
 */
export type AuthorizationCheck = { kind: 'ok'; request: AuthorizationRequest } | { kind: 'redirect'; location: string } | { kind: 'page'; status: number; message: string };

/** A consent's fate: a redirect to the client (with a code, or access_denied), or the form again with a problem. */
export type ConsentResult = { kind: 'redirect'; location: string } | { kind: 'form'; status: number; request: AuthorizationRequest; problem: string };

export interface OAuthServerOptions {
  store: Store;
  /** SVC_PUBLIC_URL (no trailing slash): the issuer, and the base of the MCP resource. */
  publicUrl: string;
  accessTokenTtlS?: number;
  now?: () => number;
}

type Params = { get(name: string): string | null };

const b64url = (buf: Buffer): string => buf.toString('base64url');
const secret = (prefix: string): string => `${prefix}${b64url(randomBytes(32))}`;
const sha256b64url = (s: string): string => b64url(createHash('sha256').update(s).digest());

function sameString(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** RFC 7636 §4.1: 43-128 characters of [A-Z] / [a-z] / [0-9] / "-" / "." / "_" / "~". */
const VERIFIER = /^[A-Za-z0-9\-._~]{43,128}$/;
/** BASE64URL(SHA256(…)): 43 characters, no padding. */
const S256_CHALLENGE = /^[A-Za-z0-9_-]{43}$/;
/** A client id as register() makes them: anything else is unknown without asking the store. */
const CLIENT_ID = /^mcpc_[0-9a-f]{32}$/;

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);
/** Schemes a redirect URI may never have: they run code or read files in the person's browser. */
const FORBIDDEN_SCHEMES = new Set(['javascript:', 'data:', 'file:', 'vbscript:', 'blob:', 'about:', 'ws:', 'wss:', 'ftp:']);

/**
 * Whether a redirect URI may be registered: https; http only on a loopback host (RFC 8252 §7.3,
 * native clients); a private-use scheme of a native app (RFC 8252 §7.1, e.g. `cursor://`); never
 * a fragment (RFC 6749 §3.1.2) nor a scheme that runs code.
 */
export function redirectUriProblem(raw: unknown): string | undefined {
  if (typeof raw !== 'string' || raw.length === 0 || raw.length > 2000) return 'each redirect URI must be a string of 1-2000 characters';
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return `${JSON.stringify(raw)} is not an absolute URI`;
  }
  if (u.hash || raw.includes('#')) return 'a redirect URI must not have a fragment';
  if (FORBIDDEN_SCHEMES.has(u.protocol)) return `the ${u.protocol} scheme is not allowed`;
  if (u.protocol === 'http:' && !LOOPBACK_HOSTS.has(u.hostname)) return 'http redirect URIs are allowed only on a loopback host (localhost, 127.0.0.1, [::1]); use https';
  return undefined;
}

/** Space-separated scopes (RFC 6749 §3.3) → the MCP scopes named, or the unknown one. */
function parseScopes(raw: string | null | undefined): { ok: true; scopes: McpScope[] } | { ok: false; unknown: string } {
  const named = (raw ?? '').split(' ').filter(Boolean);
  const out: McpScope[] = [];
  for (const s of named) {
    if (!isMcpScope(s)) return { ok: false, unknown: s };
    if (!out.includes(s)) out.push(s);
  }
  return { ok: true, scopes: out };
}

export class OAuthServer {
  readonly #store: Store;
  readonly publicUrl: string;
  readonly accessTokenTtlS: number;
  readonly #now: () => number;

  constructor(opts: OAuthServerOptions) {
    this.#store = opts.store;
    this.publicUrl = opts.publicUrl.replace(/\/$/, '');
    this.accessTokenTtlS = opts.accessTokenTtlS ?? DEFAULT_ACCESS_TOKEN_TTL_S;
    this.#now = opts.now ?? Date.now;
  }

  /** `{mcp_url}`: the MCP endpoint, and the resource its tokens are for (RFC 8707). */
  get resource(): string {
    return `${this.publicUrl}${MCP_PATH}`;
  }

  /** Where a 401 from /mcp points (RFC 9728 §5.1, WWW-Authenticate `resource_metadata`). */
  get resourceMetadataUrl(): string {
    return `${this.publicUrl}${PATHS.protectedResourceMetadata}${MCP_PATH}`;
  }

  /** RFC 8414 authorization server metadata. */
  authorizationServerMetadata(): Record<string, unknown> {
    const u = this.publicUrl;
    return {
      issuer: u,
      authorization_endpoint: `${u}${PATHS.authorize}`,
      token_endpoint: `${u}${PATHS.token}`,
      registration_endpoint: `${u}${PATHS.register}`,
      revocation_endpoint: `${u}${PATHS.revoke}`,
      scopes_supported: [...MCP_SCOPES],
      response_types_supported: ['code'],
      response_modes_supported: ['query'],
      grant_types_supported: ['authorization_code', 'refresh_token'],
      token_endpoint_auth_methods_supported: ['none'],
      revocation_endpoint_auth_methods_supported: ['none'],
      code_challenge_methods_supported: ['S256'],
    };
  }

  /** RFC 9728 protected resource metadata of the MCP endpoint. */
  protectedResourceMetadata(): Record<string, unknown> {
    return {
      resource: this.resource,
      authorization_servers: [this.publicUrl],
      scopes_supported: [...MCP_SCOPES],
      bearer_methods_supported: ['header'],
      resource_name: 'Email validation service (hosted MCP)',
    };
  }

  /**
   * RFC 7591 dynamic registration of a public client (PKCE, no secret: `token_endpoint_auth_method`
   * is always `none`). Refused (`invalid_redirect_uri`, `invalid_client_metadata`): no redirect
   * URI, a bad one, or a grant or response type this server does not offer.
   */
  async register(body: unknown): Promise<Outcome<Record<string, unknown>>> {
    if (!body || typeof body !== 'object' || Array.isArray(body)) return fail('invalid_client_metadata', 'the body must be a JSON object of client metadata');
    const m = body as Record<string, unknown>;
    const uris = m.redirect_uris;
    if (!Array.isArray(uris) || uris.length === 0 || uris.length > 10) return fail('invalid_redirect_uri', 'redirect_uris must be an array of 1-10 URIs');
    for (const u of uris) {
      const problem = redirectUriProblem(u);
      if (problem) return fail('invalid_redirect_uri', problem);
    }
    const grantTypes = m.grant_types ?? ['authorization_code', 'refresh_token'];
    if (!Array.isArray(grantTypes) || grantTypes.some((g) => g !== 'authorization_code' && g !== 'refresh_token')) return fail('invalid_client_metadata', 'grant_types may hold only authorization_code and refresh_token');
    const responseTypes = m.response_types ?? ['code'];
    if (!Array.isArray(responseTypes) || responseTypes.some((r) => r !== 'code')) return fail('invalid_client_metadata', 'response_types may hold only code');
    const name = m.client_name === undefined ? '' : m.client_name;
    if (typeof name !== 'string' || name.length > 200) return fail('invalid_client_metadata', 'client_name must be a string of at most 200 characters');
    // Shown on the consent page: printable text only.
    const unprintable = notPrintable(name);
    if (unprintable) return fail('invalid_client_metadata', `client_name must be printable text: ${unprintable}`);
    let scope: string | undefined;
    if (m.scope !== undefined) {
      const s = typeof m.scope === 'string' ? parseScopes(m.scope) : ({ ok: false, unknown: String(m.scope) } as const);
      if (!s.ok) return fail('invalid_client_metadata', `unknown scope ${JSON.stringify(s.unknown)}; scopes: ${MCP_SCOPES.join(' ')}`);
      scope = s.scopes.join(' ');
    }
    const id = `mcpc_${randomBytes(16).toString('hex')}`;
    const registered: Record<string, unknown> = {
      client_id: id,
      client_id_issued_at: Math.floor(this.#now() / 1000),
      ...(name ? { client_name: name } : {}),
      redirect_uris: uris as string[],
      grant_types: grantTypes as string[],
      response_types: responseTypes as string[],
      // A public client: PKCE stands in for a secret (OAuth 2.1 §2.1).
      token_endpoint_auth_method: 'none',
      ...(scope ? { scope } : {}),
    };
    await this.#store.oauth.createClient({ id, clientName: name, redirectUris: uris as string[], metadata: registered });
    return { ok: true, value: registered };
  }

  /**
   * Checks an authorization request (RFC 6749 §4.1.1 with PKCE). An unknown client or a redirect
   * URI that is not exactly one it registered is shown on the page; every other problem goes back
   * to the client's redirect URI with `state`: `unsupported_response_type`, `invalid_request` (no
   * code_challenge, a method other than S256, a malformed challenge), `invalid_scope`,
   * `invalid_target` (a resource other than the MCP endpoint, RFC 8707).
   */
  async checkAuthorization(q: Params): Promise<AuthorizationCheck> {
    const clientId = q.get('client_id');
    if (!clientId) return { kind: 'page', status: 400, message: 'The request names no client (client_id is missing).' };
    const client = CLIENT_ID.test(clientId) ? await this.#store.oauth.getClient(clientId) : undefined;
    if (!client) return { kind: 'page', status: 400, message: 'This application is not registered here (unknown client_id).' };
    const redirectUri = q.get('redirect_uri') ?? (client.redirect_uris.length === 1 ? client.redirect_uris[0]! : null);
    // Exact string comparison (OAuth 2.1 §4.1.1): no prefix, no normalisation.
    if (!redirectUri || !client.redirect_uris.includes(redirectUri)) return { kind: 'page', status: 400, message: 'The redirect URI is not one this application registered.' };
    const state = q.get('state') ?? undefined;
    const back = (error: string, description: string): AuthorizationCheck => ({ kind: 'redirect', location: redirectWith(redirectUri, { error, error_description: description, ...(state !== undefined ? { state } : {}) }) });
    if (q.get('response_type') !== 'code') return back('unsupported_response_type', 'response_type must be code');
    const challenge = q.get('code_challenge');
    const method = q.get('code_challenge_method');
    if (!challenge) return back('invalid_request', 'code_challenge is required (PKCE, S256)');
    if (method !== 'S256') return back('invalid_request', `code_challenge_method must be S256${method ? `, not ${method}` : ''}`);
    if (!S256_CHALLENGE.test(challenge)) return back('invalid_request', 'code_challenge must be BASE64URL(SHA256(code_verifier)): 43 characters');
    const scopes = parseScopes(q.get('scope'));
    if (!scopes.ok) return back('invalid_scope', `unknown scope ${JSON.stringify(scopes.unknown)}; scopes: ${MCP_SCOPES.join(' ')}`);
    const resource = q.get('resource');
    if (resource !== null && !this.#isResource(resource)) return back('invalid_target', `resource must be ${this.resource}`);
    return {
      kind: 'ok',
      request: { clientId, clientName: client.client_name, redirectUri, codeChallenge: challenge, state, scopes: scopes.scopes.length ? scopes.scopes : [...MCP_SCOPES], resource },
    };
  }

  /**
   * The consent form's answer. `deny`: access_denied to the client. Otherwise the API key signs
   * the person in (it must be active); the scopes they ticked must all be the key's own (an
   * unrestricted key has them all); the grant and its single-use code are stored and the client
   * gets the code and its state.
   */
  async consent(request: AuthorizationRequest, form: { decision: string | null; apiKey: string | null; scopes: string[] }): Promise<ConsentResult> {
    const withState = (p: Record<string, string>) => ({ ...p, ...(request.state !== undefined ? { state: request.state } : {}) });
    if (form.decision === 'deny') return { kind: 'redirect', location: redirectWith(request.redirectUri, withState({ error: 'access_denied', error_description: 'the account holder denied access' })) };
    const again = (status: number, problem: string): ConsentResult => ({ kind: 'form', status, request, problem });
    const apiKey = form.apiKey?.trim();
    if (!apiKey) return again(400, 'Enter an API key of your account.');
    const key = apiKey.length <= 256 ? await this.#store.keys.findByHash(hashKey(apiKey)) : undefined;
    const problem = keyProblem(key, this.#now());
    if (problem || !key) return again(401, problem ?? 'This API key is not valid.');
    const chosen = form.scopes.filter((s): s is McpScope => request.scopes.includes(s as McpScope));
    if (chosen.length === 0 || chosen.length !== form.scopes.length) return again(400, 'Choose at least one of the listed permissions.');
    const lacking = chosen.filter((s) => key.scopes !== null && !key.scopes.includes(s));
    if (lacking.length) return again(403, `This API key lacks ${lacking.join(', ')}; choose only permissions the key has.`);
    const code = secret('mcp_code_');
    await this.#store.oauth.createGrant(
      { id: `mcpg_${randomBytes(12).toString('hex')}`, clientId: request.clientId, accountId: key.account_id, keyId: key.id, scopes: MCP_SCOPES.filter((s) => chosen.includes(s)), resource: request.resource },
      { hash: hashKey(code), redirectUri: request.redirectUri, codeChallenge: request.codeChallenge, expiresAt: new Date(this.#now() + CODE_TTL_S * 1000) },
    );
    return { kind: 'redirect', location: redirectWith(request.redirectUri, withState({ code })) };
  }

  /** The token endpoint (RFC 6749 §3.2): the authorization_code and refresh_token grants. */
  async token(p: Params): Promise<Outcome<TokenResponse>> {
    const grantType = p.get('grant_type');
    const clientId = p.get('client_id');
    if (!grantType) return fail('invalid_request', 'grant_type is required');
    if (grantType !== 'authorization_code' && grantType !== 'refresh_token') return fail('unsupported_grant_type', 'grant_type must be authorization_code or refresh_token');
    if (!clientId) return fail('invalid_client', 'client_id is required (public clients authenticate with it and PKCE)', 401);
    if (!CLIENT_ID.test(clientId) || !(await this.#store.oauth.getClient(clientId))) return fail('invalid_client', 'unknown client_id', 401);
    const resource = p.get('resource');
    if (resource !== null && !this.#isResource(resource)) return fail('invalid_target', `resource must be ${this.resource}`);
    return grantType === 'authorization_code' ? this.#exchangeCode(p, clientId) : this.#refresh(p, clientId);
  }

  async #exchangeCode(p: Params, clientId: string): Promise<Outcome<TokenResponse>> {
    const code = p.get('code');
    const verifier = p.get('code_verifier');
    const redirectUri = p.get('redirect_uri');
    if (!code) return fail('invalid_request', 'code is required');
    if (!verifier) return fail('invalid_request', 'code_verifier is required (PKCE)');
    const now = this.#now();
    let issued: TokenResponse | undefined;
    const r = await this.#store.oauth.redeemCode(
      hashKey(code),
      (c: OAuthCodeRecord) => {
        if (c.client_id !== clientId) return 'the code was issued to another client';
        if (c.grant_revoked) return 'the grant was revoked';
        if (c.expires_at.getTime() <= now) return 'the code has expired';
        if (redirectUri !== c.redirect_uri) return 'redirect_uri does not match the authorization request';
        if (!VERIFIER.test(verifier) || !sameString(sha256b64url(verifier), c.code_challenge)) return 'code_verifier does not match the code_challenge';
        return undefined;
      },
      (c) => {
        const pair = this.#newPair(c.scopes);
        issued = pair.response;
        return pair.stored;
      },
    );
    if (r.kind === 'unknown') return fail('invalid_grant', 'unknown authorization code');
    if (r.kind === 'replayed') return fail('invalid_grant', 'the authorization code was used already; the tokens issued from it are revoked');
    if (r.kind === 'refused') return fail('invalid_grant', r.reason);
    return { ok: true, value: issued! };
  }

  async #refresh(p: Params, clientId: string): Promise<Outcome<TokenResponse>> {
    const refreshToken = p.get('refresh_token');
    if (!refreshToken) return fail('invalid_request', 'refresh_token is required');
    const asked = p.get('scope');
    const scopes = asked === null ? undefined : parseScopes(asked);
    if (scopes && !scopes.ok) return fail('invalid_scope', `unknown scope ${JSON.stringify(scopes.unknown)}`);
    const now = this.#now();
    let issued: TokenResponse | undefined;
    // RFC 6749 §6: a refresh may ask for the granted scopes or fewer, never more.
    let widened = false;
    const r = await this.#store.oauth.rotateRefresh(
      hashKey(refreshToken),
      (t: OAuthTokenRecord) => {
        if (t.client_id !== clientId) return 'the refresh token was issued to another client';
        if (t.grant_revoked) return 'the grant was revoked';
        if (t.expires_at.getTime() <= now) return 'the refresh token has expired';
        const key = keyProblem({ state: t.key_state, expires_at: t.key_expires_at }, now);
        if (key) return `the API key behind this grant is no longer usable (${key})`;
        if (scopes?.ok && scopes.scopes.some((s) => !t.grant_scopes.includes(s))) {
          widened = true;
          return 'a refresh cannot add scopes the grant does not have';
        }
        return undefined;
      },
      (t) => {
        const want = scopes?.ok && scopes.scopes.length ? scopes.scopes : t.scopes;
        const pair = this.#newPair(MCP_SCOPES.filter((s) => want.includes(s)));
        issued = pair.response;
        return pair.stored;
      },
    );
    if (r.kind === 'unknown') return fail('invalid_grant', 'unknown refresh token');
    if (r.kind === 'replayed') return fail('invalid_grant', 'the refresh token was used already; every token of this grant is revoked');
    if (r.kind === 'refused') return fail(widened ? 'invalid_scope' : 'invalid_grant', r.reason);
    return { ok: true, value: issued! };
  }

  /**
   * RFC 7009 revocation: the grant the token belongs to ends, so its access and refresh tokens
   * all stop working. An unknown token is answered like a known one (RFC 7009 §2.2); a token of
   * another client is refused (RFC 7009 §2.1).
   */
  async revoke(p: Params): Promise<Outcome<null>> {
    const token = p.get('token');
    const clientId = p.get('client_id');
    if (!token) return fail('invalid_request', 'token is required');
    if (!clientId) return fail('invalid_client', 'client_id is required', 401);
    const found = token.length <= 512 ? await this.#store.oauth.findToken(hashKey(token)) : undefined;
    if (!found) return { ok: true, value: null };
    if (found.client_id !== clientId) return fail('unauthorized_client', 'the token was issued to another client');
    await this.#store.oauth.revokeGrant(found.grant_id);
    return { ok: true, value: null };
  }

  /**
   * The check of every MCP request: a known access token of a live grant whose key is still usable
   * (invalid_access_token otherwise), not past its expiry (access_token_expired).
   */
  async verifyAccessToken(token: string): Promise<AccessContext> {
    const t = token.length <= 512 ? await this.#store.oauth.findToken(hashKey(token)) : undefined;
    if (!t || t.kind !== 'access' || t.grant_revoked) throw new ServiceError('invalid_access_token');
    const now = this.#now();
    if (keyProblem({ state: t.key_state, expires_at: t.key_expires_at }, now)) throw new ServiceError('invalid_access_token', 'The API key that authorized this token is no longer usable');
    if (t.expires_at.getTime() <= now) throw new ServiceError('access_token_expired');
    return { accountId: t.account_id, keyId: t.key_id, keyPrefix: t.key_prefix, clientId: t.client_id, scopes: t.scopes, subscriptionStatus: t.subscription_status, expiresAt: t.expires_at };
  }

  #newPair(scopes: readonly string[]): { response: TokenResponse; stored: NewTokenPair } {
    const access = secret('mcp_at_');
    const refresh = secret('mcp_rt_');
    const now = this.#now();
    return {
      response: { access_token: access, token_type: 'Bearer', expires_in: this.accessTokenTtlS, refresh_token: refresh, scope: scopes.join(' ') },
      stored: {
        access: { hash: hashKey(access), expiresAt: new Date(now + this.accessTokenTtlS * 1000) },
        refresh: { hash: hashKey(refresh), expiresAt: new Date(now + REFRESH_TOKEN_TTL_S * 1000) },
        scopes: [...scopes],
      },
    };
  }

  /** The MCP endpoint, with or without one trailing slash (RFC 8707 resource indicator). */
  #isResource(r: string): boolean {
    return r.replace(/\/$/, '') === this.resource;
  }
}

/** Why a key cannot sign in or keep a grant alive; undefined when it can. */
function keyProblem(key: Pick<KeyRecord, 'state' | 'expires_at'> | { state: string; expires_at: Date | null } | undefined, now: number): string | undefined {
  if (!key) return 'This API key is not valid.';
  const refused = keyRefusal(key, now);
  return refused && KEY_PROBLEMS[refused];
}

const KEY_PROBLEMS = { api_key_revoked: 'This API key has been revoked.', api_key_inactive: 'This API key is inactive.', api_key_expired: 'This API key has expired.' } as const;

/** The redirect URI with parameters added to its query (RFC 6749 §4.1.2: keeping its own query). */
export function redirectWith(uri: string, params: Record<string, string>): string {
  const u = new URL(uri);
  for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
  return u.toString();
}
