// Operator commands (npm run admin -- …). They run against the store directly, or, when the
// embedded service holds the data directory, through its admin socket (a Unix socket in the
// data directory, mode 0600), so the one process that owns PGlite does the work.

import { chmodSync, existsSync, unlinkSync } from 'node:fs';
import net from 'node:net';
import { parseArgs } from 'node:util';
import type { Store } from '@svc/store';
import { isScope, SCOPES } from '@svc/contracts';

export interface AdminResult {
  code: number;
  out: string;
}

const USAGE = `usage:
  admin account create [--credits N] [--name NAME]
  admin key create --account ACCOUNT_ID [--scopes a,b | --unrestricted] [--kind test|live] [--name NAME] [--expires ISO_DATE]
  admin key deactivate|activate|revoke|expire KEY_ID_OR_KEY
  admin credits grant --account ACCOUNT_ID --credits N
  admin credits show --account ACCOUNT_ID
scopes: ${SCOPES.join(', ')}`;

const fail = (msg: string): AdminResult => ({ code: 2, out: `${msg}\n${USAGE}` });

export async function runAdmin(store: Store, argv: string[], onKeyChange: () => void = () => {}): Promise<AdminResult> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        credits: { type: 'string' },
        amount: { type: 'string' },
        name: { type: 'string' },
        account: { type: 'string' },
        scopes: { type: 'string' },
        unrestricted: { type: 'boolean' },
        kind: { type: 'string' },
        expires: { type: 'string' },
      },
    });
  } catch (err) {
    return fail((err as Error).message);
  }
  const { values: v, positionals: [noun, verb, arg] } = parsed;
  const count = (s: string | undefined, dflt?: number): number | undefined => {
    if (s === undefined) return dflt;
    return /^\d+$/.test(s) && Number.isSafeInteger(Number(s)) ? Number(s) : undefined;
  };
  const needAccount = async (): Promise<string | AdminResult> => {
    if (!v.account) return fail('--account is required');
    if (!(await store.accounts.exists(v.account))) return { code: 1, out: `no account ${v.account}` };
    return v.account;
  };

  if (noun === 'account' && verb === 'create') {
    const credits = count(v.credits ?? v.amount, 0);
    if (credits === undefined) return fail('--credits must be a non-negative integer');
    const id = await store.accounts.create({ name: v.name ?? '', credits });
    return { code: 0, out: `account ${id} created with ${credits} credits` };
  }
  if (noun === 'key' && verb === 'create') {
    const account = await needAccount();
    if (typeof account !== 'string') return account;
    const kind = v.kind ?? 'live';
    if (kind !== 'test' && kind !== 'live') return fail('--kind must be test or live');
    let scopes: string[] | null = null;
    if (v.scopes !== undefined && v.unrestricted) return fail('give --scopes or --unrestricted, not both');
    if (v.scopes !== undefined) {
      scopes = v.scopes.split(',').map((s) => s.trim()).filter(Boolean);
      const bad = scopes.filter((s) => !isScope(s));
      if (bad.length > 0 || scopes.length === 0) return fail(`unknown scope(s): ${bad.join(', ') || '(none given)'}`);
    }
    let expiresAt: Date | null = null;
    if (v.expires) {
      expiresAt = new Date(v.expires);
      if (Number.isNaN(expiresAt.getTime())) return fail('--expires must be an ISO 8601 date');
    }
    const { id, key } = await store.keys.create({ accountId: account, kind, scopes, name: v.name ?? '', expiresAt });
    return { code: 0, out: `key ${id} created (${scopes ? scopes.join(',') : 'unrestricted'})\n${key}\nThis key is shown once; only its SHA-256 hash is stored.` };
  }
  if (noun === 'key' && (verb === 'deactivate' || verb === 'activate' || verb === 'revoke' || verb === 'expire')) {
    if (!arg) return fail('which key? give its id or the key itself');
    const id = await store.keys.resolveId(arg);
    if (!id) return { code: 1, out: 'no such key' };
    const ok = verb === 'expire' ? await store.keys.expire(id) : await store.keys.setState(id, verb === 'deactivate' ? 'inactive' : verb === 'activate' ? 'active' : 'revoked');
    onKeyChange();
    if (!ok) return { code: 1, out: `key ${id} is revoked; revocation cannot be undone` };
    return { code: 0, out: `key ${id} ${verb === 'expire' ? 'expired' : `${verb}d`}` };
  }
  if (noun === 'credits' && (verb === 'grant' || verb === 'show')) {
    const account = await needAccount();
    if (typeof account !== 'string') return account;
    if (verb === 'grant') {
      const n = count(v.credits ?? v.amount);
      if (!n) return fail('--credits must be a positive integer');
      await store.ledger.grant(account, n, 'admin grant');
    }
    const b = await store.ledger.balance(account);
    return { code: 0, out: `account ${account}: balance ${b!.balance}, reserved ${b!.reserved}, available ${b!.available}` };
  }
  return fail(noun ? `unknown command: ${[noun, verb].filter(Boolean).join(' ')}` : 'no command');
}

export const adminSocketPath = (dataDir: string) => `${dataDir}/admin.sock`;

/** Serves runAdmin on a Unix socket: one JSON line in ({argv}), one JSON line out ({code, out}). */
export function serveAdminSocket(store: Store, path: string, onKeyChange: () => void): net.Server {
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
        const { argv } = JSON.parse(buf.slice(0, nl)) as { argv: unknown };
        res = Array.isArray(argv) && argv.every((a) => typeof a === 'string') ? await runAdmin(store, argv, onKeyChange) : { code: 2, out: 'bad request' };
      } catch (err) {
        res = { code: 1, out: `admin command failed: ${(err as Error).message}` };
      }
      sock.end(`${JSON.stringify(res)}\n`);
    });
    sock.on('error', () => {});
  });
  // Only the owner may talk to it: the socket is created under a 0077 umask, then chmod'ed 0600.
  server.on('error', (err) => process.emitWarning(`admin socket ${path}: ${err.message}`));
  const old = process.umask(0o077);
  try {
    server.listen(path, () => chmodSync(path, 0o600));
  } finally {
    process.umask(old);
  }
  return server;
}

/** Sends argv to a running service's admin socket. */
export function callAdminSocket(path: string, argv: string[]): Promise<AdminResult> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(path);
    let buf = '';
    sock.setEncoding('utf8');
    sock.on('connect', () => sock.write(`${JSON.stringify({ argv })}\n`));
    sock.on('data', (c: string) => (buf += c));
    sock.on('end', () => {
      try {
        resolve(JSON.parse(buf) as AdminResult);
      } catch {
        reject(new Error('bad answer from the admin socket'));
      }
    });
    sock.on('error', reject);
  });
}
