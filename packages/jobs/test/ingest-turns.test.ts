// How much of a job's ingest runs between two turns of the event loop (a request served during a
// 500,000-address ingest waits for one such stretch; bench/jobs/ingest.ts): the intake dedupes
// and writes at most LINE_BATCH rows, publishing clones at most PUBLISH_TURN work messages, and
// start-processing parses the upload in chunks of at most START_CHUNK_ROWS rows. A setImmediate
// ticker runs beside each step and notes how far the step got at every turn. The bounds are the
// ones bench/jobs/ingest.ts was measured with (250 rows, 4 messages of 500): with 1,000 rows and
// 16 messages per turn, cached requests served during the ingest waited 15-25 ms per turn.

import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DirBlobStore, type JobRecord } from '@svc/store';
import { CsvJobs, START_CHUNK_ROWS, uploadKey } from '../src/csv/csv-jobs.ts';
import { parseCsvChunk, type ChunkParser } from '../src/csv/csv.ts';
import { DedupeIndex, INDEX_SHARDS, intake, LINE_BATCH, type IntakeDeps, type IntakeInput, type IntakeRow } from '../src/intake/intake.ts';
import type { WorkItem } from '@svc/contracts';
import { DOMAIN_BUCKETS, ITEMS_TURN, PUBLISH_TURN, WORK_CHUNK, publishWork } from '../src/pipeline/publish.ts';
import type { Bus, BusMessage } from '@svc/bus';

const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-ingest-turns-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const blobs = new DirBlobStore(path.join(dir, 'blobs'));

/** Runs `step` while a setImmediate ticker samples `progress()`; returns the largest advance between two ticks. */
async function largestStretch<T>(progress: () => number, step: () => Promise<T>): Promise<{ result: T; largest: number; ticks: number }> {
  let running = true;
  let last = progress();
  let largest = 0;
  let ticks = 0;
  const tick = () => {
    const now = progress();
    largest = Math.max(largest, now - last);
    last = now;
    ticks++;
    if (running) setImmediate(tick);
  };
  setImmediate(tick);
  try {
    const result = await step();
    return { result, largest: Math.max(largest, progress() - last), ticks };
  } finally {
    running = false;
  }
}

/** A bus that only counts what is published. */
function countingBus(): Bus & { items: number; messages: number } {
  const bus = {
    items: 0,
    messages: 0,
    async publish(_topic: string, _key: string, message: BusMessage) {
      bus.messages++;
      bus.items += (message as unknown as { items: WorkItem[] }).items.length;
    },
    subscribe() {},
    async close() {},
  };
  return bus;
}

const fakeJob = (id: string, total: number, unique: number): JobRecord => ({ id, total_rows: total, unique_emails: unique, status: 'queued' }) as unknown as JobRecord;

t.test('intake: at most LINE_BATCH rows deduped and written per turn of the event loop', async (t) => {
  const n = 5_000;
  let rowsRead = 0;
  // One chunk holding every row (a caller may hand over big chunks): the intake itself must cut it.
  const rows: IntakeRow[] = Array.from({ length: n }, (_, i) => {
    const email = `user${i % 4_000}@domain${(i % 4_000) % 300}.example`;
    return {
      email,
      get fields() {
        rowsRead++; // read once per row, when its line is written
        return [email];
      },
    };
  });
  const bus = countingBus();
  const deps: IntakeDeps = {
    store: { jobs: { create: async (rec: { id: string; totalRows: number; uniqueEmails: number }) => ({ ok: true, job: fakeJob(rec.id, rec.totalRows, rec.uniqueEmails) }) } } as unknown as IntakeDeps['store'],
    blobs,
    bus,
  };
  const input: IntakeInput = { accountId: 'acc_1', source: 'json', columns: ['email'], emailIndex: 0, rows: [rows] };
  const { result: job, largest, ticks } = await largestStretch(() => rowsRead, () => intake(deps, input));
  t.equal(job.total_rows, n);
  t.equal(job.unique_emails, 4_000);
  t.equal(bus.items, 4_000, 'every unique email published');
  t.ok(ticks >= n / LINE_BATCH, `the event loop turned ${ticks} times`);
  t.equal(LINE_BATCH, 250);
  t.ok(largest <= 250, `at most 250 rows between two turns (largest: ${largest})`);
});

t.test('publishWork: at most PUBLISH_TURN work messages per turn of the event loop', async (t) => {
  const items: WorkItem[] = Array.from({ length: 40_000 }, (_, i) => [i, `user${i}@domain${i % 1_000}.example`, 0]);
  const bus = countingBus();
  const { result: messages, largest } = await largestStretch(() => bus.messages, () => publishWork(bus, 'job_1', items));
  t.equal(bus.items, items.length, 'every item published');
  t.ok(messages >= items.length / WORK_CHUNK);
  t.equal(PUBLISH_TURN, 4);
  t.ok(largest <= 4, `at most 4 messages (2,000 items) between two turns (largest: ${largest})`);
});

t.test('publishWork: at most ITEMS_TURN items bucketed per turn when no bucket fills a message', async (t) => {
  // 10,000 domains of 2 items each (bench/jobs/ingest.ts's shape): ~310 items per bucket, so no
  // chunk of WORK_CHUNK fills before the end.
  const items: WorkItem[] = Array.from({ length: 20_000 }, (_, i) => [i, `user${i}@domain${i % 10_000}.example`, 0]);
  const bus = countingBus();
  let taken = 0;
  function* counted(): Generator<WorkItem> {
    for (const it of items) {
      taken++;
      yield it;
    }
  }
  const { largest } = await largestStretch(() => taken, () => publishWork(bus, 'job_1', counted()));
  t.equal(bus.items, items.length, 'every item published');
  t.equal(bus.messages, DOMAIN_BUCKETS, 'one message per bucket: no chunk filled before the end');
  t.equal(ITEMS_TURN, 5_000);
  t.ok(largest <= ITEMS_TURN, `at most ${ITEMS_TURN} items bucketed between two turns (largest: ${largest})`);
});

t.test('start-processing parses the upload in chunks of at most START_CHUNK_ROWS rows', async (t) => {
  const n = 3_000;
  const batchId = 'job_turns000000000000000000';
  let csv = 'name,email,city\r\n';
  for (let i = 0; i < n; i++) csv += `Name ${i},user${i}@domain${i % 50}.example,${i % 7 === 0 ? '"Paris, FR"' : 'Berlin'}\r\n`;
  await blobs.put(uploadKey(batchId), [Buffer.from(csv)]);
  const chunkSizes: number[] = [];
  const parser: ChunkParser = {
    inFlight: 1,
    parse: async (task) => {
      const r = parseCsvChunk(task);
      if (r.ok) chunkSizes.push(r.records.length);
      return r;
    },
  };
  let taken = 0;
  const jobs = {
    get: async () => ({ id: batchId, status: 'awaiting_upload', filename: 'leads.csv' }) as unknown as JobRecord,
    createJob: async (input: IntakeInput) => {
      for await (const chunk of input.rows) taken += chunk.length;
      return fakeJob(batchId, taken, taken);
    },
    checkWebhookUrl: (u: unknown) => String(u),
  };
  // The batch's intake claim (in the database in the service): granted here.
  const claims = { claimIntake: async () => true, renewIntake: async () => true, releaseIntake: async () => {} };
  const csvJobs = new CsvJobs({ jobs, store: { jobs: claims } as never, blobs, publicUrl: 'http://localhost', secret: 's'.repeat(32), maxBytes: 1 << 20, parser });
  const job = await csvJobs.start('acc_1', batchId, 'email');
  t.equal(job.total_rows, n, 'every row read');
  t.equal(taken, n);
  t.ok(chunkSizes.length >= n / START_CHUNK_ROWS, `${chunkSizes.length} chunks`);
  t.equal(START_CHUNK_ROWS, 250);
  t.ok(Math.max(...chunkSizes) <= 250, `at most 250 rows per chunk (largest: ${Math.max(...chunkSizes)})`);
});

t.test('the intake dedupe index: a Map in INDEX_SHARDS pieces, so no one rehash holds the whole index', async (t) => {
  const index = new DedupeIndex();
  const keys = Array.from({ length: 50_000 }, (_, i) => `user${i}@company${i % 2_000}.example`);
  keys.forEach((k, i) => index.set(k, i));
  t.equal(index.size, keys.length);
  t.ok(keys.every((k, i) => index.get(k) === i), 'every key answers its index');
  t.equal(index.get('nobody@company1.example'), undefined);
  index.set(keys[7]!, 99);
  t.equal(index.get(keys[7]!), 99, 'set again: the new index');
  t.equal(index.size, keys.length, 'and no new entry');
  const sizes = index.shardSizes();
  const mean = keys.length / INDEX_SHARDS;
  t.equal(sizes.length, INDEX_SHARDS);
  t.ok(Math.max(...sizes) < 1.5 * mean && Math.min(...sizes) > 0.5 * mean, `keys spread over the shards (${Math.min(...sizes)}-${Math.max(...sizes)} per shard, mean ${mean})`);
  index.clear();
  t.equal(index.size, 0);
});
