// Starting and stopping the whole embedded service (used by main.ts and by the tests).

import type { Server } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { keyKindOf, hashKey, type Store } from '@svc/store';
import { buildApp, type Services } from './app.ts';
import { adminSocketPath, serveAdminSocket } from './admin.ts';
import type { Config } from './config.ts';
import { createServices } from './services.ts';

export interface RunningService {
  app: FastifyInstance;
  services: Services;
  url: string;
  /** The key generated at first start when no bootstrap key was configured (printed once). */
  generatedKey?: string;
  close(): Promise<void>;
}

/**
 * First start: SVC_BOOTSTRAP_API_KEY becomes an unrestricted key of a new account holding
 * SVC_BOOTSTRAP_CREDITS. Without it, and with no key at all in the store, a key is generated and
 * returned to be printed once.
 */
export async function bootstrap(store: Store, config: Config): Promise<string | undefined> {
  if (config.bootstrapApiKey) {
    if (await store.findKeyByHash(hashKey(config.bootstrapApiKey))) return undefined;
    const account = await store.createAccount({ name: 'bootstrap', credits: config.bootstrapCredits });
    await store.createKey({ accountId: account, kind: keyKindOf(config.bootstrapApiKey) ?? (config.bootstrapApiKey.startsWith('svc_test_') ? 'test' : 'live'), scopes: null, name: 'bootstrap', key: config.bootstrapApiKey, lenient: true });
    return undefined;
  }
  if ((await store.countKeys()) > 0) return undefined;
  const account = await store.createAccount({ name: 'bootstrap', credits: config.bootstrapCredits });
  return (await store.createKey({ accountId: account, kind: 'live', scopes: null, name: 'generated at first start' })).key;
}

export async function startService(config: Config, opts: { store?: Store } = {}): Promise<RunningService> {
  const services = await createServices(config, opts);
  const { store, verifier, readiness } = services;
  // Sync validations never outlive their process: any still open were cut off by a crash.
  await store.releaseStale('sync', config.databaseUrl ? 10 * 60_000 : 0);
  const generatedKey = await bootstrap(store, config);
  const app = await buildApp(services);
  let admin: Server | undefined;
  if (!config.databaseUrl && !opts.store) admin = serveAdminSocket(store, adminSocketPath(config.dataDir), () => app.clearKeyCache());
  await app.listen({ port: config.port, host: config.host });
  void readiness.start();
  // A reservation left open by a failed settle or a dead process is released after 10 minutes.
  const sweep = setInterval(() => void store.releaseStale('sync', 10 * 60_000).catch((err: unknown) => app.log.error({ err }, 'stale reservation sweep failed')), 60_000);
  sweep.unref();
  const addr = app.server.address();
  const port = typeof addr === 'object' && addr ? addr.port : config.port;
  const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;
  let closing: Promise<void> | undefined;
  const service: RunningService = {
    app,
    services,
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    close: () =>
      (closing ??= (async () => {
        readiness.stop();
        clearInterval(sweep);
        admin?.close();
        await app.close(); // stops accepting, waits for in-flight requests
        await verifier.close(); // every domain actor finishes and QUITs its SMTP session
        await services.closeCache();
        if (!opts.store) await store.db.close();
      })()),
  };
  if (generatedKey) service.generatedKey = generatedKey;
  return service;
}
