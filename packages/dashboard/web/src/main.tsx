// The dashboard's pages: set-up from a single-use link, sign-in, and, signed in, the account's keys
// and team. Every user string is rendered as text (JSX escapes it); no key or token is ever put in
// browser storage.

import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, errorText, setCsrf } from './api.ts';
import { Keys } from './keys.tsx';
import { Team } from './team.tsx';
import { Validate } from './validate.tsx';
import { Jobs } from './jobs.tsx';
import { Upload } from './upload.tsx';
import { Usage } from './usage.tsx';
import { Accuracy } from './accuracy.tsx';
import { Account } from './account.tsx';
import { Operator } from './operator.tsx';
import { Data } from './data.tsx';

export interface Session {
  user: { id: string; email: string; role: 'owner' | 'member'; operator: boolean };
  account_id: string;
  csrf_token: string;
}

const PAGES = ['validate', 'upload', 'jobs', 'usage', 'accuracy', 'data', 'keys', 'team', 'account', 'operator'] as const;
type Page = (typeof PAGES)[number] | 'home';

function pageOf(path: string): Page {
  const p = path.replace(/^\/dashboard\/?/, '').split('/')[0] ?? '';
  return (PAGES as readonly string[]).includes(p) ? (p as Page) : 'home';
}

function go(path: string, set: (p: Page) => void) {
  history.pushState(null, '', path);
  set(pageOf(path));
}

function Setup({ onSignedIn }: { onSignedIn: (s: Session) => void }) {
  // The token is in the fragment: read once, then taken out of the address bar and history.
  const [token] = useState(() => new URLSearchParams(location.hash.slice(1)).get('token') ?? '');
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState('');
  useEffect(() => history.replaceState(null, '', '/dashboard/setup'), []);
  const submit = async (e: Event) => {
    e.preventDefault();
    setError('');
    try {
      const s = await api<Session>('POST', '/setup', { token, email, password });
      history.replaceState(null, '', '/dashboard/');
      onSignedIn(s);
    } catch (err) {
      setError(errorText(err));
    }
  };
  return (
    <main class="narrow">
      <h1>Create your sign-in</h1>
      {!token && <p role="alert">This page needs the single-use link you were given.</p>}
      <form onSubmit={submit}>
        <label for="setup-email">Email address</label>
        <input id="setup-email" type="email" autocomplete="username" required value={email} onInput={(e) => setEmail(e.currentTarget.value)} />
        <label for="setup-password">Password (at least 12 characters)</label>
        <input id="setup-password" type="password" autocomplete="new-password" minLength={12} required value={password} onInput={(e) => setPassword(e.currentTarget.value)} />
        {error && <p role="alert" class="error">{error}</p>}
        <button type="submit">Create sign-in</button>
      </form>
    </main>
  );
}

function SignIn({ onSignedIn }: { onSignedIn: (s: Session) => void }) {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState('');
  const submit = async (e: Event) => {
    e.preventDefault();
    setError('');
    try {
      onSignedIn(await api<Session>('POST', '/sign-in', { email, password }));
    } catch (err) {
      setError(errorText(err));
    }
  };
  return (
    <main class="narrow">
      <h1>Sign in</h1>
      <form onSubmit={submit}>
        <label for="signin-email">Email address</label>
        <input id="signin-email" type="email" autocomplete="username" required value={email} onInput={(e) => setEmail(e.currentTarget.value)} />
        <label for="signin-password">Password</label>
        <input id="signin-password" type="password" autocomplete="current-password" required value={password} onInput={(e) => setPassword(e.currentTarget.value)} />
        {error && <p role="alert" class="error">{error}</p>}
        <button type="submit">Sign in</button>
      </form>
    </main>
  );
}

function App() {
  const [session, setSession] = useState<Session | null | undefined>(undefined);
  const [page, setPage] = useState<Page>(() => pageOf(location.pathname));
  useEffect(() => {
    const onPop = () => setPage(pageOf(location.pathname));
    addEventListener('popstate', onPop);
    if (location.pathname.startsWith('/dashboard/setup')) setSession(null);
    else api<Session>('GET', '/session').then(setSession, () => setSession(null));
    return () => removeEventListener('popstate', onPop);
  }, []);
  const signedIn = (s: Session) => {
    setCsrf(s.csrf_token);
    setSession(s);
  };
  if (session === undefined) return <p class="loading">Loading…</p>;
  if (session === null) return location.pathname.startsWith('/dashboard/setup') ? <Setup onSignedIn={signedIn} /> : <SignIn onSignedIn={signedIn} />;
  const owner = session.user.role === 'owner';
  const operator = session.user.operator;
  const signOut = async () => {
    await api('POST', '/sign-out').catch(() => {});
    setCsrf(undefined);
    setSession(null);
  };
  const link = (to: Page, label: string) => (
    <a href={`/dashboard/${to === 'home' ? '' : to}`} aria-current={page === to ? 'page' : undefined} onClick={(e) => (e.preventDefault(), go(`/dashboard/${to === 'home' ? '' : to}`, setPage))}>
      {label}
    </a>
  );
  return (
    <>
      <header>
        <nav aria-label="Dashboard">
          {link('home', 'Overview')}
          {link('validate', 'Validate')}
          {link('upload', 'Validate a list')}
          {link('jobs', 'Jobs')}
          {link('usage', 'Usage')}
          {link('accuracy', 'Accuracy')}
          {link('data', 'Find & enrich')}
          {owner && link('keys', 'API keys')}
          {owner && link('team', 'Team')}
          {owner && link('account', 'Account')}
          {operator && link('operator', 'Operator')}
        </nav>
        <span class="who">{session.user.email}</span>
        <button type="button" class="link" onClick={signOut}>
          Sign out
        </button>
      </header>
      <main>
        {page === 'validate' ? (
          <Validate />
        ) : page === 'upload' ? (
          <Upload />
        ) : page === 'jobs' ? (
          <Jobs />
        ) : page === 'usage' ? (
          <Usage />
        ) : page === 'accuracy' ? (
          <Accuracy />
        ) : page === 'data' ? (
          <Data />
        ) : page === 'account' && owner ? (
          <Account />
        ) : page === 'operator' && operator ? (
          <Operator />
        ) : page === 'keys' && owner ? (
          <Keys />
        ) : page === 'team' && owner ? (
          <Team self={session.user.id} />
        ) : (
          <section>
            <h1>Overview</h1>
            <p>
              Signed in as <strong>{session.user.email}</strong>, {session.user.role} of account <code>{session.account_id}</code>.
            </p>
            {!owner && <p>Members validate addresses and follow jobs; keys, team and billing are managed by the account's owners.</p>}
          </section>
        )}
      </main>
    </>
  );
}

render(<App />, document.getElementById('app')!);
