// Lint-like guard: the verifier core never imports a socket, DNS or database client.
// Only src/adapters/ may; everything else reaches the outside world through ports.ts.

import t from 'tap';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { packageOf, specifiers } from '../../../test/helpers/imports.ts';

const SRC = fileURLToPath(new URL('../src/', import.meta.url));

/** Packages (node built-ins without the `node:` prefix, npm packages by name) the core must not use. */
const FORBIDDEN = new Set(['net', 'tls', 'dns', 'dgram', 'pg', '@electric-sql/pglite', 'ioredis', 'kafkajs', '@clickhouse/client']);

export function forbiddenImports(source: string): string[] {
  return specifiers(source).filter((s) => FORBIDDEN.has(packageOf(s)));
}

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return tsFiles(p);
    return e.name.endsWith('.ts') ? [p] : [];
  });
}

const rel = (p: string) => path.relative(SRC, p).split(path.sep).join('/');

t.test('the matcher finds every import form and ignores what is not an import', async (t) => {
  const cases: Array<[string, string[]]> = [
    ["import net from 'node:net';", ['node:net']],
    ["import * as tls from 'tls';", ['tls']],
    ["import { Resolver } from 'node:dns/promises';", ['node:dns/promises']],
    ["import dns from \"dns\";", ['dns']],
    ["import {\n  createSocket,\n  type Socket,\n} from 'node:dgram';", ['node:dgram']],
    ["import type { Pool } from 'pg';", ['pg']],
    ["import { PGlite } from '@electric-sql/pglite';", ['@electric-sql/pglite']],
    ["import { live } from '@electric-sql/pglite/live';", ['@electric-sql/pglite/live']],
    ["import Redis from 'ioredis';", ['ioredis']],
    ["import { Kafka } from 'kafkajs';", ['kafkajs']],
    ["import { createClient } from '@clickhouse/client';", ['@clickhouse/client']],
    ["export { connect } from 'node:net';", ['node:net']],
    ["export * from 'node:tls';", ['node:tls']],
    ["import 'node:net';", ['node:net']],
    ["const m = await import('node:net');", ['node:net']],
    ['const pg = require("pg");', ['pg']],
  ];
  for (const [src, expected] of cases) {
    t.strictSame(specifiers(src), expected, src.replace(/\n/g, ' '));
    t.equal(forbiddenImports(src).length, 1, `forbidden: ${src.replace(/\n/g, ' ')}`);
  }
  // Allowed modules, look-alikes, comments and strings that are not imports.
  const allowed = [
    "import { readFileSync } from 'node:fs';",
    "import { domainToASCII } from 'node:url';",
    "import type { DnsPort } from './ports.ts';",
    "import { netSmtpConnector } from './adapters/smtp-net.ts';",
    "import x from 'pg-format';",
    "import x from 'dns2';",
    "import x from 'network';",
    "import x from '@clickhouse/client-web-ish';",
    "// import net from 'node:net';",
    "/* import { Pool } from 'pg'; */",
    "const s = 'the net result';",
  ];
  for (const src of allowed) t.strictSame(forbiddenImports(src), [], `allowed: ${src}`);
  t.equal(packageOf('node:dns/promises'), 'dns');
  t.equal(packageOf('@electric-sql/pglite/worker'), '@electric-sql/pglite');
  t.equal(packageOf('./ports.ts'), '.');
});

t.test('the matcher catches the adapters (proof it works on real files)', async (t) => {
  t.strictSame(forbiddenImports(readFileSync(path.join(SRC, 'adapters/smtp-net.ts'), 'utf8')), ['node:net', 'node:tls']);
  t.strictSame(forbiddenImports(readFileSync(path.join(SRC, 'adapters/dns-node.ts'), 'utf8')), ['node:dns/promises', 'node:net']);
});

t.test('no core file imports a socket, DNS or database client', async (t) => {
  const all = tsFiles(SRC).map(rel).sort();
  const core = all.filter((f) => !f.startsWith('adapters/'));
  t.ok(all.some((f) => f.startsWith('adapters/')), 'adapters exist and are excluded');
  for (const must of ['index.ts', 'ports.ts', 'verifier.ts', 'verdict.ts', 'smtp/session.ts', 'smtp/reply.ts', 'smtp/classify.ts', 'syntax.ts']) {
    t.ok(core.includes(must), `scanned ${must}`);
  }
  let importsSeen = 0;
  for (const file of core) {
    const source = readFileSync(path.join(SRC, file), 'utf8');
    importsSeen += specifiers(source).length;
    t.strictSame(forbiddenImports(source), [], file);
  }
  t.ok(importsSeen >= 10, `the scan saw the core's imports (${importsSeen})`);
});
