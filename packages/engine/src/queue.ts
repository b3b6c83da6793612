// What waits for a session to an MX host: the MX actor's own record of each recipient, in two
// deques: recipients of a request with a deadline (a synchronous request) are taken before those
// without (a job's), so a real-time validation does not queue behind a job's thousands of
// recipients on the same host; each lane keeps its own order.

import type { RcptRequest } from './types.ts';

/** A recipient as the MX actor holds it: the request, and what the actor learnt about it. */
export interface Entry {
  readonly req: RcptRequest;
  /** Sessions that ended under it without an answer (dropped line, protocol error, 421). */
  interruptions: number;
  /** Withdrawn by its domain actor (answered elsewhere, past its deadline): skipped wherever it is found. */
  withdrawn: boolean;
  /** When it came to this MX actor (clock time). */
  readonly arrivedAt: number;
}

/** Entries waiting for a session, oldest first: a ring-free deque (push back, take front, put back at the front). */
class Deque {
  #items: Entry[] = [];
  #head = 0;

  get length(): number {
    return this.#items.length - this.#head;
  }

  push(item: Entry): void {
    this.#items.push(item);
  }

  /** Puts entries back at the front, in the order given. */
  unshift(items: Entry[]): void {
    if (items.length === 0) return;
    this.#items = [...items, ...this.#items.slice(this.#head)];
    this.#head = 0;
  }

  /** Takes up to `n` entries that `ok` accepts, front first; skips (drops) withdrawn ones. */
  take(n: number, ok: (item: Entry) => boolean): Entry[] {
    const out: Entry[] = [];
    const skipped: Entry[] = [];
    while (out.length < n && this.#head < this.#items.length) {
      const item = this.#items[this.#head++]!;
      if (item.withdrawn) continue;
      if (ok(item)) out.push(item);
      else skipped.push(item);
      if (skipped.length > 1000) break; // leave the rest for another session
    }
    if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    this.unshift(skipped);
    return out;
  }

  /** Everything waiting and not withdrawn, front first (a copy: the queue may change while it is read). */
  entries(): Entry[] {
    return this.#items.slice(this.#head).filter((i) => !i.withdrawn);
  }

  /** Removes and returns everything not withdrawn. */
  drain(): Entry[] {
    const out = this.#items.slice(this.#head).filter((i) => !i.withdrawn);
    this.#items = [];
    this.#head = 0;
    return out;
  }

  /** Drops withdrawn entries from the front (cheap housekeeping). */
  live(): number {
    while (this.#head < this.#items.length && this.#items[this.#head]!.withdrawn) this.#head++;
    return this.length;
  }
}

/** The MX actor's queue: the urgent lane (requests with a deadline) first, then the rest. */
export class Queue {
  readonly #urgent = new Deque();
  readonly #rest = new Deque();

  #lane(item: Entry): Deque {
    return item.req.urgent ? this.#urgent : this.#rest;
  }

  get length(): number {
    return this.#urgent.length + this.#rest.length;
  }

  push(item: Entry): void {
    this.#lane(item).push(item);
  }

  /** Puts entries back at the front of their lanes, in the order given. */
  unshift(items: Entry[]): void {
    this.#urgent.unshift(items.filter((i) => i.req.urgent));
    this.#rest.unshift(items.filter((i) => !i.req.urgent));
  }

  /** Takes up to `n` entries that `ok` accepts, the urgent lane first; skips (drops) withdrawn ones. */
  take(n: number, ok: (item: Entry) => boolean): Entry[] {
    const out = this.#urgent.take(n, ok);
    return out.length < n ? out.concat(this.#rest.take(n - out.length, ok)) : out;
  }

  /** Everything waiting and not withdrawn, urgent first (a copy). */
  entries(): Entry[] {
    return this.#urgent.entries().concat(this.#rest.entries());
  }

  /** Removes and returns everything not withdrawn. */
  drain(): Entry[] {
    return this.#urgent.drain().concat(this.#rest.drain());
  }

  /** Drops withdrawn entries from the fronts (cheap housekeeping). */
  live(): number {
    return this.#urgent.live() + this.#rest.live();
  }
}
