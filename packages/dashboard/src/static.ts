// The dashboard's pages at /dashboard: the single-page app Vite built into packages/dashboard/dist
// (by `npm install`, or here at start when it is missing), served by @fastify/static with a strict
// Content-Security-Policy: scripts, styles and connections from this origin only, no inline script,
// no framing. Any /dashboard path that is not a file is the app's (it routes in the page).

import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance } from 'fastify';

export const DIST = fileURLToPath(new URL('../dist/', import.meta.url));
const WEB_CONFIG = fileURLToPath(new URL('../web/vite.config.ts', import.meta.url));

export const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const SECURITY_HEADERS: Record<string, string> = {
  'Content-Security-Policy': CONTENT_SECURITY_POLICY,
  'X-Frame-Options': 'DENY',
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
};

/** Builds the app when packages/dashboard/dist has none (a checkout whose `npm install` skipped scripts). Returns whether it is there now. */
export function ensureDashboardBuilt(log: (msg: string) => void): boolean {
  if (existsSync(path.join(DIST, 'index.html'))) return true;
  let vite: string;
  try {
    vite = path.join(path.dirname(createRequire(import.meta.url).resolve('vite/package.json')), 'bin/vite.js');
  } catch {
    log('dashboard: packages/dashboard/dist is missing and Vite is not installed; run `npm install`');
    return false;
  }
  log('dashboard: building the web app (first start without a build; a few seconds)');
  execFileSync(process.execPath, [vite, 'build', '--config', WEB_CONFIG, '--logLevel', 'warn'], { stdio: ['ignore', 'ignore', 'inherit'] });
  return existsSync(path.join(DIST, 'index.html'));
}

/** Serves the built app under /dashboard/ (register without a prefix). */
export async function dashboardPages(app: FastifyInstance): Promise<void> {
  const index = readFileSync(path.join(DIST, 'index.html'));
  await app.register(fastifyStatic, {
    root: DIST,
    prefix: '/dashboard/',
    index: false,
    wildcard: true,
    decorateReply: false,
    // Hashed asset names: cached for a year; index.html is answered below, never cached.
    setHeaders: (res, file) => {
      for (const [k, v] of Object.entries(SECURITY_HEADERS)) res.setHeader(k, v);
      res.setHeader('Cache-Control', file.includes(`${path.sep}assets${path.sep}`) ? 'public, max-age=31536000, immutable' : 'no-cache');
    },
  });
  const page = async (_req: unknown, reply: import('fastify').FastifyReply) => reply.headers({ ...SECURITY_HEADERS, 'Cache-Control': 'no-cache', 'Content-Type': 'text/html; charset=utf-8' }).send(index);
  app.get('/dashboard', { schema: { hide: true } }, async (_req, reply) => reply.redirect('/dashboard/', 302));
  app.get('/dashboard/', { schema: { hide: true } }, page);
  for (const p of ['setup', 'validate', 'upload', 'jobs', 'usage', 'accuracy', 'data', 'keys', 'team', 'account', 'operator'].map((name) => `/dashboard/${name}`)) app.get(p, { schema: { hide: true } }, page);
}
