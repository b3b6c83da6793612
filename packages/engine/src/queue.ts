import type { Item } from './types.ts';

/** Items waiting for a session, oldest first: a ring-free deque (push back, take front, put back at the front). */
export class Queue {
  #items: Item[] = [];
  #head = 0;

  get length(): number {
    return this.#items.length - this.#head;
  }

  push(item: Item): void {
    this.#items.push(item);
  }

  /** Puts items back at the front, in the order given. */
  unshift(items: Item[]): void {
    if (items.length === 0) return;
    this.#items = [...items, ...this.#items.slice(this.#head)];
    this.#head = 0;
  }

  /** Takes up to `n` items that `ok` accepts, front first; skips (drops) items already done. */
  take(n: number, ok: (item: Item) => boolean): Item[] {
    const out: Item[] = [];
    const skipped: Item[] = [];
    while (out.length < n && this.#head < this.#items.length) {
      const item = this.#items[this.#head++]!;
      if (item.done) continue;
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

  /** Removes and returns everything not done. */
  drain(): Item[] {
    const out = this.#items.slice(this.#head).filter((i) => !i.done);
    this.#items = [];
    this.#head = 0;
    return out;
  }

  /** Drops items that are done from the front (cheap housekeeping). */
  live(): number {
    while (this.#head < this.#items.length && this.#items[this.#head]!.done) this.#head++;
    return this.length;
  }
}
