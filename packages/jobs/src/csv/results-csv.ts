// The results CSV of a job, produced in one streaming pass: the stored
// input rows (intake/rows.ts) merged with the stored results read in idx order, a batch of rows at a
// time, rendered by render.ts (inline, or on the CSV pool's threads). In memory at any moment: one
// batch of rows, one page of results, and the results of emails repeated later in the input
// (dups.bin), which a repeated row shows again with 0 credits and `duplicate_in_job`.
//
// A row whose email has no result (only in a canceled job's partial results) keeps its input
// cells and leaves the result columns empty; a segment filter leaves it out.

import type { ValidationResultBody } from '@svc/contracts';
import type { BlobStore, JobRecord, Store, StoredResult } from '@svc/store';
import type { RenderResult, RenderTask } from './csv-task.ts';
import { serializeFields } from './csv.ts';
import { RESULT_COLUMNS, renderHeader, renderRows, type RenderRow, type ResultCells } from './render.ts';
import { dupsKey, hasBit, openRows, readDups } from '../intake/rows.ts';

/** Renders rows off the event loop (csv-pool.ts CsvPool); inline when absent. */
export interface RowRenderer {
  render(task: RenderTask): Promise<RenderResult>;
}

export interface ResultsCsvDeps {
  store: Pick<Store, 'jobs'>;
  blobs: BlobStore;
  renderer?: RowRenderer;
}

const RESULTS_PAGE = 2000;

/** A stored result as render.ts takes it: optional fields it lacks are null (empty cells). */
function cellsOf(v: ValidationResultBody): ResultCells {
  return {
    ...v,
    role_type: v.role_type ?? null,
    catchall_confidence: v.catchall_confidence ?? null,
    did_you_mean: v.did_you_mean ?? null,
    smtp_response: v.smtp_response ?? null,
  };
}

/** The lines of the results CSV of `job` (its input must be stored), as text chunks. */
export async function* resultsCsv(deps: ResultsCsvDeps, job: Pick<JobRecord, 'id' | 'input_key'>, segments: ReadonlySet<string> | null = null): AsyncGenerator<string, void, undefined> {
  const { store, blobs, renderer } = deps;
  if (!job.input_key) throw new Error(`job ${job.id} has no stored input`);
  const rows = await openRows(blobs, job.input_key);
  if (!rows) throw new Error(`job ${job.id}: input ${job.input_key} is missing`);
  const dups = await readDups(blobs, dupsKey(job.id));
  const columns = rows.header.columns;
  const width = columns.length;
  const noResult = ','.repeat(RESULT_COLUMNS.length) + '\r\n';

  yield renderHeader(columns, { bom: rows.header.bom });

  // Results in idx order, a page at a time.
  let page: StoredResult[] = [];
  let at = 0;
  let after = -1;
  let exhausted = false;
  const resultOf = async (idx: number): Promise<ResultCells | undefined> => {
    for (;;) {
      while (at < page.length && page[at]!.idx < idx) at++;
      if (at < page.length) return page[at]!.idx === idx ? cellsOf(page[at]!.verdict) : undefined;
      if (exhausted) return undefined;
      page = await store.jobs.results(job.id, after, RESULTS_PAGE);
      at = 0;
      if (page.length < RESULTS_PAGE) exhausted = true;
      if (page.length > 0) after = page[page.length - 1]!.idx;
    }
  };

  const render = async (batch: RenderRow[]): Promise<string> => {
    if (batch.length === 0) return '';
    if (!renderer) return renderRows(columns, batch, segments);
    const r = await renderer.render({ header: columns, rows: batch, segments: segments ? [...segments] : null });
    if (!r.ok) throw new Error(`rendering job ${job.id}: ${r.code} ${r.message}`);
    return r.text;
  };

  const kept = new Map<number, ResultCells | null>();
  let nextFirst = 0;
  for await (const batch of rows.batches()) {
    let text = '';
    let pending: RenderRow[] = [];
    for (const row of batch) {
      let verdict: ResultCells | undefined;
      if (row.idx === nextFirst) {
        nextFirst++;
        verdict = await resultOf(row.idx);
        if (hasBit(dups, row.idx)) kept.set(row.idx, verdict ?? null);
      } else if (row.idx < nextFirst) {
        const first = kept.get(row.idx);
        verdict = first ? { ...first, credits_charged: 0, charge_reason: 'duplicate_in_job' } : undefined;
      } else {
        throw new Error(`job ${job.id}: stored rows out of order (idx ${row.idx}, expected at most ${nextFirst})`);
      }
      if (verdict) pending.push({ fields: row.fields, verdict });
      else if (segments === null) {
        // Keep the order: what is pending goes first.
        text += await render(pending);
        pending = [];
        const cells = row.fields.length >= width ? row.fields.slice(0, width) : [...row.fields, ...new Array<string>(width - row.fields.length).fill('')];
        text += serializeFields(cells) + noResult;
      }
    }
    text += await render(pending);
    if (text) yield text;
  }
}
