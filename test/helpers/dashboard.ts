// A browser's view of the dashboard's API for the HTTP tests: its own cookie jar (the session
// cookie) and CSRF token, and a signed-in owner made from the stack's first-run link.

import type { Stack } from './stack.ts';

export const PASSWORD = 'correct horse battery staple';

export type Browser = ReturnType<typeof browser>;

/** One browser: requests to /dashboard/api with its session cookie and, on changes, its CSRF token. */
export function browser(stack: Stack) {
  let cookie: string | undefined;
  let csrf: string | undefined;
  return {
    get cookie() {
      return cookie;
    },
    set cookie(v: string | undefined) {
      cookie = v;
    },
    set csrf(v: string | undefined) {
      csrf = v;
    },
    get csrf() {
      return csrf;
    },
    /** A JSON call; `text` is the raw body (a CSV download). */
    async call(method: string, route: string, body?: unknown, headers: Record<string, string> = {}) {
      const res = await fetch(`${stack.url}/dashboard/api${route}`, {
        method,
        headers: {
          ...(body !== undefined && { 'content-type': 'application/json' }),
          ...(cookie && { cookie: `svc_session=${cookie}` }),
          ...(csrf && method !== 'GET' && { 'x-csrf-token': csrf }),
          ...headers,
        },
        ...(body !== undefined && { body: JSON.stringify(body) }),
      });
      const setCookie = res.headers.get('set-cookie');
      if (setCookie) {
        const m = /^svc_session=([^;]*)/.exec(setCookie);
        cookie = m && m[1] ? m[1] : undefined;
      }
      const text = await res.text();
      const json = text && (res.headers.get('content-type') ?? '').startsWith('application/json') ? JSON.parse(text) : undefined;
      if (json?.csrf_token) csrf = json.csrf_token;
      return { status: res.status, body: json, text, setCookie, headers: res.headers };
    },
  };
}

/** The token of a set-up link (it sits in the fragment). */
export const tokenOf = (url: string) => new URL(url).hash.replace(/^#token=/, '');

/** A browser signed in as the stack's first owner, created from the first-run link. */
export async function firstOwner(stack: Stack, email = 'owner@example.test'): Promise<Browser> {
  const b = browser(stack);
  const r = await b.call('POST', '/setup', { token: tokenOf(stack.svc.setupUrl!), email, password: PASSWORD });
  if (r.status !== 201) throw new Error(`set-up failed: ${r.status} ${JSON.stringify(r.body)}`);
  return b;
}
