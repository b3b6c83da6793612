// Operator commands (npm run admin -- …). They run against the store directly, or, when the
// embedded service holds the data directory, through its admin socket (a Unix socket in the
// data directory, mode 0600), so the one process that owns PGlite does the work.

import { chmodSync, existsSync, unlinkSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { openStore, type KeyListing, type Store } from '@svc/store';
import { isScope, JOB_STATES, SCOPES, type JobState } from '@svc/contracts';
import { LocalProcessor, SubscriptionService } from '@svc/billing';
import { DEFAULT_SECRET_GRACE_S, listWebhookSecrets, MAX_SECRET_GRACE_S, rotateWebhookSecret } from '@svc/jobs';
import { hidePassword, type Config } from './config.ts';

export interface AdminResult {
  /** 0 done, 1 refused or not found, 2 a usage error. */
  code: number;
  out: string;
}

type Values = {
  credits?: string;
  amount?: string;
  name?: string;
  account?: string;
  scopes?: string;
  unrestricted?: boolean;
  enable?: boolean;
  disable?: boolean;
  kind?: string;
  expires?: string;
  limit?: string;
  status?: string;
  plan?: string;
  'grace-seconds'?: string;
  help?: boolean;
};

interface Command {
  noun: string;
  verb: string;
  /** After `admin <noun> <verb>`. */
  synopsis: string;
  about: string;
  /** The options it takes, with their help lines (`--amount` is an old alias of `--credits`). */
  options: Array<[flag: string, help: string]>;
  /** The name of its one positional argument, if it takes one. */
  arg?: string;
  run(store: Store, v: Values, arg: string | undefined, onKeyChange: () => void): Promise<AdminResult>;
}

const OPTIONS = {
  credits: { type: 'string' },
  amount: { type: 'string' },
  name: { type: 'string' },
  account: { type: 'string' },
  scopes: { type: 'string' },
  unrestricted: { type: 'boolean' },
  enable: { type: 'boolean' },
  disable: { type: 'boolean' },
  kind: { type: 'string' },
  expires: { type: 'string' },
  limit: { type: 'string' },
  status: { type: 'string' },
  plan: { type: 'string' },
  'grace-seconds': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

const LEDGER_LIMIT = { dflt: 20, max: 1000 };
const JOB_LIMIT = { dflt: 20, max: 1000 };

/** ISO 8601: a date, or a date and time with an optional offset (without one, local time). */
const ISO_8601 = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/;

const count = (s: string | undefined, dflt?: number): number | undefined => {
  if (s === undefined) return dflt;
  return /^\d+$/.test(s) && Number.isSafeInteger(Number(s)) ? Number(s) : undefined;
};

/** Free text in a column: control characters shown as `?`, empty as `-` (columns never collapse). */
const cell = (s: string | null | undefined): string => (s ? s.replace(/[\x00-\x1f\x7f]/g, '?') : '-');
const iso = (d: Date | null): string => (d ? d.toISOString() : '-');

/**
 * Aligned plain-text columns with a header row, two spaces apart; `right` columns (numbers) are
 * right-aligned. The last column is free text and never padded, so lines carry no trailing spaces.
 */
export function columns(header: string[], rows: string[][], right: ReadonlySet<number> = new Set()): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) =>
    r.map((c, i) => (i === r.length - 1 ? c : right.has(i) ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join('  ');
  return [header, ...rows].map(line).join('\n');
}

/** What `key list` calls a key's state: revoked is final, then a passed expiry, then the stored state. */
export function keyState(k: Pick<KeyListing, 'state' | 'expires_at'>, now: number): 'active' | 'inactive' | 'revoked' | 'expired' {
  if (k.state === 'revoked') return 'revoked';
  if (k.expires_at && k.expires_at.getTime() <= now) return 'expired';
  return k.state;
}

const needAccount = async (store: Store, cmd: Command, v: Values): Promise<string | AdminResult> => {
  if (!v.account) return usageError('--account is required', cmd);
  if (!(await store.accounts.exists(v.account))) return { code: 1, out: `no account ${v.account}` };
  return v.account;
};

const keyStateCommand = (verb: 'activate' | 'deactivate' | 'revoke' | 'expire', about: string): Command => ({
  noun: 'key',
  verb,
  synopsis: 'KEY_ID_OR_KEY',
  about,
  options: [],
  arg: 'KEY_ID_OR_KEY',
  async run(store, _v, arg, onKeyChange) {
    if (!arg) return usageError('which key? give its id or the key itself', this);
    const id = await store.keys.resolveId(arg);
    const key = id ? await store.keys.get(id) : undefined;
    if (!id || !key) return { code: 1, out: 'no such key' };
    if (key.state === 'revoked' && verb !== 'revoke') return { code: 1, out: `key ${id} is revoked; revocation cannot be undone` };
    const expired = key.expires_at !== null && key.expires_at.getTime() <= Date.now();
    if (expired && verb === 'activate') return { code: 1, out: `key ${id} expired at ${iso(key.expires_at)}; an expired key cannot be activated: create a new key` };
    if (expired && verb === 'expire') return { code: 0, out: `key ${id} already expired at ${iso(key.expires_at)}` };
    const ok = verb === 'expire' ? await store.keys.expire(id) : await store.keys.setState(id, verb === 'deactivate' ? 'inactive' : verb === 'activate' ? 'active' : 'revoked');
    onKeyChange();
    if (!ok) return { code: 1, out: `key ${id} is revoked; revocation cannot be undone` };
    return { code: 0, out: `key ${id} ${verb === 'expire' ? 'expired' : `${verb}d`}` };
  },
});

const COMMANDS: Command[] = [
  {
    noun: 'account',
    verb: 'create',
    synopsis: '[--credits N] [--name NAME]',
    about: 'Creates an account holding N credits and prints its id.',
    options: [
      ['--credits N', 'initial credits, a whole number (default 0)'],
      ['--name NAME', 'a label for operators'],
    ],
    async run(store, v) {
      const credits = count(v.credits ?? v.amount, 0);
      if (credits === undefined) return usageError('--credits must be a non-negative integer', this);
      const id = await store.accounts.create({ name: v.name ?? '', credits });
      return { code: 0, out: `account ${id} created with ${credits} credits` };
    },
  },
  {
    noun: 'account',
    verb: 'list',
    synopsis: '',
    about: 'Lists every account, oldest first: id, credits (balance, reserved, available), number of keys, creation time, name.',
    options: [],
    async run(store) {
      const rows = (await store.accounts.list()).map((a) => [a.id, String(a.balance), String(a.reserved), String(a.available), String(a.keys), iso(a.created_at), cell(a.name)]);
      return { code: 0, out: columns(['ID', 'BALANCE', 'RESERVED', 'AVAILABLE', 'KEYS', 'CREATED', 'NAME'], rows, new Set([1, 2, 3, 4])) };
    },
  },
  {
    noun: 'account',
    verb: 'connectors',
    synopsis: '--account ACCOUNT_ID [--enable | --disable]',
    about: 'Shows, or sets with --enable or --disable, whether an account may use sender-platform connectors (disabled: creating one answers 403 connector_unavailable).',
    options: [
      ['--account ACCOUNT_ID', 'the account (required)'],
      ['--enable', 'allow connectors (the default of a new account)'],
      ['--disable', 'refuse connectors'],
    ],
    async run(store, v) {
      const account = await needAccount(store, this, v);
      if (typeof account !== 'string') return account;
      if (v.enable && v.disable) return usageError('give --enable or --disable, not both', this);
      if (v.enable || v.disable) await store.outcomes.setConnectorsEnabled(account, v.enable === true);
      return { code: 0, out: `account ${account}: connectors ${(await store.outcomes.connectorsEnabled(account)) ? 'enabled' : 'disabled'}` };
    },
  },
  {
    noun: 'key',
    verb: 'create',
    synopsis: '--account ACCOUNT_ID [--scopes a,b | --unrestricted] [--kind test|live] [--name NAME] [--expires ISO_DATE]',
    about: 'Creates an API key of an account and prints it once (only its SHA-256 is stored).',
    options: [
      ['--account ACCOUNT_ID', 'the account the key belongs to (required)'],
      ['--scopes a,b', `what the key may do, comma-separated: ${SCOPES.join(', ')}`],
      ['--unrestricted', 'every scope (the default without --scopes)'],
      ['--kind test|live', 'the key prefix, svc_test_ or svc_live_ (default live)'],
      ['--name NAME', 'a label for operators'],
      ['--expires ISO_DATE', 'when the key stops working, in the future: 2027-01-31 (midnight UTC) or 2027-01-31T12:00:00Z'],
    ],
    async run(store, v) {
      const account = await needAccount(store, this, v);
      if (typeof account !== 'string') return account;
      const kind = v.kind ?? 'live';
      if (kind !== 'test' && kind !== 'live') return usageError('--kind must be test or live', this);
      let scopes: string[] | null = null;
      if (v.scopes !== undefined && v.unrestricted) return usageError('give --scopes or --unrestricted, not both', this);
      if (v.scopes !== undefined) {
        scopes = v.scopes.split(',').map((s) => s.trim()).filter(Boolean);
        const bad = scopes.filter((s) => !isScope(s));
        if (bad.length > 0 || scopes.length === 0) return usageError(`unknown scope(s): ${bad.join(', ') || '(none given)'}`, this);
      }
      let expiresAt: Date | null = null;
      if (v.expires !== undefined) {
        expiresAt = new Date(v.expires);
        if (!ISO_8601.test(v.expires) || Number.isNaN(expiresAt.getTime())) return usageError(`--expires must be an ISO 8601 date or time, got ${JSON.stringify(v.expires)}`, this);
        // A key that is expired from birth is a mistake (a typo in the year), never what was meant.
        if (expiresAt.getTime() <= Date.now()) return usageError(`--expires must be in the future, got ${expiresAt.toISOString()}`, this);
      }
      const { id, key } = await store.keys.create({ accountId: account, kind, scopes, name: v.name ?? '', expiresAt });
      const what = [scopes ? scopes.join(',') : 'unrestricted', ...(expiresAt ? [`expires ${expiresAt.toISOString()}`] : [])].join(', ');
      return { code: 0, out: `key ${id} created (${what})\n${key}\nThis key is shown once; only its SHA-256 hash is stored.` };
    },
  },
  {
    noun: 'key',
    verb: 'list',
    synopsis: '--account ACCOUNT_ID',
    about:
      'Lists the keys of an account, oldest first: id, display prefix, kind, state (active, inactive, revoked, or expired once its expiry has passed), creation, last use (to about a minute), expiry, scopes, name. Never the key nor its hash.',
    options: [['--account ACCOUNT_ID', 'the account (required)']],
    async run(store, v) {
      const account = await needAccount(store, this, v);
      if (typeof account !== 'string') return account;
      const now = Date.now();
      const rows = (await store.keys.list(account)).map((k) => [
        k.id,
        k.display_prefix,
        k.kind,
        keyState(k, now),
        iso(k.created_at),
        iso(k.last_used_at),
        iso(k.expires_at),
        k.scopes === null ? 'unrestricted' : k.scopes.length === 0 ? 'none' : k.scopes.join(','),
        cell(k.name),
      ]);
      return { code: 0, out: columns(['ID', 'PREFIX', 'KIND', 'STATE', 'CREATED', 'LAST_USED', 'EXPIRES', 'SCOPES', 'NAME'], rows) };
    },
  },
  keyStateCommand('activate', 'Makes an inactive key work again. A revoked or expired key cannot be activated: create a new key.'),
  keyStateCommand('deactivate', 'Stops a key from working until it is activated again.'),
  keyStateCommand('revoke', 'Stops a key for good; revocation cannot be undone.'),
  keyStateCommand('expire', 'Expires a key now: from then on it is refused with api_key_expired.'),
  {
    noun: 'credits',
    verb: 'grant',
    synopsis: '--account ACCOUNT_ID --credits N',
    about: "Adds N credits to an account's balance (a ledger row `admin grant`) and shows the balance.",
    options: [
      ['--account ACCOUNT_ID', 'the account (required)'],
      ['--credits N', 'how many, a positive whole number (required)'],
    ],
    async run(store, v) {
      const account = await needAccount(store, this, v);
      if (typeof account !== 'string') return account;
      const n = count(v.credits ?? v.amount);
      if (!n) return usageError('--credits must be a positive integer', this);
      await store.ledger.grant(account, n, 'admin grant');
      return showBalance(store, account);
    },
  },
  {
    noun: 'credits',
    verb: 'show',
    synopsis: '--account ACCOUNT_ID',
    about: "Shows an account's balance, reserved and available credits.",
    options: [['--account ACCOUNT_ID', 'the account (required)']],
    async run(store, v) {
      const account = await needAccount(store, this, v);
      if (typeof account !== 'string') return account;
      return showBalance(store, account);
    },
  },
  {
    noun: 'credits',
    verb: 'ledger',
    synopsis: '--account ACCOUNT_ID [--limit N]',
    about: "Shows an account's newest credit ledger rows, newest first: id, time, kind (grant, reserve, charge, release, debit, expire), amount, reservation, note.",
    options: [
      ['--account ACCOUNT_ID', 'the account (required)'],
      ['--limit N', `how many rows, 1-${LEDGER_LIMIT.max} (default ${LEDGER_LIMIT.dflt})`],
    ],
    async run(store, v) {
      const limit = count(v.limit, LEDGER_LIMIT.dflt);
      if (limit === undefined || limit < 1 || limit > LEDGER_LIMIT.max) return usageError(`--limit must be an integer from 1 to ${LEDGER_LIMIT.max}, got ${JSON.stringify(v.limit)}`, this);
      const account = await needAccount(store, this, v);
      if (typeof account !== 'string') return account;
      const rows = (await store.ledger.entries(account, limit)).map((e) => [String(e.id), iso(e.created_at), e.kind, String(e.amount), cell(e.reservation_id), cell(e.note)]);
      return { code: 0, out: columns(['ID', 'TIME', 'KIND', 'AMOUNT', 'RESERVATION', 'NOTE'], rows, new Set([0, 3])) };
    },
  },
  {
    noun: 'job',
    verb: 'list',
    synopsis: '[--account ACCOUNT_ID] [--status STATE] [--limit N]',
    about: 'Lists jobs, newest first: id, account, state, source, input rows, unique emails, processed, credits reserved and charged, creation time, file name (CSV jobs).',
    options: [
      ['--account ACCOUNT_ID', 'only the jobs of this account'],
      ['--status STATE', `only jobs in this state: ${JOB_STATES.join(', ')}`],
      ['--limit N', `how many jobs, 1-${JOB_LIMIT.max} (default ${JOB_LIMIT.dflt})`],
    ],
    async run(store, v) {
      const limit = count(v.limit, JOB_LIMIT.dflt);
      if (limit === undefined || limit < 1 || limit > JOB_LIMIT.max) return usageError(`--limit must be an integer from 1 to ${JOB_LIMIT.max}, got ${JSON.stringify(v.limit)}`, this);
      if (v.status !== undefined && !(JOB_STATES as readonly string[]).includes(v.status)) return usageError(`--status must be one of ${JOB_STATES.join(', ')}, got ${JSON.stringify(v.status)}`, this);
      if (v.account !== undefined && !(await store.accounts.exists(v.account))) return { code: 1, out: `no account ${v.account}` };
      const { jobs } = await store.jobs.list(v.account, { limit, ...(v.status ? { status: v.status as JobState } : {}) });
      const rows = jobs.map((j) => [
        j.id,
        j.account_id,
        j.status,
        j.source,
        String(j.total_rows),
        String(j.unique_emails),
        String(j.processed),
        String(j.credits_reserved),
        j.finalized ? String(j.credits_charged) : '-',
        iso(j.created_at),
        cell(j.filename),
      ]);
      return { code: 0, out: columns(['ID', 'ACCOUNT', 'STATE', 'SOURCE', 'ROWS', 'UNIQUE', 'PROCESSED', 'RESERVED', 'CHARGED', 'CREATED', 'FILENAME'], rows, new Set([4, 5, 6, 7, 8])) };
    },
  },
  {
    noun: 'job',
    verb: 'show',
    synopsis: 'JOB_ID',
    about: 'Shows one job: its state, counts, credits (reserved, charged, refunded), times, webhook, stored input and results, and the error of a failed job.',
    options: [],
    arg: 'JOB_ID',
    async run(store, _v, arg) {
      if (!arg) return usageError('which job? give its id', this);
      const j = await store.jobs.byId(arg);
      if (!j) return { code: 1, out: `no job ${arg}` };
      const pct = j.unique_emails > 0 ? ` (${Math.floor((j.processed / j.unique_emails) * 100)}%)` : '';
      const lines: Array<[string, string]> = [
        ['id', j.id],
        ['account', j.account_id],
        ['state', j.status],
        ['source', j.source],
        ['filename', cell(j.filename)],
        ['webhook_url', cell(j.webhook_url)],
        ['rows', String(j.total_rows)],
        ['unique_emails', String(j.unique_emails)],
        ['processed', `${j.processed}${pct}`],
        ['results', `valid ${j.valid}, valid_role_based ${j.valid_role_based}, invalid ${j.invalid}, risky ${j.risky}, unknown ${j.unknown} (role_based ${j.role_based}, high_value ${j.high_value}, catch_all ${j.catch_all})`],
        ['credits', `reserved ${j.credits_reserved}, ${j.finalized ? `charged ${j.credits_charged}, refunded ${j.credits_refunded} (finalized)` : `${j.high_value} High-Value so far (not finalized)`}`],
        ['reservation', cell(j.reservation_id)],
        ['created', iso(j.created_at)],
        ['started', iso(j.started_at)],
        ['completed', iso(j.completed_at)],
        ['input', cell(j.input_key)],
        ['results_csv', cell(j.results_key)],
        ['error', cell(j.error)],
      ];
      const w = Math.max(...lines.map(([k]) => k.length));
      return { code: 0, out: lines.map(([k, val]) => `${k.padEnd(w)}  ${val}`).join('\n') };
    },
  },
  {
    noun: 'subscription',
    verb: 'plans',
    synopsis: '',
    about: 'Lists the plans (rows of `plans`): id, price, credits granted each period, period length, name.',
    options: [],
    async run(store) {
      const rows = (await store.subscriptions.plans()).map((p) => [p.id, `${(p.price_cents / 100).toFixed(2)} ${p.currency}`, String(p.credits_per_period), `${p.period_days} d`, cell(p.name)]);
      return { code: 0, out: columns(['ID', 'PRICE', 'CREDITS', 'PERIOD', 'NAME'], rows, new Set([1, 2, 3])) };
    },
  },
  {
    noun: 'subscription',
    verb: 'create',
    synopsis: '--account ACCOUNT_ID --plan PLAN_ID',
    about: "Subscribes an account to a plan with the local payment processor, from now: the first period's credits are granted (a ledger row), and it renews at the period end. (With Stripe, subscriptions come from Stripe's own events.)",
    options: [
      ['--account ACCOUNT_ID', 'the account (required); it must have no live subscription'],
      ['--plan PLAN_ID', 'the plan (required; `admin subscription plans` lists them)'],
    ],
    async run(store, v) {
      const account = await needAccount(store, this, v);
      if (typeof account !== 'string') return account;
      if (!v.plan) return usageError('--plan is required', this);
      if (!(await store.subscriptions.plan(v.plan))) return { code: 1, out: `no plan ${v.plan}` };
      const live = await store.subscriptions.live(account);
      if (live) return { code: 1, out: `account ${account} already has a live subscription ${live.id} (${live.status})` };
      const sub = await localProcessor(store).create(account, v.plan);
      return showSubscription(store, account, `subscription ${sub.id} created`);
    },
  },
  {
    noun: 'subscription',
    verb: 'show',
    synopsis: '--account ACCOUNT_ID',
    about: "Shows an account's newest subscription (status, plan, period, cancel_at_period_end), its credits, and the processor events applied to it.",
    options: [['--account ACCOUNT_ID', 'the account (required)']],
    async run(store, v) {
      const account = await needAccount(store, this, v);
      if (typeof account !== 'string') return account;
      return showSubscription(store, account);
    },
  },
  {
    noun: 'subscription',
    verb: 'advance-period',
    synopsis: '--account ACCOUNT_ID',
    about: "Moves the local payment processor's clock to the end of the account's current period, now: a subscription set to cancel ends (canceled; its credits expire to 0, a ledger row), any other renews (the plan's credits granted, the next period begins). For operators and tests.",
    options: [['--account ACCOUNT_ID', 'the account (required)']],
    async run(store, v) {
      const account = await needAccount(store, this, v);
      if (typeof account !== 'string') return account;
      const live = await store.subscriptions.live(account);
      if (!live) return { code: 1, out: `account ${account} has no live subscription` };
      if (live.processor !== 'local') return { code: 1, out: `subscription ${live.id} is Stripe's: its periods move with Stripe's events` };
      const after = await localProcessor(store).advancePeriod(live.id);
      return showSubscription(store, account, after.status === 'canceled' ? `subscription ${after.id} ended` : `subscription ${after.id} renewed`);
    },
  },
  {
    noun: 'webhook-secret',
    verb: 'rotate',
    synopsis: '--account ACCOUNT_ID [--grace-seconds N]',
    about: `Makes a new webhook signing secret for the account and prints it (shown this once). The secrets that were current keep signing deliveries for N seconds more (default ${DEFAULT_SECRET_GRACE_S}, at most ${MAX_SECRET_GRACE_S}; 0 stops them now), so receivers can switch without missing one.`,
    options: [
      ['--account ACCOUNT_ID', 'the account (required)'],
      ['--grace-seconds N', `how long the replaced secrets still sign (0-${MAX_SECRET_GRACE_S}, default ${DEFAULT_SECRET_GRACE_S})`],
    ],
    async run(store, v) {
      const account = await needAccount(store, this, v);
      if (typeof account !== 'string') return account;
      const grace = count(v['grace-seconds'], DEFAULT_SECRET_GRACE_S);
      if (grace === undefined || grace > MAX_SECRET_GRACE_S) return usageError(`--grace-seconds must be a whole number from 0 to ${MAX_SECRET_GRACE_S}`, this);
      const r = await rotateWebhookSecret(store, account, grace);
      return {
        code: 0,
        out: [`webhook secret ${r.id} created for account ${account} (shown once):`, r.secret, ...r.previous.map((p) => `secret ${p.id} signs until ${p.expires_at}`)].join('\n'),
      };
    },
  },
  {
    noun: 'webhook-secret',
    verb: 'list',
    synopsis: '--account ACCOUNT_ID',
    about: "Lists the account's current webhook signing secrets, newest first, by their first characters, with when each stops signing.",
    options: [['--account ACCOUNT_ID', 'the account (required)']],
    async run(store, v) {
      const account = await needAccount(store, this, v);
      if (typeof account !== 'string') return account;
      const { secrets } = await listWebhookSecrets(store, account);
      if (secrets.length === 0) return { code: 0, out: `account ${account} has no webhook secret yet (one is made at its first delivery; rotate to get one shown)` };
      return { code: 0, out: columns(['ID', 'SECRET', 'CREATED', 'SIGNS UNTIL'], secrets.map((s) => [s.id, s.secret_prefix, s.created_at, s.expires_at ?? 'next rotation'])) };
    },
  },
];

/** The local payment processor over the store, with its events applied by a SubscriptionService. */
function localProcessor(store: Store): LocalProcessor {
  const local = new LocalProcessor(store);
  local.attach(new SubscriptionService(store, local));
  return local;
}

async function showSubscription(store: Store, account: string, headline?: string): Promise<AdminResult> {
  const s = await store.subscriptions.latest(account);
  if (!s) return { code: 1, out: `account ${account} has no subscription` };
  const b = (await store.ledger.balance(account))!;
  const events = await store.subscriptions.events(s.id);
  const lines: Array<[string, string]> = [
    ['id', s.id],
    ['account', s.account_id],
    ['processor', s.processor],
    ['plan', s.plan_id],
    ['status', s.status],
    ['cancel_at_period_end', String(s.cancel_at_period_end)],
    ['current_period', `${iso(s.current_period_start)} to ${iso(s.current_period_end)}`],
    ['ended', iso(s.ended_at)],
    ['credits', `balance ${b.balance}, reserved ${b.reserved}, available ${b.available}`],
    ['events', String(events.length)],
  ];
  const w = Math.max(...lines.map(([k]) => k.length));
  const out = [
    ...(headline ? [headline] : []),
    ...lines.map(([k, val]) => `${k.padEnd(w)}  ${val}`),
    ...events.map((e) => `  ${iso(e.received_at)}  ${e.type}  ${cell(e.result)}`),
  ];
  return { code: 0, out: out.join('\n') };
}

async function showBalance(store: Store, account: string): Promise<AdminResult> {
  const b = await store.ledger.balance(account);
  return { code: 0, out: `account ${account}: balance ${b!.balance}, reserved ${b!.reserved}, available ${b!.available}` };
}

const NOUNS = [...new Set(COMMANDS.map((c) => c.noun))];
const usageLine = (c: Command): string => `admin ${c.noun} ${c.verb}${c.synopsis ? ` ${c.synopsis}` : ''}`;

/** `admin --help`: every command. */
const USAGE = [
  'usage: admin COMMAND [OPTIONS]    (admin COMMAND --help explains one)',
  ...COMMANDS.map((c) => `  ${usageLine(c)}`),
  `scopes: ${SCOPES.join(', ')}`,
].join('\n');

/** `admin key --help`: the commands of one noun. */
const nounUsage = (noun: string): string =>
  [`usage: admin ${noun} COMMAND [OPTIONS]    (admin ${noun} COMMAND --help explains one)`, ...COMMANDS.filter((c) => c.noun === noun).flatMap((c) => [`  ${usageLine(c)}`, `      ${c.about}`])].join('\n');

/** `admin key create --help`: one command. */
function commandHelp(c: Command): string {
  const lines = [`usage: ${usageLine(c)}`, '', c.about];
  if (c.options.length > 0) {
    const w = Math.max(...c.options.map(([flag]) => flag.length));
    lines.push('', 'options:', ...c.options.map(([flag, help]) => `  ${flag.padEnd(w)}  ${help}`));
  }
  return lines.join('\n');
}

function usageError(msg: string, c?: Command): AdminResult {
  return { code: 2, out: `${msg}\n${c ? `usage: ${usageLine(c)}` : USAGE}` };
}

type Plan = { done: AdminResult } | { command: Command; values: Values; arg: string | undefined };

/** Everything that needs no store: parsing, help, unknown commands and options. */
function plan(argv: string[]): Plan {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, allowPositionals: true, options: OPTIONS });
  } catch (err) {
    return { done: usageError((err as Error).message) };
  }
  const v = parsed.values as Values;
  const [noun, verb, ...rest] = parsed.positionals;
  if (noun === 'help') return { done: { code: 0, out: USAGE } };
  if (!noun) return v.help ? { done: { code: 0, out: USAGE } } : { done: usageError('no command') };
  if (!NOUNS.includes(noun)) return { done: usageError(`unknown command: ${noun}`) };
  if (!verb) return { done: v.help ? { code: 0, out: nounUsage(noun) } : { code: 2, out: `which ${noun} command?\n${nounUsage(noun)}` } };
  const command = COMMANDS.find((c) => c.noun === noun && c.verb === verb);
  if (!command) return { done: { code: 2, out: `unknown command: ${noun} ${verb}\n${nounUsage(noun)}` } };
  if (v.help) return { done: { code: 0, out: commandHelp(command) } };
  const allowed = new Set(command.options.map(([flag]) => flag.split(' ')[0]!.slice(2)));
  if (allowed.has('credits')) allowed.add('amount');
  const unknown = Object.keys(v).filter((k) => !allowed.has(k));
  if (unknown.length > 0) return { done: usageError(`admin ${noun} ${verb} takes no ${unknown.map((k) => `--${k}`).join(', ')}`, command) };
  if (rest.length > (command.arg ? 1 : 0)) return { done: usageError(`unexpected argument: ${rest.slice(command.arg ? 1 : 0).join(' ')}`, command) };
  return { command, values: v, arg: rest[0] };
}

/** Runs one admin command against a store (directly, or for the admin socket). */
export async function runAdmin(store: Store, argv: string[], onKeyChange: () => void = () => {}): Promise<AdminResult> {
  const p = plan(argv);
  if ('done' in p) return p.done;
  return p.command.run(store, p.values, p.arg, onKeyChange);
}

/**
 * What `npm run admin` does: help and usage errors at once; then, embedded, the running service's
 * admin socket, or else the store in SVC_DATA_DIR, which must exist already (a mistyped directory
 * must not become a new, empty store); with DATABASE_URL, that database, which must hold the
 * service's schema already (opened without migrating: a mistyped database gets no tables).
 */
export async function runAdminCli(
  config: Pick<Config, 'dataDir' | 'databaseUrl'>,
  argv: string[],
  opts: { socketTimeoutMs?: number } = {},
): Promise<AdminResult> {
  const p = plan(argv);
  if ('done' in p) return p.done;
  if (!config.databaseUrl) {
    const sock = adminSocketPath(config.dataDir);
    if (existsSync(sock)) {
      try {
        return await callAdminSocket(sock, argv, opts.socketTimeoutMs);
      } catch (err) {
        // Nobody listening (a socket file left by a dead process): open the store ourselves. Any
        // other failure (no answer in time, a broken answer) comes after the command was sent, so
        // the service may have run it: report it rather than run it a second time.
        const code = (err as NodeJS.ErrnoException).code;
        if (code !== 'ECONNREFUSED' && code !== 'ENOENT') return { code: 1, out: code ? `admin socket ${sock}: ${(err as Error).message}` : (err as Error).message };
      }
    }
    if (!existsSync(path.join(config.dataDir, 'pgdata'))) {
      return { code: 1, out: `no store at ${path.resolve(config.dataDir)} (SVC_DATA_DIR); start the service once with \`npm start\`, or point SVC_DATA_DIR at its data directory` };
    }
  }
  const store = await openStore(config.databaseUrl ? { databaseUrl: config.databaseUrl, migrate: false } : { dataDir: config.dataDir });
  try {
    if (config.databaseUrl && !(await store.hasSchema())) {
      return { code: 1, out: `no store in DATABASE_URL (${hidePassword(config.databaseUrl)}): start the service once with it, or fix the URL` };
    }
    return await p.command.run(store, p.values, p.arg, () => {});
  } finally {
    await store.close();
  }
}

export const adminSocketPath = (dataDir: string) => `${dataDir}/admin.sock`;

/**
 * Serves runAdmin on a Unix socket: one JSON line in ({argv}), one JSON line out ({code, out}).
 * Only the owner may talk to it: it lives in the data directory, which is owner-only (0700), and
 * is chmod'ed 0600 once listening. (No umask change around listen: the umask is process-wide, so
 * changing it would race with files created by other threads.)
 */
export function serveAdminSocket(store: Store, path: string, onKeyChange: () => void): net.Server {
  if (existsSync(path)) unlinkSync(path);
  const server = net.createServer((sock) => {
    let buf = '';
    let handled = false;
    sock.setEncoding('utf8');
    sock.on('data', async (chunk: string) => {
      if (handled) return; // one command per connection: later bytes never run it again
      buf += chunk;
      if (buf.length > 64 * 1024) return sock.destroy();
      const nl = buf.indexOf('\n');
      if (nl < 0) return;
      handled = true;
      let res: AdminResult;
      try {
        const { argv } = JSON.parse(buf.slice(0, nl)) as { argv: unknown };
        res = Array.isArray(argv) && argv.every((a) => typeof a === 'string') ? await runAdmin(store, argv, onKeyChange) : { code: 2, out: 'bad request' };
      } catch (err) {
        res = { code: 1, out: `admin command failed: ${(err as Error).message}` };
      }
      sock.end(`${JSON.stringify(res)}\n`);
    });
    sock.on('error', () => {});
  });
  server.on('error', (err) => process.emitWarning(`admin socket ${path}: ${err.message}`));
  server.listen(path, () => chmodSync(path, 0o600));
  return server;
}

/** How long the CLI waits for the service's answer before giving up. */
export const ADMIN_SOCKET_TIMEOUT_MS = 30_000;

/**
 * Sends argv to a running service's admin socket. A service that accepts but does not answer
 * within `timeoutMs` (wedged) fails the call, with the socket destroyed, rather than hanging.
 */
export function callAdminSocket(path: string, argv: string[], timeoutMs = ADMIN_SOCKET_TIMEOUT_MS): Promise<AdminResult> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(path);
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error(`the service at ${path} did not answer within ${timeoutMs >= 1000 && timeoutMs % 1000 === 0 ? `${timeoutMs / 1000} s` : `${timeoutMs} ms`}`));
    }, timeoutMs);
    let buf = '';
    sock.setEncoding('utf8');
    sock.on('connect', () => sock.write(`${JSON.stringify({ argv })}\n`));
    sock.on('data', (c: string) => (buf += c));
    sock.on('end', () => {
      clearTimeout(timer);
      try {
        resolve(JSON.parse(buf) as AdminResult);
      } catch {
        reject(new Error('bad answer from the admin socket'));
      }
    });
    sock.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}
