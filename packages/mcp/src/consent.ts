// The consent page of GET/POST /oauth/authorize: plain HTML, no script, every value escaped. The
// account holder signs in with one of their API keys (sent once, in the form's POST body, never
// in a URL) and ticks the permissions the application gets, among that key's own.

import type { AuthorizationRequest, McpScope } from './oauth.ts';

const SCOPE_TEXT: Record<McpScope, string> = {
  'credits:read': 'Read your credit balance',
  'email:validate:single': 'Validate single email addresses (charges credits)',
  'email:validate:bulk': 'Validate lists and run validation jobs (charges credits)',
  'data:company:read': 'Look up company data from a domain (charges credits; needs the data product)',
  'email:find': 'Find email addresses from names (charges credits; needs the data product)',
};

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

const page = (title: string, body: string): string =>
  `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${escapeHtml(title)}</title>
<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem;color:#222}label{display:block;margin:.5rem 0}input[type=password]{width:100%;padding:.4rem}.problem{color:#a00}button{margin:1rem .5rem 0 0;padding:.4rem 1rem}</style>
</head>
<body>
${body}
</body>
</html>
`;

/** The hidden fields that carry the authorization request through the form's POST. */
function hidden(r: AuthorizationRequest): string {
  const fields: Record<string, string> = {
    response_type: 'code',
    client_id: r.clientId,
    redirect_uri: r.redirectUri,
    code_challenge: r.codeChallenge,
    code_challenge_method: 'S256',
    scope: r.scopes.join(' '),
    ...(r.state !== undefined ? { state: r.state } : {}),
    ...(r.resource !== null ? { resource: r.resource } : {}),
  };
  return Object.entries(fields)
    .map(([k, v]) => `<input type="hidden" name="${k}" value="${escapeHtml(v)}">`)
    .join('\n');
}

/** The form: who asks, where it will send you back, an API key field and a checkbox per requested scope. */
export function consentPage(r: AuthorizationRequest, action: string, problem?: string): string {
  const who = r.clientName ? escapeHtml(r.clientName) : 'An application';
  const scopes = r.scopes.map((s) => `<label><input type="checkbox" name="scopes" value="${s}" checked> ${escapeHtml(SCOPE_TEXT[s])} <code>${s}</code></label>`).join('\n');
  return page(
    'Allow access to email validation',
    `<h1>Allow access?</h1>
<p><strong>${who}</strong> wants to use the email validation service on your behalf through MCP. You will be sent back to <code>${escapeHtml(r.redirectUri)}</code>.</p>
${problem ? `<p class="problem" role="alert">${escapeHtml(problem)}</p>` : ''}
<form method="post" action="${escapeHtml(action)}">
${hidden(r)}
<label>API key of your account <input type="password" name="api_key" autocomplete="off" required></label>
<fieldset><legend>Permissions (only those your key has)</legend>
${scopes}
</fieldset>
<button type="submit" name="decision" value="allow">Allow</button>
<button type="submit" name="decision" value="deny" formnovalidate>Deny</button>
</form>`,
  );
}

/** An authorization request that cannot go back to the application (unknown client, unregistered redirect URI). */
export function errorPage(message: string): string {
  return page('Authorization failed', `<h1>Authorization failed</h1>\n<p class="problem">${escapeHtml(message)}</p>`);
}
