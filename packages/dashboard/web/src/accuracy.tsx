// Accuracy: how the account's verdicts held up against what happened to the mail (its imported
// outcomes). The REST reports' figures (bounce rate per verdict with its 95% interval, the
// confusion matrix, per domain), the same report per day or week, what catch-all recoveries
// upgraded, an outcome CSV import answered row by row, and the sender-platform connector. Every
// string from a file or the server is rendered as text.

import Papa from 'papaparse';
import { useEffect, useState } from 'preact/hooks';
import { api, errorText, type ApiError } from './api.ts';
import type { AccuracyFigures, ImportResponse, OutcomeLabel, PredictedResult, SummaryReport } from '@svc/contracts';
import { Chart } from './chart.tsx';
import { Table } from './table.tsx';
import { reloadingAction, when as shownTime } from './ui.tsx';

type Summary = SummaryReport;
interface Trend {
  bucket: 'day' | 'week';
  buckets: Summary[];
}
interface Recoveries {
  recoveries: number;
  rows: number;
  upgraded: number;
  downgraded: number;
  unchanged: number;
  credits_charged: number;
  by_reason: Record<string, number>;
  latest: Array<{ recovery_id: string; job_id: string; rows: number; upgraded: number; downgraded: number; unchanged: number; credits_charged: number; completed_at: string }>;
}
type ImportAnswer = ImportResponse;
interface Connector {
  platform: string;
  status: 'active' | 'revoked';
  created_at: string;
  last_event_at: string | null;
  events_received: number;
  events_ignored: number;
  denominator_status: 'ok' | 'sent_event_missing';
}

const PLATFORM = 'emailbison';
const MAX_CSV_BYTES = 5 * 1024 * 1024;

const VERDICTS: Record<string, string> = {
  valid: 'Valid',
  valid_role_based: 'Valid (role address)',
  risky: 'Risky',
  invalid: 'Invalid',
  unknown: 'Unknown',
  not_validated: 'Not validated before',
};
const LABELS: Record<string, string> = {
  delivered: 'Delivered',
  bounced_hard: 'Hard bounce',
  bounced_soft: 'Soft bounce',
  blocked_policy: 'Blocked by policy',
  unknown: 'Unknown',
};
const REASONS: Record<string, string> = {
  recovered_delivery: 'Upgraded: the account delivered to it or got a reply',
  recovered_pattern: "Upgraded: it has the domain's confirmed address pattern",
  recovered_hard_bounce: 'Downgraded: a confirmed hard bounce',
};
const verdict = (r: string) => VERDICTS[r] ?? r;

/** A rate as a percentage; none (no `sent` event to divide by) reads as a dash. */
const pct = (v: number | null) => (v === null || Number.isNaN(v) ? '—' : `${(v * 100).toFixed(1)}%`);
const interval = (ci: [number, number] | null) => (ci ? `${pct(ci[0])} to ${pct(ci[1])}` : '—');
const date = (iso: string) => iso.slice(0, 10);
const when = (iso: string | null) => shownTime(iso, 'never');
const DAY_MS = 86_400_000;

/** A bucket's label: its day, or its first and last day. */
function bucketLabel(b: Summary, size: 'day' | 'week'): string {
  if (size === 'day') return date(b.from);
  return `${date(b.from)} to ${date(new Date(Date.parse(b.to) - DAY_MS).toISOString())}`;
}

/** One request's state: its answer, or the server's refusal (its message is what the page shows). */
type Loaded<T> = { data?: T; error?: string };

function useLoad<T>(path: string | null, version: number): Loaded<T> {
  const [state, setState] = useState<Loaded<T>>({});
  useEffect(() => {
    if (!path) return;
    let gone = false;
    setState({});
    api<T>('GET', path).then(
      (data) => !gone && setState({ data }),
      (e) => !gone && setState({ error: errorText(e) }),
    );
    return () => {
      gone = true;
    };
  }, [path, version]);
  return state;
}

function Problem({ error }: { error?: string }) {
  return error ? (
    <p role="alert" class="error">
      {error}
    </p>
  ) : null;
}

function ByVerdict({ s }: { s: Summary }) {
  const results = Object.keys(s.by_result) as PredictedResult[];
  const labels = Object.keys((results[0] && s.matrix[results[0]]) ?? LABELS) as OutcomeLabel[];
  return (
    <>
      {s.denominator_status === 'sent_event_missing' && (
        <p class="muted">
          No <code>sent</code> event in this window, so no rate can be computed: the counts stand, the rates wait for sends (import <code>sent</code> outcomes, or connect your sending platform below).
        </p>
      )}
      <Chart title="Hard-bounce rate by verdict" labels={results.map(verdict)} series={[{ label: 'Hard-bounce rate', values: results.map((r) => s.by_result[r]!.hard_bounce_rate ?? null) }]} yTitle="Hard bounces per address sent" format={pct} />
      <Table caption="Hard-bounce rate by verdict, with its 95% interval (Wilson)" headers={['Verdict', 'Sent', 'Outcomes', 'Delivered', 'Hard bounces', 'Hard-bounce rate', '95% interval']}>
        {results.map((r) => {
          const f = s.by_result[r]!;
          return (
            <tr key={r}>
              <th scope="row">{verdict(r)}</th>
              <td>{f.sent}</td>
              <td>{f.outcomes}</td>
              <td>{f.delivered}</td>
              <td>{f.bounced_hard}</td>
              <td>{pct(f.hard_bounce_rate)}</td>
              <td>{interval(f.hard_bounce_rate_ci95)}</td>
            </tr>
          );
        })}
      </Table>
      <Table caption="Verdict against outcome (each outcome against the validation made before it)" headers={['Verdict', ...labels.map((l) => LABELS[l] ?? l)]}>
        {results.map((r) => (
          <tr key={r}>
            <th scope="row">{verdict(r)}</th>
            {labels.map((l) => (
              <td key={l}>{s.matrix[r]?.[l] ?? 0}</td>
            ))}
          </tr>
        ))}
      </Table>
      <Table caption="Precision (delivered and hard-bounced outcomes only)" headers={['Verdict', 'Precision', '95% interval', 'Delivered', 'Hard bounces']}>
        {(['valid', 'invalid'] as const).map((r) => {
          const p = s.precision[r];
          return (
            <tr key={r}>
              <th scope="row">{r === 'valid' ? 'Valid: delivered' : 'Invalid: hard-bounced'}</th>
              <td>{pct(p.value)}</td>
              <td>{interval(p.ci95)}</td>
              <td>{p.delivered}</td>
              <td>{p.bounced_hard}</td>
            </tr>
          );
        })}
      </Table>
      <p>
        Outcomes in the window: {s.totals.claims} (of which {s.totals.not_validated} for addresses not validated before), {s.totals.sent} sent, {s.totals.opens} opened. From {date(s.from)} to {date(new Date(Date.parse(s.to) - DAY_MS).toISOString())} (UTC).
      </p>
    </>
  );
}

function ByDomain({ d }: { d: { domains: Array<AccuracyFigures & { domain: string }> } }) {
  if (d.domains.length === 0) return <p>No outcome in this window.</p>;
  const top = d.domains.slice(0, 10);
  return (
    <>
      <Chart title="Hard-bounce rate of addresses validated as valid, by domain (the 10 with the most outcomes)" labels={top.map((x) => x.domain)} series={[{ label: 'Valid: hard-bounce rate', values: top.map((x) => x.by_result.valid?.hard_bounce_rate ?? null) }]} format={pct} />
      <Table caption="By recipient domain (most outcomes first)" headers={['Domain', 'Outcomes', 'Sent', 'Valid: hard-bounce rate', 'Valid: 95% interval', 'Valid: precision', 'Invalid: hard-bounce rate']}>
        {d.domains.map((x) => (
          <tr key={x.domain}>
            <th scope="row">{x.domain}</th>
            <td>{x.totals.claims}</td>
            <td>{x.totals.sent}</td>
            <td>{pct(x.by_result.valid?.hard_bounce_rate ?? null)}</td>
            <td>{interval(x.by_result.valid?.hard_bounce_rate_ci95 ?? null)}</td>
            <td>{pct(x.precision.valid.value)}</td>
            <td>{pct(x.by_result.invalid?.hard_bounce_rate ?? null)}</td>
          </tr>
        ))}
      </Table>
    </>
  );
}

function OverTime({ t }: { t: Trend }) {
  const results = (Object.keys(t.buckets[0]?.by_result ?? {}) as PredictedResult[]).filter((r) => r !== 'not_validated' && t.buckets.some((b) => (b.by_result[r]?.sent ?? 0) > 0));
  if (results.length === 0)
    return (
      <p>
        No verdict had a <code>sent</code> event in this window: there is no rate to draw.
      </p>
    );
  return (
    <Chart
      kind="line"
      title={`Hard-bounce rate by verdict, per ${t.bucket}`}
      labels={t.buckets.map((b) => bucketLabel(b, t.bucket))}
      series={results.map((r) => ({ label: verdict(r), values: t.buckets.map((b) => b.by_result[r]?.hard_bounce_rate ?? null) }))}
      yTitle="Hard bounces per address sent"
      format={pct}
    />
  );
}

function Recovery({ r }: { r: Recoveries }) {
  if (r.recoveries === 0)
    return (
      <p>
        No catch-all recovery completed in this window. A recovery is asked for on a completed job (<code>POST /v1/csv/jobs/{'{id}'}/recover-catchalls</code>): each risky catch-all row is checked against the account's own outcomes.
      </p>
    );
  return (
    <>
      <p>
        {r.recoveries} recover{r.recoveries === 1 ? 'y' : 'ies'} looked at {r.rows} risky catch-all row{r.rows === 1 ? '' : 's'}: <strong>{r.upgraded} upgraded to valid</strong>, {r.downgraded} downgraded to invalid, {r.unchanged} left risky. Credits charged: {r.credits_charged} (one per upgrade).
      </p>
      <Table caption="Rows changed, by the evidence that decided them" headers={['Reason', 'Rows']}>
        {Object.entries(r.by_reason).map(([code, n]) => (
          <tr key={code}>
            <th scope="row">{REASONS[code] ?? code}</th>
            <td>{n}</td>
          </tr>
        ))}
      </Table>
      <Table caption="The latest recoveries" headers={['Job', 'Completed', 'Catch-all rows', 'Upgraded', 'Downgraded', 'Unchanged', 'Credits']}>
        {r.latest.map((x) => (
          <tr key={x.recovery_id}>
            <th scope="row">
              <code>{x.job_id}</code>
            </th>
            <td>{when(x.completed_at)}</td>
            <td>{x.rows}</td>
            <td>{x.upgraded}</td>
            <td>{x.downgraded}</td>
            <td>{x.unchanged}</td>
            <td>{x.credits_charged}</td>
          </tr>
        ))}
      </Table>
    </>
  );
}

function Import({ onImported }: { onImported: () => void }) {
  const [file, setFile] = useState<{ name: string; text: string; rows: number; columns: string[]; sample: Array<Record<string, string>> } | null>(null);
  const [answer, setAnswer] = useState<ImportAnswer | null>(null);
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const take = async (f: File) => {
    setError('');
    setAnswer(null);
    setFile(null);
    if (f.size > MAX_CSV_BYTES) return setError(`${f.name} is larger than 5 MiB: split it and import the parts.`);
    const text = await f.text();
    // A preview only: the server's CSV reader is the judge of the file.
    const p = Papa.parse<Record<string, string>>(text, { header: true, skipEmptyLines: 'greedy', preview: 2000 });
    setFile({ name: f.name, text, rows: p.data.length, columns: p.meta.fields ?? [], sample: p.data.slice(0, 5) });
  };
  const send = async () => {
    if (!file) return;
    setBusy(true);
    setError('');
    try {
      setAnswer(await api<ImportAnswer>('POST', '/accuracy/import', { csv: file.text }));
      onImported();
    } catch (e) {
      setError(errorText(e));
    } finally {
      setBusy(false);
    }
  };
  return (
    <div class="card wide stack">
      <p>
        A CSV with a header row naming its columns (<code>email</code>, <code>outcome</code>, <code>occurred_at</code>, <code>external_id</code>, <code>source</code>, <code>action</code>, <code>smtp_enhanced_code</code>, ...), up to 10,000 rows and 5 MiB. Importing costs nothing; an event already
        imported (same source and id) counts as a duplicate.
      </p>
      <label for="outcomes-file">Outcomes CSV file</label>
      <input id="outcomes-file" type="file" accept=".csv,text/csv" onChange={(e) => e.currentTarget.files?.[0] && void take(e.currentTarget.files[0])} />
      {file && (
        <>
          <p>
            <strong>{file.name}</strong>: {file.rows === 2000 ? 'at least 2,000' : file.rows} row{file.rows === 1 ? '' : 's'}, columns {file.columns.join(', ') || '(none found)'}.
          </p>
          {file.sample.length > 0 && file.columns.length > 0 && (
            <Table caption="The first rows of the file" headers={['Row', ...file.columns]}>
              {file.sample.map((r, i) => (
                <tr key={i}>
                  <th scope="row">{i + 1}</th>
                  {file.columns.map((c) => (
                    <td key={c}>{r[c] ?? ''}</td>
                  ))}
                </tr>
              ))}
            </Table>
          )}
          <button type="button" disabled={busy} onClick={() => void send()}>
            {busy ? 'Importing…' : 'Import outcomes'}
          </button>
        </>
      )}
      <Problem error={error} />
      {answer && (
        <div role="status" aria-label="Import result">
          <Table caption="What the import did" headers={['', 'Rows']}>
            {(
              [
                ['Received', answer.received],
                ['Accepted', answer.accepted],
                ['Duplicates (imported before)', answer.duplicates],
                ['Rejected', answer.skipped_invalid],
                ['Addresses suppressed', answer.suppressed],
                ['… for complaints', answer.complaints_suppressed],
                ['… for unsubscribes', answer.unsubscribed_suppressed],
                ['Older evidence not applied', answer.stale_suppressions_skipped],
                ['Cached verdicts dropped', answer.suppression_cache_invalidated],
                ['Credits charged', answer.credits_charged],
              ] as const
            ).map(([k, v]) => (
              <tr key={k}>
                <th scope="row">{k}</th>
                <td>{v}</td>
              </tr>
            ))}
          </Table>
          {answer.errors.length > 0 && (
            <Table caption="Rejected rows (row 1 is the first row after the header)" headers={['Row', 'Code', 'Message']}>
              {answer.errors.map((x) => (
                <tr key={x.index}>
                  <th scope="row">{x.index + 1}</th>
                  <td>
                    <code>{x.code}</code>
                  </td>
                  <td>{x.reason}</td>
                </tr>
              ))}
            </Table>
          )}
          <details>
            <summary>The API's answer (JSON)</summary>
            <pre>{JSON.stringify(answer, null, 2)}</pre>
          </details>
        </div>
      )}
    </div>
  );
}

function ConnectorPanel({ owner }: { owner: boolean }) {
  const [status, setStatus] = useState<Connector | null | undefined>(undefined);
  const [error, setError] = useState('');
  const [shown, setShown] = useState<string | null>(null);
  const [copied, setCopied] = useState(false);
  const load = () =>
    api<Connector>('GET', `/accuracy/connectors/${PLATFORM}`).then(
      (c) => setStatus(c),
      (e: ApiError) => (e.code === 'connector_not_found' ? setStatus(null) : (setStatus(null), setError(errorText(e)))),
    );
  useEffect(() => void load(), []);
  const act = reloadingAction(setError, load);
  const create = () =>
    act(async () => {
      if (status?.status === 'active' && !confirm('Creating it again replaces its URL: the current one stops working at once. Go on?')) return;
      const made = await api<{ webhook_url: string }>('POST', `/accuracy/connectors/${PLATFORM}`);
      setShown(made.webhook_url);
      setCopied(false);
    });
  const revoke = () =>
    act(async () => {
      if (!confirm('Revoke the connector? Its webhook URL stops working at once.')) return;
      await api('DELETE', `/accuracy/connectors/${PLATFORM}`);
      setShown(null);
    });
  return (
    <div class="card wide stack">
      <p>Your sending platform posts its events (sent, opened, bounced, replied, unsubscribed) to a secret URL: the outcomes arrive by themselves.</p>
      {status === undefined ? (
        <p>Loading…</p>
      ) : status === null ? (
        !error && <p>No EmailBison connector yet.</p>
      ) : (
        <dl class="facts" aria-label="Connector status">
          <dt>Status</dt>
          <dd>{status.status === 'active' ? 'Active' : 'Revoked'}</dd>
          <dt>Created</dt>
          <dd>{when(status.created_at)}</dd>
          <dt>Last event</dt>
          <dd>{when(status.last_event_at)}</dd>
          <dt>Events received</dt>
          <dd>{status.events_received}</dd>
          <dt>Events ignored</dt>
          <dd>{status.events_ignored}</dd>
          <dt>Sent events</dt>
          <dd>{status.denominator_status === 'ok' ? 'received: bounce rates can be computed' : 'none yet: bounce rates need them'}</dd>
        </dl>
      )}
      <Problem error={error} />
      {shown && (
        <div class="shown" role="status">
          <label for="connector-url">Webhook URL for EmailBison</label>
          <input id="connector-url" readOnly value={shown} onFocus={(e) => e.currentTarget.select()} />
          <button
            type="button"
            onClick={() =>
              navigator.clipboard.writeText(shown).then(
                () => setCopied(true),
                () => setCopied(false),
              )
            }
          >
            {copied ? 'Copied' : 'Copy webhook URL'}
          </button>
          <p>Copy it now into EmailBison's webhook settings: it is shown once, and only its hash is kept.</p>
          <button type="button" class="link" onClick={() => setShown(null)}>
            I have stored it
          </button>
        </div>
      )}
      {owner ? (
        <div class="actions">
          <button type="button" onClick={() => void create()}>
            {status?.status === 'active' ? 'Replace the webhook URL' : 'Create the connector'}
          </button>
          {status?.status === 'active' && (
            <button type="button" class="danger" onClick={() => void revoke()}>
              Revoke the connector
            </button>
          )}
        </div>
      ) : (
        <p>The account's owners create and revoke the connector: its URL lets a platform write into the account.</p>
      )}
    </div>
  );
}

export function Accuracy() {
  const [days, setDays] = useState(30);
  const [bucket, setBucket] = useState<'day' | 'week'>('week');
  const [version, setVersion] = useState(0);
  const [owner, setOwner] = useState(false);
  useEffect(() => {
    api<{ user: { role: string } }>('GET', '/session').then(
      (s) => setOwner(s.user.role === 'owner'),
      () => {},
    );
  }, []);
  const size = days > 31 ? 'week' : bucket;
  const summary = useLoad<Summary>(`/accuracy/summary?days=${days}`, version);
  const domains = useLoad<{ domains: Array<AccuracyFigures & { domain: string }> }>(`/accuracy/domains?days=${days}&limit=50`, version);
  const trend = useLoad<Trend>(`/accuracy/trend?days=${days}&bucket=${size}`, version);
  const recoveries = useLoad<Recoveries>(`/accuracy/recoveries?days=${days}`, version);
  const loading = <p>Loading…</p>;
  return (
    <section>
      <h1>Accuracy</h1>
      <p>Each outcome you import (or your sending platform reports) is set against the verdict the account got for that address before it.</p>
      <div class="controls">
        <div>
          <label for="accuracy-window">Period</label>
          <select id="accuracy-window" value={days} onChange={(e) => setDays(Number(e.currentTarget.value))}>
            <option value={7}>Last 7 days</option>
            <option value={30}>Last 30 days</option>
            <option value={90}>Last 90 days</option>
          </select>
        </div>
        <div>
          <label for="accuracy-bucket">Over time, per</label>
          <select id="accuracy-bucket" value={size} onChange={(e) => setBucket(e.currentTarget.value as 'day' | 'week')}>
            <option value="day" disabled={days > 31}>
              Day
            </option>
            <option value="week">Week</option>
          </select>
        </div>
        <button type="button" onClick={() => setVersion((v) => v + 1)}>
          Refresh
        </button>
      </div>

      <h2>Bounce rate by verdict</h2>
      <Problem error={summary.error} />
      {summary.data ? <ByVerdict s={summary.data} /> : !summary.error && loading}

      <h2>Over time</h2>
      <Problem error={trend.error} />
      {trend.data ? <OverTime t={trend.data} /> : !trend.error && loading}

      <h2>By domain</h2>
      <Problem error={domains.error} />
      {domains.data ? <ByDomain d={domains.data} /> : !domains.error && loading}

      <h2>Catch-all recovery</h2>
      <Problem error={recoveries.error} />
      {recoveries.data ? <Recovery r={recoveries.data} /> : !recoveries.error && loading}

      <h2>Import outcomes</h2>
      <Import onImported={() => setVersion((v) => v + 1)} />

      <h2>Sender connector: EmailBison</h2>
      <ConnectorPanel owner={owner} />
    </section>
  );
}
