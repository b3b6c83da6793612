// The store conformance suite on the embedded adapter (PGlite). In-memory databases, or a
// temporary data directory when the test needs to survive a restart.

import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Db } from '../src/db/db.ts';
import { openPglite } from '../src/db/pglite.ts';
import { storeConformance, type Adapter } from './conformance.ts';
import { freshPglite } from '../../../test/helpers/pglite.ts';

const adapter: Adapter = {
  kind: 'pglite',
  parallel: false,
  async fresh(t, opts = {}) {
    const dir = opts.persistent ? mkdtempSync(path.join(tmpdir(), 'svc-store-pglite-')) : undefined;
    // A fresh database starts from the dump of an initialised one (initdb once per machine).
    let db: Db | undefined = await freshPglite(dir);
    t.teardown(async () => {
      await db?.close();
      db = undefined;
      if (dir) rmSync(dir, { recursive: true, force: true });
    });
    return {
      get db() {
        if (!db) throw new Error('closed');
        return db;
      },
      async restart() {
        if (!dir) throw new Error('an in-memory PGlite cannot restart: ask for { persistent: true }');
        await db?.close();
        db = undefined;
        db = await openPglite(dir);
        return db;
      },
      // One process per data directory: no second handle.
    };
  },
};

storeConformance(t, adapter);
