// Benchmark: the dashboard's initial download. Builds the web app (packages/dashboard, Vite) and
// measures what a first visit to /dashboard/ loads before any interaction: index.html and every
// script and stylesheet it names, gzipped at level 9 as a server or CDN would send them. Target:
// initial JavaScript ≤ 150 kB gzipped. Baseline in the same run: the same files uncompressed.

import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import type { BenchResult } from '../lib/result.ts';

export const NAME = 'dashboard/bundle';
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const DIST = path.join(ROOT, 'packages/dashboard/dist');
const TARGET_KB = 150;

export async function run(): Promise<BenchResult> {
  const vite = path.join(path.dirname(createRequire(path.join(ROOT, 'packages/dashboard/package.json')).resolve('vite/package.json')), 'bin/vite.js');
  const t0 = performance.now();
  execFileSync(process.execPath, [vite, 'build', '--config', path.join(ROOT, 'packages/dashboard/web/vite.config.ts'), '--logLevel', 'warn'], { stdio: ['ignore', 'ignore', 'inherit'] });
  const buildS = (performance.now() - t0) / 1000;
  const html = readFileSync(path.join(DIST, 'index.html'), 'utf8');
  const refs = [...html.matchAll(/(?:src|href)="\/dashboard\/(assets\/[^"]+)"/g)].map((m) => m[1]!);
  const size = (files: string[]) => {
    let raw = 0;
    let gz = 0;
    for (const f of files) {
      const b = readFileSync(path.join(DIST, f));
      raw += b.length;
      gz += gzipSync(b, { level: 9 }).length;
    }
    return { raw, gz };
  };
  const js = size(refs.filter((f) => f.endsWith('.js')));
  const css = size(refs.filter((f) => f.endsWith('.css')));
  const page = size(['index.html']);
  const kb = (n: number) => Math.round((n / 1000) * 10) / 10;
  return {
    name: NAME,
    rows: [
      { bench: NAME, metric: 'initial JavaScript, gzipped', value: kb(js.gz), unit: 'kB', baseline: { label: 'uncompressed', value: kb(js.raw) }, ratio: js.gz / js.raw, ratioLabel: 'of uncompressed', target: `≤ ${TARGET_KB} kB`, pass: js.gz / 1000 <= TARGET_KB },
      { bench: NAME, metric: 'initial CSS + HTML, gzipped', value: kb(css.gz + page.gz), unit: 'kB', baseline: { label: 'uncompressed', value: kb(css.raw + page.raw) } },
    ],
    details: [
      `Vite build in ${buildS.toFixed(1)} s. A first visit loads index.html (${kb(page.raw)} kB, ${kb(page.gz)} kB gzipped) and ${refs.length} asset(s): ${refs.map((r) => path.basename(r)).join(', ')}.`,
      `JavaScript ${kb(js.raw)} kB (${kb(js.gz)} kB gzipped, target ≤ ${TARGET_KB} kB); CSS ${kb(css.raw)} kB (${kb(css.gz)} kB gzipped).`,
    ],
    warnings: [],
  };
}
