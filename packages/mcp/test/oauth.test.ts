// The authorization server's rules on a clock of its own (PGlite store): code and token lifetimes
// to the second, redirect URI rules, the consent page's escaping. The HTTP flow with the SDK's
// client is test/e2e/mcp.test.ts.

import { createHash, randomBytes } from 'node:crypto';
import t from 'tap';
import { Store } from '@svc/store';
import { migratedPglite } from '../../../test/helpers/pglite.ts';
import { consentPage, OAuthServer, redirectUriProblem, redirectWith, type AuthorizationRequest } from '@svc/mcp';

t.test('redirect URIs that may be registered', async (t) => {
  const table: Array<[string, string | undefined]> = [
    ['https://agent.example.com/callback', undefined],
    ['http://localhost:8765/cb', undefined],
    ['http://127.0.0.1:33418/callback', undefined],
    ['http://[::1]:9000/cb', undefined],
    ['cursor://anysphere.cursor-mcp/oauth/callback', undefined],
    ['com.example.agent:/oauth2redirect', undefined],
    ['http://agent.example.com/callback', 'http redirect URIs are allowed only on a loopback host (localhost, 127.0.0.1, [::1]); use https'],
    ['https://agent.example.com/cb#x', 'a redirect URI must not have a fragment'],
    ['javascript:alert(1)', 'the javascript: scheme is not allowed'],
    ['data:text/html,hi', 'the data: scheme is not allowed'],
    ['file:///etc/passwd', 'the file: scheme is not allowed'],
    ['/relative/callback', '"/relative/callback" is not an absolute URI'],
    ['', 'each redirect URI must be a string of 1-2000 characters'],
  ];
  for (const [uri, problem] of table) t.equal(redirectUriProblem(uri), problem, uri);
  t.equal(redirectUriProblem(42), 'each redirect URI must be a string of 1-2000 characters');
});

t.test('redirectWith keeps the redirect URI’s own query (RFC 6749 §4.1.2)', async (t) => {
  t.equal(redirectWith('https://a.example/cb?tenant=7', { code: 'c d', state: 'x&y' }), 'https://a.example/cb?tenant=7&code=c+d&state=x%26y');
});

t.test('the consent page escapes what the client chose', async (t) => {
  const r: AuthorizationRequest = { clientId: 'mcpc_1', clientName: '<b>Evil</b> & co', redirectUri: 'https://a.example/cb?x="1"', codeChallenge: 'c'.repeat(43), state: '"><img src=x>', scopes: ['credits:read'], resource: null };
  const html = consentPage(r, '/oauth/authorize', 'Problem <here>');
  t.ok(html.includes('&lt;b&gt;Evil&lt;/b&gt; &amp; co'));
  t.ok(html.includes('value="&quot;&gt;&lt;img src=x&gt;"'));
  t.ok(html.includes('Problem &lt;here&gt;'));
  t.notOk(/<img|<b>/.test(html), 'no markup of theirs');
  t.ok(html.includes('<input type="password" name="api_key"'), 'the key goes in the POST body');
});

t.test('lifetimes on the server’s clock: a 60 s code, the configured access token TTL', async (t) => {
  const db = await migratedPglite();
  const store = new Store(db);
  t.teardown(() => store.close());
  let clock = Date.parse('2026-03-01T10:00:00Z');
  const oauth = new OAuthServer({ store, publicUrl: 'https://svc.example.com/', accessTokenTtlS: 120, now: () => clock });
  t.equal(oauth.resource, 'https://svc.example.com/mcp', 'the trailing slash of the public URL is dropped');
  const accountId = await store.accounts.create({ credits: 5 });
  const { key } = await store.keys.create({ accountId, kind: 'test', scopes: null });
  const reg = await oauth.register({ client_name: 'clock agent', redirect_uris: ['http://127.0.0.1:1/cb'] });
  if (!reg.ok) throw new Error(reg.body.error);
  const clientId = String(reg.value.client_id);

  const codeAt = async (): Promise<{ code: string; verifier: string }> => {
    const verifier = randomBytes(32).toString('base64url');
    const q = new URLSearchParams({ response_type: 'code', client_id: clientId, redirect_uri: 'http://127.0.0.1:1/cb', code_challenge: createHash('sha256').update(verifier).digest('base64url'), code_challenge_method: 'S256', scope: 'credits:read' });
    const check = await oauth.checkAuthorization(q);
    if (check.kind !== 'ok') throw new Error(check.kind);
    t.strictSame(check.request.scopes, ['credits:read']);
    const c = await oauth.consent(check.request, { decision: 'allow', apiKey: key, scopes: ['credits:read'] });
    if (c.kind !== 'redirect') throw new Error(c.problem);
    return { code: new URL(c.location).searchParams.get('code')!, verifier };
  };
  const exchange = (c: { code: string; verifier: string }) => oauth.token(new URLSearchParams({ grant_type: 'authorization_code', code: c.code, code_verifier: c.verifier, redirect_uri: 'http://127.0.0.1:1/cb', client_id: clientId }));

  const late = await codeAt();
  clock += 60_000;
  t.strictSame(await exchange(late), { ok: false, status: 400, body: { error: 'invalid_grant', error_description: 'the code has expired' } }, 'at 60 s the code is gone');
  const inTime = await codeAt();
  clock += 59_999;
  const tokens = await exchange(inTime);
  if (!tokens.ok) throw new Error(tokens.body.error_description);
  t.equal(tokens.value.expires_in, 120);
  const start = clock;
  clock = start + 119_999;
  t.match(await oauth.verifyAccessToken(tokens.value.access_token), { accountId, scopes: ['credits:read'], subscriptionStatus: 'active' });
  clock = start + 120_000;
  await t.rejects(oauth.verifyAccessToken(tokens.value.access_token), { code: 'access_token_expired' });
  // The refresh token outlives it: a new access token for another 120 s.
  const refreshed = await oauth.token(new URLSearchParams({ grant_type: 'refresh_token', refresh_token: tokens.value.refresh_token, client_id: clientId }));
  if (!refreshed.ok) throw new Error(refreshed.body.error_description);
  t.match(await oauth.verifyAccessToken(refreshed.value.access_token), { accountId });
  // After 30 days the refresh token is refused.
  clock += 30 * 86_400_000;
  t.strictSame(await oauth.token(new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshed.value.refresh_token, client_id: clientId })), { ok: false, status: 400, body: { error: 'invalid_grant', error_description: 'the refresh token has expired' } });
});
