// Entry point of `npm run admin -- …`.

import { existsSync } from 'node:fs';
import { adminSocketPath, callAdminSocket, ConfigError, loadConfig, runAdmin, type AdminResult } from '@svc/runtime';
import { DataDirLockedError, DataDirPermissionError, openStore } from '@svc/store';

async function main(): Promise<number> {
  const config = loadConfig(process.env);
  const argv = process.argv.slice(2);
  let res: AdminResult;
  const sock = adminSocketPath(config.dataDir);
  if (!config.databaseUrl && existsSync(sock)) {
    try {
      res = await callAdminSocket(sock, argv);
      process.stdout.write(`${res.out}\n`);
      return res.code;
    } catch {
      // a socket file left by a dead process: open the store ourselves
    }
  }
  const store = await openStore(config.databaseUrl ? { databaseUrl: config.databaseUrl } : { dataDir: config.dataDir });
  try {
    res = await runAdmin(store, argv);
  } finally {
    await store.close();
  }
  process.stdout.write(`${res.out}\n`);
  return res.code;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`${err instanceof ConfigError || err instanceof DataDirLockedError || err instanceof DataDirPermissionError ? err.message : (err as Error).stack}\n`);
    process.exit(1);
  },
);
