// The blob conformance suite (blob-conformance.ts) on the directory adapter.

import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DirBlobStore } from '../src/blob/blob.ts';
import { blobConformance } from './blob-conformance.ts';

blobConformance(t, {
  name: 'dir',
  // Files have no chunks; a size the sizes around it still exercise.
  chunkBytes: 64 * 1024,
  async fresh(t) {
    const d = mkdtempSync(path.join(os.tmpdir(), 'svc-blob-conf-'));
    t.teardown(() => rmSync(d, { recursive: true, force: true }));
    return new DirBlobStore(path.join(d, 'blobs'));
  },
  async writing(store) {
    const root = (store as DirBlobStore).root;
    const names = await readdir(root, { recursive: true }).catch(() => [] as string[]);
    const partial = names.filter((n) => path.basename(n).includes('.partial-'));
    const sizes = await Promise.all(partial.map(async (n) => (await stat(path.join(root, n)).catch(() => ({ size: 0 }))).size)); // a renamed one is done
    return sizes.filter((n) => n > 0).length;
  },
});
