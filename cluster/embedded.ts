// Entry point of `npm start`: the embedded profile (or the cluster adapters that are configured).
// The only place, with cluster/admin.ts, that reads process.env.

import { ConfigError, loadConfig, startService } from '@svc/runtime';
import { DataDirLockedError, DataDirPermissionError } from '@svc/store';

/**
 * The key generated at first start, for the operator's terminal: one write to stderr, framed by
 * marker lines, so a JSON log parser reading stdout never sees it. Only its SHA-256 is stored.
 */
function printGeneratedKey(key: string): void {
  const rule = '='.repeat(78);
  process.stderr.write(`${rule}\nAPI key generated at first start (shown once, only its SHA-256 is stored):\n${key}\n${rule}\n`);
}

async function main(): Promise<void> {
  const config = loadConfig(process.env);
  const svc = await startService(config, { onGeneratedKey: printGeneratedKey });
  const log = svc.app.log;
  for (const [name, set] of [['KAFKA_BROKERS', config.kafkaBrokers], ['CLICKHOUSE_URL', config.clickhouseUrl]] as const) {
    if (set) log.warn(`${name} is set but this build does not use it yet (the job transport and analytics come with the next issues)`);
  }
  log.info({ url: svc.url, store: config.databaseUrl ? 'postgres' : 'pglite', cache: config.redisUrl ? 'redis' : 'in-process', dataDir: config.databaseUrl ? undefined : config.dataDir }, 'email validation service listening');
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'draining in-flight requests and SMTP sessions');
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
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main().catch((err) => {
  if (err instanceof ConfigError || err instanceof DataDirLockedError || err instanceof DataDirPermissionError) {
    process.stderr.write(`configuration error: ${err.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`${(err as Error).stack}\n`);
  process.exit(1);
});
