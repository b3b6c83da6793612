// The full embedded service (startService: PGlite store, key auth, rate limits, credits, verifier)
// in its own process, configured from the environment the parent passes (loadConfig(env)).
// SVC_DATA_DIR: a fresh temporary directory unless given, removed on exit. Prints {"url"} as one
// JSON line on stdout; IPC: cpuUsage() of this process, ledgerSeq(), enableDataProduct() (every account gets the
// data product, as an operator's `account data --enable` would).

import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig, startService } from '@svc/runtime';
import { serveParent } from '../lib/children.ts';
import { mainThreadCpuMs } from '../lib/proc.ts';

const ownDir = process.env.SVC_DATA_DIR ? undefined : mkdtempSync(path.join(os.tmpdir(), 'svc-bench-'));
const env = { ...process.env, ...(ownDir ? { SVC_DATA_DIR: ownDir } : {}) };
const svc = await startService(loadConfig(env));
await svc.services.readiness.refresh();
serveParent(
  {
    cpuUsage: () => process.cpuUsage(),
    mainCpuMs: () => mainThreadCpuMs(),
    memory: () => process.memoryUsage(),
    // The newest credit_ledger row's id: the rows written between two reads are the debit batches
    // (one row a batch) of a charged run.
    ledgerSeq: async () => {
      const [account] = await svc.services.store.accounts.list();
      return account ? ((await svc.services.store.ledger.entries(account.id, 1))[0]?.id ?? 0) : 0;
    },
    enableDataProduct: async () => {
      const accounts = await svc.services.store.accounts.list();
      for (const a of accounts) await svc.services.store.accounts.setDataProduct(a.id, true);
      svc.app.clearKeyCache();
      return accounts.length;
    },
  },
  async () => {
    await svc.close();
    if (ownDir) rmSync(ownDir, { recursive: true, force: true });
  },
);
process.stdout.write(`${JSON.stringify({ url: svc.url })}\n`);
