// Job intake: rows in input order → dedupe → the input stored in the blob store
// (intake/rows.ts) → the job recorded with its credits held (one transaction) → work published on the
// bus. JSON jobs and CSV jobs come through the same function; rows arrive in chunks and are
// written out as they come, so nothing but the dedupe index (one entry per unique email) grows
// with the input.
//
// Dedupe (docs/decisions/jobs-and-csv.md, "Same email"): two strings are the same email when the
// verifier's parser gives them the same mailbox (exact local part, canonical form of a quoted one;
// the domain case-insensitive, in ASCII): the same key sync pricing uses, so one mailbox is never
// probed or charged twice in a job. Strings that are not addresses are deduplicated by their exact
// (trimmed) text. Credits reserved = unique emails.

import { randomBytes } from 'node:crypto';
import { ServiceError } from '@svc/contracts';
import { DEFAULT_CLAIM_LEASE_MS, keepRenewing, type BlobStore, type IdempotentCompletion, type JobRecord, type JobSource, type Store } from '@svc/store';
import { parseAddress } from '@svc/verifier';
import { jobCredits, refusal } from '@svc/billing';
import type { WorkItem } from '@svc/contracts';
import { publishWork } from '../pipeline/publish.ts';
import { fnv1a, type Bus } from '@svc/bus';
import { BitSet, dupsKey, rowLine, rowsKey, type RowsHeader } from './rows.ts';

/** One input row: its cells (the input columns of the results CSV) and its email, trimmed. */
export interface IntakeRow {
  fields: readonly string[];
  email: string;
}

export interface IntakeInput {
  accountId: string;
  source: JobSource;
  /** The input columns (JSON jobs: `['email']`). */
  columns: readonly string[];
  /** Which column holds the email. */
  emailIndex: number;
  /** The upload started with a UTF-8 BOM. */
  bom?: boolean;
  /**
   * The rows in input order, in chunks. To refuse the input (a CSV error), throw a ServiceError
   * from the iterable: nothing is kept and the error reaches the caller.
   */
  rows: AsyncIterable<readonly IntakeRow[]> | Iterable<readonly IntakeRow[]>;
  webhookUrl?: string | null;
  filename?: string | null;
  emailColumn?: string | null;
  /** A CSV job made by prepare-upload (awaiting its upload): it is queued instead of created. */
  jobId?: string;
  /** An idempotent request's response, recorded in the transaction that creates the job. */
  completion?: (job: JobRecord) => IdempotentCompletion;
}

export interface IntakeDeps {
  store: Pick<Store, 'jobs'> & Partial<Pick<Store, 'ledger'>>;
  blobs: BlobStore;
  bus: Bus;
  /** Publishing the work of a created job failed (a worker publishes it once the claim runs out). */
  onPublishError?: (err: unknown, jobId: string) => void;
  /**
   * SVC_CLAIM_LEASE_MS (default 15 s): the job is created with a claim on publishing its work,
   * renewed every third of it while the intake publishes; if this process dies first, a worker
   * takes the job over when the claim runs out (JobsService's unpublished sweep).
   */
  claimLeaseMs?: number;
}

export const newJobId = (): string => `job_${randomBytes(12).toString('hex')}`;

/** The dedupe key of an email (see the file comment). */
export function dedupeKey(email: string): string {
  const p = parseAddress(email);
  if (!p.ok) return `\u0000${email}`;
  const key = `${p.local}@${p.asciiDomain}`;
  // Most addresses are their own key: keep the string the row already holds, so the dedupe map
  // of a 500,000-row job does not hold a second copy of each (~25 MiB).
  return key === email ? email : key;
}

const yieldToLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Maps of the dedupe index: a Map doubles its table all at once as it grows. */
export const INDEX_SHARDS = 64;

/**
 * The intake's dedupe index (dedupe key → index of the unique email), in INDEX_SHARDS maps by a
 * hash of the key. One Map of a 490,000-unique job rehashed its 262,144 entries in one go halfway
 * through the intake: a 60-80 ms stall of the event loop in every 500,000-address ingest
 * (bench/jobs/ingest.ts); a shard's rehash is a 64th of that.
 */
export class DedupeIndex {
  readonly #shards = Array.from({ length: INDEX_SHARDS }, () => new Map<string, number>());

  #shard(key: string): Map<string, number> {
    // FNV-1a's low bits alone spread similar keys unevenly (507-1,209 keys per shard for a mean
    // of 781): mixed with MurmurHash3's finaliser first.
    let h = fnv1a(key);
    h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
    h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
    return this.#shards[((h ^ (h >>> 16)) >>> 0) % INDEX_SHARDS]!;
  }

  get(key: string): number | undefined {
    return this.#shard(key).get(key);
  }

  set(key: string, idx: number): void {
    this.#shard(key).set(key, idx);
  }

  get size(): number {
    return this.#shards.reduce((n, m) => n + m.size, 0);
  }

  /** Entries per shard. */
  shardSizes(): number[] {
    return this.#shards.map((m) => m.size);
  }

  clear(): void {
    for (const m of this.#shards) m.clear();
  }
}

/**
 * Rows per written line batch; the event loop gets a turn between batches. Deduping a row costs
 * about 10 µs (parseAddress), so a request served during a 500,000-row intake waits for a few
 * milliseconds of it at most (1,000 rows: 10-25 ms on a busy 2-core machine; bench/jobs/ingest.ts).
 */
export const LINE_BATCH = 250;

/**
 * Runs the intake of one job and returns it queued. Throws ServiceError `insufficient_credits`
 * (with `required` and `available`), `job_not_found` / `invalid_job_state` (a CSV job that is not
 * awaiting its upload), or whatever the rows throw; in every case the stored input is deleted.
 */
export async function intake(deps: IntakeDeps, input: IntakeInput): Promise<JobRecord> {
  const { store, blobs, bus } = deps;
  const lease = deps.claimLeaseMs ?? DEFAULT_CLAIM_LEASE_MS;
  const id = input.jobId ?? newJobId();
  const rKey = rowsKey(id);
  const dKey = dupsKey(id);
  const index = new DedupeIndex();
  const uniques: string[] = [];
  const dups = new BitSet();
  let total = 0;

  const header: RowsHeader = { v: 1, columns: [...input.columns], email_index: input.emailIndex, bom: input.bom ?? false };
  async function* lines(): AsyncGenerator<string> {
    yield `${JSON.stringify(header)}\n`;
    let out = '';
    let n = 0;
    for await (const chunk of input.rows) {
      for (const row of chunk) {
        const key = dedupeKey(row.email);
        let idx = index.get(key);
        if (idx === undefined) {
          idx = uniques.length;
          index.set(key, idx);
          uniques.push(row.email);
        } else dups.set(idx);
        total++;
        out += `${rowLine(idx, row.fields)}\n`;
        if (++n >= LINE_BATCH) {
          yield out;
          out = '';
          n = 0;
          await yieldToLoop();
        }
      }
    }
    if (out) yield out;
  }

  const cleanup = async () => {
    await blobs.delete(rKey).catch(() => {});
    await blobs.delete(dKey).catch(() => {});
  };
  let job: JobRecord;
  try {
    await blobs.put(rKey, lines());
    index.clear();
    if (total === 0) throw new ServiceError('emails_required');
    await blobs.put(dKey, [Buffer.from(dups.slice(uniques.length))]);
    const counts = { totalRows: total, uniqueEmails: uniques.length, inputKey: rKey, publishLeaseMs: lease };
    if (input.jobId) {
      const r = await store.jobs.queue(input.accountId, input.jobId, { ...counts, emailColumn: input.emailColumn ?? null }, jobCredits, input.completion);
      if (!r.ok) {
        if ('available' in r) throw await refusal(store, input.accountId, insufficient(uniques.length, r.available));
        throw new ServiceError(r.reason === 'not_found' ? 'job_not_found' : 'invalid_job_state');
      }
      job = r.job;
    } else {
      const r = await store.jobs.create(
        { id, accountId: input.accountId, source: input.source, filename: input.filename ?? null, webhookUrl: input.webhookUrl ?? null, emailColumn: input.emailColumn ?? null, ...counts },
        jobCredits,
        input.completion,
      );
      if (!r.ok) throw await refusal(store, input.accountId, insufficient(uniques.length, r.available));
      job = r.job;
    }
  } catch (err) {
    await cleanup();
    throw err;
  }
  // The job is durable from here, with this process's claim on publishing its work: if publishing
  // fails (or the process dies), the claim runs out and a worker publishes what is missing
  // (JobsService's unpublished sweep; an embedded restart resumes it at start).
  const stopRenewing = keepRenewing(lease, () => store.jobs.renewPublish(job.id, lease));
  try {
    await publishWork(bus, job.id, uniqueItems(uniques), job.account_id);
    await store.jobs.markWorkPublished(job.id);
  } catch (err) {
    deps.onPublishError?.(err, job.id);
  } finally {
    stopRenewing();
  }
  return job;
}

function* uniqueItems(uniques: readonly string[]): Generator<WorkItem> {
  for (let i = 0; i < uniques.length; i++) yield [i, uniques[i]!, 0];
}

export function insufficient(required: number, available: number): ServiceError {
  return new ServiceError('insufficient_credits', `This job needs ${required} credits (one per unique email); ${available} available`, { required, available });
}
