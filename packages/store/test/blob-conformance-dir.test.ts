// The blob conformance suite (blob-conformance.ts) on the directory adapter.

import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
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
});
