// A whole stack for end-to-end tests: the simulated internet plus the embedded service on a
// random port with its own PGlite data directory, talked to over real HTTP.

import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig, startService, type RunningService } from '@svc/runtime';
import { Store, type Db } from '@svc/store';
import { migratedPglite } from './pglite.ts';
import { startSim, type Sim, type SimOptions } from '../sim/index.ts';

export const BOOTSTRAP_KEY = 'svc_test_e2eBootstrapKey0000000001';

export interface Stack {
  sim: Sim;
  svc: RunningService;
  url: string;
  dataDir: string;
  env: Record<string, string>;
  /** The service's store, and its database for test set-up and audits (the service never exposes it). */
  store: Store;
  db: Db;
  /** POST/GET with JSON; returns status, headers and parsed body (or raw text). */
  call(method: string, route: string, opts?: { key?: string | null; body?: unknown; raw?: string; headers?: Record<string, string> }): Promise<{ status: number; headers: Headers; body: any; text: string }>;
  close(): Promise<void>;
}

export function stackEnv(sim: Sim, dataDir: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    PORT: '0',
    HOST: '127.0.0.1',
    SVC_DATA_DIR: dataDir,
    SVC_DNS_SERVERS: sim.dnsServers,
    SVC_SMTP_PORT: String(sim.smtpPort),
    SVC_BOOTSTRAP_API_KEY: BOOTSTRAP_KEY,
    SVC_BOOTSTRAP_CREDITS: '1000',
    SVC_SMTP_TIMEOUT_MS: '1500',
    SVC_DNS_TIMEOUT_MS: '400',
    SVC_SMTP_RETRY_DELAY_MS: '400',
    SVC_HELO_NAME: 'verifier.sim.test',
    SVC_MAIL_FROM: 'probe@verifier.sim.test',
    SVC_LOG_LEVEL: 'silent',
    ...extra,
  };
}

export async function startStack(opts: { sim?: SimOptions; env?: Record<string, string> } = {}): Promise<Stack> {
  const sim = await startSim({ tarpitMs: 5000, ...opts.sim });
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-e2e-'));
  const env = stackEnv(sim, dataDir, opts.env);
  const config = loadConfig(env);
  // The test opens the store so it can keep the raw handle; the service gets the repositories.
  // In memory: nothing here needs the database to outlive the stack.
  const db = await migratedPglite();
  const store = new Store(db);
  const svc = await startService(config, { store });
  await svc.services.readiness.refresh();
  const call: Stack['call'] = async (method, route, o = {}) => {
    const headers: Record<string, string> = { ...o.headers };
    const key = o.key === undefined ? BOOTSTRAP_KEY : o.key;
    if (key !== null) headers['x-api-key'] = key;
    let body: string | undefined;
    if (o.raw !== undefined) body = o.raw;
    else if (o.body !== undefined) {
      body = JSON.stringify(o.body);
      headers['content-type'] ??= 'application/json';
    }
    const res = await fetch(svc.url + route, { method, headers, body });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      /* not JSON */
    }
    return { status: res.status, headers: res.headers, body: parsed, text };
  };
  return {
    sim,
    svc,
    url: svc.url,
    dataDir,
    env,
    store,
    db,
    call,
    async close() {
      await svc.close();
      await store.close();
      await sim.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Creates an account and a key through the admin command path; returns the key. */
export async function makeKey(stack: Stack, opts: { credits?: number; scopes?: string[] | null; kind?: 'test' | 'live' } = {}): Promise<{ key: string; id: string; accountId: string }> {
  const store = stack.store;
  const accountId = await store.accounts.create({ credits: opts.credits ?? 100 });
  const { key, id } = await store.keys.create({ accountId, kind: opts.kind ?? 'test', scopes: opts.scopes === undefined ? null : opts.scopes });
  return { key, id, accountId };
}
