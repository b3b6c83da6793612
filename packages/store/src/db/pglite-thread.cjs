// The embedded store's PGlite, in a thread of its own (started by openPglite, pglite.ts).
//
// Postgres-in-WASM runs every statement synchronously in the thread that owns it: on the service's
// request thread a batch of analytics rows or a job's results held every HTTP request and every
// SMTP session for 10-50 ms. Here it has a thread to itself, and the request thread only posts
// statements and receives rows. Plain CommonJS (PGlite's CJS build): the thread needs no
// TypeScript loader.
//
// Protocol (one message in, one reply out, both carrying the caller's `id`):
//   { op: 'query', sql, params, tx? }  -> { id, rows }        (tx: an open transaction's number)
//   { op: 'begin' }                    -> { id, tx }          (the transaction is open)
//   { op: 'end', tx, commit }          -> { id }              (COMMIT, or ROLLBACK when !commit)
//   { op: 'exec', sql }                -> { id }
//   { op: 'copy', sql, text, background?, sentAt? } -> { id } (COPY ... FROM '/dev/blob', `text` its data: a string a row)
//   { op: 'close' }                    -> { id }              (then the thread ends)
// A failure replies { id, error }: the error's message, name and Postgres fields (code, detail,
// constraint, ...), which the caller puts back on an Error of its own.
//
// The order of statements is kept here, not by the caller. PGlite has one connection, so one
// top-level operation (a statement, a script, a COPY, or a whole transaction from its BEGIN to
// its end) runs at a time; the others wait in this thread's queue, in the order they were sent,
// and a statement of the open transaction (it carries `tx`) runs at once. The caller posts every
// operation as soon as it has one: the next statement is already here when one ends, instead of
// waiting for the request thread's event loop to receive the reply and send it (under load, a
// turn of that loop is milliseconds, and every statement waited one). A `background` operation
// (analytics rows) lets the foreground ones queued behind it go first, for at most
// BACKGROUND_MAX_WAIT_MS: a debit is not held behind a COPY of decisions that could wait.

'use strict';

const { parentPort, workerData } = require('node:worker_threads');
const { PGlite, types, protocol, parse } = require('@electric-sql/pglite');
const { OwnerOnlyNodeFS } = require('./owner-only-fs.cjs');

/** What crosses back of a thrown error: its text and the Postgres fields callers read. */
const ERROR_FIELDS = ['code', 'detail', 'hint', 'position', 'schema', 'table', 'column', 'dataType', 'constraint', 'severity', 'where', 'routine'];
function wireError(err) {
  const e = { message: err instanceof Error ? err.message : String(err), name: err instanceof Error ? err.name : 'Error' };
  if (err && typeof err === 'object') for (const k of ERROR_FIELDS) if (err[k] !== undefined && typeof err[k] !== 'function') e[k] = err[k];
  return e;
}

const d = workerData;
// numeric (1700) comes back as a string by default: parse it to a number like the pg adapter does.
const parsers = { [types.NUMERIC]: (v) => Number(v) };
const startParams = [...PGlite.defaultStartParams, ...d.extraStartParams];
const template = d.template ? { loadDataDir: new Blob([d.template]) } : {};
const pg = d.pgdata ? new PGlite({ fs: new OwnerOnlyNodeFS(d.pgdata), parsers, startParams, ...template }) : new PGlite({ parsers, startParams, ...template });

/** Open transactions by number: the transaction's handle and how to end it. */
const open = new Map();
let nextTx = 1;

function reply(id, body) {
  try {
    parentPort.postMessage({ id, ...body });
  } catch (err) {
    // Rows that cannot be copied to the caller's thread: the call fails, the thread goes on.
    parentPort.postMessage({ id, error: wireError(err) });
  }
}

function begin(id) {
  const n = nextTx++;
  const entry = { tx: undefined, finish: undefined, endId: undefined, commit: false };
  const done = pg.transaction(
    (tx) =>
      new Promise((resolve, reject) => {
        entry.tx = tx;
        entry.finish = { resolve, reject };
        open.set(n, entry);
        reply(id, { tx: n });
      }),
  );
  done
    .then(
      () => {
        open.delete(n);
        reply(entry.endId, {});
      },
      (err) => {
        open.delete(n);
        if (entry.endId === undefined) reply(id, { error: wireError(err) }); // BEGIN itself failed
        else if (entry.commit) reply(entry.endId, { error: wireError(err) }); // COMMIT failed
        else reply(entry.endId, {}); // the ROLLBACK asked for
      },
    )
    .finally(finished);
}

/**
 * Statements with parameters, prepared once and kept by their text (at most MAX_PREPARED, the
 * least recently used closed first). PGlite's query() sends Parse, Describe, Bind, Describe,
 * Execute and Sync as six calls into Postgres, and Postgres parses and plans the text every time:
 * ~130 µs a statement here. A kept statement is one call, Bind + Describe + Execute + Sync: ~55
 * µs. The same protocol messages and the same parsers and serializers as query() (PGlite's
 * exported `protocol` and `parse`), so the rows are the same. A statement prepared inside a
 * transaction outlives it (prepared statements are per session, not transactional).
 */
const MAX_PREPARED = 256;
const prepared = new Map();
let preparedSeq = 0;
const ser = protocol.serialize;

function concat(parts) {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

/** Closes a kept statement's prepared statement in Postgres (its entry is the caller's to drop). */
function closeStatement(name) {
  return pg.execProtocolStream(concat([ser.close({ type: 'S', name }), ser.sync()]));
}

async function statementFor(sql) {
  const kept = prepared.get(sql);
  if (kept) {
    prepared.delete(sql); // to the back: the least recently used is first
    prepared.set(sql, kept);
    return kept;
  }
  if (prepared.size >= MAX_PREPARED) {
    const [oldest, st] = prepared.entries().next().value;
    prepared.delete(oldest);
    await closeStatement(st.name);
  }
  const name = `svc_${++preparedSeq}`;
  const described = await pg.execProtocolStream(concat([ser.parse({ name, text: sql }), ser.describe({ type: 'S', name }), ser.sync()]));
  const st = { name, types: parse.parseDescribeStatementResults(described) };
  prepared.set(sql, st);
  return st;
}

/**
 * Drops every kept statement: after a script (migrations) or a statement that may change what a
 * kept one reads (ALTER, DROP, CREATE...), whose next use could fail with "cached plan must not
 * change result type".
 */
async function forgetPrepared() {
  if (prepared.size === 0) return;
  prepared.clear();
  await pg.exec('DEALLOCATE ALL').catch(() => {});
}
const SCHEMA_CHANGE = /^\s*(ALTER|DROP|CREATE|DISCARD|DEALLOCATE)\b/i;

/** A statement with parameters through its kept prepared statement (see MAX_PREPARED). */
async function preparedQuery(sql, params, again = false) {
  const st = await statementFor(sql);
  const values = params.map((v, i) => {
    if (v === null || v === undefined) return null;
    const serialize = pg.serializers[st.types[i]];
    return serialize ? serialize(v) : v.toString();
  });
  let messages;
  try {
    messages = await pg.execProtocolStream(concat([ser.bind({ statement: st.name, values }), ser.describe({ type: 'P' }), ser.execute({}), ser.sync()]));
  } catch (err) {
    // 26000: the statement is gone (a DISCARD or DEALLOCATE by someone else). 0A000: a table it
    // reads changed its columns. Either way it is prepared again, once.
    if (!again && err && (err.code === '26000' || (err.code === '0A000' && /cached plan/.test(err.message)))) {
      prepared.delete(sql);
      if (err.code === '0A000') await closeStatement(st.name).catch(() => {});
      return preparedQuery(sql, params, true);
    }
    throw err;
  }
  return parse.parseResults(messages, pg.parsers)[0];
}

async function handle(m) {
  switch (m.op) {
    case 'query': {
      const target = m.tx === undefined ? pg : open.get(m.tx)?.tx;
      if (!target) throw new Error(`transaction ${m.tx} is not open`);
      if (m.params && m.params.length > 0) return { rows: (await preparedQuery(m.sql, m.params)).rows };
      try {
        return { rows: (await target.query(m.sql, m.params)).rows };
      } finally {
        if (SCHEMA_CHANGE.test(m.sql)) await forgetPrepared();
      }
    }
    case 'copy':
      // PGlite reads COPY FROM '/dev/blob' from the blob option: the rows' texts one after the
      // other, no parameters. Sent as a simple query (Query, Sync: two calls into Postgres) rather than
      // query()'s extended protocol (six).
      await pg.exec(m.sql, { blob: new Blob(m.text) });
      return {};
    case 'exec':
      // A script that fails after its own BEGIN leaves the one connection in an aborted
      // transaction: roll it back before anyone else's statement runs.
      try {
        await pg.exec(m.sql);
      } catch (err) {
        if (pg.isInTransaction()) await pg.exec('ROLLBACK').catch(() => {});
        throw err;
      } finally {
        await forgetPrepared();
      }
      return {};
    case 'close':
      await pg.close();
      return {};
    default:
      throw new Error(`unknown operation ${m.op}`);
  }
}

/** How long a background operation lets later foreground ones overtake it (PgliteOptions). */
const BACKGROUND_MAX_WAIT_MS = d.backgroundMaxWaitMs ?? 100;
/** Top-level operations not started yet, in the order they came: { m, at }. */
const waiting = [];
/** A top-level operation is running, or a transaction is open. */
let busy = false;

/**
 * The next operation to start: the oldest, unless it is a background one younger than
 * BACKGROUND_MAX_WAIT_MS and a foreground operation waits behind it (the oldest of those goes
 * first). `close` never overtakes: it ends the thread, so everything sent before it runs first.
 */
function take() {
  const first = waiting[0];
  if (first.m.background && Date.now() - first.at < BACKGROUND_MAX_WAIT_MS) {
    const i = waiting.findIndex((w) => !w.m.background);
    if (i > 0 && waiting[i].m.op !== 'close') return waiting.splice(i, 1)[0].m;
  }
  return waiting.shift().m;
}

function finished() {
  busy = false;
  schedule();
}

let scheduled = false;
/**
 * Starts the next operation after this turn's messages are in: a statement runs synchronously in
 * this thread, so the messages sent meanwhile are still in the port when it ends, and one taken
 * at once would be chosen without them (the background COPY first because it came first).
 */
function schedule() {
  if (scheduled) return;
  scheduled = true;
  setImmediate(() => {
    scheduled = false;
    startNext();
  });
}

function startNext() {
  if (busy || waiting.length === 0) return;
  busy = true;
  const m = take();
  if (m.op === 'begin') return begin(m.id); // busy until the transaction ends (finished)
  run(m).finally(finished);
}

/** Runs one operation and sends its answer (its result, or its error); never rejects. */
function run(m) {
  return handle(m).then(
    (body) => {
      reply(m.id, body);
      if (m.op === 'close') parentPort.close();
    },
    (err) => reply(m.id, { error: wireError(err) }),
  );
}

parentPort.on('message', (m) => {
  if (m.op === 'end') {
    const entry = open.get(m.tx);
    if (!entry) return reply(m.id, { error: wireError(new Error(`transaction ${m.tx} is not open`)) });
    entry.endId = m.id;
    entry.commit = m.commit;
    if (m.commit) entry.finish.resolve();
    else entry.finish.reject(new Error('rolled back by the caller'));
    return;
  }
  if (m.tx !== undefined) {
    // A statement of the open transaction (its caller sends the next only after this reply).
    run(m);
    return;
  }
  // A background operation's age counts from when it was sent (`sentAt`, the same clock): while
  // a statement runs, the messages sent meanwhile reach this queue only when it ends.
  waiting.push({ m, at: m.sentAt ?? Date.now() });
  schedule();
});

pg.waitReady.then(
  () => parentPort.postMessage({ ready: true }),
  (err) => parentPort.postMessage({ ready: false, error: wireError(err) }),
);
