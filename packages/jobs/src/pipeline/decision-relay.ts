// Ships the decision outbox to analytics (every validation decision goes to analytics:
// docs/decisions/jobs-and-csv.md, "Decisions reach analytics").
// A job's decisions are queued in the transaction that records its results (JobsRepo.recordResults),
// so a worker killed before its analytics buffer was written loses none: whichever relay runs next
// takes them. The relay writes each batch with Analytics.recordNow (not the buffer) and deletes it
// only once it landed; a crash in between sends it again, and analytics, idempotent by decision
// id, counts it once. Every consuming process runs one; relays share the outbox (SKIP LOCKED).

import type { Analytics, Store } from '@svc/store';
import type { JobsLogger } from './aggregator.ts';
import { MAX_RETRY_DELAY_MS, retryDelay } from '@svc/bus';

/** Decisions per analytics write. */
export const RELAY_BATCH = 1_000;
/** How often the relay looks at the outbox without being kicked (another process's results). */
export const RELAY_POLL_MS = 1_000;
/** Back-off after a failed shipment: doubling from RELAY_POLL_MS up to this (the bus's retry cap). */
export const RELAY_MAX_BACKOFF_MS = MAX_RETRY_DELAY_MS;

export interface DecisionRelayOptions {
  store: Pick<Store, 'decisionOutbox'>;
  analytics: Pick<Analytics, 'recordNow'>;
  log: JobsLogger;
  pollMs?: number;
  batch?: number;
}

export class DecisionRelay {
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #again = false;
  #stopped = true;
  #failures = 0;
  readonly #pollMs: number;
  readonly #batch: number;

  constructor(private readonly o: DecisionRelayOptions) {
    this.#pollMs = o.pollMs ?? RELAY_POLL_MS;
    this.#batch = o.batch ?? RELAY_BATCH;
  }

  start(): void {
    this.#stopped = false;
    this.kick();
  }

  /** Ships what is queued now (results were just recorded), or as soon as the shipment in progress ends. */
  kick(): void {
    if (this.#stopped) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    clearTimeout(this.#timer);
    this.#running = this.#run().finally(() => {
      this.#running = undefined;
      if (this.#stopped) return;
      // After a failure the bus's back-off: doubling from pollMs up to RELAY_MAX_BACKOFF_MS.
      const wait = this.#failures === 0 ? this.#pollMs : retryDelay(this.#pollMs, this.#failures);
      this.#timer = setTimeout(() => this.kick(), wait);
      this.#timer.unref();
    });
  }

  /** Ships batches until the outbox is empty (or a shipment fails: the rows stay queued). Returns how many it shipped. */
  async drain(): Promise<number> {
    let shipped = 0;
    for (;;) {
      const n = await this.o.store.decisionOutbox.ship(this.#batch, (ds) => this.o.analytics.recordNow(ds));
      shipped += n;
      if (n < this.#batch) return shipped;
    }
  }

  async #run(): Promise<void> {
    do {
      this.#again = false;
      try {
        await this.drain();
        this.#failures = 0;
      } catch (err) {
        this.#failures++;
        // Analytics (or the database) is away: the decisions wait in the outbox, nothing is lost.
        if (this.#failures === 1 || this.#failures % 10 === 0) this.o.log.warn({ err, failures: this.#failures }, 'decision outbox: analytics write failed; the decisions stay queued');
        return;
      }
    } while (this.#again && !this.#stopped);
  }

  /** No more shipments after the one in progress; then one last drain (best effort: what fails stays queued). */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#running;
    await this.drain().catch(() => {});
  }
}
