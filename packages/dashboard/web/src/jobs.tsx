// Every job of the account, newest first, filterable by state: progress, counters by verdict,
// credits reserved, charged and refunded; cancel a running job; download all rows, or only those
// worth emailing (valid). Refreshed every 3 s while a job runs.

import { useEffect, useState } from 'preact/hooks';
import { api, errorText } from './api.ts';
import { Table } from './table.tsx';

export interface Job {
  id: string;
  status: string;
  progress: { processed: number; total: number; percent: number };
  results: { total_rows: number; valid: number; valid_role_based: number; invalid: number; risky: number; unknown: number; credits_reserved: number; credits_charged: number; credits_refunded: number };
  created_at: string;
  filename: string | null;
  download: { available: boolean };
}

const STATES = ['awaiting_upload', 'queued', 'processing', 'completed', 'failed', 'canceled'];

/** Starts the download of a finished job's results CSV: every row, or only the valid ones. */
export async function downloadJob(id: string, segment?: string): Promise<void> {
  const link = await api<{ url: string }>('GET', `/jobs/${id}/download${segment ? `?segment=${segment}` : ''}`);
  // Relative: the signed URL's path on the origin this page came from (SVC_PUBLIC_URL may name another).
  const u = new URL(link.url);
  location.assign(`${u.pathname}${u.search}`);
}

export const cancelText = (id: string) => `Cancel job ${id}? Addresses already validated are charged; the rest of the reservation is refunded.`;

export function Jobs() {
  const [status, setStatus] = useState('');
  const [pages, setPages] = useState<Array<string | null>>([null]);
  const [jobs, setJobs] = useState<Job[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [error, setError] = useState('');
  const cursor = pages[pages.length - 1] ?? null;
  const load = () => {
    const q = new URLSearchParams({ limit: '20', ...(status && { status }), ...(cursor && { cursor }) });
    return api<{ jobs: Job[]; next_cursor: string | null }>('GET', `/jobs?${q}`).then(
      (r) => {
        setJobs(r.jobs);
        setNext(r.next_cursor);
      },
      (e) => setError(errorText(e)),
    );
  };
  useEffect(() => {
    void load();
  }, [status, cursor]);
  useEffect(() => {
    if (!jobs.some((j) => j.status === 'queued' || j.status === 'processing')) return;
    const timer = setInterval(() => void load(), 3000);
    return () => clearInterval(timer);
  }, [jobs]);
  const download = async (j: Job, segment?: string) => {
    setError('');
    await downloadJob(j.id, segment).catch((e) => setError(errorText(e)));
  };
  const cancel = async (j: Job) => {
    if (!confirm(cancelText(j.id))) return;
    setError('');
    await api('POST', `/jobs/${j.id}/cancel`).catch((e) => setError(errorText(e)));
    await load();
  };
  return (
    <section>
      <h1>Jobs</h1>
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      <label for="jobs-status">Show</label>{' '}
      <select
        id="jobs-status"
        value={status}
        onChange={(e) => {
          setStatus(e.currentTarget.value);
          setPages([null]);
        }}
      >
        <option value="">every job</option>
        {STATES.map((s) => (
          <option value={s} key={s}>
            {s}
          </option>
        ))}
      </select>
      <Table caption="Jobs of this account, newest first" headers={['Created', 'Job', 'State', 'Progress', 'Valid · role · risky · invalid · unknown', 'Credits reserved · charged · refunded', 'Actions']}>
            {jobs.map((j) => (
              <tr key={j.id}>
                <td>{j.created_at.slice(0, 16).replace('T', ' ')}</td>
                <td>
                  <code>{j.id}</code>
                  {j.filename && <div>{j.filename}</div>}
                </td>
                <td>{j.status}</td>
                <td>
                  <progress max={100} value={j.progress.percent} aria-label={`Job ${j.id} progress`} /> {j.progress.percent}% ({j.progress.processed} of {j.progress.total})
                </td>
                <td>
                  {j.results.valid} · {j.results.valid_role_based} · {j.results.risky} · {j.results.invalid} · {j.results.unknown}
                </td>
                <td>
                  {j.results.credits_reserved} · {j.results.credits_charged} · {j.results.credits_refunded}
                </td>
                <td class="actions">
                  {(j.status === 'queued' || j.status === 'processing') && (
                    <button type="button" class="danger" aria-label={`Cancel job ${j.id}`} onClick={() => cancel(j)}>
                      Cancel
                    </button>
                  )}
                  {j.download.available && (
                    <button type="button" aria-label={`Download all rows of job ${j.id}`} onClick={() => download(j)}>
                      Download all rows
                    </button>
                  )}
                  {j.download.available && (
                    <button type="button" aria-label={`Download valid rows of job ${j.id}`} onClick={() => download(j, 'valid')}>
                      Download valid rows
                    </button>
                  )}
                </td>
              </tr>
            ))}
      </Table>
      {jobs.length === 0 && <p>No job{status ? ` in state ${status}` : ''} yet.</p>}
      <div class="pager">
        {pages.length > 1 && (
          <button type="button" onClick={() => setPages(pages.slice(0, -1))}>
            Newer jobs
          </button>
        )}
        {next && (
          <button type="button" onClick={() => setPages([...pages, next])}>
            Older jobs
          </button>
        )}
      </div>
    </section>
  );
}
