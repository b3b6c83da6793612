// A 10,000-row CSV job through `npx svc` against the whole service on the simulated internet
// (startStack), twice: first in a real terminal (tmux, 120×40; first, so its job meets no cached
// verdicts and runs long enough to be watched), where the progress bar with its ETA must be
// drawn while the job runs and the summary must follow it; then with --json from a script, whose
// stdout must be exactly one JSON document with the exact counters and credits. Then the
// download, the balance and the listing through the CLI.
//
// The file: 6,505 unique addresses whose verdicts the sim's table fixes (2 known mailboxes and 2
// role accounts at accept.test, 3,000 unknown users there, 2,000 at a catch-all domain, 500 at a
// disposable one, 1,000 at an NXDOMAIN, one bad string), then 3,495 repeats of them, shuffled
// with a fixed seed. No greylisting, tarpit or timeout: the job takes seconds.

import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { seededRandom } from '../../../test/helpers/random.ts';
import { freePort } from '../../../test/helpers/private-infra.ts';
import { makeKey, startStack } from '../../../test/helpers/stack.ts';

const ROOT = path.resolve(import.meta.dirname, '../../..');
const run = promisify(execFile);
t.setTimeout(180_000);

// `npx svc` must find the workspace's bin (npm install links it); `--no` keeps npx from ever
// looking for a package of that name elsewhere.
const BIN = path.join(ROOT, 'node_modules/.bin/svc');
if (realpathSync(BIN) !== path.join(ROOT, 'packages/cli/bin/svc.js')) throw new Error(`${BIN} is not the workspace's svc: run npm install`);

const port = await freePort();
// Room for a busy machine (CI runs two test files at once): no address here needs a short
// timeout, and an SMTP timeout under load would turn accepted mailboxes into `unknown`.
const stack = await startStack({
  env: { PORT: String(port), SVC_PUBLIC_URL: `http://127.0.0.1:${port}`, SVC_SECRET: 'cli-e2e-secret-0123456789abcdef', SVC_SMTP_TIMEOUT_MS: '10000', SVC_DNS_TIMEOUT_MS: '3000' },
});
t.teardown(() => stack.close());
const tmp = mkdtempSync(path.join(os.tmpdir(), 'svc-cli-e2e-'));
t.teardown(() => rmSync(tmp, { recursive: true, force: true }));

// ------------------------------------------------------------------------------------------------
// The input

const uniques: string[] = [
  'jane.doe@accept.test',
  'john.smith@accept.test',
  'info@accept.test',
  'support@accept.test',
  ...Array.from({ length: 3000 }, (_, i) => `user${i}@accept.test`),
  ...Array.from({ length: 2000 }, (_, i) => `lead${i}@catchall.test`),
  ...Array.from({ length: 500 }, (_, i) => `temp${i}@mailinator.com`),
  ...Array.from({ length: 1000 }, (_, i) => `someone${i}@nxdomain.test`),
  'not-an-email',
];
const UNIQUE = uniques.length; // 6,505
const ROWS = 10_000;
const rand = seededRandom(20261126);
const emails = [...uniques];
while (emails.length < ROWS) emails.push(uniques[Math.floor(rand() * UNIQUE)]!);
for (let i = emails.length - 1; i > 0; i--) {
  const j = Math.floor(rand() * (i + 1));
  [emails[i], emails[j]] = [emails[j]!, emails[i]!];
}
const csvText = `id,email,company\n${emails.map((e, i) => `${i + 1},${e},"Company ${i % 97}, Ltd"`).join('\n')}\n`;
const file = path.join(tmp, 'list.csv');
writeFileSync(file, csvText);

/** The 2.2 counters the sim's table gives this file, exactly. */
const RESULTS = {
  total_rows: ROWS,
  unique_emails: UNIQUE,
  valid: 2,
  valid_role_based: 2,
  invalid: 3000 + 1000 + 1,
  risky: 2000 + 500,
  unknown: 0,
  role_based: 2,
  high_value: 2,
  catch_all: 2500,
  credits_reserved: UNIQUE,
  credits_charged: 2,
  credits_consumed: 2,
  credits_refunded: UNIQUE - 2,
  credits_per_high_value_validation: 1,
};

const CREDITS = 10_000;

/**
 * `npx svc ARGS` with the key and base URL in a config file of mode 0600 (SVC_CONFIG), and the
 * variables that would override it emptied.
 */
async function svc(key: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const config = path.join(tmp, `config-${key.slice(-8)}.json`);
  writeFileSync(config, JSON.stringify({ api_key: key, base_url: stack.url }), { mode: 0o600 });
  try {
    const r = await run('npx', ['--no', '--', 'svc', ...args], { cwd: ROOT, env: { ...process.env, SVC_CONFIG: config, SVC_API_KEY: '', SVC_BASE_URL: '' }, maxBuffer: 64 * 1024 * 1024 });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

const hasTmux = (() => {
  try {
    execFileSync('tmux', ['-V']);
    return true;
  } catch {
    return false;
  }
})();

t.test('in a terminal (tmux): the progress bar with an ETA while it runs, then the summary', { skip: hasTmux ? false : 'tmux is not installed' }, async (t) => {
  const { key } = await makeKey(stack, { credits: CREDITS });
  // A tmux server of its own, its socket in the test's directory (removed with it).
  const socket = path.join(tmp, 'tmux.sock');
  const tmux = (...args: string[]) => execFileSync('tmux', ['-S', socket, ...args], { encoding: 'utf8' });
  // The key from the environment here; no config file is read (HOME has none).
  const env = `SVC_API_KEY=${key} SVC_BASE_URL=${stack.url} SVC_CONFIG= XDG_CONFIG_HOME= HOME=${tmp}`;
  const command = `cd ${ROOT} && env ${env} npx --no -- svc job create --file ${file} --wait --interval 0.25; echo "EXIT=$?"; sleep 600`;
  tmux('new-session', '-d', '-s', 'cli', '-x', '120', '-y', '40', command);
  t.teardown(() => {
    try {
      tmux('kill-server');
    } catch {
      /* already gone */
    }
  });
  const frames: string[] = [];
  const t0 = Date.now();
  let pane = '';
  while (!/EXIT=\d+/.test(pane)) {
    if (Date.now() - t0 > 120_000) throw new Error(`no EXIT= after 120 s; the pane:\n${pane}`);
    await new Promise((r) => setTimeout(r, 100));
    pane = tmux('capture-pane', '-p', '-t', 'cli');
    if (frames.at(-1) !== pane) frames.push(pane);
  }
  t.comment(`10,000-row CSV job through npx svc in tmux: ${((Date.now() - t0) / 1000).toFixed(1)} s, ${frames.length} distinct frames`);
  const BAR = /\[([#.]{30})\]\s+(\d+\.\d)%\s+([\d,]+)\/6,505\s+([\d,]+\/s|-)\s+ETA (\d+:\d\d|-:--)\s+(\w+)/;
  const midway = frames.map((f) => BAR.exec(f)).filter((m): m is RegExpExecArray => m !== null && Number(m[2]) > 0 && Number(m[2]) < 100 && m[5] !== '-:--');
  t.ok(midway.length >= 1, `a bar with progress and an ETA was drawn while the job ran (${midway.length} frames; e.g. ${midway[0]?.[0]})`);
  for (const m of midway) if (m[1]!.indexOf('.') !== -1 && m[1]!.slice(m[1]!.indexOf('.')).includes('#')) t.fail(`a malformed bar: ${m[0]}`);
  const lines = pane.split('\n').map((l) => l.trimEnd());
  const at = lines.findIndex((l) => l.includes(' completed in '));
  t.match(lines.find((l) => / rows, 6,505 unique, 6,505 credits reserved$/.test(l)), /^job_[0-9a-f]{24} queued: 10,000 rows, 6,505 unique, 6,505 credits reserved$/, 'the start line');
  t.equal(lines[at - 1], '[##############################]  100.0%  6,505/6,505  ' + BAR.exec(lines[at - 1]!)?.[4] + `  ETA 0:00  completed`, 'the bar ends full, on its own line');
  t.match(lines[at], /^job_[0-9a-f]{24} completed in [\d.]+ s: 10,000 rows, 6,505 unique, 6,505\/6,505 validated$/, 'the summary');
  t.strictSame(lines.slice(at + 1, at + 4), ['  valid 2, valid_role_based 2, risky 2,500, invalid 4,001, unknown 0', '  credits: 6,505 reserved, 2 charged, 6,503 refunded', `  results: svc job download ${lines[at]!.split(' ')[0]} --output results.csv`]);
  t.equal(lines[at + 4], 'EXIT=0', 'exit 0');
  if (!t.passing()) t.comment(`the last pane:\n${pane}\nthe frames with a bar:\n${frames.map((f) => BAR.exec(f)?.[0] ?? '(none)').join('\n')}`);
});

t.test('--json from a script: one JSON document with the exact counters, then download, credits, list', async (t) => {
  const { key } = await makeKey(stack, { credits: CREDITS });
  const t0 = Date.now();
  const r = await svc(key, ['--json', 'job', 'create', '--file', file, '--column', 'email', '--wait', '--interval', '0.25']);
  const took = Date.now() - t0;
  t.comment(`10,000-row CSV job through npx svc --json: ${(took / 1000).toFixed(1)} s`);
  t.equal(r.code, 0, `exit 0 (stderr: ${r.stderr.slice(0, 500)})`);
  t.equal(r.stderr, '', 'nothing on stderr');
  if (r.code !== 0 || r.stderr !== '') t.comment(`stdout: ${r.stdout.slice(0, 2000)}`);
  t.equal(r.stdout.indexOf('\n'), r.stdout.length - 1, 'stdout is one line');
  const job = JSON.parse(r.stdout) as Record<string, any>;
  t.equal(job.status, 'completed');
  t.equal(job.filename, 'list.csv');
  t.strictSame(job.progress, { processed: UNIQUE, total: UNIQUE, percent: 100 });
  t.strictSame(job.results, RESULTS, 'the exact 2.2 counters');
  t.strictSame(job.credit_reservation, { reserved: true, reserved_credits: UNIQUE, credits_charged: 2, credits_consumed: 2, refunded_credits: UNIQUE - 2, credits_per_high_value_validation: 1, finalized: true });
  t.ok(took < 60_000, `well under a minute (${took} ms)`);

  const credits = await svc(key, ['--json', 'credits']);
  t.match(JSON.parse(credits.stdout), { balance: CREDITS - 2, reserved: 0, available: CREDITS - 2 }, 'the balance paid the two High-Value Validations');

  const out = path.join(tmp, 'results.csv');
  const dl = await svc(key, ['job', 'download', job.id, '--output', out]);
  t.equal(dl.code, 0);
  const lines = readFileSync(out, 'utf8').trim().split('\r\n'); // RFC 4180 line ends
  t.equal(lines.length, ROWS + 1, 'the header and one row per input row');
  t.equal(lines[0], 'id,email,company,result,reason_code,reason,b2b_outbound_quality,is_role_based,role_type,is_free_provider,is_disposable,is_catchall,catchall_confidence,did_you_mean,credits_charged,charge_reason,validation_layer,smtp_response');
  t.equal(lines.filter((l) => /,duplicate_in_job,/.test(l)).length, ROWS - UNIQUE, 'every repeat says duplicate_in_job');
  const valid = await svc(key, ['job', 'download', job.id, '--segment', 'valid']);
  t.equal(valid.stdout.trim().split('\r\n').length - 1, emails.filter((e) => e === 'jane.doe@accept.test' || e === 'john.smith@accept.test').length, 'segment=valid: the rows of the two valid mailboxes');
  const link = await svc(key, ['--json', 'job', 'download', job.id]);
  t.match(JSON.parse(link.stdout), { url: new RegExp(`^http://127\\.0\\.0\\.1:${port}/v1/csv/jobs/${job.id}/results\\.csv\\?expires=\\d+&signature=`) }, '--json: the signed URL');

  const list = await svc(key, ['--json', 'job', 'list', '--limit', '5']);
  t.match(JSON.parse(list.stdout), { jobs: [{ id: job.id, status: 'completed' }], next_cursor: null });
  const status = await svc(key, ['job', 'status', job.id]);
  t.match(status.stdout, new RegExp(`^${job.id} completed in [\\d.]+ s: 10,000 rows, 6,505 unique, 6,505/6,505 validated\\n  valid 2, valid_role_based 2, risky 2,500, invalid 4,001, unknown 0\\n  credits: 6,505 reserved, 2 charged, 6,503 refunded\\n`));
  const cancel = await svc(key, ['--json', 'job', 'cancel', job.id]);
  t.equal(cancel.code, 5, 'a finished job cannot be canceled: exit 5');
  t.match(JSON.parse(cancel.stdout), { error: { status: 409, code: 'invalid_job_state', request_id: /^req_[0-9a-f]{32}$/ }, exit_code: 5 });
});
