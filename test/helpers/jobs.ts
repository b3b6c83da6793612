// Helpers for the job end-to-end tests (jobs-crash, jobs-10k, cluster-10k): a seeded random
// source, inputs built from the simulated internet's table with the verdict the sim expects for
// each address (among them the 10,000-address job of every sim behaviour), the results CSV parsed
// into rows, the 2.2 counters counted from those rows, and a webhook receiver that records every
// request it gets.

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { parse } from 'csv-parse/sync';
import { RESULT_COLUMNS } from '@svc/jobs';
import { SIM_DOMAINS, SIM_GMAIL_MAILBOXES, type SimDomain } from '../sim/index.ts';

// ------------------------------------------------------------------------------------------------
// Seeded randomness

export { seededRandom } from './random.ts';

/** The seed named by `value` (an env variable, decimal or 0x hex), or a fresh random one. */
export function seedFrom(value: string | undefined): number {
  if (value !== undefined && value.trim() !== '') {
    const n = Number(value.trim());
    if (!Number.isSafeInteger(n) || n < 0 || n > 0xffffffff) throw new Error(`not a seed (0 … 2^32-1): ${value}`);
    return n;
  }
  return Math.floor(Math.random() * 0x100000000);
}

/** Shuffles `items` in place with `rand` (Fisher–Yates) and returns them. */
export function shuffle<T>(items: T[], rand: () => number): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}

// ------------------------------------------------------------------------------------------------
// Inputs with the sim's expected verdicts

/** `result/reason_code`, the shape verdicts are compared in. */
export type VerdictKey = string;

export const verdictKey = (v: { result: string; reason_code: string }): VerdictKey => `${v.result}/${v.reason_code}`;

/** An input string and, when the sim's table says, the verdict a correct verifier reaches for it. */
export interface InputEmail {
  email: string;
  expect?: VerdictKey;
}

/** The sim's domain (by its ASCII or Unicode name). */
export function simDomain(name: string): SimDomain {
  const d = SIM_DOMAINS.find((x) => x.domain === name || x.unicode === name);
  if (!d) throw new Error(`no sim domain ${name}`);
  return d;
}

/** The domain as a user would type it: the Unicode form of an IDN. */
export const typed = (d: SimDomain): string => d.unicode ?? d.domain;

/** The known personal mailboxes `jane.doe` and `john.smith` at the domain. */
export function knownAt(d: SimDomain): InputEmail[] {
  return ['jane.doe', 'john.smith'].map((local) => ({ email: `${local}@${typed(d)}`, expect: verdictKey(d.known) }));
}

/**
 * A role mailbox the sim knows (info, support, sales, admin, postmaster) at the domain: on a
 * server that accepts it as a real mailbox it is `valid_role_based/role_account`; anywhere else
 * the domain's verdict for a known mailbox stands (catch-all, disposable, refusals).
 */
export function roleAt(d: SimDomain, local: 'info' | 'support' | 'sales' | 'admin' | 'postmaster'): InputEmail {
  const expect = verdictKey(d.known) === 'valid/accepted' ? 'valid_role_based/role_account' : verdictKey(d.known);
  return { email: `${local}@${typed(d)}`, expect };
}

/**
 * `n` distinct generated local parts at the domain (`<prefix><i>`, never a mailbox the sim
 * knows): a normal server refuses them (the domain's `unknown` verdict), a catch-all or
 * disposable domain accepts them, a domain-wide behaviour gives them its verdict.
 */
export function generatedAt(d: SimDomain, n: number, prefix = 'user', from = 0): InputEmail[] {
  return Array.from({ length: n }, (_, i) => ({ email: `${prefix}${from + i}@${typed(d)}`, expect: verdictKey(d.unknown) }));
}

/** Strings that are not addresses (invalid_syntax), and where they came from. */
export const BAD_SYNTAX: readonly string[] = ['not-an-email', '@lead', 'x@', 'two@@at.test', 'a b@accept.test', 'trailing.dot.@accept.test', 'no-domain@', 'jane.doe@accept..test', '.lead@accept.test', 'x@-bad-.test'];

/**
 * The same address written another way: the domain's case changed (and for an IDN its ASCII
 * form), which intake dedupes onto the first spelling. Local parts are case-sensitive (RFC 5321),
 * so only the domain changes.
 */
export function respelled(email: string, rand: () => number): string {
  const at = email.lastIndexOf('@');
  const local = email.slice(0, at);
  let domain = email.slice(at + 1);
  const idn = SIM_DOMAINS.find((d) => d.unicode && d.unicode === domain);
  if (idn && rand() < 0.5) domain = idn.domain;
  let out = '';
  for (const c of domain) out += rand() < 0.5 ? c.toUpperCase() : c;
  if (out === domain) out = domain.toUpperCase();
  return `${local}@${out}`;
}

// ------------------------------------------------------------------------------------------------
// The 10,000-address job of every sim behaviour (jobs-10k, cluster-10k)

/**
 * Generated unknown (or, on catch-all domains, accepted) users per sim domain in the 10,000-address
 * job: every dialect of refusal, catch-all and disposable domains, greylisting (passed on the
 * re-probe) and for ever, DNS failures, dead and refusing servers, the Postfix limits, and a few
 * tarpitted addresses (each waits the SMTP timeout).
 */
export const EVERY_BEHAVIOUR_GENERATED: Readonly<Record<string, number>> = {
  'accept.test': 2000,
  'gmail.com': 800,
  'bücher.test': 400,
  'utf8.test': 200,
  'slowmx.test': 400,
  'greylist.test': 600,
  'greylist-forever.test': 40,
  'catchall.test': 800,
  'catchall-backup.test': 200,
  'mailinator.com': 400,
  'slowbanner.test': 200,
  'starttls.test': 200,
  'multimx.test': 200,
  'aonly.test': 200,
  'heloonly.test': 200,
  'multiline.test': 200,
  'usertext.test': 200,
  'badaddr553.test': 200,
  'mailboxfull.test': 100,
  'postfix.test': 300,
  'rcptlimit.test': 200,
  'rcptlimit451.test': 200,
  'connlimit.test': 200,
  'nxdomain.test': 200,
  'nullmx.test': 100,
  'nodata.test': 100,
  'servfail.test': 50,
  'timeout.test': 20,
  'alldead.test': 30,
  'banner421.test': 30,
  'dropped.test': 20,
  'policy.test': 50,
  'blocklist-text.test': 50,
  'tarpit.test': 3,
};

export interface EveryBehaviourJob {
  /** The input rows in order, each with the sim's verdict where the table says. */
  rows: InputEmail[];
  /** The same rows as the strings submitted. */
  emails: string[];
  /** Unique addresses (what intake dedupes the rows to). */
  unique: number;
}

/**
 * The 10,000-address JSON job of every sim behaviour, shuffled with `rand`: the known mailboxes
 * of every well-populated domain, EVERY_BEHAVIOUR_GENERATED users per domain, role accounts, the
 * gmail mailboxes the sim knows, a quoted local part, SMTPUTF8 (accepted and refused), a typo'd
 * domain, bad syntax; then repeats up to `totalRows`: the same address with the domain in another
 * case (or an IDN in its other form), or the same string again, each after its first occurrence.
 * The same seed gives the same job.
 */
export function everyBehaviourJob(rand: () => number, totalRows = 10_000): EveryBehaviourJob {
  const uniques: InputEmail[] = [];
  for (const [name, n] of Object.entries(EVERY_BEHAVIOUR_GENERATED)) {
    const dom = simDomain(name);
    if (n >= 100) uniques.push(...knownAt(dom)); // the known mailboxes of every well-populated domain
    uniques.push(...generatedAt(dom, n));
  }
  for (const local of ['info', 'support', 'sales', 'admin', 'postmaster'] as const) uniques.push(roleAt(simDomain('accept.test'), local));
  uniques.push(roleAt(simDomain('gmail.com'), 'info'), roleAt(simDomain('bücher.test'), 'sales'), roleAt(simDomain('postfix.test'), 'admin'));
  uniques.push(...SIM_GMAIL_MAILBOXES.map((local) => ({ email: `${local}@gmail.com`, expect: 'valid/accepted' })));
  uniques.push(
    { email: '"john..doe"@accept.test', expect: 'valid/accepted' },
    { email: 'josé@utf8.test', expect: 'valid/accepted' },
    { email: 'josé@accept.test', expect: 'invalid/smtputf8_unsupported' },
    { email: 'jane.doe@gmial.com', expect: 'invalid/nxdomain' },
  );
  uniques.push(...BAD_SYNTAX.map((email) => ({ email, expect: 'invalid/invalid_syntax' })));

  const rows: InputEmail[] = shuffle([...uniques], rand);
  while (rows.length < totalRows) {
    const u = rows[Math.floor(rand() * rows.length)]!;
    const again = u.expect === 'invalid/invalid_syntax' || rand() < 0.3 ? u.email : respelled(u.email, rand);
    const first = rows.findIndex((r) => r.email === u.email);
    rows.splice(first + 1 + Math.floor(rand() * (rows.length - first)), 0, { email: again, expect: u.expect! });
  }
  return { rows, emails: rows.map((r) => r.email), unique: uniques.length };
}

/**
 * The key intake dedupes a row on, for the tests' own count: the local part as written and the
 * domain lower-cased (an IDN in its Unicode form); a string that is not an address is its own key.
 */
export function dedupeKeyOf(row: InputEmail): string {
  const e = row.email;
  const at = e.lastIndexOf('@');
  if (at <= 0 || at === e.length - 1 || row.expect === 'invalid/invalid_syntax') return e;
  const domain = e.slice(at + 1).toLowerCase();
  const idn = SIM_DOMAINS.find((d) => d.unicode && d.domain === domain);
  return `${e.slice(0, at)}@${idn ? idn.unicode : domain}`;
}

// ------------------------------------------------------------------------------------------------
// The results CSV

export { RESULT_COLUMNS };

export type ResultRow = { email: string } & ResultCells;

/** The rows of a JSON job's results CSV (header checked), as objects. */
export function parseResults(text: string): ResultRow[] {
  const rows = parse(text, { relax_column_count: false }) as string[][];
  const header = rows[0];
  if (!header || header.join(',') !== ['email', ...RESULT_COLUMNS].join(',')) throw new Error(`unexpected header: ${header?.join(',')}`);
  return rows.slice(1).map((r) => Object.fromEntries(header.map((h, i) => [h, r[i]!])) as ResultRow);
}

/** How an input cell shows in the results CSV (formula-looking cells escaped with `'`). */
export const shownCell = (s: string): string => (/^[=+\-@\t\r]/.test(s) ? `'${s}` : s);

/** The result columns of a results-CSV row whose result columns start at `offset` (after the input columns). */
export function resultCells(cells: readonly string[], offset: number): ResultCells {
  return Object.fromEntries(RESULT_COLUMNS.map((c, i) => [c, cells[offset + i]!])) as ResultCells;
}

export type ResultCells = Record<(typeof RESULT_COLUMNS)[number], string>;

/** The 2.2 `results` a finalized job must show, counted from the rows of its first occurrences. */
export function countersFrom(firsts: readonly ResultCells[], totalRows: number): Record<string, number> {
  const count = (pred: (r: ResultCells) => boolean) => firsts.filter(pred).length;
  const by = (result: string) => count((r) => r.result === result);
  const charged = firsts.reduce((n, r) => n + Number(r.credits_charged), 0);
  return {
    total_rows: totalRows,
    unique_emails: firsts.length,
    valid: by('valid'),
    valid_role_based: by('valid_role_based'),
    invalid: by('invalid'),
    risky: by('risky'),
    unknown: by('unknown'),
    role_based: count((r) => r.is_role_based === 'true'),
    high_value: count((r) => r.charge_reason === 'high_value_validation'),
    catch_all: count((r) => r.is_catchall === 'true'),
    credits_reserved: firsts.length,
    credits_charged: charged,
    credits_consumed: charged,
    credits_refunded: firsts.length - charged,
    credits_per_high_value_validation: 1,
  };
}

// ------------------------------------------------------------------------------------------------
// A webhook receiver

export interface ReceivedHook {
  at: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export interface WebhookReceiver {
  url: string;
  received: ReceivedHook[];
  /** Resolves once at least `n` requests arrived; rejects after `ms`. */
  waitFor(n: number, ms: number): Promise<void>;
  close(): Promise<void>;
}

/** An HTTP receiver on loopback answering 204 to every POST and keeping what it got. */
export async function startWebhookReceiver(pathname = '/hooks/jobs'): Promise<WebhookReceiver> {
  const received: ReceivedHook[] = [];
  const waiters = new Set<() => void>();
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      received.push({ at: Date.now(), headers: req.headers, body });
      res.writeHead(204).end();
      for (const w of waiters) w();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}${pathname}`,
    received,
    waitFor(n, ms) {
      return new Promise<void>((resolve, reject) => {
        const check = () => {
          if (received.length < n) return;
          clearTimeout(timer);
          waiters.delete(check);
          resolve();
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`${received.length} webhook requests within ${ms} ms, wanted ${n}`));
        }, ms);
        waiters.add(check);
        check();
      });
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
