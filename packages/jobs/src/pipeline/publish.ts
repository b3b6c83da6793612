// Publishing a job's work on the bus: its unique emails grouped by a bucket of their domain (the
// work topic's key, so one partition owner sees every address of a domain), in the job's own
// fairness lane. The message shapes are @svc/contracts' (messages.ts), the topics @svc/bus's.

import type { WorkItem, WorkMessageV1 } from '@svc/contracts';
import { fnv1a, WORK_TOPIC, type Bus, type PublishOptions } from '@svc/bus';

/** Unique emails per work message. */
export const WORK_CHUNK = 500;
/** Work messages published per turn of the event loop. */
export const PUBLISH_TURN = 4;
/** Domain buckets: the work topic's keys (`d0` … `d63`). */
export const DOMAIN_BUCKETS = 64;

/** The bus lanes of a job's messages: its own lane, in its account's group (PublishOptions). */
export const jobLane = (jobId: string, accountId: string | undefined): PublishOptions => ({ lane: jobId, ...(accountId ? { group: accountId } : {}) });

/** The domain part of an address as written, lower-cased: enough to bucket it (the verifier canonicalises). */
export function domainOf(email: string): string {
  const at = email.lastIndexOf('@');
  return at < 0 ? '' : email.slice(at + 1).toLowerCase();
}

export const bucketKey = (email: string): string => `d${fnv1a(domainOf(email)) % DOMAIN_BUCKETS}`;

/** Work items bucketed between two turns of the event loop (bucketKey parses each address: ~1 µs). */
export const ITEMS_TURN = 5_000;

/**
 * Publishes work for a job: items grouped by domain bucket, at most WORK_CHUNK per message, each
 * message keyed by its bucket. Returns the number of messages.
 */
export async function publishWork(bus: Bus, jobId: string, items: Iterable<WorkItem>, accountId?: string): Promise<number> {
  const open = new Map<string, WorkItem[]>();
  let sent = 0;
  const flush = async (key: string, chunk: WorkItem[]) => {
    const message: WorkMessageV1 = { v: 1, job_id: jobId, ...(accountId ? { account_id: accountId } : {}), items: chunk };
    // The job's own lane in its account's group: another account's work, and another job's, is
    // taken in turn with it, not after it.
    await bus.publish(WORK_TOPIC, key, message as unknown as WorkMessageV1 & { readonly [k: string]: unknown }, jobLane(jobId, accountId));
    // A 500,000-address job is a thousand messages: let requests in between, every
    // PUBLISH_TURN messages (each cloned by the in-process bus: a few milliseconds per turn).
    if (++sent % PUBLISH_TURN === 0) await new Promise<void>((resolve) => setImmediate(resolve));
  };
  let seen = 0;
  for (const item of items) {
    // Items spread over many buckets fill no chunk until the end: a turn every ITEMS_TURN items too
    // (500,000 items over DOMAIN_BUCKETS buckets fill few chunks before the end: one 100-170 ms stretch).
    const key = bucketKey(item[1]);
    if (++seen % ITEMS_TURN === 0) await new Promise<void>((resolve) => setImmediate(resolve));
    let chunk = open.get(key);
    if (!chunk) open.set(key, (chunk = []));
    chunk.push(item);
    if (chunk.length >= WORK_CHUNK) {
      open.delete(key);
      await flush(key, chunk);
    }
  }
  for (const [key, chunk] of open) await flush(key, chunk);
  return sent;
}
