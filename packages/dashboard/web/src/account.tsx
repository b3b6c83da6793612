// The account (owners): credits and the subscription (cancel at the period end, or undo it, under
// the REST API's rules), the MCP apps connected to the account (disconnect one: its tokens stop at
// once), and how job webhooks are signed and verified, with the account's current signing secrets.

import { useEffect, useState } from 'preact/hooks';
import { api, errorText } from './api.ts';
import { Table } from './table.tsx';
import { Alerts, when } from './ui.tsx';

interface Overview {
  credits: { balance: number; reserved: number; available: number; subscription_status: string; current_period_end: string | null; cancel_at_period_end: boolean };
  subscription: {
    id: string;
    processor: string;
    plan: { id: string; name: string | null; credits_per_period: number | null; period_days: number | null };
    status: string;
    cancel_at_period_end: boolean;
    current_period_start: string;
    current_period_end: string;
    ended_at: string | null;
  } | null;
  can_change_subscription: boolean;
}

interface App {
  id: string;
  client_name: string;
  scopes: string[];
  created_at: string;
  last_token_at: string | null;
  key: { id: string; prefix: string; name: string; state: string };
}

interface Secret {
  id: string;
  secret_prefix: string;
  created_at: string;
  expires_at: string | null;
}


/** A receiver's check of X-Signature, in Node (shown as text, never run by the page). */
export const VERIFY_SNIPPET = `import { createHmac, timingSafeEqual } from 'node:crypto';

// rawBody: the request body exactly as received (bytes or string), before any JSON.parse.
export function verifyWebhook(secret, signatureHeader, rawBody, toleranceS = 300) {
  const parts = String(signatureHeader).split(',').map((p) => p.trim().split('='));
  const t = parts.find(([k]) => k === 't')?.[1];
  if (!t || !/^\\d+$/.test(t)) return false;
  if (Math.abs(Date.now() / 1000 - Number(t)) > toleranceS) return false; // an old delivery replayed
  const want = createHmac('sha256', secret).update(\`\${t}.\`).update(rawBody).digest();
  // One v1 per current secret (two during a rotation's grace period): any one matching will do.
  return parts.some(([k, v]) => k === 'v1' && /^[0-9a-f]{64}$/.test(v) && timingSafeEqual(want, Buffer.from(v, 'hex')));
}

// In the handler: answer 2xx only after a good signature, and skip an X-Webhook-Id already handled
// (a delivery is retried until a 2xx, so the same event may arrive more than once).`;

function Subscription() {
  const [data, setData] = useState<Overview | null>(null);
  const [error, setError] = useState('');
  const [note, setNote] = useState('');
  const [busy, setBusy] = useState(false);
  const load = () => api<Overview>('GET', '/account').then(setData, (e) => setError(errorText(e)));
  useEffect(() => void load(), []);
  const change = async (verb: 'cancel' | 'reactivate') => {
    if (verb === 'cancel' && !confirm('Cancel the subscription at the end of the current period? Credits stay usable until then.')) return;
    setError('');
    setNote('');
    setBusy(true);
    try {
      setNote((await api<{ message: string }>('POST', `/account/subscription/${verb}`)).message);
    } catch (e) {
      setError(errorText(e));
    }
    setBusy(false);
    await load();
  };
  if (!data) return error ? <p role="alert" class="error">{error}</p> : <p class="loading">Loading…</p>;
  const { credits, subscription: sub } = data;
  const live = sub !== null && sub.status !== 'canceled';
  return (
    <section aria-labelledby="sub-h" class="card wide">
      <h2 id="sub-h">Credits and subscription</h2>
      <Alerts error={error} note={note} />
      <dl class="facts">
        <dt>Available credits</dt>
        <dd>{credits.available}</dd>
        <dt>Balance</dt>
        <dd>{credits.balance}</dd>
        <dt>Held by work in progress</dt>
        <dd>{credits.reserved}</dd>
        <dt>Subscription status</dt>
        <dd>{credits.subscription_status}</dd>
        <dt>Current period ends</dt>
        <dd>{when(credits.current_period_end)}</dd>
        <dt>Cancels at the period end</dt>
        <dd>{credits.cancel_at_period_end ? 'yes' : 'no'}</dd>
        {sub && (
          <>
            <dt>Plan</dt>
            <dd>
              {sub.plan.name ?? sub.plan.id}
              {sub.plan.credits_per_period !== null && ` (${sub.plan.credits_per_period} credits every ${sub.plan.period_days} days)`}
            </dd>
          </>
        )}
      </dl>
      {!sub && <p>This account has no subscription: its credits were granted by the service's operator.</p>}
      {sub && !live && <p>The subscription ended {when(sub.ended_at)}; validation is blocked until the operator starts a new one.</p>}
      {live && data.can_change_subscription && (
        <div class="actions">
          {sub.cancel_at_period_end ? (
            <button type="button" disabled={busy} onClick={() => change('reactivate')}>
              Undo the cancellation
            </button>
          ) : (
            <button type="button" class="danger" disabled={busy} onClick={() => change('cancel')}>
              Cancel at the period end
            </button>
          )}
        </div>
      )}
      {live && (
        <p class="muted">
          {sub.cancel_at_period_end
            ? `Validation and the full balance stay available until ${when(sub.current_period_end)}; then the subscription ends and the credits expire.`
            : `It renews on ${when(sub.current_period_end)}. Cancelling keeps validation and the full balance until then, with no later charge.`}
        </p>
      )}
    </section>
  );
}

function Apps() {
  const [apps, setApps] = useState<App[]>([]);
  const [error, setError] = useState('');
  const [note, setNote] = useState('');
  const load = () => api<{ apps: App[] }>('GET', '/account/apps').then((r) => setApps(r.apps), (e) => setError(errorText(e)));
  useEffect(() => void load(), []);
  const revoke = async (a: App) => {
    if (!confirm(`Disconnect ${a.client_name || 'this app'}? Its tokens stop working at once.`)) return;
    setError('');
    setNote('');
    try {
      setNote((await api<{ message: string }>('POST', `/account/apps/${a.id}/revoke`)).message);
    } catch (e) {
      setError(errorText(e));
    }
    await load();
  };
  return (
    <section aria-labelledby="apps-h">
      <h2 id="apps-h">Connected apps (MCP)</h2>
      <p>
        AI agents and other MCP clients someone allowed to use this account, each through one of its API keys and with some of that key's scopes. Revoking, deactivating or
        expiring that key disconnects the app too.
      </p>
      <Alerts error={error} note={note} />
      {apps.length === 0 ? (
        <p>No app is connected.</p>
      ) : (
        <Table caption="Apps connected to this account" headers={['App', 'Scopes', 'Connected', 'Last token', 'Acts through key', 'Actions']}>
          {apps.map((a) => (
            <tr key={a.id}>
              <td>{a.client_name || '(no name)'}</td>
              <td>{a.scopes.join(', ')}</td>
              <td>{when(a.created_at)}</td>
              <td>{when(a.last_token_at)}</td>
              <td>
                <code>{a.key.prefix}…</code> {a.key.name && `(${a.key.name})`} {a.key.state !== 'active' && `— ${a.key.state}`}
              </td>
              <td class="actions">
                <button type="button" class="danger" aria-label={`Disconnect ${a.client_name || a.id}`} onClick={() => revoke(a)}>
                  Disconnect
                </button>
              </td>
            </tr>
          ))}
        </Table>
      )}
      <p class="muted">"Last token" is when the app last signed in or refreshed its access; single requests are not recorded.</p>
    </section>
  );
}

function Webhooks() {
  const [secrets, setSecrets] = useState<Secret[] | null>(null);
  const [error, setError] = useState('');
  useEffect(() => void api<{ secrets: Secret[] }>('GET', '/account/webhook-secrets').then((r) => setSecrets(r.secrets), (e) => setError(errorText(e))), []);
  return (
    <section aria-labelledby="wh-h">
      <h2 id="wh-h">Job webhooks: checking they come from this service</h2>
      <p>
        When a list job started with a <code>webhook_url</code> finishes, the service POSTs its status there as JSON, with two headers:
      </p>
      <ul>
        <li>
          <code>X-Signature: t=&lt;unix time&gt;,v1=&lt;hex&gt;</code>: the HMAC-SHA256 of <code>t + "." + body</code> (the exact bytes received) with this account's signing
          secret. During a rotation's grace period there is one <code>v1</code> per current secret.
        </li>
        <li>
          <code>X-Webhook-Id</code>: the event's id, the same on every retry. A delivery is retried until your endpoint answers 2xx, so handle each id once.
        </li>
      </ul>
      <h3>Signing secrets</h3>
      <Alerts error={error} />
      {secrets && secrets.length === 0 && <p>No secret yet. One is made at the first delivery, and never shown: rotate to get one you can verify with.</p>}
      {secrets && secrets.length > 0 && (
        <Table caption="Current signing secrets (first characters only)" headers={['Secret', 'Created', 'Signs until']}>
          {secrets.map((s) => (
            <tr key={s.id}>
              <td>
                <code>{s.secret_prefix}</code>
              </td>
              <td>{when(s.created_at)}</td>
              <td>{s.expires_at ? when(s.expires_at) : 'the next rotation'}</td>
            </tr>
          ))}
        </Table>
      )}
      <p>
        A secret is shown once, when it is made: by <code>POST /v1/webhooks/secret/rotate</code> with an API key that has the <code>email:validate:bulk</code> scope (body{' '}
        <code>{'{"grace_period_seconds": N}'}</code>, default one day, during which the old secret still signs), or by the service's operator. The dashboard shows only the
        first characters.
      </p>
      <figure class="snippet">
        <figcaption>
          <h3>Verifying in Node</h3>
        </figcaption>
        <pre>
          <code>{VERIFY_SNIPPET}</code>
        </pre>
      </figure>
    </section>
  );
}

export function Account() {
  return (
    <section>
      <h1>Account</h1>
      <Subscription />
      <Apps />
      <Webhooks />
    </section>
  );
}
