// initdb of a new PGlite data directory, in a process of its own (started by openPglite,
// pglite.ts): `node pglite-initdb.cjs <pgdata> <start parameters as JSON>`. Exits 0 once the
// directory is initialised and closed; on failure, the error on stderr and exit 1.
//
// Why a process: initdb grows the WebAssembly memory to ~750 MiB and the C heap of the thread that
// runs it by ~60 MiB. A thread's WebAssembly memory goes when the thread ends, but the malloc arena
// it used stays in the process for good: a service whose first start ran initdb in a thread sat at
// 333-365 MiB idle, one whose directory was initialised by another process at 302-303.

'use strict';

const { PGlite } = require('@electric-sql/pglite');
const { OwnerOnlyNodeFS } = require('./owner-only-fs.cjs');

const [pgdata, params] = process.argv.slice(2);

(async () => {
  const pg = new PGlite({ fs: new OwnerOnlyNodeFS(pgdata), startParams: [...PGlite.defaultStartParams, ...JSON.parse(params)] });
  await pg.waitReady;
  await pg.close();
})().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`${err && err.stack ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
