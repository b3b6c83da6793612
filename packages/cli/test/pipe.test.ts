// `svc job list | head -1`: the reader closes the pipe after the first line while `svc` is still
// writing. The built command (bin/svc.js, plain node) must stop quietly: exit 0, no EPIPE and no
// stack trace on stderr. The listing is made long (20 pages of 100 jobs, ~300 kB: several times a
// pipe's 64 kB buffer), so `svc` is certainly still writing when the reader goes away.

import { spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import path from 'node:path';
import t from 'tap';
import { startFaultServer, type Step } from '../../../test/helpers/fault-server.ts';
import { exitQuietlyOnClosedPipe } from '../src/index.ts';

const BIN = path.resolve(import.meta.dirname, '../bin/svc.js');
const server = await startFaultServer();
t.teardown(() => server.close());

const PAGES = 20;
const PER_PAGE = 100;
const job = (i: number) => ({
  id: `job_${i.toString(16).padStart(24, '0')}`,
  status: 'completed',
  filename: `a-long-file-name-so-the-listing-is-wide-${i}.csv`,
  created_at: '2026-01-01T00:00:00.000Z',
  progress: { processed: 10, total: 10, percent: 100 },
  results: { total_rows: 10 },
});
const pages: Step[] = Array.from({ length: PAGES }, (_, p) => ({
  status: 200,
  body: { jobs: Array.from({ length: PER_PAGE }, (_, i) => job(p * PER_PAGE + i)), next_cursor: p < PAGES - 1 ? `page${p + 1}` : null },
}));

/** Runs the built `svc` with stdout into a reader that closes after the first line. */
function runIntoHead(args: string[]): Promise<{ code: number | null; signal: string | null; firstLine: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const env: NodeJS.ProcessEnv = { ...process.env, SVC_API_KEY: 'svc_test_pipeTestKey000000000001', SVC_BASE_URL: server.url, SVC_CONFIG: '' };
    delete env.NODE_OPTIONS; // plain node, as a user runs it
    const child = spawn(process.execPath, [BIN, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString('utf8');
      if (out.includes('\n')) child.stdout.destroy(); // `head -1` has its line and exits
    });
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, firstLine: out.split('\n')[0]!, stderr }));
  });
}

t.test('svc job list --all | head -1: exit 0, nothing on stderr', async (t) => {
  server.script(pages);
  const r = await runIntoHead(['job', 'list', '--all', '--limit', String(PER_PAGE)]);
  t.equal(r.firstLine, `${'ID'.padEnd(28)}  ${'STATUS'.padEnd(15)}  ${'ROWS'.padStart(9)}  DONE  ${'CREATED'.padEnd(24)}  FILE`, 'the reader got the header line');
  t.equal(server.received.length, PAGES, 'every page was read (the output was written after them)');
  t.notMatch(r.stderr, /EPIPE|\n\s+at /, 'no EPIPE and no stack trace');
  t.equal(r.stderr, '', 'nothing on stderr');
  t.strictSame([r.code, r.signal], [0, null], 'exit 0');
});

t.test('the same without the reader closing: the whole listing, exit 0', async (t) => {
  server.script(pages);
  const env: NodeJS.ProcessEnv = { ...process.env, SVC_API_KEY: 'svc_test_pipeTestKey000000000001', SVC_BASE_URL: server.url, SVC_CONFIG: '' };
  delete env.NODE_OPTIONS;
  const child = spawn(process.execPath, [BIN, 'job', 'list', '--all', '--limit', String(PER_PAGE)], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString('utf8')));
  const code = await new Promise((r) => child.on('close', r));
  t.equal(code, 0);
  t.equal(out.trimEnd().split('\n').length, 1 + PAGES * PER_PAGE, 'the header and one line per job');
  t.ok(out.length > 4 * 65536, `more than four pipe buffers (${out.length} bytes)`);
});

t.test('the rule: EPIPE on stdout exits 0, EPIPE on stderr is ignored, any other write error is thrown', async (t) => {
  const stdout = new EventEmitter();
  const stderr = new EventEmitter();
  const exits: number[] = [];
  exitQuietlyOnClosedPipe(stdout, stderr, (code) => exits.push(code));
  const error = (code: string) => Object.assign(new Error(`write ${code}`), { code });
  stderr.emit('error', error('EPIPE'));
  t.strictSame(exits, [], 'a closed stderr: carry on');
  t.throws(() => stderr.emit('error', error('EIO')), /write EIO/, 'stderr: another error is thrown');
  t.throws(() => stdout.emit('error', error('ENOSPC')), /write ENOSPC/, 'stdout: another error is thrown');
  t.strictSame(exits, [], 'and does not exit 0');
  stdout.emit('error', error('EPIPE'));
  t.strictSame(exits, [0], 'a closed stdout: exit 0');
});
