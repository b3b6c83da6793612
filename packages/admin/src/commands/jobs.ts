// Jobs: list them, show one with its counters.

import { JOB_COUNTERS, JOB_STATES, type JobCounter, type JobState } from '@svc/contracts';
import { type Command, JOB_LIMIT, cell, columns, count, iso, usageError } from '../command.ts';

export const jobsCommands: Command[] = [
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
      const counts = (keys: readonly JobCounter[]): string => keys.map((k) => `${k} ${j[k]}`).join(', ');
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
        // The counters of a result, then (in parentheses) the flags among them.
        ['results', `${counts(JOB_COUNTERS.slice(0, 5))} (${counts(JOB_COUNTERS.slice(5))})`],
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
];
