// What every operator command is made of: its words, options and help, the parsed values, and the
// small formatting helpers the commands share (columns, cells, dates, counts).

import type { Store } from '@svc/store';

export interface AdminResult {
  /** 0 done, 1 refused or not found, 2 a usage error. */
  code: number;
  out: string;
}

export type Values = {
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
  email?: string;
  role?: string;
  operator?: boolean;
  force?: boolean;
  'password-stdin'?: boolean;
  help?: boolean;
};

/**
 * What a command may need besides its options: where the dashboard is reached (for sign-in
 * links), and a password read from standard input (`--password-stdin`; never an option, so it is
 * never in argv, a shell history or a process list).
 */
export interface AdminContext {
  publicUrl?: string;
  password?: string;
}

export interface Command {
  noun: string;
  verb: string;
  /** After `admin <noun> <verb>`. */
  synopsis: string;
  about: string;
  /** The options it takes, with their help lines (`--amount` is an old alias of `--credits`). */
  options: Array<[flag: string, help: string]>;
  /** The name of its one positional argument, if it takes one. */
  arg?: string;
  run(store: Store, v: Values, arg: string | undefined, onKeyChange: () => void, ctx: AdminContext): Promise<AdminResult>;
}

export const OPTIONS = {
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
  email: { type: 'string' },
  role: { type: 'string' },
  operator: { type: 'boolean' },
  force: { type: 'boolean' },
  'password-stdin': { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

export const LEDGER_LIMIT = { dflt: 20, max: 1000 };
export const JOB_LIMIT = { dflt: 20, max: 1000 };

/** ISO 8601: a date, or a date and time with an optional offset (without one, local time). */
export const ISO_8601 = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/;

export const count = (s: string | undefined, dflt?: number): number | undefined => {
  if (s === undefined) return dflt;
  return /^\d+$/.test(s) && Number.isSafeInteger(Number(s)) ? Number(s) : undefined;
};

/** Free text in a column: control characters shown as `?`, empty as `-` (columns never collapse). */
export const cell = (s: string | null | undefined): string => (s ? s.replace(/[\x00-\x1f\x7f]/g, '?') : '-');
export const iso = (d: Date | null): string => (d ? d.toISOString() : '-');

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

export const needAccount = async (store: Store, cmd: Command, v: Values): Promise<string | AdminResult> => {
  if (!v.account) return usageError('--account is required', cmd);
  if (!(await store.accounts.exists(v.account))) return { code: 1, out: `no account ${v.account}` };
  return v.account;
};

export const usageLine = (c: Command): string => `admin ${c.noun} ${c.verb}${c.synopsis ? ` ${c.synopsis}` : ''}`;

/** A usage error of one command: exit code 2, with the command's usage line. */
export function usageError(msg: string, c: Command): AdminResult {
  return { code: 2, out: `${msg}\nusage: ${usageLine(c)}` };
}
