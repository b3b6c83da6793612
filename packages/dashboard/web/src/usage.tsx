// Usage and credits: the balance, validations per day by verdict and credits spent per day (charts
// with their figures as tables), and the credit ledger, paged, with a CSV export.

import type { CreditBalance, ValidationResult } from '@svc/contracts';
import { useEffect, useState } from 'preact/hooks';
import { api, errorText } from './api.ts';
import { Chart } from './chart.tsx';
import { Table } from './table.tsx';

const RESULTS = [
  ['valid', 'Valid'],
  ['valid_role_based', 'Valid (role)'],
  ['risky', 'Risky'],
  ['invalid', 'Invalid'],
  ['unknown', 'Unknown'],
] as const;

interface Usage {
  balance: Omit<CreditBalance, 'account_id'>;
  from: string;
  to: string;
  analytics: boolean;
  days: Array<{ day: string; validations: number; by_result: Record<ValidationResult, number>; credits_spent: number }>;
}

interface Entry {
  id: number;
  created_at: string;
  kind: string;
  amount: number;
  note: string;
  reservation_id: string | null;
}

/** How a ledger row moves the balance, in words. */
const KIND_TEXT: Record<string, string> = {
  grant: 'credits added',
  reserve: 'held for work in progress',
  charge: 'charged from a hold',
  release: 'hold released (refund)',
  debit: 'charged',
  expire: 'expired',
};

const n = (v: number) => v.toLocaleString('en-US');

export function Usage() {
  const [days, setDays] = useState('30');
  const [usage, setUsage] = useState<Usage | null>(null);
  const [pages, setPages] = useState<Array<string | null>>([null]);
  const [entries, setEntries] = useState<Entry[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [error, setError] = useState('');
  const cursor = pages[pages.length - 1] ?? null;
  useEffect(() => {
    api<Usage>('GET', `/usage?days=${days}`).then(setUsage, (e) => setError(errorText(e)));
  }, [days]);
  useEffect(() => {
    const q = new URLSearchParams({ limit: '25', ...(cursor && { cursor }) });
    api<{ entries: Entry[]; next_cursor: string | null }>('GET', `/usage/ledger?${q}`).then(
      (r) => {
        setEntries(r.entries);
        setNext(r.next_cursor);
      },
      (e) => setError(errorText(e)),
    );
  }, [cursor]);
  const labels = usage?.days.map((d) => d.day.slice(5)) ?? [];
  const spent = usage?.days.reduce((a, d) => a + d.credits_spent, 0) ?? 0;
  const validated = usage?.days.reduce((a, d) => a + d.validations, 0) ?? 0;
  return (
    <section>
      <h1>Usage and credits</h1>
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      {usage && (
        <dl class="figures" aria-label="Credit balance">
          <div>
            <dt>Available</dt>
            <dd>{n(usage.balance.available)}</dd>
          </div>
          <div>
            <dt>Balance</dt>
            <dd>{n(usage.balance.balance)}</dd>
          </div>
          <div>
            <dt>Held by work in progress</dt>
            <dd>{n(usage.balance.reserved)}</dd>
          </div>
          <div>
            <dt>Subscription</dt>
            <dd>
              {usage.balance.subscription_status}
              {usage.balance.current_period_end && `, period ends ${usage.balance.current_period_end.slice(0, 10)}`}
              {usage.balance.cancel_at_period_end && ' (cancels then)'}
            </dd>
          </div>
        </dl>
      )}
      <label for="usage-days">Period</label>{' '}
      <select id="usage-days" value={days} onChange={(e) => setDays(e.currentTarget.value)}>
        <option value="7">Last 7 days</option>
        <option value="30">Last 30 days</option>
        <option value="90">Last 90 days</option>
      </select>
      {usage && (
        <>
          <p>
            {n(validated)} validation(s) and {n(spent)} credit(s) spent from {usage.from.slice(0, 10)} to {usage.days[usage.days.length - 1]?.day} (UTC days).
          </p>
          {usage.analytics ? (
            <Chart title="Validations per day by verdict" labels={labels} series={RESULTS.map(([key, label]) => ({ label, values: usage.days.map((d) => d.by_result[key] ?? 0) }))} stacked yTitle="Validations" />
          ) : (
            <p>Validations per day are not available: analytics is not configured on this service.</p>
          )}
          <Chart title="Credits spent per day" labels={labels} series={[{ label: 'Credits spent', values: usage.days.map((d) => d.credits_spent) }]} yTitle="Credits" />
        </>
      )}
      <h2>Credit ledger</h2>
      <p>
        <a href="/dashboard/api/usage/ledger.csv" download>
          Export the whole ledger (CSV)
        </a>
      </p>
      <Table caption="Ledger entries, newest first" headers={['When (UTC)', 'Kind', 'Credits', 'Note']}>
        {entries.map((e) => (
          <tr key={e.id}>
            <td>{e.created_at.slice(0, 19).replace('T', ' ')}</td>
            <td>
              {e.kind} <span class="muted">({KIND_TEXT[e.kind] ?? e.kind})</span>
            </td>
            <td>{n(e.amount)}</td>
            <td>{e.note}</td>
          </tr>
        ))}
      </Table>
      <div class="pager">
        <button type="button" disabled={pages.length === 1} onClick={() => setPages(pages.slice(0, -1))}>
          Newer entries
        </button>
        <button type="button" disabled={!next} onClick={() => next && setPages([...pages, next])}>
          Older entries
        </button>
      </div>
    </section>
  );
}
