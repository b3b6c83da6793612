// Benchmark: importing 10,000 outcome rows (target: "in under 2 s in the embedded profile"),
// JSON and CSV, over HTTP to the embedded service in its own process (PGlite store), as a user
// would send them. Each request is a fresh set of event identities, so every row is parsed,
// labelled, stored and (for the hard bounces, complaints and unsubscribes) suppressed: nothing is
// a duplicate. Rows mix a full RFC 3464 DSN (hard bounces), flat DSN keys (soft and policy
// bounces), replies, complaints, unsubscribes and opens.
//
// Baseline in the same run: the same rows labelled by the parser alone in this process
// (parseOutcomeRow, no HTTP and no store): the ratio says what HTTP, storage and suppression add.
//
//   node --import tsx bench/outcomes/import.ts

import { pathToFileURL } from 'node:url';
import { parseOutcomeRow } from '@svc/outcomes';
import type { BenchResult, Row } from '../lib/result.ts';
import { fmt } from '../lib/stats.ts';
import { startChild, type Child } from '../lib/children.ts';

export const NAME = 'outcomes/import';
const ROWS = 10_000;
const TARGET_S = 2;
const KEY = 'svc_test_benchOutcomesImport000000001';
const RUNS = 3;

const CSV_COLUMNS = ['email', 'outcome', 'source', 'external_id', 'occurred_at', 'action', 'smtp_enhanced_code', 'diagnostic_code', 'dsn_message'] as const;

function dsn(email: string, at: string): string {
  return [
    'Reporting-MTA: dns; mx.bench.example',
    `Arrival-Date: ${at}`,
    '',
    `Final-Recipient: rfc822; ${email}`,
    'Action: failed',
    'Status: 5.1.1',
    'Remote-MTA: dns; mx.bench.example',
    'Diagnostic-Code: smtp; 550 5.1.1 <recipient> User unknown (in reply to RCPT TO)',
    `Last-Attempt-Date: ${at}`,
    '',
  ].join('\r\n');
}

/** RFC 822 date of `d` in UTC with a weekday. */
function rfc822(d: Date): string {
  const day = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'][d.getUTCDay()];
  const mon = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'][d.getUTCMonth()];
  const p = (n: number) => String(n).padStart(2, '0');
  return `${day}, ${d.getUTCDate()} ${mon} ${d.getUTCFullYear()} ${p(d.getUTCHours())}:${p(d.getUTCMinutes())}:${p(d.getUTCSeconds())} +0000`;
}

export function makeRows(run: string, n = ROWS): Array<Record<string, string>> {
  const when = new Date(Date.now() - 3_600_000);
  const at = when.toISOString();
  const at822 = rfc822(when);
  const rows: Array<Record<string, string>> = [];
  for (let i = 0; i < n; i++) {
    const email = `person${i}@domain${i % 500}.bench.example`;
    const base = { email, source: 'smtp_log', external_id: `${run}-${i}`, occurred_at: at };
    switch (i % 10) {
      case 0:
      case 1:
      case 2:
      case 3:
        rows.push({ ...base, outcome: 'bounced', dsn_message: dsn(email, at822) });
        break;
      case 4:
        rows.push({ ...base, outcome: 'bounced', action: 'delayed', smtp_enhanced_code: '4.2.2', diagnostic_code: 'smtp; 452 4.2.2 Mailbox full' });
        break;
      case 5:
        rows.push({ ...base, outcome: 'bounced', action: 'failed', smtp_enhanced_code: '5.7.1', diagnostic_code: 'smtp; 550 5.7.1 Message rejected as spam' });
        break;
      case 6:
      case 7:
        rows.push({ ...base, outcome: 'replied' });
        break;
      case 8:
        rows.push({ ...base, outcome: i % 20 === 8 ? 'complaint' : 'unsubscribed' });
        break;
      default:
        rows.push({ ...base, outcome: 'opened' });
    }
  }
  return rows;
}

const cell = (v: string | undefined): string => (v === undefined ? '' : /[",\r\n]/.test(v) ? `"${v.replace(/"/g, '""')}"` : v);
export const toCsv = (rows: Array<Record<string, string>>): string => [CSV_COLUMNS.join(','), ...rows.map((r) => CSV_COLUMNS.map((c) => cell(r[c])).join(','))].join('\r\n') + '\r\n';

interface Timed {
  seconds: number;
  body: Record<string, unknown>;
}

async function post(url: string, body: string, type: string): Promise<Timed> {
  const t0 = performance.now();
  const res = await fetch(`${url}/v1/outcomes/email/import`, { method: 'POST', headers: { 'x-api-key': KEY, 'content-type': type }, body, signal: AbortSignal.timeout(60_000) });
  const json = (await res.json()) as Record<string, unknown>;
  const seconds = (performance.now() - t0) / 1000;
  if (res.status !== 200) throw new Error(`import: ${res.status} ${JSON.stringify(json).slice(0, 300)}`);
  if (json.accepted !== ROWS) throw new Error(`import accepted ${String(json.accepted)} of ${ROWS}: ${JSON.stringify((json.errors as unknown[])?.slice(0, 3))}`);
  return { seconds, body: json };
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

export async function run(): Promise<BenchResult> {
  const warnings: string[] = [];
  let svc: Child<{ url: string }> | undefined;
  try {
    svc = await startChild<{ url: string }>('api/service-child.ts', {
      env: {
        PORT: '0',
        HOST: '127.0.0.1',
        SVC_DATA_DIR: '',
        DATABASE_URL: '',
        REDIS_URL: '',
        KAFKA_BROKERS: '',
        CLICKHOUSE_URL: '',
        // No validation runs here: DNS and SMTP point nowhere.
        SVC_DNS_SERVERS: '127.0.0.1:9',
        SVC_LOG_LEVEL: 'silent',
        SVC_BOOTSTRAP_API_KEY: KEY,
        SVC_BOOTSTRAP_CREDITS: '0',
        SVC_RATE_LIMIT_PER_KEY: '10000000',
        SVC_RATE_LIMIT_PER_IP: '10000000',
      },
    });
    const url = svc.info.url;
    // Warm-up: JIT of the parser and the routes, PGlite's first statements.
    await post(url, JSON.stringify({ outcomes: makeRows('warm-json') }), 'application/json');
    await post(url, toCsv(makeRows('warm-csv')), 'text/csv');

    const json: Timed[] = [];
    const csv: Timed[] = [];
    const parserOnly: number[] = [];
    for (let r = 0; r < RUNS; r++) {
      const rows = makeRows(`json-${r}`);
      const body = JSON.stringify({ outcomes: rows });
      json.push(await post(url, body, 'application/json'));
      csv.push(await post(url, toCsv(makeRows(`csv-${r}`)), 'text/csv'));
      const now = new Date();
      const t0 = performance.now();
      const parsed = (JSON.parse(body) as { outcomes: unknown[] }).outcomes.map((row) => parseOutcomeRow(row, { now }));
      parserOnly.push((performance.now() - t0) / 1000);
      if (parsed.some((p) => !p.ok)) throw new Error('the parser refused a benchmark row');
    }
    const jsonS = median(json.map((x) => x.seconds));
    const csvS = median(csv.map((x) => x.seconds));
    const parseS = median(parserOnly);
    const sample = json[0]!.body;
    const rows: Row[] = [
      { bench: NAME, metric: 'JSON import of 10,000 rows', value: jsonS, unit: 's', baseline: { label: 'parser alone', value: parseS }, ratio: jsonS / parseS, target: `< ${TARGET_S} s`, pass: jsonS < TARGET_S },
      { bench: NAME, metric: 'CSV import of 10,000 rows', value: csvS, unit: 's', baseline: { label: 'parser alone', value: parseS }, ratio: csvS / parseS, target: `< ${TARGET_S} s`, pass: csvS < TARGET_S },
    ];
    return {
      name: NAME,
      rows,
      details: [
        `${ROWS.toLocaleString('en-US')} rows per request, fresh event ids each time (nothing is a duplicate); median of ${RUNS} requests each, after one warm-up of each kind. Rows: 40% hard bounces with a whole RFC 3464 DSN, 10% mailbox-full delays, 10% 5.7.1 policy bounces, 20% replies, 10% complaints/unsubscribes, 10% opens.`,
        '',
        '| request | runs (s) | median (s) | rows/s |',
        '|---|---|---|---|',
        `| JSON (${fmt(Buffer.byteLength(JSON.stringify({ outcomes: makeRows('size') })) / 2 ** 20)} MiB) | ${json.map((x) => fmt(x.seconds)).join(', ')} | ${fmt(jsonS)} | ${fmt(ROWS / jsonS)} |`,
        `| CSV (${fmt(Buffer.byteLength(toCsv(makeRows('size'))) / 2 ** 20)} MiB) | ${csv.map((x) => fmt(x.seconds)).join(', ')} | ${fmt(csvS)} | ${fmt(ROWS / csvS)} |`,
        `| parser alone, in process (baseline) | ${parserOnly.map(fmt).join(', ')} | ${fmt(parseS)} | ${fmt(ROWS / parseS)} |`,
        '',
        `One JSON response: accepted ${String(sample.accepted)}, suppressed ${String(sample.suppressed)} (complaints ${String(sample.complaints_suppressed)}, unsubscribes ${String(sample.unsubscribed_suppressed)}), suppression_cache_invalidated ${String(sample.suppression_cache_invalidated)}.`,
      ],
      warnings,
    };
  } finally {
    await svc?.stop();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const r = await run();
  console.log(r.rows.map((x) => `${x.metric}: ${fmt(x.value)} ${x.unit} (baseline ${x.baseline?.label} ${fmt(x.baseline?.value ?? 0)}; ratio ${fmt(x.ratio ?? 0)}; target ${x.target}: ${x.pass ? 'pass' : 'FAIL'})`).join('\n'));
  console.log(r.details.join('\n'));
}
