// A list: drop a CSV (or paste addresses), pick the email column, see the most it can cost, start
// it, watch it (progress, counters, an estimate of the time left), cancel it, download the rows.
// The file goes up the REST API's way: a batch, the file PUT to its signed URL, then start.

import Papa from 'papaparse';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, errorText } from './api.ts';
import { cancelText, downloadJob, type Job } from './jobs.tsx';

interface Parsed {
  name: string;
  blob: Blob;
  columns: string[];
  /** The first rows: enough to guess the email column. */
  sample: Array<Record<string, string>>;
}

/** A column's rows and unique addresses, counted over the whole file. */
interface Count {
  column: string;
  rows: number;
  unique: number;
}

const SAMPLE_ROWS = 50;
/** The file is read this much at a time: a list of hundreds of MB never sits in the page whole. */
const CHUNK_BYTES = 1 << 20;

/** The column most likely to hold the emails: named like one, else the one whose cells hold an @. */
function guessColumn(p: Parsed): string {
  const named = p.columns.find((c) => /^e-?mail( address)?$/i.test(c.trim())) ?? p.columns.find((c) => /e-?mail/i.test(c));
  if (named) return named;
  const sample = p.sample;
  return p.columns.find((c) => sample.filter((r) => (r[c] ?? '').includes('@')).length > sample.length / 2) ?? p.columns[0] ?? '';
}

/** The header and the first rows only. */
function preview(name: string, blob: Blob): Promise<Parsed> {
  return new Promise((resolve, reject) =>
    Papa.parse<Record<string, string>>(blob as File, {
      header: true,
      skipEmptyLines: 'greedy',
      preview: SAMPLE_ROWS,
      complete: (r) => (r.meta.fields && r.meta.fields.length > 0 ? resolve({ name, blob, columns: r.meta.fields, sample: r.data }) : reject(new Error('the file has no header row naming its columns'))),
      error: (e) => reject(e),
    }),
  );
}

// As the server dedupes a job: the domain is case-blind, the mailbox name is not.
const keyOf = (v: string) => {
  const at = v.lastIndexOf('@');
  return at < 1 ? '' : `${v.slice(0, at)}@${v.slice(at + 1).toLowerCase()}`;
};

/** Rows and unique addresses of `column`, streamed a chunk at a time (only the addresses are kept). */
function count(blob: Blob, column: string): Promise<Count> {
  return new Promise((resolve, reject) => {
    const seen = new Set<string>();
    let rows = 0;
    Papa.parse<Record<string, string>>(blob as File, {
      header: true,
      skipEmptyLines: 'greedy',
      chunkSize: CHUNK_BYTES,
      chunk: (r) => {
        for (const row of r.data) {
          rows++;
          const k = keyOf((row[column] ?? '').trim());
          if (k) seen.add(k);
        }
      },
      complete: () => resolve({ column, rows, unique: seen.size }),
      error: (e) => reject(e),
    });
  });
}

export function Upload() {
  const [parsed, setParsed] = useState<Parsed | null>(null);
  const [column, setColumn] = useState('');
  const [pasted, setPasted] = useState('');
  const [webhook, setWebhook] = useState('');
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const [job, setJob] = useState<Job | null>(null);
  const [eta, setEta] = useState('');
  const last = useRef<{ at: number; processed: number } | null>(null);

  const [counted, setCounted] = useState<Count | null>(null);

  const take = async (name: string, blob: Blob) => {
    setError('');
    setJob(null);
    setCounted(null);
    try {
      const p = await preview(name, blob);
      setParsed(p);
      setColumn(guessColumn(p));
    } catch (e) {
      setParsed(null);
      setError(errorText(e));
    }
  };
  // The whole file, counted for the chosen column (again when another is chosen).
  useEffect(() => {
    if (!parsed || !column) return;
    let gone = false;
    setCounted(null);
    count(parsed.blob, column).then(
      (c) => !gone && setCounted(c),
      (e) => !gone && setError(errorText(e)),
    );
    return () => {
      gone = true;
    };
  }, [parsed, column]);
  const unique = counted?.column === column ? counted.unique : null;

  const start = async () => {
    if (!parsed) return;
    setBusy(true);
    setError('');
    try {
      const batch = await api<{ batch_id: string; upload_path: string }>('POST', '/csv/prepare', { filename: parsed.name, webhook_url: webhook || null });
      const put = await fetch(batch.upload_path, { method: 'PUT', headers: { 'content-type': 'text/csv' }, body: parsed.blob });
      if (!put.ok) throw new Error(((await put.json().catch(() => ({}))) as { message?: string }).message ?? `upload failed (${put.status})`);
      last.current = null;
      setJob(await api<Job>('POST', '/csv/start', { batch_id: batch.batch_id, email_column: column }));
    } catch (e) {
      setError(errorText(e));
    } finally {
      setBusy(false);
    }
  };

  // Live progress: polled every 1.5 s until the job is final; the time left from the last rate.
  useEffect(() => {
    if (!job || !['queued', 'processing'].includes(job.status)) return;
    const timer = setTimeout(async () => {
      try {
        const now = await api<Job>('GET', `/jobs/${job.id}`);
        const t = Date.now();
        const prev = last.current;
        if (prev && now.progress.processed > prev.processed) {
          const perS = ((now.progress.processed - prev.processed) * 1000) / (t - prev.at);
          const left = Math.ceil((now.progress.total - now.progress.processed) / perS);
          setEta(left > 0 ? `about ${left < 90 ? `${left} s` : `${Math.round(left / 60)} min`} left` : '');
        }
        last.current = { at: t, processed: now.progress.processed };
        setJob(now);
      } catch (e) {
        setError(errorText(e));
      }
    }, 1500);
    return () => clearTimeout(timer);
  }, [job]);

  return (
    <section>
      <h1>Validate a list</h1>
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      <div
        class="drop"
        onDragOver={(e) => e.preventDefault()}
        onDrop={(e) => {
          e.preventDefault();
          const f = e.dataTransfer?.files[0];
          if (f) void take(f.name, f);
        }}
      >
        <label for="csv-file">CSV file (drop it here, or choose it)</label>
        <input id="csv-file" type="file" accept=".csv,text/csv" onChange={(e) => e.currentTarget.files?.[0] && void take(e.currentTarget.files[0].name, e.currentTarget.files[0])} />
      </div>
      <label for="csv-paste">Or paste addresses, one per line</label>
      <textarea id="csv-paste" rows={4} value={pasted} onInput={(e) => setPasted(e.currentTarget.value)} />
      <button type="button" disabled={!pasted.trim()} onClick={() => void take('pasted.csv', new Blob([`email\n${pasted.trim()}\n`], { type: 'text/csv' }))}>
        Use the pasted addresses
      </button>
      {parsed && (
        <div class="card">
          <p>
            <strong>{parsed.name}</strong>: {counted ? `${counted.rows} row${counted.rows === 1 ? '' : 's'}` : 'counting rows…'}, {parsed.columns.length} column{parsed.columns.length === 1 ? '' : 's'}.
          </p>
          <label for="csv-column">Column holding the emails</label>
          <select id="csv-column" value={column} onChange={(e) => setColumn(e.currentTarget.value)}>
            {parsed.columns.map((c) => (
              <option value={c} key={c}>
                {c}
              </option>
            ))}
          </select>
          <p role="status" aria-label="Cost ceiling">
            {unique === null ? 'Counting the unique addresses…' : `At most ${unique} credit${unique === 1 ? '' : 's'}: one is held per unique address, and only usable personal addresses are charged; the rest is refunded when the job ends.`}
          </p>
          <label for="csv-webhook">Webhook URL when it ends (optional)</label>
          <input id="csv-webhook" type="url" value={webhook} onInput={(e) => setWebhook(e.currentTarget.value)} />
          <button type="button" disabled={busy || !column || unique === null} onClick={() => void start()}>
            {busy ? 'Starting…' : 'Start validation'}
          </button>
        </div>
      )}
      {job && (
        <div class="shown" role="status" aria-label="Job progress">
          <p>
            Job <code>{job.id}</code>: <strong>{job.status}</strong>, {job.progress.percent}% ({job.progress.processed} of {job.progress.total}){eta && job.status === 'processing' ? `, ${eta}` : ''}.
          </p>
          <progress max={100} value={job.progress.percent} aria-label="Progress" />
          <p>
            Valid {job.results.valid} · role {job.results.valid_role_based} · risky {job.results.risky} · invalid {job.results.invalid} · unknown {job.results.unknown}. Credits held {job.results.credits_reserved}, charged {job.results.credits_charged}, refunded {job.results.credits_refunded}.
          </p>
          <div class="actions">
            {['queued', 'processing'].includes(job.status) && (
              <button type="button" class="danger" onClick={() => confirm(cancelText(job.id)) && api<Job>('POST', `/jobs/${job.id}/cancel`).then(setJob, (e) => setError(errorText(e)))}>
                Cancel job
              </button>
            )}
            {job.download.available && (
              <button type="button" onClick={() => downloadJob(job.id).catch((e) => setError(errorText(e)))}>
                Download all rows
              </button>
            )}
            {job.download.available && (
              <button type="button" onClick={() => downloadJob(job.id, 'valid').catch((e) => setError(errorText(e)))}>
                Download the rows worth emailing
              </button>
            )}
          </div>
        </div>
      )}
    </section>
  );
}
