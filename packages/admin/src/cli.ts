// The operator CLI (`npm run admin -- …`): help and usage errors at once, then the command, run
// against a store directly or, when the embedded service holds the data directory, through its
// admin socket (a Unix socket in the data directory, mode 0600), so the one process that owns
// PGlite does the work.

import { existsSync } from 'node:fs';
import path from 'node:path';
import { hidePassword } from '@svc/contracts';
import { openStore } from '@svc/store';
import type { AdminResult } from './command.ts';
import { plan } from './run.ts';
import { adminSocketPath, callAdminSocket } from './socket.ts';

/**
 * What `npm run admin` does: help and usage errors at once; then, embedded, the running service's
 * admin socket, or else the store in SVC_DATA_DIR, which must exist already (a mistyped directory
 * must not become a new, empty store); with DATABASE_URL, that database, which must hold the
 * service's schema already (opened without migrating: a mistyped database gets no tables).
 */
export async function runAdminCli(
  config: { dataDir: string; databaseUrl?: string | undefined; publicUrl?: string },
  argv: string[],
  opts: { socketTimeoutMs?: number; readStdin?: () => Promise<string> } = {},
): Promise<AdminResult> {
  const p = plan(argv);
  if ('done' in p) return p.done;
  let password: string | undefined;
  if (p.values['password-stdin']) {
    // One line (a trailing newline, as `echo` or a terminal adds, is not part of it).
    password = (await (opts.readStdin ?? readStdin)()).replace(/\r?\n$/, '');
  }
  const ctx = { ...(config.publicUrl !== undefined && { publicUrl: config.publicUrl }), ...(password !== undefined && { password }) };
  if (!config.databaseUrl) {
    const sock = adminSocketPath(config.dataDir);
    if (existsSync(sock)) {
      try {
        return await callAdminSocket(sock, argv, opts.socketTimeoutMs, password);
      } catch (err) {
        // Nobody listening (a socket file left by a dead process): open the store ourselves. Any
        // other failure (no answer in time, a broken answer) comes after the command was sent, so
        // the service may have run it: report it rather than run it a second time.
        const code = (err as NodeJS.ErrnoException).code;
        if (code !== 'ECONNREFUSED' && code !== 'ENOENT') return { code: 1, out: code ? `admin socket ${sock}: ${(err as Error).message}` : (err as Error).message };
      }
    }
    if (!existsSync(path.join(config.dataDir, 'pgdata'))) {
      return { code: 1, out: `no store at ${path.resolve(config.dataDir)} (SVC_DATA_DIR); start the service once with \`npm start\`, or point SVC_DATA_DIR at its data directory` };
    }
  }
  const store = await openStore(config.databaseUrl ? { databaseUrl: config.databaseUrl, migrate: false } : { dataDir: config.dataDir });
  try {
    if (config.databaseUrl && !(await store.hasSchema())) {
      return { code: 1, out: `no store in DATABASE_URL (${hidePassword(config.databaseUrl)}): start the service once with it, or fix the URL` };
    }
    return await p.command.run(store, p.values, p.arg, () => {}, ctx);
  } finally {
    await store.close();
  }
}

/** Standard input, whole (at most 64 KiB: a password, not a file). */
async function readStdin(): Promise<string> {
  let text = '';
  for await (const chunk of process.stdin.setEncoding('utf8')) {
    text += chunk as string;
    if (text.length > 65_536) break;
  }
  return text;
}
