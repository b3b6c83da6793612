// The page's one way to the server: /dashboard/api with the session cookie (the browser sends it;
// the page never sees it) and, on every change, the session's CSRF token, held in memory only.

export interface ApiError {
  status: number;
  code: string;
  message: string;
}

let csrf: string | undefined;
export const setCsrf = (token: string | undefined) => {
  csrf = token;
};

export async function api<T = any>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = {};
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET' && csrf) headers['x-csrf-token'] = csrf;
  const res = await fetch(`/dashboard/api${path}`, { method, headers, credentials: 'same-origin', ...(body !== undefined && { body: JSON.stringify(body) }) });
  const text = await res.text();
  const json = text ? JSON.parse(text) : undefined;
  if (!res.ok) throw { status: res.status, code: json?.code ?? 'error', message: json?.message ?? res.statusText } satisfies ApiError;
  if (json?.csrf_token) csrf = json.csrf_token;
  return json as T;
}

export const errorText = (e: unknown): string => (e && typeof e === 'object' && 'message' in e ? String((e as ApiError).message) : String(e));
