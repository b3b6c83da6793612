// The commands of `svc`: each reads its arguments, calls the client, and prints either lines for
// people or, with --json, exactly one JSON document on stdout. `find` and `enrich` also take a
// CSV file and write it back with the answers' columns added.

import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { MAX_COMPANIES_PER_REQUEST, MAX_CONTACTS_PER_REQUEST, SvcApiError, type BulkValidationResponse, type CompanyEnrichment, type CompanyToEnrich, type ContactToFind, type FindResult, type Job, type OutcomeRow, type ValidationResult, type WriteOptions } from '@svc/client';
import { inBatches, type BatchOutcome } from './batches.ts';
import type { Command, Context } from './context.ts';
import { addressesOf, columnIndex, formatCsv, guessColumn, readTable, type Cell, type Table } from './csv.ts';
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

// ------------------------------------------------------------------------------------------------
// Data: `svc find` and `svc enrich` (docs/api.md "Data endpoints"). One contact or company from
// the arguments, or a CSV file in and the same rows out, in order, with the answer's columns
// added: to --out, or to stdout.

/** Requests of one file in flight at once (each bulk request also bounds its own work on the service). */
const DATA_PARALLEL = 4;
/**
 * The most one request of a file may take, its retries and waits included: long enough to wait
 * out a 429's `retry_after` (60 s; the bulk company route takes 100 requests a minute per key),
 * so a long file slows down to the limit instead of stopping at it.
 */
const BATCH_DEADLINE_MS = 180_000;

// Column names tried when the option does not name one, in order; case, spaces, `_`, `-` and `.`
// do not matter (csv.ts guessColumn).
const FIRST_NAME_COLUMNS = ['first_name', 'firstname', 'first', 'given_name', 'fname', 'forename'];
const LAST_NAME_COLUMNS = ['last_name', 'lastname', 'last', 'surname', 'family_name', 'lname'];
const DOMAIN_COLUMNS = ['domain', 'company_domain', 'website', 'company_website', 'website_url', 'email_domain', 'url', 'web', 'site', 'homepage'];
const COMPANY_COLUMNS = ['company', 'company_name', 'organization', 'organisation', 'organization_name', 'account', 'account_name', 'employer'];

/** The options that only mean something with --file. */
const FILE_ONLY = ['first-name-column', 'last-name-column', 'domain-column', 'company-column', 'out', 'output'];

/** Checks the two forms: the arguments (exactly `names`) or --file, not both; answers the file, if any. */
function dataForm(ctx: Context, command: string, names: readonly string[]): string | undefined {
  const file = ctx.values.file;
  if (typeof file === 'string') {
    if (ctx.args.length > 0) throw new CliError(EXIT.usage, `${command} takes ${names.join(' ')} or --file FILE, not both; see: svc ${command} --help`);
    return file;
  }
  if (ctx.args.length !== names.length) throw new CliError(EXIT.usage, `${command} takes ${names.join(' ')} (got ${ctx.args.length} argument${ctx.args.length === 1 ? '' : 's'}), or --file FILE; see: svc ${command} --help`);
  const stray = FILE_ONLY.find((o) => ctx.values[o] !== undefined);
  if (stray !== undefined) throw new CliError(EXIT.usage, `--${stray} goes with --file FILE; see: svc ${command} --help`);
  return undefined;
}

/** The write options of a call: --idempotency-key as given, or with `:N` for the file's N-th request. */
function keyOf(ctx: Context, batch?: number): WriteOptions {
  const key = ctx.values['idempotency-key'];
  if (typeof key !== 'string') return {};
  return { idempotencyKey: batch === undefined ? key : `${key}:${batch}` };
}

async function readTableFile(ctx: Context, file: string): Promise<Table> {
  const text = (await readInput(ctx, file)).toString('utf8');
  let table: Table;
  try {
    table = readTable(text);
  } catch (err) {
    throw new CliError(EXIT.badInput, `${file}: ${(err as Error).message}`);
  }
  if (table.rows.length === 0) throw new CliError(EXIT.badInput, `${file}: no rows under the header`);
  return table;
}

const headerList = (header: readonly string[]): string => header.map((h) => JSON.stringify(h)).join(', ');

/** The column an option names (it must exist), else the first of `names` the header has. */
function pickColumn(ctx: Context, file: string, table: Table, option: string, names: readonly string[]): number | undefined {
  const named = ctx.values[option];
  if (typeof named !== 'string') return guessColumn(table.header, names);
  const i = columnIndex(table.header, named);
  if (i === undefined) throw new CliError(EXIT.badInput, `${file}: no column ${JSON.stringify(named)} (--${option}) in the header (${headerList(table.header)})`);
  return i;
}

function noColumn(file: string, table: Table, what: string, names: readonly string[], option: string): CliError {
  return new CliError(EXIT.badInput, `${file}: no ${what} column (looked for ${names.join(', ')}; any case, spaces for _); name it with --${option} (the header: ${headerList(table.header)})`);
}

function failureText(err: unknown): string {
  if (err instanceof SvcApiError) return `${err.status}${err.code ? ` ${err.code}` : ''}: ${err.message}`;
  return (err as Error)?.message ?? String(err);
}

/** What one request of a file answers: the results in the order of its rows, and its counters. */
interface BatchAnswer<R> {
  results?: R[];
  summary?: Record<string, unknown>;
}

interface FileSpec<R> {
  /** What a row is: `contacts`, `companies`. */
  noun: string;
  /** Rows per request (the route's limit). */
  size: number;
  send(rows: string[][], batch: number): Promise<BatchAnswer<R>>;
  /** The columns added after the input's. */
  columns: readonly string[];
  cells(result: R): Record<string, Cell>;
  /** The summary's counters, summed over the requests. */
  counters: readonly string[];
  summaryLine(total: number, s: Record<string, number>): string;
}

/**
 * A file through the batch runner: progress on stderr as a job's (a bar on a terminal), then the
 * CSV (the input rows, in order, with `spec.columns` added) to --out or stdout, and the summary
 * (stderr; with --json one document on stdout: `results`, `summary`, `out`). When a request
 * fails, the rows already answered are still written (they may have been charged), the others
 * say "not processed" in `error`, and the failure decides the exit code; when none was answered,
 * nothing is written.
 */
async function runFile<R>(ctx: Context, file: string, table: Table, spec: FileSpec<R>): Promise<ExitCode> {
  const total = table.rows.length;
  const showProgress = ctx.io.stderr.isTTY || !ctx.json;
  const reporter = new ProgressReporter(ctx.io.stderr, ctx.io.now);
  const progress = (processed: number): void => {
    if (showProgress) reporter.update({ id: file, status: processed === total ? 'completed' : 'processing', progress: { processed, total, percent: (processed * 100) / total } });
  };
  progress(0);
  let outcome: BatchOutcome<BatchAnswer<R>>;
  try {
    outcome = await inBatches(table.rows, spec.size, DATA_PARALLEL, (rows, i) => spec.send(rows, i), progress);
  } finally {
    reporter.done();
  }
  const results: Array<R | null> = [];
  const summary: Record<string, number> = Object.fromEntries(spec.counters.map((k) => [k, 0]));
  let answered = 0;
  outcome.answers.forEach((answer, b) => {
    const rows = Math.min(spec.size, total - b * spec.size);
    if (answer) answered += rows;
    for (let j = 0; j < rows; j++) results.push(answer?.results?.[j] ?? null);
    for (const k of spec.counters) summary[k]! += Number(answer?.summary?.[k] ?? 0);
  });
  if (outcome.failure !== undefined && answered === 0) throw outcome.failure;
  const notProcessed = outcome.failure === undefined ? 'no result' : `not processed: ${failureText(outcome.failure)}`;
  const lines = table.rows.map((row, i) => {
    const r = results[i];
    const cells = r === null || r === undefined ? { error: notProcessed } : spec.cells(r);
    return [...row, ...spec.columns.map((c) => cells[c])];
  });
  const csv = formatCsv([[...table.header, ...spec.columns], ...lines], table.bom);
  const raw = ctx.values.out ?? ctx.values.output;
  const outFile = typeof raw === 'string' ? raw : undefined;
  if (outFile !== undefined) {
    try {
      await writeFile(path.resolve(ctx.io.cwd, outFile), csv);
    } catch (err) {
      throw new CliError(EXIT.badInput, `cannot write ${outFile}: ${(err as Error).message}`);
    }
  } else if (!ctx.json) ctx.io.stdout.write(ctx.io.stdout.isTTY ? printableLines(csv) : csv);
  if (outcome.failure !== undefined) {
    if (!ctx.json) ctx.io.stderr.write(`svc: ${n(answered)} of ${n(total)} ${spec.noun} were processed (and charged for what was found) before this error${outFile !== undefined ? `; ${outFile} has them` : ''}; the others say "not processed"\n`);
    throw outcome.failure;
  }
  if (ctx.json) out(ctx, { results, summary, ...(outFile !== undefined ? { out: outFile } : {}) }, '');
  else ctx.io.stderr.write(`${spec.summaryLine(total, summary)}${outFile !== undefined ? `${outFile}: ${n(total)} rows\n` : ''}`);
  return EXIT.ok;
}

/** The columns `svc find --file` adds (and, with --validate, FIND_VALIDATION_COLUMNS). */
export const FIND_COLUMNS = ['email', 'confidence', 'pattern', 'source', 'not_found', 'credits_charged', 'error'] as const;
export const FIND_VALIDATION_COLUMNS = ['validation_result', 'validation_reason_code'] as const;

function findCells(r: FindResult): Record<string, Cell> {
  return {
    email: r.email,
    confidence: r.confidence,
    pattern: r.pattern,
    source: r.source_provider,
    not_found: r.not_found,
    credits_charged: r.credits_charged,
    error: r.error,
    validation_result: r.validation?.result,
    validation_reason_code: r.validation?.reason_code,
  };
}

function findLine(r: FindResult, who: string): string {
  const validation = r.validation ? `\n  validation: ${p(r.validation.result)} (${p(r.validation.reason_code)})` : '';
  if (r.email) return `${p(r.email)}: confidence ${p(r.confidence)}, pattern ${p(r.pattern)}, source ${p(r.source_provider)}, credits charged ${p(r.credits_charged)}${validation}\n`;
  return `${p(who)}: ${r.not_found ? 'not found' : 'no answer'}${r.error ? ` (${p(r.error)})` : ''}, credits charged ${p(r.credits_charged)}\n`;
}

const find: Command = {
  args: ['FIRST?', 'LAST?', 'DOMAIN?'],
  synopsis: 'FIRST LAST DOMAIN [--validate]\n--file FILE [--first-name-column NAME] [--last-name-column NAME] [--domain-column NAME] [--company-column NAME] [--validate] [--out FILE]',
  summary: 'find the email address of a person at a company (1 credit per address found)',
  details: [
    'FIRST LAST DOMAIN: one contact; prints the address with its confidence (0-100), pattern and source, or why none was found.',
    '',
    'With --file: a CSV of contacts (a header row; `,` `;` or tab), 100 per request. Every row is written back in input order with the columns email, confidence, pattern, source, not_found, credits_charged and error added (with --validate also validation_result and validation_reason_code), to --out or stdout; a summary on stderr (with --json, one document of the results and the summary instead, the CSV only to --out). The columns are found by their usual names (First Name, first_name, firstname…; Last Name, surname…; domain, website, company_domain…; company, company_name…) unless named by the options. A contact needs a domain or a company (a company the service has not seen before is not resolved).',
    '',
    'Charged: 1 credit per address found with confidence 70 or more; --validate adds the validation of each address found, and its credit when it is a High-Value Validation.',
  ].join('\n'),
  options: {
    file: { type: 'string' },
    'first-name-column': { type: 'string' },
    'last-name-column': { type: 'string' },
    'domain-column': { type: 'string' },
    'company-column': { type: 'string' },
    validate: { type: 'boolean' },
    out: { type: 'string', short: 'o' },
    output: { type: 'string' },
    'idempotency-key': { type: 'string' },
  },
  optionHelp: {
    '--file FILE': 'a CSV of contacts',
    '--first-name-column NAME': 'the column of first names',
    '--last-name-column NAME': 'the column of last names',
    '--domain-column NAME': 'the column of company domains or websites',
    '--company-column NAME': 'the column of company names (for rows without a domain)',
    '--validate': 'also validate each address found',
    '-o, --out FILE': 'write the results CSV here (or --output), not to stdout',
    '--idempotency-key KEY': 'a durable key: the same command again is answered, not charged, again (a file\u2019s requests get KEY:0, KEY:1, \u2026)',
  },
  async run(ctx) {
    const validate = ctx.values.validate === true;
    const file = dataForm(ctx, 'find', ['FIRST', 'LAST', 'DOMAIN']);
    if (file === undefined) {
      const [first_name, last_name, domain] = ctx.args as [string, string, string];
      const answer = await ctx.client.findEmails([{ first_name, last_name, domain }], { ...keyOf(ctx), validate });
      const r = answer.results?.[0];
      if (!r) throw new Error('find/bulk answered no result');
      out(ctx, r, findLine(r, `${first_name} ${last_name} at ${domain}`));
      return EXIT.ok;
    }
    const table = await readTableFile(ctx, file);
    const first = pickColumn(ctx, file, table, 'first-name-column', FIRST_NAME_COLUMNS);
    if (first === undefined) throw noColumn(file, table, 'first-name', FIRST_NAME_COLUMNS, 'first-name-column');
    const last = pickColumn(ctx, file, table, 'last-name-column', LAST_NAME_COLUMNS);
    if (last === undefined) throw noColumn(file, table, 'last-name', LAST_NAME_COLUMNS, 'last-name-column');
    const domain = pickColumn(ctx, file, table, 'domain-column', DOMAIN_COLUMNS);
    const company = pickColumn(ctx, file, table, 'company-column', COMPANY_COLUMNS);
    if (domain === undefined && company === undefined) {
      throw new CliError(EXIT.badInput, `${file}: no domain or company column (looked for ${DOMAIN_COLUMNS.join(', ')}; ${COMPANY_COLUMNS.join(', ')}; any case, spaces for _); name one with --domain-column or --company-column (the header: ${headerList(table.header)})`);
    }
    const cell = (row: string[], i: number | undefined): string | undefined => (i === undefined ? undefined : row[i]!.trim() || undefined);
    return runFile<FindResult>(ctx, file, table, {
      noun: 'contacts',
      size: MAX_CONTACTS_PER_REQUEST,
      send: (rows, batch) => {
        // Empty cells are left out: the service answers such a row with its `error`.
        const contacts: ContactToFind[] = rows.map((row) => ({ first_name: cell(row, first), last_name: cell(row, last), domain: cell(row, domain), company: cell(row, company) }));
        return ctx.client.findEmails(contacts, { ...keyOf(ctx, batch), validate, deadlineMs: BATCH_DEADLINE_MS });
      },
      columns: validate ? [...FIND_COLUMNS, ...FIND_VALIDATION_COLUMNS] : FIND_COLUMNS,
      cells: findCells,
      counters: ['total', 'found', 'not_found', 'errors', 'credits_charged'],
      summaryLine: (total, s) => `${n(total)} ${total === 1 ? 'contact' : 'contacts'}: found ${n(s.found!)}, not found ${n(s.not_found!)}, errors ${n(s.errors!)}; credits charged ${n(s.credits_charged!)}\n`,
    });
  },
};

/** The columns `svc enrich --file` adds. */
export const ENRICH_COLUMNS = ['company_name', 'description', 'website', 'employee_count', 'employee_range', 'founded_year', 'company_type', 'city', 'region', 'country', 'country_code', 'linkedin_url', 'twitter_url', 'facebook_url', 'phone', 'technologies', 'confidence', 'found', 'credits_charged', 'error'] as const;

function companyCells(r: CompanyEnrichment): Record<string, Cell> {
  return {
    company_name: r.company_name,
    description: r.description,
    website: r.website,
    employee_count: r.employee_count,
    employee_range: r.employee_range,
    founded_year: r.founded_year,
    company_type: r.company_type,
    city: r.location?.city,
    region: r.location?.region,
    country: r.location?.country,
    country_code: r.location?.country_code,
    linkedin_url: r.linkedin_url,
    twitter_url: r.twitter_url,
    facebook_url: r.facebook_url,
    phone: r.phone,
    technologies: r.technologies?.join('; '),
    confidence: r.confidence,
    found: r.found,
    credits_charged: r.credits_charged,
    error: r.error,
  };
}

function companyText(r: CompanyEnrichment): string {
  const head = `${p(r.domain)}: ${r.found ? `found, confidence ${p(r.confidence)}` : `not found${r.error ? ` (${p(r.error)})` : ''}`}, credits charged ${p(r.credits_charged)}${r.cache_hit ? ' (from the cache)' : ''}\n`;
  const cells = companyCells(r);
  const shown = ENRICH_COLUMNS.filter((c) => !['confidence', 'found', 'credits_charged', 'error'].includes(c) && cells[c] !== null && cells[c] !== undefined && cells[c] !== '');
  return head + shown.map((c) => `  ${c.padEnd(16)}${p(String(cells[c]))}\n`).join('');
}

const enrich: Command = {
  args: ['DOMAIN?'],
  synopsis: 'DOMAIN [--force-refresh]\n--file FILE [--domain-column NAME] [--force-refresh] [--out FILE]',
  summary: 'company data from a domain: name, size, place, links, technologies (1 credit if found)',
  details: [
    'DOMAIN: one company (a domain or a website URL); prints what was found, field by field.',
    '',
    `With --file: a CSV with a column of domains or websites (domain, company_domain, website…, or --domain-column), 25 per request. Every row is written back in input order with the columns ${ENRICH_COLUMNS.join(', ')} added (technologies joined with "; "), to --out or stdout; a summary on stderr (with --json, one document of the results and the summary instead, the CSV only to --out).`,
    '',
    'Charged: 1 credit per company found, answers from the 30-day cache included; nothing for a company not found.',
  ].join('\n'),
  options: { file: { type: 'string' }, 'domain-column': { type: 'string' }, 'force-refresh': { type: 'boolean' }, out: { type: 'string', short: 'o' }, output: { type: 'string' }, 'idempotency-key': { type: 'string' } },
  optionHelp: {
    '--file FILE': 'a CSV of companies',
    '--domain-column NAME': 'the column of domains or websites',
    '--force-refresh': 'read the website again rather than the cache',
    '-o, --out FILE': 'write the results CSV here (or --output), not to stdout',
    '--idempotency-key KEY': 'a durable key: the same command again is answered, not charged, again (a file\u2019s requests get KEY:0, KEY:1, \u2026)',
  },
  async run(ctx) {
    const forceRefresh = ctx.values['force-refresh'] === true;
    const file = dataForm(ctx, 'enrich', ['DOMAIN']);
    if (file === undefined) {
      const r = await ctx.client.enrichCompany(ctx.args[0]!, { ...keyOf(ctx), ...(forceRefresh ? { forceRefresh } : {}) });
      out(ctx, r, companyText(r));
      return EXIT.ok;
    }
    const table = await readTableFile(ctx, file);
    const domain = pickColumn(ctx, file, table, 'domain-column', DOMAIN_COLUMNS);
    if (domain === undefined) throw noColumn(file, table, 'domain', DOMAIN_COLUMNS, 'domain-column');
    return runFile<CompanyEnrichment>(ctx, file, table, {
      noun: 'companies',
      size: MAX_COMPANIES_PER_REQUEST,
      send: (rows, batch) => {
        // A row without a domain is sent as is: the service answers it with its `error`.
        const companies: CompanyToEnrich[] = rows.map((row) => ({ domain: row[domain]!.trim() || undefined, ...(forceRefresh ? { force_refresh: true } : {}) }));
        return ctx.client.enrichCompanies(companies, { ...keyOf(ctx, batch), deadlineMs: BATCH_DEADLINE_MS });
      },
      columns: ENRICH_COLUMNS,
      cells: companyCells,
      counters: ['total', 'found', 'not_found', 'errors', 'cache_hits', 'credits_charged'],
      summaryLine: (total, s) => `${n(total)} ${total === 1 ? 'company' : 'companies'}: found ${n(s.found!)}, not found ${n(s.not_found!)}, errors ${n(s.errors!)}, cache hits ${n(s.cache_hits!)}; credits charged ${n(s.credits_charged!)}\n`,
    });
  },
};

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
  find,
  enrich,
  'subscription cancel': subscription('cancel'),
  'subscription reactivate': subscription('reactivate'),
};
