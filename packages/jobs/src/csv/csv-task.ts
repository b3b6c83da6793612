// The Piscina worker file of csv-pool.ts: the CPU-bound CSV steps, one named export per task.
// Tasks take and return plain data: an Error would lose its class and code crossing
// the thread boundary, so every expected outcome is `{ ok: true, … } | { ok: false, code, message }`;
// a throw here is a bug and rejects the caller's promise.

import { parseCsvChunk, type ParseResult, type ParseTask } from './csv.ts';
import { renderRows, type RenderRow } from './render.ts';

export interface RenderTask {
  header: readonly string[];
  rows: readonly RenderRow[];
  /** Result values to keep (render.ts parseSegments); null keeps every row. */
  segments: readonly string[] | null;
}

export type RenderResult = { ok: true; text: string; rows: number } | { ok: false; code: string; message: string };

export function parse(task: ParseTask): ParseResult {
  return parseCsvChunk(task);
}

export function render(task: RenderTask): RenderResult {
  const segments = task.segments === null ? null : new Set(task.segments);
  const text = renderRows(task.header, task.rows, segments);
  return { ok: true, text, rows: task.rows.length };
}
