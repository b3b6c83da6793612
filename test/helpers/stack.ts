// A whole stack for end-to-end tests: the simulated internet plus the service on a random port,
// talked to over real HTTP. The profile comes from TEST_PROFILE:
// - `embedded` (the default): the embedded service with its own PGlite database (in memory).
// - `cluster`: the cluster adapters on the real servers of scripts/infra-up.sh (SVC_ROLE=all), each
//   stack isolated from every other: a fresh PostgreSQL schema (the stack's `store`/`db` are on
//   it), Redis keys under a prefix of its own (ioredis' `keyPrefix`, given in REDIS_URL's query)
//   and its own SVC_EGRESS_ID, Kafka topics and groups under its own SVC_KAFKA_TOPIC_PREFIX, and a
//   ClickHouse database of its own; all dropped by close(). A server that does not answer fails
//   startStack. A test's own `env` overrides any of these.

import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig, startService, type RunningService } from '@svc/runtime';
import { migrate, openPostgres, Store, type Db } from '@svc/store';
import { migratedPglite } from './pglite.ts';
import { freshSchema } from './postgres.ts';
import { BROKERS, CLICKHOUSE_URL, clickhouseUnreachable, clusterServersUnreachable, dropClickHouseDatabase, dropKafkaPrefix, dropRedisPrefix, REDIS_URL } from './cluster.ts';
import { startSim, type Sim, type SimOptions } from '../sim/index.ts';

export type TestProfile = 'embedded' | 'cluster';

function testProfile(raw: string | undefined): TestProfile {
  if (raw === undefined || raw === '' || raw === 'embedded') return 'embedded';
  if (raw === 'cluster') return 'cluster';
  throw new Error(`TEST_PROFILE must be embedded or cluster, got ${JSON.stringify(raw)}`);
}

/** The profile startStack runs the service in (TEST_PROFILE; default embedded). */
export const TEST_PROFILE: TestProfile = testProfile(process.env.TEST_PROFILE);
/** Whether startStack runs the cluster profile (for expectations that differ by profile). */
export const CLUSTER_PROFILE = TEST_PROFILE === 'cluster';

export const BOOTSTRAP_KEY = 'svc_test_e2eBootstrapKey0000000001';

export interface Stack {
  /** The profile the service runs in (TEST_PROFILE). */
  profile: TestProfile;
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
    // Websites (company data) on the sim's ports, as its MX hosts on its SMTP port.
    SVC_WEB_HTTP_PORT: String(sim.webHttpPort),
    SVC_WEB_HTTPS_PORT: String(sim.webHttpsPort),
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

/** Whether the servers of the cluster profile answer: asked once per process. */
let clusterCheck: Promise<string | undefined> | undefined;

/** A cluster-profile stack's own corner of each server, and the cleanup of all of it. */
async function clusterCorner(): Promise<{ env: Record<string, string>; db: Db; drop: () => Promise<void> }> {
  clusterCheck ??= (async () => (await clusterServersUnreachable()) ?? (await clickhouseUnreachable()))();
  const why = await clusterCheck;
  if (why) throw new Error(`TEST_PROFILE=cluster: ${why} (start the servers with scripts/infra-up.sh)`);
  const id = `e2e_${randomBytes(5).toString('hex')}`;
  const schema = await freshSchema();
  const drop = async (): Promise<void> => {
    const results = await Promise.allSettled([schema.drop(), dropKafkaPrefix(`${id}.`), dropClickHouseDatabase(id), dropRedisPrefix(`${id}:`)]);
    const failed = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []));
    if (failed.length) throw new AggregateError(failed, `cleanup of the cluster stack ${id} failed`);
  };
  let db: Db;
  try {
    db = await openPostgres(schema.url);
  } catch (err) {
    await drop().catch(() => {});
    throw err;
  }
  try {
    await migrate(db);
  } catch (err) {
    await db.close().catch(() => {});
    await drop().catch(() => {});
    throw err;
  }
  const env = {
    DATABASE_URL: schema.url,
    REDIS_URL: `${REDIS_URL}${REDIS_URL.includes('?') ? '&' : '?'}keyPrefix=${id}:`,
    SVC_EGRESS_ID: id,
    KAFKA_BROKERS: BROKERS.join(','),
    // SVC_KAFKA_PARTITIONS stays at its default (16), the service's work lanes: every lane gets one.
    SVC_KAFKA_TOPIC_PREFIX: `${id}.`,
    CLICKHOUSE_URL,
    SVC_CLICKHOUSE_DATABASE: id,
    SVC_ROLE: 'all',
  };
  return { env, db, drop };
}

export async function startStack(opts: { sim?: SimOptions; env?: Record<string, string> } = {}): Promise<Stack> {
  if (CLUSTER_PROFILE) return startClusterStack(opts);
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
  return assemble({ profile: 'embedded', sim, svc, dataDir, env, store, db }, async () => {
    await svc.close();
    await store.close();
    await sim.close();
    rmSync(dataDir, { recursive: true, force: true });
  });
}

async function startClusterStack(opts: { sim?: SimOptions; env?: Record<string, string> }): Promise<Stack> {
  const corner = await clusterCorner();
  // As embedded: the test keeps the raw handle (on the stack's own schema); the service gets the repositories.
  const { db } = corner;
  const store = new Store(db);
  let sim: Sim | undefined;
  let svc: RunningService | undefined;
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-e2e-'));
  const close = async (): Promise<void> => {
    try {
      await svc?.close();
      await store.close();
      await sim?.close();
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
      await corner.drop();
    }
  };
  try {
    sim = await startSim({ tarpitMs: 5000, ...opts.sim });
    const env = stackEnv(sim, dataDir, { ...corner.env, ...opts.env });
    svc = await startService(loadConfig(env), { store });
    await svc.services.readiness.refresh();
    return assemble({ profile: 'cluster', sim, svc, dataDir, env, store, db }, close);
  } catch (err) {
    await close().catch(() => {});
    throw err;
  }
}

function assemble(parts: Omit<Stack, 'url' | 'call' | 'close'>, close: () => Promise<void>): Stack {
  const { svc } = parts;
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
  return { ...parts, url: svc.url, call, close };
}

/** Creates an account and a key through the admin command path; returns the key. */
export async function makeKey(stack: Stack, opts: { credits?: number; scopes?: string[] | null; kind?: 'test' | 'live' } = {}): Promise<{ key: string; id: string; accountId: string }> {
  const store = stack.store;
  const accountId = await store.accounts.create({ credits: opts.credits ?? 100 });
  const { key, id } = await store.keys.create({ accountId, kind: opts.kind ?? 'test', scopes: opts.scopes === undefined ? null : opts.scopes });
  return { key, id, accountId };
}
