// The front built over small in-memory fakes of its services: enough for the gates, the credit
// balance and a refused charge, without a database or a simulated internet.

import { Writable } from 'node:stream';
import { hashKey, MemoryRateLimiter, type KeyRecord, type Store } from '@svc/store';
import type { Verifier } from '@svc/verifier';
import { buildApp, type ApiServices, type ApiSettings } from '../src/app.ts';

export const KEYS = {
  /** Unrestricted, with credits. */
  full: 'svc_test_apiFakeFullKey000000000001',
  /** Only `credits:read`. */
  creditsOnly: 'svc_test_apiFakeCreditsOnly0000002',
  /** Unrestricted; reading its account's balance fails (a bug: 500). */
  failing: 'svc_test_apiFakeFailingKey000000003',
};

const record = (id: string, account: string, scopes: string[] | null): KeyRecord => ({
  id,
  account_id: account,
  display_prefix: `${id}…`,
  kind: 'test',
  scopes,
  state: 'active',
  expires_at: null,
  subscription_status: 'active',
  data_product: false,
});

const records = new Map<string, KeyRecord>([
  [hashKey(KEYS.full), record('key_full', 'acct_full', null)],
  [hashKey(KEYS.creditsOnly), record('key_credits', 'acct_full', ['credits:read'])],
  [hashKey(KEYS.failing), record('key_failing', 'acct_failing', null)],
]);

export const settings: ApiSettings = {
  logLevel: 'silent',
  bodyLimitBytes: 1 << 20,
  trustProxy: false,
  publicUrl: 'http://127.0.0.1',
  rateLimitPerIp: 1000,
  rateLimitPerKey: 10_000,
};

export function fakeServices(): ApiServices {
  const store = {
    keys: { findByHash: async (hash: string) => records.get(hash), touch: async () => {} },
    ledger: {
      balance: async (accountId: string) => {
        if (accountId === 'acct_failing') throw new Error('balance query failed');
        return { account_id: accountId, balance: 7, reserved: 2, available: 5, subscription_status: 'active', current_period_end: null, cancel_at_period_end: false };
      },
      // Every reservation is refused: the account has no credits.
      reserve: async () => ({ ok: false, available: 0 }),
    },
    idempotency: {},
  } as unknown as Store;
  // One address whose verdict is not known yet: the charge path reserves 1 credit first.
  const verifier = { plan: async (emails: string[]) => ({ items: emails, maxCost: 1, settled: false }) } as unknown as Verifier;
  return { store, verifier, rateLimiter: new MemoryRateLimiter(), readiness: { state: { ready: true, checks: { redis: 'ok', dns: 'ok', smtp: 'ok' }, errors: [] } } };
}

/** Log lines written by the app, as text, for assertions. */
export class LogCapture extends Writable {
  lines: string[] = [];
  override _write(chunk: Buffer, _enc: BufferEncoding, done: () => void): void {
    this.lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
    done();
  }
}

export function buildFakeApp(overrides: Partial<ApiSettings> = {}, logStream?: LogCapture) {
  return buildApp(fakeServices(), { ...settings, ...overrides }, logStream ? { logStream } : {});
}
