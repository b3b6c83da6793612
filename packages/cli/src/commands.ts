// The commands of `svc`: each reads its arguments, calls the client, and prints either lines for
// people or, with --json, exactly one JSON document on stdout.

import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { BulkValidationResponse, Job, OutcomeRow, ValidationResult } from '@svc/client';
import type { Command, Context } from './context.ts';
import { addressesOf } from './csv.ts';
import { CliError, EXIT, type ExitCode } from './exit.ts';
import { ProgressReporter } from './progress.ts';
import { printable as p, printableLines } from './text.ts';

export type { Command, Context } from './context.ts';

const BULK_CHUNK = 100;
const BULK_PARALLEL = 4;

const n = (x: number): string => x.toLocaleString('en-US');

function out(ctx: Context, doc: unknown, human: string): void {
  ctx.io.stdout.write(ctx.json ? `${JSON.stringify(doc)}\n` : human);
}

async function readInput(ctx: Context, file: string): Promise<Buffer> {
  try {
    return await readFile(path.resolve(ctx.io.cwd, file));
  } catch (err) {
    throw new CliError(EXIT.badInput, `cannot read ${file}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}`);
  }
}

function interval(ctx: Context): number {
  const raw = ctx.values.interval;
  if (raw === undefined) return 1000;
  const s = Number(raw);
  if (!(Number.isFinite(s) && s >= 0.05 && s <= 3600)) throw new CliError(EXIT.usage, `--interval must be a number of seconds from 0.05 to 3600, got ${JSON.stringify(raw)}`);
  return Math.round(s * 1000);
}

function positiveInt(name: string, raw: string | boolean | undefined, max: number): number | undefined {
  if (raw === undefined) return undefined;
  const v = Number(raw);
  if (!(Number.isInteger(v) && v >= 1 && v <= max)) throw new CliError(EXIT.usage, `--${name} must be an integer from 1 to ${max}, got ${JSON.stringify(raw)}`);
  return v;
}

// ------------------------------------------------------------------------------------------------
// Rendering for people: every string the service sent goes through p() (./text.ts), so a file
// name or a message cannot move the cursor, recolour, fake lines or reorder the terminal's text.

function resultLine(r: ValidationResult): string {
  const extra = [r.reason, r.did_you_mean ? `did you mean ${r.did_you_mean}` : ''].filter(Boolean).map(p).join('; ');
  return `${p(r.email)}: ${p(r.result)} (${p(r.reason_code)})${extra ? ` - ${extra}` : ''}\n  b2b quality ${p(r.b2b_outbound_quality)}, credits charged ${p(r.credits_charged)}${r.smtp_response ? `, smtp "${p(r.smtp_response)}"` : ''}\n`;
}

function seconds(job: Job): string {
  const from = Date.parse(job.created_at);
  const to = job.completed_at ? Date.parse(job.completed_at) : NaN;
  return Number.isFinite(from) && Number.isFinite(to) ? ` in ${((to - from) / 1000).toFixed(1)} s` : '';
}

export function jobSummary(job: Job): string {
  const r = job.results;
  const lines = [
    `${p(job.id)} ${p(job.status)}${FINAL.has(job.status) ? seconds(job) : ''}: ${n(r.total_rows)} rows, ${n(r.unique_emails)} unique, ${n(job.progress.processed)}/${n(job.progress.total)} validated`,
    `  valid ${n(r.valid)}, valid_role_based ${n(r.valid_role_based)}, risky ${n(r.risky)}, invalid ${n(r.invalid)}, unknown ${n(r.unknown)}`,
    `  credits: ${n(r.credits_reserved)} reserved, ${n(r.credits_charged)} charged, ${n(r.credits_refunded)} refunded${job.credit_reservation.finalized ? '' : ' (not final yet)'}`,
  ];
  if (job.status === 'completed' || job.status === 'canceled') lines.push(`  results: svc job download ${p(job.id)} --output results.csv`);
  return `${lines.join('\n')}\n`;
}

const FINAL = new Set<string>(['completed', 'failed', 'canceled']);

/** Polls the job to its end, with a progress display on stderr (unless --json on a non-terminal). */
async function waitFor(ctx: Context, id: string): Promise<ExitCode> {
  const showProgress = ctx.io.stderr.isTTY || !ctx.json;
  const reporter = new ProgressReporter(ctx.io.stderr, ctx.io.now);
  let job: Job;
  try {
    job = await ctx.client.waitForJob(id, { intervalMs: interval(ctx), ...(showProgress ? { onProgress: (j: Job) => reporter.update(j) } : {}) });
  } finally {
    reporter.done();
  }
  out(ctx, job, jobSummary(job));
  return job.status === 'completed' ? EXIT.ok : EXIT.jobNotCompleted;
}

// ------------------------------------------------------------------------------------------------
// The commands

const validate: Command = {
  args: ['ADDRESS'],
  synopsis: 'ADDRESS',
  summary: 'validate one address (1 credit if it is a High-Value Validation)',
  async run(ctx) {
    const r = await ctx.client.validate(ctx.args[0]!);
    out(ctx, r, resultLine(r));
    return EXIT.ok;
  },
};

const bulk: Command = {
  args: ['FILE'],
  synopsis: 'FILE [--column NAME]',
  summary: 'validate a file of addresses, 100 per request',
  details: 'FILE holds one address per line, or is a CSV whose header names the column (`email` by default, or --column). Prints one tab-separated line per address (address, result, reason code, credits) and a summary on stderr.',
  options: { column: { type: 'string' } },
  optionHelp: { '--column NAME': 'the CSV column holding the addresses' },
  async run(ctx) {
    const text = (await readInput(ctx, ctx.args[0]!)).toString('utf8');
    let emails: string[];
    try {
      emails = addressesOf(text, typeof ctx.values.column === 'string' ? ctx.values.column : undefined);
    } catch (err) {
      throw new CliError(EXIT.badInput, `${ctx.args[0]}: ${(err as Error).message}`);
    }
    if (emails.length === 0) throw new CliError(EXIT.badInput, `${ctx.args[0]}: no addresses`);
    const chunks: string[][] = [];
    for (let i = 0; i < emails.length; i += BULK_CHUNK) chunks.push(emails.slice(i, i + BULK_CHUNK));
    const answers: BulkValidationResponse[] = new Array(chunks.length);
    let next = 0;
    let done = 0;
    const worker = async (): Promise<void> => {
      while (next < chunks.length) {
        const i = next++;
        answers[i] = await ctx.client.validateBulk(chunks[i]!);
        done += chunks[i]!.length;
      }
    };
    try {
      await Promise.all(Array.from({ length: Math.min(BULK_PARALLEL, chunks.length) }, worker));
    } catch (err) {
      if (!ctx.json && done > 0) ctx.io.stderr.write(`svc: ${n(done)} of ${n(emails.length)} addresses were validated (and charged) before this error\n`);
      throw err;
    }
    const results = answers.flatMap((a) => a.results);
    const summary = { total: 0, valid: 0, valid_role_based: 0, risky: 0, invalid: 0, unknown: 0, credits_charged: 0 };
    for (const a of answers) for (const k of Object.keys(summary) as Array<keyof typeof summary>) summary[k] += a.summary[k];
    if (ctx.json) out(ctx, { results, summary }, '');
    else {
      ctx.io.stdout.write(results.map((r) => `${p(r.email)}\t${p(r.result)}\t${p(r.reason_code)}\t${p(r.credits_charged)}\n`).join(''));
      ctx.io.stderr.write(`${n(summary.total)} addresses: valid ${n(summary.valid)}, valid_role_based ${n(summary.valid_role_based)}, risky ${n(summary.risky)}, invalid ${n(summary.invalid)}, unknown ${n(summary.unknown)}; credits charged ${n(summary.credits_charged)}\n`);
    }
    return EXIT.ok;
  },
};

const jobCreate: Command = {
  args: [],
  synopsis: '--file FILE [--column NAME] [--filename NAME] [--wait] [--interval SECONDS] [--idempotency-key KEY]',
  summary: 'upload a CSV (or a list, one address per line) as a job',
  details: 'One credit per unique address is reserved; only High-Value Validations are charged when the job completes. With --wait, shows progress (a bar on a terminal) and the final counts; exits 7 if the job ends failed or canceled.',
  options: { file: { type: 'string' }, column: { type: 'string' }, filename: { type: 'string' }, wait: { type: 'boolean' }, interval: { type: 'string' }, 'idempotency-key': { type: 'string' } },
  optionHelp: {
    '--file FILE': 'the CSV (a header row; `,` `;` or tab) or a list of addresses',
    '--column NAME': 'the column of the addresses (default: email)',
    '--filename NAME': 'the name shown in the job (default: the file’s)',
    '--wait': 'wait for the job to finish',
    '--interval SECONDS': 'between two status reads while waiting (default 1)',
    '--idempotency-key KEY': 'a durable key: the same command again finds the same job',
  },
  async run(ctx) {
    const file = ctx.values.file;
    if (typeof file !== 'string') throw new CliError(EXIT.usage, 'job create needs --file FILE; see: svc job create --help');
    const column = typeof ctx.values.column === 'string' ? ctx.values.column : undefined;
    interval(ctx); // checked before anything is created
    let bytes: Uint8Array = await readInput(ctx, file);
    // A bare list of addresses (no header) becomes a one-column CSV.
    const head = Buffer.from(bytes.subarray(0, 4096)).toString('utf8').replace(/^\uFEFF/, '');
    const firstLine = head.split(/\r?\n/, 1)[0] ?? '';
    if (column === undefined && firstLine.includes('@')) bytes = Buffer.concat([Buffer.from('email\n'), bytes]);
    const key = ctx.values['idempotency-key'];
    const started = await ctx.client.createCsvJob(bytes, {
      emailColumn: column ?? 'email',
      filename: typeof ctx.values.filename === 'string' ? ctx.values.filename : path.basename(file),
      ...(typeof key === 'string' ? { idempotencyKey: key } : {}),
    });
    if (!ctx.values.wait) {
      out(ctx, started, `${p(started.id)} ${p(started.status)}: ${n(started.results.total_rows)} rows, ${n(started.results.unique_emails)} unique, ${n(started.results.credits_reserved)} credits reserved\n  follow it: svc job wait ${p(started.id)}\n`);
      return EXIT.ok;
    }
    if (!ctx.json) ctx.io.stderr.write(`${p(started.id)} ${p(started.status)}: ${n(started.results.total_rows)} rows, ${n(started.results.unique_emails)} unique, ${n(started.results.credits_reserved)} credits reserved\n`);
    return waitFor(ctx, started.id);
  },
};

const jobStatus: Command = {
  args: ['ID'],
  synopsis: 'ID',
  summary: 'a job’s status, counts and credits',
  async run(ctx) {
    const job = await ctx.client.getJob(ctx.args[0]!);
    out(ctx, job, jobSummary(job));
    return EXIT.ok;
  },
};

const jobWait: Command = {
  args: ['ID'],
  synopsis: 'ID [--interval SECONDS]',
  summary: 'wait for a job to finish, with progress',
  details: 'Exits 0 when the job completed, 7 when it failed or was canceled.',
  options: { interval: { type: 'string' } },
  optionHelp: { '--interval SECONDS': 'between two status reads (default 1)' },
  run: (ctx) => waitFor(ctx, ctx.args[0]!),
};

const jobDownload: Command = {
  args: ['ID'],
  synopsis: 'ID [--output FILE] [--segment valid,risky,…]',
  summary: 'the results CSV of a job (stdout, or --output); with --json its signed URL',
  options: { output: { type: 'string', short: 'o' }, segment: { type: 'string' } },
  optionHelp: { '-o, --output FILE': 'write the CSV here instead of stdout', '--segment LIST': 'only these results: valid, valid_role_based, risky, invalid, unknown' },
  async run(ctx) {
    const segment = typeof ctx.values.segment === 'string' ? ctx.values.segment.split(',').map((s) => s.trim()) : undefined;
    const opts = segment ? { segment } : {};
    if (ctx.json) {
      out(ctx, await ctx.client.getDownloadUrl(ctx.args[0]!, opts), '');
      return EXIT.ok;
    }
    const csv = await ctx.client.download(ctx.args[0]!, opts);
    const output = ctx.values.output;
    if (typeof output === 'string') {
      await writeFile(path.resolve(ctx.io.cwd, output), csv);
      ctx.io.stderr.write(`${output}: ${n(Buffer.byteLength(csv))} bytes\n`);
    } else ctx.io.stdout.write(ctx.io.stdout.isTTY ? printableLines(csv) : csv); // the exact bytes into a pipe or file; on a terminal, nothing that acts on it
    return EXIT.ok;
  },
};

const jobCancel: Command = {
  args: ['ID'],
  synopsis: 'ID',
  summary: 'cancel a queued or processing job (done rows are charged, the rest refunded)',
  async run(ctx) {
    const job = await ctx.client.cancelJob(ctx.args[0]!);
    out(ctx, job, jobSummary(job));
    return EXIT.ok;
  },
};

const jobList: Command = {
  args: [],
  synopsis: '[--limit N] [--status STATE] [--all]',
  summary: 'the account’s jobs, newest first',
  options: { limit: { type: 'string' }, status: { type: 'string' }, all: { type: 'boolean' } },
  optionHelp: { '--limit N': 'jobs per page, 1-100 (default 20)', '--status STATE': 'awaiting_upload, queued, processing, completed, failed or canceled', '--all': 'every page' },
  async run(ctx) {
    const limit = positiveInt('limit', ctx.values.limit, 100);
    const status = ctx.values.status as Job['status'] | undefined;
    const query = { ...(limit !== undefined ? { limit } : {}), ...(status !== undefined ? { status } : {}) };
    let jobs: Job[];
    let nextCursor: string | null = null;
    if (ctx.values.all) {
      jobs = [];
      for await (const j of ctx.client.iterateJobs(query)) jobs.push(j);
    } else {
      const page = await ctx.client.listJobs(query);
      jobs = page.jobs;
      nextCursor = page.next_cursor;
    }
    const rows = jobs.map((j) => `${p(j.id).padEnd(28)}  ${p(j.status).padEnd(15)}  ${n(j.results.total_rows).padStart(9)}  ${`${j.progress.percent.toFixed(0)}%`.padStart(4)}  ${p(j.created_at)}  ${p(j.filename)}`);
    out(ctx, { jobs, next_cursor: nextCursor }, `${['ID'.padEnd(28), 'STATUS'.padEnd(15), 'ROWS'.padStart(9), 'DONE', 'CREATED'.padEnd(24), 'FILE'].join('  ')}\n${rows.map((r) => `${r}\n`).join('')}`);
    return EXIT.ok;
  },
};

const credits: Command = {
  args: [],
  synopsis: '',
  summary: 'the credit balance of the key’s account',
  async run(ctx) {
    const c = await ctx.client.getCredits();
    const r = c as unknown as Record<string, unknown>;
    out(ctx, c, `balance ${n(Number(r.balance))}, reserved ${n(Number(r.reserved))}, available ${n(Number(r.available))}${r.subscription_status ? ` (subscription ${p(String(r.subscription_status))})` : ''}\n`);
    return EXIT.ok;
  },
};

const outcomesImport: Command = {
  args: ['FILE'],
  synopsis: 'FILE',
  summary: 'import delivery outcomes from a JSON or CSV file (free)',
  details: 'JSON: an array of rows or {"outcomes": [...]}; CSV: a header row naming the fields (email, outcome, source, external_id, occurred_at, …). Up to 10,000 rows.',
  async run(ctx) {
    const text = (await readInput(ctx, ctx.args[0]!)).toString('utf8').replace(/^\uFEFF/, '');
    let payload: readonly OutcomeRow[] | { csv: string };
    if (/^\s*[[{]/.test(text)) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch (err) {
        throw new CliError(EXIT.badInput, `${ctx.args[0]}: not valid JSON: ${(err as Error).message}`);
      }
      const rows = Array.isArray(parsed) ? parsed : (parsed as { outcomes?: unknown }).outcomes;
      if (!Array.isArray(rows)) throw new CliError(EXIT.badInput, `${ctx.args[0]}: expected an array of outcome rows or {"outcomes": [...]}`);
      payload = rows as OutcomeRow[];
    } else payload = { csv: text };
    const r = await ctx.client.importOutcomes(payload);
    const errors = r.errors.map((e) => `  row ${p(e.index)}: ${p(e.code)}: ${p(e.reason)}\n`).join('');
    out(ctx, r, `received ${n(r.received)}, accepted ${n(r.accepted)}, duplicates ${n(r.duplicates)}, skipped ${n(r.skipped_invalid)}, suppressed ${n(r.suppressed)}\n${errors}`);
    return EXIT.ok;
  },
};

const subscription = (action: 'cancel' | 'reactivate'): Command => ({
  args: [],
  synopsis: '',
  summary: action === 'cancel' ? 'cancel the subscription at the end of the period' : 'undo a pending cancellation',
  async run(ctx) {
    const s = action === 'cancel' ? await ctx.client.cancelSubscription() : await ctx.client.reactivateSubscription();
    out(ctx, s, `${p(s.subscription_id)}: ${p(s.status)}, cancel at period end ${p(String(s.cancel_at_period_end))} (${p(s.current_period_end)})${s.message ? `\n  ${p(s.message)}` : ''}\n`);
    return EXIT.ok;
  },
});

export const COMMANDS: Record<string, Command> = {
  validate,
  bulk,
  'job create': jobCreate,
  'job status': jobStatus,
  'job wait': jobWait,
  'job download': jobDownload,
  'job cancel': jobCancel,
  'job list': jobList,
  credits,
  'outcomes import': outcomesImport,
  'subscription cancel': subscription('cancel'),
  'subscription reactivate': subscription('reactivate'),
};
