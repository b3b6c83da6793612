// Entry point of `npm start`: the embedded profile (or the cluster adapters that are configured).
// The only place, with cluster/admin.ts, that reads process.env.

import { ConfigError, loadConfig, startService } from '@svc/runtime';
import { DataDirLockedError, DataDirPermissionError } from '@svc/store';

async function main(): Promise<void> {
  const config = loadConfig(process.env);
  const svc = await startService(config);
  const log = svc.app.log;
  for (const [name, set] of [['KAFKA_BROKERS', config.kafkaBrokers], ['CLICKHOUSE_URL', config.clickhouseUrl]] as const) {
    if (set) log.warn(`${name} is set but this build does not use it yet (the job transport and analytics come with the next issues)`);
  }
  log.info({ url: svc.url, store: config.databaseUrl ? 'postgres' : 'pglite', cache: config.redisUrl ? 'redis' : 'in-process', dataDir: config.databaseUrl ? undefined : config.dataDir }, 'email validation service listening');
  if (svc.generatedKey) {
    // Shown once, to the operator's terminal; only its hash is stored.
    process.stdout.write(`\n  No SVC_BOOTSTRAP_API_KEY was set, so an unrestricted API key was generated (shown once):\n\n    ${svc.generatedKey}\n\n`);
  }
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
