// API keys: created with the full key shown once (and a copy button), listed by prefix, revoked,
// rotated, deactivated and activated under the same rules as the admin CLI (the server's).

import { useEffect, useState } from 'preact/hooks';
import { api, errorText } from './api.ts';
import { Table } from './table.tsx';
import { reloadingAction } from './ui.tsx';

interface Key {
  id: string;
  prefix: string;
  name: string;
  kind: 'test' | 'live';
  scopes: string[] | null;
  state: string;
  created_at: string;
  last_used_at: string | null;
  expires_at: string | null;
}

const day = (iso: string | null) => (iso ? iso.slice(0, 16).replace('T', ' ') : '—');

export function Keys() {
  const [keys, setKeys] = useState<Key[]>([]);
  const [catalogue, setCatalogue] = useState<string[]>([]);
  const [error, setError] = useState('');
  const [shown, setShown] = useState<{ key: string; note: string } | null>(null);
  const [copied, setCopied] = useState(false);
  const [name, setName] = useState('');
  const [kind, setKind] = useState<'live' | 'test'>('live');
  const [all, setAll] = useState(true);
  const [scopes, setScopes] = useState<string[]>([]);
  const [expires, setExpires] = useState('');
  const load = () => api<{ keys: Key[] }>('GET', '/keys').then((r) => setKeys(r.keys), (e) => setError(errorText(e)));
  useEffect(() => {
    void load();
    api<{ scopes: string[] }>('GET', '/scopes').then((r) => setCatalogue(r.scopes), () => {});
  }, []);
  const act = reloadingAction(setError, load);
  const create = (e: Event) => {
    e.preventDefault();
    void act(async () => {
      const made = await api<{ key: string }>('POST', '/keys', { name, kind, scopes: all ? null : scopes, expires_at: expires ? new Date(expires).toISOString() : null });
      setShown({ key: made.key, note: 'Copy it now: it is shown once, and only its hash is kept.' });
      setCopied(false);
      setName('');
    });
  };
  const rotate = (k: Key) =>
    act(async () => {
      const made = await api<{ key: string; old_key: { expires_at: string } }>('POST', `/keys/${k.id}/rotate`, {});
      setShown({ key: made.key, note: `The old key (${k.prefix}…) keeps working until ${day(made.old_key.expires_at)} UTC. Copy the new one now: it is shown once.` });
      setCopied(false);
    });
  return (
    <section>
      <h1>API keys</h1>
      {error && <p role="alert" class="error">{error}</p>}
      {shown && (
        <div class="shown" role="status">
          <label for="new-key">New API key</label>
          <input id="new-key" readOnly value={shown.key} onFocus={(e) => e.currentTarget.select()} />
          <button type="button" onClick={() => navigator.clipboard.writeText(shown.key).then(() => setCopied(true), () => setCopied(false))}>
            {copied ? 'Copied' : 'Copy key'}
          </button>
          <p>{shown.note}</p>
          <button type="button" class="link" onClick={() => setShown(null)}>
            I have stored it
          </button>
        </div>
      )}
      <form onSubmit={create} class="card">
        <h2>Create a key</h2>
        <label for="key-name">Name</label>
        <input id="key-name" maxLength={100} value={name} onInput={(e) => setName(e.currentTarget.value)} />
        <label for="key-kind">Kind</label>
        <select id="key-kind" value={kind} onChange={(e) => setKind(e.currentTarget.value as 'live' | 'test')}>
          <option value="live">live (svc_live_)</option>
          <option value="test">test (svc_test_)</option>
        </select>
        <fieldset>
          <legend>Scopes</legend>
          <label class="check">
            <input type="checkbox" checked={all} onChange={(e) => setAll(e.currentTarget.checked)} /> Every scope
          </label>
          {!all &&
            catalogue.map((s) => (
              <label class="check" key={s}>
                <input type="checkbox" checked={scopes.includes(s)} onChange={(e) => setScopes(e.currentTarget.checked ? [...scopes, s] : scopes.filter((x) => x !== s))} /> {s}
              </label>
            ))}
        </fieldset>
        <label for="key-expires">Expires (optional)</label>
        <input id="key-expires" type="datetime-local" value={expires} onInput={(e) => setExpires(e.currentTarget.value)} />
        <button type="submit">Create key</button>
      </form>
      <Table caption="Keys of this account" headers={['Name', 'Prefix', 'Scopes', 'State', 'Created', 'Last used', 'Expires', 'Actions']}>
            {keys.map((k) => (
              <tr key={k.id}>
                <td>{k.name || '—'}</td>
                <td>
                  <code>{k.prefix}…</code>
                </td>
                <td>{k.scopes ? k.scopes.join(', ') : 'every scope'}</td>
                <td>{k.state}</td>
                <td>{day(k.created_at)}</td>
                <td>{day(k.last_used_at)}</td>
                <td>{day(k.expires_at)}</td>
                <td class="actions">
                  {k.state === 'active' && (
                    <button type="button" aria-label={`Rotate key ${k.prefix}`} onClick={() => rotate(k)}>
                      Rotate
                    </button>
                  )}
                  {k.state === 'active' && (
                    <button type="button" aria-label={`Deactivate key ${k.prefix}`} onClick={() => act(() => api('POST', `/keys/${k.id}/deactivate`))}>
                      Deactivate
                    </button>
                  )}
                  {k.state === 'inactive' && (
                    <button type="button" aria-label={`Activate key ${k.prefix}`} onClick={() => act(() => api('POST', `/keys/${k.id}/activate`))}>
                      Activate
                    </button>
                  )}
                  {k.state !== 'revoked' && (
                    <button type="button" class="danger" aria-label={`Revoke key ${k.prefix}`} onClick={() => confirm(`Revoke ${k.prefix}…? This cannot be undone.`) && act(() => api('POST', `/keys/${k.id}/revoke`))}>
                      Revoke
                    </button>
                  )}
                </td>
              </tr>
            ))}
      </Table>
    </section>
  );
}
