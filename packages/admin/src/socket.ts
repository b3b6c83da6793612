// The embedded service's admin socket: the CLI sends a command to the running process, which
// owns the data directory, instead of opening PGlite a second time.

import { chmodSync, existsSync, unlinkSync } from 'node:fs';
import net from 'node:net';
import type { Store } from '@svc/store';
import type { AdminResult } from './command.ts';
import { runAdmin } from './run.ts';

export const adminSocketPath = (dataDir: string) => `${dataDir}/admin.sock`;

/**
 * Serves runAdmin on a Unix socket: one JSON line in ({argv, password?}), one JSON line out ({code, out}).
 * Only the owner may talk to it: it lives in the data directory, which is owner-only (0700), and
 * is chmod'ed 0600 once listening. (No umask change around listen: the umask is process-wide, so
 * changing it would race with files created by other threads.)
 */
export function serveAdminSocket(store: Store, path: string, onKeyChange: () => void, ctx: { publicUrl?: string } = {}): net.Server {
  if (existsSync(path)) unlinkSync(path);
  const server = net.createServer((sock) => {
    let buf = '';
    let handled = false;
    sock.setEncoding('utf8');
    sock.on('data', async (chunk: string) => {
      if (handled) return; // one command per connection: later bytes never run it again
      buf += chunk;
      if (buf.length > 64 * 1024) return sock.destroy();
      const nl = buf.indexOf('\n');
      if (nl < 0) return;
      handled = true;
      let res: AdminResult;
      try {
        const { argv, password } = JSON.parse(buf.slice(0, nl)) as { argv: unknown; password?: unknown };
        res =
          Array.isArray(argv) && argv.every((a) => typeof a === 'string') && (password === undefined || typeof password === 'string')
            ? await runAdmin(store, argv, onKeyChange, { ...ctx, ...(password !== undefined && { password }) })
            : { code: 2, out: 'bad request' };
      } catch (err) {
        res = { code: 1, out: `admin command failed: ${(err as Error).message}` };
      }
      sock.end(`${JSON.stringify(res)}\n`);
    });
    sock.on('error', () => {});
  });
  server.on('error', (err) => process.emitWarning(`admin socket ${path}: ${err.message}`));
  server.listen(path, () => chmodSync(path, 0o600));
  return server;
}

/** How long the CLI waits for the service's answer before giving up. */
export const ADMIN_SOCKET_TIMEOUT_MS = 30_000;

/**
 * Sends argv to a running service's admin socket. A service that accepts but does not answer
 * within `timeoutMs` (wedged) fails the call, with the socket destroyed, rather than hanging.
 */
export function callAdminSocket(path: string, argv: string[], timeoutMs = ADMIN_SOCKET_TIMEOUT_MS, password?: string): Promise<AdminResult> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(path);
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error(`the service at ${path} did not answer within ${timeoutMs >= 1000 && timeoutMs % 1000 === 0 ? `${timeoutMs / 1000} s` : `${timeoutMs} ms`}`));
    }, timeoutMs);
    let buf = '';
    sock.setEncoding('utf8');
    sock.on('connect', () => sock.write(`${JSON.stringify({ argv, ...(password !== undefined && { password }) })}\n`));
    sock.on('data', (c: string) => (buf += c));
    sock.on('end', () => {
      clearTimeout(timer);
      try {
        resolve(JSON.parse(buf) as AdminResult);
      } catch {
        reject(new Error('bad answer from the admin socket'));
      }
    });
    sock.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}
