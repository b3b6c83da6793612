// Strings from the service reach a person's terminal escaped: a job's file name with CR/LF, an
// ANSI escape sequence (ESC [ … m, ESC ] … BEL), a C1 control (U+009B, the one-byte CSI) and bidi
// overrides (U+202E, U+2066) is printed by `svc job list` as visible escapes on one line; the
// same in `job status`, `validate` (the remote SMTP reply), error messages, retries and progress.
// With --json the output is the exact JSON of what the server sent.

import t from 'tap';
import { fail, startFaultServer, type Step } from '../../../test/helpers/fault-server.ts';
import { printable, printableLines, ProgressReporter, run, type CliIO } from '../src/index.ts';

const server = await startFaultServer();
t.teardown(() => server.close());

const HOSTILE = 'q3.csv\r\nFAKE LINE\u001b[2J\u001b[31mred\u001b]0;title\u0007\u009b6n\u202eexe.txt\u2066x\u2069';
const SHOWN = 'q3.csv\\r\\nFAKE LINE\\u001b[2J\\u001b[31mred\\u001b]0;title\\u0007\\u009b6n\\u202eexe.txt\\u2066x\\u2069';
/** Anything that would act on a terminal: C0 but LF, DEL, C1, bidi controls and marks, U+2028/9. */
const ACTS = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;

const job = (over: Record<string, unknown> = {}) => ({
  id: 'job_0123456789abcdef01234567',
  status: 'completed',
  filename: HOSTILE,
  created_at: '2026-01-01T00:00:00.000Z',
  completed_at: '2026-01-01T00:00:02.000Z',
  progress: { processed: 2, total: 2, percent: 100 },
  results: { total_rows: 2, unique_emails: 2, valid: 1, valid_role_based: 0, risky: 0, invalid: 1, unknown: 0, credits_reserved: 2, credits_charged: 1, credits_refunded: 1 },
  credit_reservation: { finalized: true },
  ...over,
});

async function svc(argv: string[], script: Step[], tty = false): Promise<{ code: number; stdout: string; stderr: string }> {
  server.script(script);
  let stdout = '';
  let stderr = '';
  const io: CliIO = {
    env: { SVC_API_KEY: 'svc_test_hostileStringsKey000001', SVC_BASE_URL: server.url, HOME: '/nonexistent' },
    cwd: '/',
    stdout: { write: (s: string) => (stdout += s), isTTY: tty, columns: 100 },
    stderr: { write: (s: string) => (stderr += s), isTTY: tty, columns: 100 },
    clientOptions: { backoff: { baseMs: 1, capMs: 2 }, maxAttempts: 2 },
  };
  return { code: await run(argv, io), stdout, stderr };
}

t.test('printable: the escapes', async (t) => {
  t.equal(printable(HOSTILE), SHOWN);
  t.equal(printable('tab\there\u007f\u0085\u061c\u200e\u200f\u2028\u2029\u202a\u202b\u202c\u202d\u2067\u2068'), 'tab\\there\\u007f\\u0085\\u061c\\u200e\\u200f\\u2028\\u2029\\u202a\\u202b\\u202c\\u202d\\u2067\\u2068');
  t.equal(printable('lone \ud800 and \udc00, a pair 😀, é, 名前, a\\u001b backslash'), 'lone \\ud800 and \\udc00, a pair 😀, é, 名前, a\\u001b backslash', 'lone surrogates escaped; printable text as is');
  t.equal(printable(undefined), '');
  t.equal(printableLines('a,b\r\nc\rd\te\n\u001b[2J\u202e'), 'a,b\r\nc\\rd\te\n\\u001b[2J\\u202e', 'lines: LF, CRLF and tab pass, a lone CR does not');
});

t.test('svc job list: the file name escaped on its line; --json exact', async (t) => {
  const page = { jobs: [job(), job({ id: 'job_0123456789abcdef01234568', filename: 'plain.csv' })], next_cursor: null };
  const human = await svc(['job', 'list'], [{ status: 200, body: page }]);
  t.equal(human.code, 0);
  t.equal(
    human.stdout,
    `${'ID'.padEnd(28)}  ${'STATUS'.padEnd(15)}  ${'ROWS'.padStart(9)}  DONE  ${'CREATED'.padEnd(24)}  FILE\n` +
      `job_0123456789abcdef01234567  completed                2  100%  2026-01-01T00:00:00.000Z  ${SHOWN}\n` +
      `job_0123456789abcdef01234568  completed                2  100%  2026-01-01T00:00:00.000Z  plain.csv\n`,
  );
  t.notMatch(human.stdout, ACTS, 'nothing that acts on a terminal');
  t.equal(human.stdout.split('\n').length, 4, 'three lines: the CR/LF made none');
  const json = await svc(['--json', 'job', 'list'], [{ status: 200, body: page }]);
  t.equal(json.stdout, `${JSON.stringify({ jobs: page.jobs, next_cursor: null })}\n`, '--json: exactly the JSON of what was sent');
  t.strictSame((JSON.parse(json.stdout) as { jobs: Array<{ filename: string }> }).jobs[0]!.filename, HOSTILE, 'the name itself, unescaped, in the document');
});

t.test('job status, validate, errors, retries and progress escape what the server sent', async (t) => {
  const status = await svc(['job', 'status', 'job_0123456789abcdef01234567'], [{ status: 200, body: job({ id: 'job_x\u001b[1A', status: 'completed\r\u202e' }) }]);
  t.equal(status.stdout.split('\n')[0], 'job_x\\u001b[1A completed\\r\\u202e: 2 rows, 2 unique, 2/2 validated');
  t.notMatch(status.stdout, ACTS);

  const result = { email: 'jane@accept.test', result: 'invalid', reason_code: 'mailbox_not_found', reason: 'no\u001b[8m', did_you_mean: null, b2b_outbound_quality: 'low', credits_charged: 0, smtp_response: '550 5.1.1 gone\r\n\u001b]8;;http://evil.test\u0007click\u001b]8;;\u0007' };
  const v = await svc(['validate', 'jane@accept.test'], [{ status: 200, body: result }]);
  t.equal(v.stdout, 'jane@accept.test: invalid (mailbox_not_found) - no\\u001b[8m\n  b2b quality low, credits charged 0, smtp "550 5.1.1 gone\\r\\n\\u001b]8;;http://evil.test\\u0007click\\u001b]8;;\\u0007"\n');

  const err = await svc(['credits'], [fail(400, 'bad\u001b[31m', { message: 'line one\nsvc: a fake second line\u202e' })]);
  t.equal(err.code, 2);
  t.equal(err.stderr, 'svc: 400 bad\\u001b[31m: line one\\nsvc: a fake second line\\u202e (request req_00000000000000000000000000000001)\n', 'one line, escaped');
  const errJson = await svc(['--json', 'credits'], [fail(400, 'bad\u001b[31m', { message: 'line one\n\u202e' })]);
  t.match(JSON.parse(errJson.stdout), { error: { code: 'bad\u001b[31m', message: 'line one\n\u202e' } }, '--json keeps the exact strings');

  const retried = await svc(['credits'], [fail(503, 'busy\u001b[2K'), { status: 200, body: { balance: 1, reserved: 0, available: 1, subscription_status: 'active\u001b[5m' } }]);
  t.strictSame(retried, { code: 0, stdout: 'balance 1, reserved 0, available 1 (subscription active\\u001b[5m)\n', stderr: 'svc: 503 busy\\u001b[2K; retrying in 0.0 s\n' });

  let bar = '';
  const reporter = new ProgressReporter({ write: (s: string) => (bar += s), isTTY: true, columns: 100 }, () => 0);
  reporter.update(job({ status: 'processing\u001b[2J', progress: { processed: 1, total: 2, percent: 50 } }) as never);
  t.match(bar, /processing\\u001b\[2J\x1b\[K$/, 'the status escaped (the bar’s own erase-line stays)');
  let log = '';
  new ProgressReporter({ write: (s: string) => (log += s), isTTY: false }, () => 0).update(job({ id: 'job_\r', status: 'processing\u202e', progress: { processed: 1, total: 2, percent: 50 } }) as never);
  t.equal(log, 'job_\\r processing\\u202e 1/2 (50.0%)\n');
});

t.test('job download: exact bytes into a pipe, escaped on a terminal', async (t) => {
  const csv = 'email,note\r\na@x.test,"multi\nline"\r\nb@x.test,\u001b[2J\u202e\r\n';
  const piped = await svc(['job', 'download', 'job_0123456789abcdef01234567'], [{ status: 200, raw: csv, headers: { 'Content-Type': 'text/csv' } }]);
  t.equal(piped.stdout, csv, 'not a terminal: the CSV as sent');
  const tty = await svc(['job', 'download', 'job_0123456789abcdef01234567'], [{ status: 200, raw: csv, headers: { 'Content-Type': 'text/csv' } }], true);
  t.equal(tty.stdout, 'email,note\r\na@x.test,"multi\nline"\r\nb@x.test,\\u001b[2J\\u202e\r\n', 'a terminal: lines kept, the rest escaped');
});
