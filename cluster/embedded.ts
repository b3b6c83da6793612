// Entry point of `npm start`: the embedded profile (or the cluster adapters that are configured).
// Like the other entry points (cluster/admin.ts, cluster/cluster.ts, tests, benchmarks), it may
// read process.env; the packages never do.

import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
// Only the configuration table first (a few milliseconds): a bad value is reported before
// anything else happens, and the first log line comes before the rest of the code is loaded.
import { loadConfig, type Config } from '@svc/runtime/config';
import { fail } from './fail.ts';

/**
 * The first thing a newcomer sees, before the code is loaded and the database opened (loading
 * takes most of a second, a first PGlite initialisation a few more): one JSON line in the logger's
 * shape saying what the wait is for, unless the log level hides info lines.
 */
function sayStarting(config: Config): void {
  if (['fatal', 'error', 'warn', 'silent'].includes(config.logLevel)) return;
  const [msg, extra] = config.databaseUrl
    ? ['starting: connecting to PostgreSQL (DATABASE_URL)', {}]
    : existsSync(path.join(config.dataDir, 'pgdata'))
      ? ['starting: opening the data directory', { dataDir: config.dataDir }]
      : ['starting: initialising the data directory (first start: this takes a few seconds)', { dataDir: config.dataDir }];
  process.stdout.write(`${JSON.stringify({ level: 30, time: Date.now(), pid: process.pid, hostname: os.hostname(), ...extra, msg })}\n`);
}

let config: Config;
try {
  config = loadConfig(process.env);
} catch (err) {
  fail(err);
}
sayStarting(config);
const { startService } = await import('@svc/runtime');

/**
 * The key generated at first start, for the operator's terminal: one write to stderr, framed by
 * marker lines, so a JSON log parser reading stdout never sees it. Only its SHA-256 is stored.
 */
function printGeneratedKey(key: string): void {
  const rule = '='.repeat(78);
  process.stderr.write(`${rule}\nAPI key generated at first start (shown once, only its SHA-256 is stored):\n${key}\n${rule}\n`);
}

/** The owner's single-use dashboard set-up link, printed once at first start like the key. */
function printSetupLink(url: string, expiresAt: Date): void {
  const rule = '='.repeat(78);
  process.stderr.write(`${rule}\nDashboard: create the owner's sign-in with this single-use link (valid until ${expiresAt.toISOString()}):\n${url}\n${rule}\n`);
}

async function main(): Promise<void> {
  const svc = await startService(config, { onGeneratedKey: printGeneratedKey, onSetupLink: printSetupLink });
  const log = svc.app.log;
  log.info({ url: svc.url, role: config.role, store: config.databaseUrl ? 'postgres' : 'pglite', cache: config.redisUrl ? 'redis' : 'in-process', bus: config.kafkaBrokers ? 'kafka' : 'in-process', analytics: config.clickhouseUrl ? 'clickhouse' : 'sql', dataDir: config.databaseUrl ? undefined : config.dataDir }, 'email validation service listening');
  let stopping = false;
  /** Drains and exits; `why` (the signal, or the reason) goes in the log line. */
  const stop = (why: { signal: NodeJS.Signals } | { reason: string }) => {
    if (stopping) return;
    stopping = true;
    log.info(why, 'draining in-flight requests and SMTP sessions');
    const force = setTimeout(() => {
      log.error('drain took longer than 30 s; exiting');
      process.exit(1);
    }, 30_000);
    force.unref();
    svc.close().then(
      () => {
        log.info('stopped');
        process.exit(0);
      },
      (err) => {
        log.error({ err }, 'error while stopping');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop({ signal: 'SIGTERM' }));
  process.on('SIGINT', () => stop({ signal: 'SIGINT' }));
  // Started with an IPC channel (by `npm run cluster`, or a test): the supervisor's death closes
  // it, and the service drains and stops as on SIGTERM instead of running on as an orphan that
  // nobody will stop. The channel alone does not keep the process alive.
  if (process.channel) {
    process.channel.unref();
    process.once('disconnect', () => stop({ reason: 'the parent process is gone (its IPC channel closed)' }));
  }
}

main().catch(fail);
