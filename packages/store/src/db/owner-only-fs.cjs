// PGlite's Node file system with owner-only modes, for the PGlite thread (pglite-thread.cjs) and
// the initdb process (pglite-initdb.cjs). Plain CommonJS, like them.

'use strict';

const { NodeFS } = require('@electric-sql/pglite/nodefs');

const OWNER_ONLY = ~0o077;

/**
 * PGlite's Node filesystem with owner-only modes. Postgres-in-WASM creates its files through
 * Emscripten's NODEFS, which chmods each new file to the mode Postgres asked for (0666 in this
 * build) and makes directories with the host umask: neither honours a 0077 umask. Masking the
 * mode in NODEFS's two mode-setting operations (mknod, and the setattr behind chmod/fchmod)
 * covers initdb's files and every relation and WAL file created later. If an upgrade of PGlite
 * moves them, opening fails here rather than writing world-readable files.
 */
class OwnerOnlyNodeFS extends NodeFS {
  async init(pg, opts) {
    const out = await super.init(pg, opts);
    const restrict = (mod) => {
      const nodefs = mod.NODEFS;
      const mknod = nodefs.node_ops && nodefs.node_ops.mknod;
      const doSetAttr = nodefs.doSetAttr;
      if (typeof mknod !== 'function' || typeof doSetAttr !== 'function') throw new Error('PGlite NODEFS has no mknod/doSetAttr: cannot keep the data directory owner-only');
      nodefs.node_ops.mknod = (parent, name, mode, dev) => mknod(parent, name, mode & OWNER_ONLY, dev);
      nodefs.doSetAttr = (arg, node, attr, ...rest) => doSetAttr(arg, node, attr.mode === undefined ? attr : { ...attr, mode: attr.mode & OWNER_ONLY }, ...rest);
    };
    // Before NodeFS's own preRun mounts the directory.
    out.emscriptenOpts.preRun = [restrict, ...(out.emscriptenOpts.preRun || [])];
    return out;
  }
}

module.exports = { OwnerOnlyNodeFS };
