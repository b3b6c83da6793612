// `svc` in process (run() with captured streams) against the client's fault-injecting server:
// argument errors, the exit code of every class of failure (and of every catalogue code), the
// --json contract (one document on stdout, nothing on stderr), the key and the config file's
// 0600 rule, and the pieces (address files, progress) as pure functions.

import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { ERRORS, type ErrorSpec } from '@svc/contracts';
import { SvcApiError, SvcNetworkError } from '@svc/client';
import { addressesOf, clock, estimate, EXIT, exitCodeOf, jobSummary, ProgressReporter, renderBar, renderLine, run, STALL_MS, type CliIO, type Sample } from '../src/index.ts';
import { fail, requestIdOf, startFaultServer, type Step } from '../../../test/helpers/fault-server.ts';

const server = await startFaultServer();
t.teardown(() => server.close());
const tmp = mkdtempSync(path.join(os.tmpdir(), 'svc-cli-test-'));
t.teardown(() => rmSync(tmp, { recursive: true, force: true }));

const KEY = 'svc_test_cliUnitTestKey00000000001';

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `svc` with `argv` against the fault server answering `script`. */
async function svc(argv: string[], script: Step[] = [{ status: 200, body: {} }], env: Record<string, string | undefined> = { SVC_API_KEY: KEY, SVC_BASE_URL: server.url, HOME: tmp }, tty = false): Promise<Ran> {
  server.script(script);
  let stdout = '';
  let stderr = '';
  const io: CliIO = {
    env,
    cwd: tmp,
    stdout: { write: (s: string) => (stdout += s), isTTY: tty, columns: 100 },
    stderr: { write: (s: string) => (stderr += s), isTTY: tty, columns: 100 },
    clientOptions: { backoff: { baseMs: 1, capMs: 2 }, maxAttempts: 3 },
  };
  const code = await run(argv, io);
  return { code, stdout, stderr };
}

t.test('argument errors exit 1 with a message on stderr, and call nothing', async (t) => {
  const cases: Array<[string[], RegExp]> = [
    [[], /^Usage: svc/],
    [['frobnicate'], /unknown command: frobnicate; see: svc --help/],
    [['job', 'explode', 'job_1'], /unknown command: job explode/],
    [['validate'], /validate takes 1 argument \(ADDRESS\), got 0/],
    [['validate', 'a@accept.test', 'b@accept.test'], /validate takes 1 argument \(ADDRESS\), got 2/],
    [['validate', '--colour', 'a@accept.test'], /Unknown option '--colour'.*see: svc validate --help/],
    [['job', 'create'], /job create needs --file FILE/],
    [['job', 'create', '--file', 'x.csv', '--interval', 'soon'], /--interval must be a number of seconds/],
    [['job', 'list', '--limit', '0'], /--limit must be an integer from 1 to 100, got "0"/],
    [['job', 'status'], /job status takes 1 argument \(ID\), got 0/],
    [['credits', 'now'], /credits takes 0 arguments \(none\), got 1/],
    [['bulk', '--column'], /Option '--column <value>' argument missing/],
  ];
  for (const [argv, message] of cases) {
    const r = await svc(argv);
    t.equal(r.code, EXIT.usage, `svc ${argv.join(' ')}: exit 1`);
    t.match(argv.length === 0 ? r.stdout : r.stderr, message, `svc ${argv.join(' ')}: the message`);
    t.equal(server.received.length, 0, `svc ${argv.join(' ')}: no request`);
  }
  const help = await svc(['--help']);
  t.strictSame([help.code, help.stderr], [0, ''], '--help exits 0');
  t.match(help.stdout, /Exit codes: 0 ok; 1 usage or configuration; 2 bad input/);
  const one = await svc(['job', 'create', '--help']);
  t.match(one, { code: 0, stdout: /^Usage: svc job create --file FILE.*\n[\s\S]*--idempotency-key KEY/ });
  t.match(await svc(['--version', '--json']), { code: 0, stdout: '{"version":"0.1.0"}\n' });
});

t.test('exit codes by class of failure, human and --json', async (t) => {
  const table: Array<[string, Step[], number]> = [
    ['400 email_required', [fail(400, 'email_required')], EXIT.badInput],
    ['413 payload_too_large', [fail(413, 'payload_too_large')], EXIT.badInput],
    ['401 invalid_api_key', [fail(401, 'invalid_api_key')], EXIT.auth],
    ['403 insufficient_scope', [fail(403, 'insufficient_scope', { required_scope: 'email:validate:single' })], EXIT.auth],
    ['402 insufficient_credits', [fail(402, 'insufficient_credits', { required: 1, available: 0 })], EXIT.credits],
    ['402 subscription_inactive', [fail(402, 'subscription_inactive')], EXIT.credits],
    ['404 job_not_found', [fail(404, 'job_not_found')], EXIT.notFound],
    ['409 idempotency_key_conflict', [fail(409, 'idempotency_key_conflict')], EXIT.notFound],
    ['409 idempotency_request_in_progress every time', [fail(409, 'idempotency_request_in_progress')], EXIT.retryable],
    ['429 rate_limited every time', [fail(429, 'rate_limited', { retry_after: 0 })], EXIT.retryable],
    ['503 service_unavailable every time', [fail(503, 'service_unavailable')], EXIT.retryable],
    ['500 control_plane_route_misconfigured', [fail(500, 'control_plane_route_misconfigured')], EXIT.retryable],
    ['dropped connections', ['drop'], EXIT.retryable],
  ];
  for (const [name, script, code] of table) {
    const human = await svc(['validate', 'jane.doe@accept.test'], script);
    t.equal(human.code, code, `${name}: exit ${code}`);
    t.equal(human.stdout, '', `${name}: nothing on stdout`);
    const attempts = server.received.length;
    if (script[0] === 'drop') t.match(human.stderr, /^svc: POST \/v1\/validate: .*\(3 attempts\)\n$/m, `${name}: the message`);
    else t.match(human.stderr, new RegExp(`^svc: ${name.split(' ').slice(0, 2).join(' ')}: the .* message \\(.*request ${requestIdOf(attempts)}\\)\\n$`, 'm'), `${name}: status, code, message, request id on stderr`);
    const json = await svc(['--json', 'validate', 'jane.doe@accept.test'], script);
    t.equal(json.code, code, `${name} --json: exit ${code}`);
    t.equal(json.stderr, '', `${name} --json: nothing on stderr`);
    const doc = JSON.parse(json.stdout) as { error: Record<string, unknown>; exit_code: number };
    t.equal(json.stdout.trim().split('\n').length, 1, `${name} --json: one line`);
    t.equal(doc.exit_code, code);
    if (script[0] === 'drop') t.match(doc.error, { code: 'network_error', request_id: null, attempts: 3, retryable: true }, `${name}: no request id`);
    else t.match(doc.error, { status: Number(name.slice(0, 3)), code: name.split(' ')[1], request_id: requestIdOf(server.received.length) }, `${name} --json: the error document`);
  }
  const missing = await svc(['bulk', 'no-such-file.txt']);
  t.match(missing, { code: EXIT.badInput, stderr: 'svc: cannot read no-such-file.txt: no such file\n' }, 'a missing local file: exit 2');
});

t.test('every catalogue code has the exit code of its class', async (t) => {
  const expected = (status: number, retry: boolean): number => {
    if (status === 401 || status === 403) return EXIT.auth;
    if (status === 402) return EXIT.credits;
    if (status === 404 || (status === 409 && !retry)) return EXIT.notFound;
    if (retry || status >= 500) return EXIT.retryable;
    return EXIT.badInput;
  };
  for (const [code, spec] of Object.entries(ERRORS) as Array<[string, ErrorSpec]>) {
    const err = new SvcApiError(spec.status, { error: spec.error, message: spec.message, code }, new Headers(), 'GET', '/');
    t.equal(exitCodeOf(err), expected(spec.status, spec.retry), `${spec.status} ${code}`);
  }
  t.equal(exitCodeOf(new SvcNetworkError('timeout', 'slow', 'GET', '/')), EXIT.retryable, 'a timeout');
  t.equal(exitCodeOf(new TypeError('a bug')), EXIT.internal, 'anything else is a bug');
});

t.test('the API key: SVC_API_KEY, else a config file of mode 0600, else a clear refusal', async (t) => {
  const home = mkdtempSync(path.join(tmp, 'home-'));
  const none = await svc(['credits'], undefined, { HOME: home, SVC_BASE_URL: server.url });
  t.match(none, { code: EXIT.usage, stderr: /^svc: no API key: set SVC_API_KEY, or put \{"api_key": "svc_live_…"\} in .*\/\.config\/svc\/config\.json \(mode 0600\)\n$/ });

  const file = path.join(tmp, 'config.json');
  writeFileSync(file, JSON.stringify({ api_key: 'svc_test_fromTheConfigFile000001', base_url: server.url }));
  for (const mode of [0o644, 0o640, 0o604, 0o660, 0o622]) {
    chmodSync(file, mode);
    const r = await svc(['credits'], undefined, { SVC_CONFIG: file });
    t.equal(r.code, EXIT.usage, `mode ${mode.toString(8)}: exit 1`);
    t.equal(r.stderr, `svc: refusing to use the config file ${file}: it holds an API key but its mode is 0${mode.toString(8)} (readable or writable by others); run: chmod 600 ${file}\n`, `mode ${mode.toString(8)}: the message`);
    t.equal(server.received.length, 0, 'nothing sent');
  }
  chmodSync(file, 0o600);
  const ok = await svc(['credits'], [{ status: 200, body: { balance: 7, reserved: 1, available: 6, subscription_status: 'active' } }], { SVC_CONFIG: file });
  t.strictSame(ok, { code: 0, stdout: 'balance 7, reserved 1, available 6 (subscription active)\n', stderr: '' }, 'mode 0600: used');
  t.equal(server.received[0]!.headers['x-api-key'], 'svc_test_fromTheConfigFile000001', 'the key of the file');
  chmodSync(file, 0o400);
  t.equal((await svc(['credits'], undefined, { SVC_CONFIG: file })).code, 0, 'mode 0400: used');

  // The default place, ~/.config/svc/config.json; the environment wins over it.
  const dir = path.join(home, '.config', 'svc');
  (await import('node:fs')).mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, 'config.json'), JSON.stringify({ api_key: 'svc_test_fromTheDefaultFile00001', base_url: server.url }), { mode: 0o600 });
  t.equal((await svc(['credits'], undefined, { HOME: home })).code, 0);
  t.equal(server.received[0]!.headers['x-api-key'], 'svc_test_fromTheDefaultFile00001', '~/.config/svc/config.json');
  t.equal((await svc(['credits'], undefined, { HOME: home, SVC_API_KEY: KEY })).code, 0);
  t.equal(server.received[0]!.headers['x-api-key'], KEY, 'SVC_API_KEY wins');
  chmodSync(path.join(dir, 'config.json'), 0o644);
  t.match(await svc(['credits'], undefined, { HOME: home, SVC_API_KEY: KEY }), { code: EXIT.usage, stderr: /refusing to use the config file .*config\.json: .* mode is 0644/ }, 'an unsafe file is refused even when the environment has the key');

  t.match(await svc(['credits'], undefined, { SVC_CONFIG: path.join(tmp, 'absent.json') }), { code: EXIT.usage, stderr: /cannot read the config file .*absent\.json/ }, 'SVC_CONFIG naming no file');
  const broken = path.join(tmp, 'broken.json');
  writeFileSync(broken, '{api_key:', { mode: 0o600 });
  t.match(await svc(['credits'], undefined, { SVC_CONFIG: broken }), { code: EXIT.usage, stderr: /is not valid JSON/ });
  t.match(await svc(['credits'], undefined, { SVC_API_KEY: KEY, SVC_BASE_URL: 'ftp://x', HOME: home + '-none' }), { code: EXIT.usage, stderr: /the base URL must be an http or https URL, got "ftp:\/\/x"/ });
});

t.test('bulk: a list or a CSV, 100 per request, in order', async (t) => {
  const emails = Array.from({ length: 250 }, (_, i) => `user${i}@accept.test`);
  writeFileSync(path.join(tmp, 'list.txt'), `${emails.join('\n')}\n\n`);
  // The fault server answers every chunk with the addresses it was sent.
  const answer = (emails: string[]) => ({ results: emails.map((email) => ({ email, result: 'invalid', reason_code: 'mailbox_not_found', credits_charged: 0 })), summary: { total: emails.length, valid: 0, valid_role_based: 0, risky: 0, invalid: emails.length, unknown: 0, credits_charged: 0 } });
  const steps: Step[] = [0, 100, 200].map((from) => ({ status: 200, body: answer(emails.slice(from, from + 100)) }));
  // Chunks go 4 at a time: answer each by what it asked, not by arrival order.
  const r = await svcEcho(['--json', 'bulk', 'list.txt'], answer);
  t.equal(r.code, 0);
  const doc = JSON.parse(r.stdout) as { results: Array<{ email: string }>; summary: Record<string, number> };
  t.strictSame(doc.results.map((x) => x.email), emails, 'one result per address, in order');
  t.strictSame(doc.summary, { total: 250, valid: 0, valid_role_based: 0, risky: 0, invalid: 250, unknown: 0, credits_charged: 0 });
  t.strictSame(server.received.map((x) => (JSON.parse(x.body) as { emails: string[] }).emails.length).sort((a, b) => a - b), [50, 100, 100], 'requests of 100');
  t.equal(new Set(server.received.map((x) => x.headers['idempotency-key'])).size, 3, 'a key per request');
  t.equal(steps.length, 3);

  writeFileSync(path.join(tmp, 'leads.csv'), 'Name;E-mail;Company\r\nJane;jane.doe@accept.test;"Acme; Inc"\r\nInfo;info@accept.test;Acme\r\n');
  const csv = await svcEcho(['bulk', 'leads.csv'], answer);
  t.strictSame(csv, { code: 0, stdout: 'jane.doe@accept.test\tinvalid\tmailbox_not_found\t0\ninfo@accept.test\tinvalid\tmailbox_not_found\t0\n', stderr: '2 addresses: valid 0, valid_role_based 0, risky 0, invalid 2, unknown 0; credits charged 0\n' });
});

/** Like svc(), with a server that answers each bulk request from its own body. */
async function svcEcho(argv: string[], answer: (emails: string[]) => unknown): Promise<Ran> {
  const { createServer } = await import('node:http');
  const received: string[] = [];
  const echo = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c));
    req.on('end', () => {
      received.push(body);
      server.received.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body, at: Date.now() });
      res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify(answer((JSON.parse(body) as { emails: string[] }).emails)));
    });
  });
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
  try {
    server.script([]);
    return await svc(argv, [], { SVC_API_KEY: KEY, SVC_BASE_URL: `http://127.0.0.1:${(echo.address() as { port: number }).port}`, HOME: tmp });
  } finally {
    await new Promise<void>((r) => {
      echo.closeAllConnections();
      echo.close(() => r());
    });
  }
}

t.test('address files', async (t) => {
  t.strictSame(addressesOf('a@x.test\r\n b@x.test \n\nc@x.test'), ['a@x.test', 'b@x.test', 'c@x.test'], 'one per line, trimmed, blank lines skipped');
  t.strictSame(addressesOf('\uFEFFemail,name\na@x.test,"A, B"\n"b@x.test",B\n'), ['a@x.test', 'b@x.test'], 'a CSV with an email header (BOM)');
  t.strictSame(addressesOf('name\tMail\nA\ta@x.test\n', 'mail'), ['a@x.test'], '--column, ignoring case; tab-delimited');
  t.strictSame(addressesOf('n;e\n"multi\nline";a@x.test\n', 'e'), ['a@x.test'], 'a quoted line break');
  t.throws(() => addressesOf('name,email\nA,a@x.test\n', 'mail'), /no column "mail" in the header \("name", "email"\)/);
});

t.test('progress: the bar, the rate and the ETA', async (t) => {
  const job = { id: 'job_1', status: 'processing' as const, progress: { processed: 4520, total: 10000, percent: 45.2 } };
  const samples = [
    { at: 0, processed: 0 },
    { at: 1000, processed: 1000 },
    { at: 4000, processed: 4520 },
  ];
  t.strictSame(estimate(samples, 10000), { rate: 1173.3333333333333, etaSeconds: 4.670454545454546, stalledSeconds: undefined }, 'from the first sample with progress');
  t.equal(renderBar(job, samples, 100), '[#############.................]   45.2%  4,520/10,000  1,173/s  ETA 0:05  processing');
  t.equal(renderBar(job, samples.slice(0, 1), 100), '[#############.................]   45.2%  4,520/10,000  -  ETA -:--  processing', 'no ETA before progress');
  t.strictSame([clock(0), clock(65.4), clock(3725)], ['0:00', '1:05', '1:02:05']);
  let tty = '';
  let clockMs = 0;
  const bar = new ProgressReporter({ write: (s: string) => (tty += s), isTTY: true, columns: 80 }, () => clockMs);
  bar.update({ ...job, progress: { processed: 0, total: 10000, percent: 0 } } as never);
  clockMs = 2000;
  bar.update({ ...job, progress: { processed: 10000, total: 10000, percent: 100 }, status: 'completed' } as never);
  bar.done();
  t.equal(tty, '\r[....................]    0.0%  0/10,000  -  ETA -:--  processing\x1b[K\r[####################]  100.0%  10,000/10,000  5,000/s  ETA 0:00  completed\x1b[K\n', 'redrawn in place on a terminal');
  let log = '';
  const lines = new ProgressReporter({ write: (s: string) => (log += s), isTTY: false }, () => clockMs);
  for (const p of [0, 5, 12, 18, 100]) lines.update({ ...job, progress: { processed: p * 100, total: 10000, percent: p } } as never);
  t.strictSame(log.trim().split('\n').map((l) => l.split(' ')[2]), ['0/10,000', '1,200/10,000', '10,000/10,000'], 'plain lines at each 10% step (0, 12, 100), not at every read');
  const done = { id: 'job_1', status: 'completed', progress: { processed: 3, total: 3, percent: 100 }, created_at: '2026-01-01T00:00:00.000Z', completed_at: '2026-01-01T00:00:02.500Z', credit_reservation: { finalized: true }, results: { total_rows: 4, unique_emails: 3, valid: 1, valid_role_based: 1, risky: 0, invalid: 1, unknown: 0, credits_reserved: 3, credits_charged: 1, credits_refunded: 2 } };
  t.equal(jobSummary(done as never), 'job_1 completed in 2.5 s: 4 rows, 3 unique, 3/3 validated\n  valid 1, valid_role_based 1, risky 0, invalid 1, unknown 0\n  credits: 3 reserved, 1 charged, 2 refunded\n  results: svc job download job_1 --output results.csv\n');
});

t.test('progress: a stall (greylisted addresses waiting for their re-probe) shows how long, not an ETA', async (t) => {
  // 600 addresses a second for 10 s (the first read, at 0, before any progress), then the count
  // stays at 6,000 of 6,505 for 13 s while the rest wait for their re-probe, then completes.
  const TOTAL = 6505;
  const reads: Sample[] = [];
  for (let s = 0; s <= 10; s++) reads.push({ at: s * 1000, processed: 600 * s });
  for (let s = 11; s <= 22; s++) reads.push({ at: s * 1000, processed: 6000 });
  reads.push({ at: 23_000, processed: TOTAL });
  const job = (processed: number) => ({ status: processed === TOTAL ? ('completed' as const) : ('processing' as const), progress: { processed, total: TOTAL, percent: (processed * 100) / TOTAL } });
  const barAt = (second: number): string => {
    const upTo = reads.filter((r) => r.at <= second * 1000);
    return renderBar(job(upTo.at(-1)!.processed), upTo, 100);
  };
  const BAR = '[###########################...]   92.2%  6,000/6,505';
  t.strictSame(
    [10, 11, 12, 13, 14, 15, 16, 22].map(barAt),
    [
      `${BAR}  600/s  ETA 0:01  processing`, // the last progress: 505 left at 600/s
      `${BAR}  540/s  ETA 0:01  processing`, // still 1 s: the rate counts the time without progress, the ETA does not count down
      `${BAR}  491/s  ETA 0:01  processing`,
      `${BAR}  450/s  ETA 0:01  processing`,
      `${BAR}  415/s  ETA 0:01  processing`,
      `${BAR}  386/s  idle 0:05  processing`, // STALL_MS without progress: no ETA is claimed
      `${BAR}  360/s  idle 0:06  processing`,
      `${BAR}  257/s  idle 0:12  processing`,
    ],
    'ETA 0:01 while the count moved within 5 s, then the time since it last moved',
  );
  t.equal(barAt(23), '[##############################]  100.0%  6,505/6,505  268/s  ETA 0:00  completed', 'done: ETA 0:00');
  t.equal(STALL_MS, 5000);
  const upTo = (second: number) => reads.filter((r) => r.at <= second * 1000);
  t.strictSame(estimate(upTo(14), TOTAL), { rate: 5400 / 13, etaSeconds: (505 * 13) / 5400, stalledSeconds: undefined }, '4 s without progress: still an estimate, grown with the wait');
  t.strictSame(estimate(upTo(22), TOTAL), { rate: 5400 / 21, etaSeconds: undefined, stalledSeconds: 12 }, '12 s without progress: stalled, no ETA');
  t.strictSame(estimate([{ at: 0, processed: 0 }, { at: 60_000, processed: 0 }], TOTAL), { rate: undefined, etaSeconds: undefined, stalledSeconds: undefined }, 'a queued job (no progress yet) is not stalled: ETA -:--');
  t.equal(renderLine({ id: 'job_1', ...job(6000) }, upTo(22)), 'job_1 processing 6,000/6,505 (92.2%) no progress for 0:12', 'the plain line says it too');
  t.equal(renderLine({ id: 'job_1', ...job(6000) }, upTo(12)), 'job_1 processing 6,000/6,505 (92.2%) ETA 0:01');

  // The reporter over a longer stall: past the 30 s rate window the rate is gone ("-"), and the
  // time since the count moved is still counted from the read where it was first seen.
  let tty = '';
  let now = 0;
  const bar = new ProgressReporter({ write: (s: string) => (tty += s), isTTY: true, columns: 100 }, () => now);
  for (let s = 0; s <= 45; s++) {
    now = s * 1000;
    bar.update({ id: 'job_1', ...job(Math.min(600 * s, 6000)) } as never);
  }
  const frames = tty.split('\r').filter(Boolean).map((f) => f.replace(/\x1b\[K$/, ''));
  t.equal(frames.length, 46);
  t.equal(frames[45], `${BAR}  -  idle 0:35  processing`, '35 s without progress: no rate in the window, idle 0:35');
  t.equal(frames[40], `${BAR}  -  idle 0:30  processing`);
  t.equal(frames[39], `${BAR}  20/s  idle 0:29  processing`, 'the window (from 9 s) still holds progress: 600 in 30 s');
});
