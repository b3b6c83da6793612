// @svc/mcp: the hosted MCP server for AI agents. OAuth 2.1 (PKCE S256, dynamic client
// registration, consent, hashed short-lived tokens with rotating refresh and revocation) and the
// svc_* tools over the Streamable HTTP transport. No HTTP framework here: @svc/api serves it.

import { OAuthServer, type OAuthServerOptions } from './oauth.ts';
import { createMcpServer, type ToolCallContext, type ToolDeps } from './tools.ts';

export {
  OAuthServer,
  MCP_SCOPES,
  MCP_PATH,
  PATHS as OAUTH_PATHS,
  DEFAULT_ACCESS_TOKEN_TTL_S,
  REFRESH_TOKEN_TTL_S,
  CODE_TTL_S,
  redirectUriProblem,
  redirectWith,
  type AccessContext,
  type AuthorizationCheck,
  type AuthorizationRequest,
  type ConsentResult,
  type McpScope,
  type OAuthError,
  type OAuthServerOptions,
  type Outcome,
  type TokenResponse,
} from './oauth.ts';
export { createMcpServer, toolError, TOOL_SCOPES, type ToolCallContext, type ToolDeps } from './tools.ts';
export { consentPage, errorPage, escapeHtml } from './consent.ts';
export { TOOL_NAMES, MAX_BULK, inputs as toolInputs, outputs as toolOutputs, outputJsonSchema, type ToolName } from './schemas.ts';

/** What the front serves hosted MCP with: the authorization server, and a tool server per request. */
export class HostedMcp {
  readonly oauth: OAuthServer;
  readonly #deps: ToolDeps;

  constructor(opts: OAuthServerOptions & ToolDeps) {
    this.oauth = new OAuthServer(opts);
    this.#deps = { store: opts.store, verifier: opts.verifier, ...(opts.jobs ? { jobs: opts.jobs } : {}), ...(opts.analytics ? { analytics: opts.analytics } : {}), ...(opts.data ? { data: opts.data } : {}) };
  }

  /** A new MCP server bound to one request's access token (stateless transport). */
  server(ctx: ToolCallContext): ReturnType<typeof createMcpServer> {
    return createMcpServer(this.#deps, ctx);
  }
}
