// The email finder's second kind of evidence: addresses known to exist at a domain whose owner's
// name is not known (a `valid` verdict of a validation, a job or a find; an address the asking
// account has confirmed delivery to). Without the name, such an address cannot say which pattern
// it follows, but its shape can narrow it: `j.smith` is `{f}.{last}` whoever j. smith is, and
// `jane.smith` is `{first}.{last}` or `{last}.{first}`. Only the shape of the local part is kept
// (finder_shapes: domain, shape, count), never the address.
//
// The finder reads shapes as weaker evidence than a pattern proven by name (SHAPE_WEIGHT of a
// confirmation), shared between the patterns a shape allows by how common each is in business
// mail (`{first}.{last}` far more than `{last}.{first}`). So on a catch-all domain, where the mail
// server proves nothing, three `initial.word` addresses make `{f}.{last}` a charged answer
// (confidence 79) and one does not (59); on any domain the shapes put the likely patterns first.
// Shapes that many patterns share (a single word: `jsmith`, `jane`, `smith`) say nothing and are
// not kept.

import type { Verdict } from '@svc/verifier';
import type { PatternCounts } from './patterns.ts';

/** The shapes kept, and the patterns each allows with the share each gets of its evidence. */
export const SHAPES: Readonly<Record<string, ReadonlyArray<readonly [pattern: string, share: number]>>> = Object.freeze({
  'word.word': [
    ['{first}.{last}', 0.75],
    ['{last}.{first}', 0.25],
  ],
  'initial.word': [['{f}.{last}', 1]],
  'word.initial': [['{first}.{l}', 1]],
  word_word: [
    ['{first}_{last}', 0.75],
    ['{last}_{first}', 0.25],
  ],
  'word-word': [['{first}-{last}', 1]],
});

/** What one address of a shape is worth against one address proven by name. */
export const SHAPE_WEIGHT = 0.5;

const SHAPED = /^([a-z]+)([._-])([a-z]+)$/;

/**
 * The shape of a local part (case ignored), or undefined when it has none of SHAPES: two runs of
 * ASCII letters around one `.`, `_` or `-` (a word is 2 letters or more, an initial 1). Digits,
 * a second separator, a single word: no shape.
 */
export function shapeOf(local: string): string | undefined {
  const m = SHAPED.exec(local.toLowerCase());
  if (!m) return undefined;
  const [, a, sep, b] = m as unknown as [string, string, string, string];
  const kind = (s: string) => (s.length === 1 ? 'initial' : 'word');
  const shape = `${kind(a)}${sep}${kind(b)}`;
  return shape in SHAPES ? shape : undefined;
}

/** Shape counts as pattern counts: each shape's count × SHAPE_WEIGHT, shared among its patterns. */
export function shapeEvidence(shapes: Readonly<Record<string, number>>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [shape, n] of Object.entries(shapes)) {
    const patterns = SHAPES[shape];
    if (!patterns || typeof n !== 'number' || !Number.isFinite(n) || n <= 0) continue;
    for (const [pattern, share] of patterns) out[pattern] = (out[pattern] ?? 0) + n * SHAPE_WEIGHT * share;
  }
  return out;
}

/** The sum of several tallies of pattern evidence. */
export function addCounts(...tallies: ReadonlyArray<Readonly<Record<string, number>>>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const t of tallies) for (const [k, n] of Object.entries(t)) if (typeof n === 'number' && Number.isFinite(n) && n > 0) out[k] = (out[k] ?? 0) + n;
  return out;
}

/** The shapes of some local parts (or whole addresses), counted. */
export function shapesOf(addresses: Iterable<string>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const a of addresses) {
    const at = a.lastIndexOf('@');
    const shape = shapeOf(at < 0 ? a : a.slice(0, at));
    if (shape) out[shape] = (out[shape] ?? 0) + 1;
  }
  return out;
}

/** Where sightings go (@svc/store's FinderPatternsRepo). */
export interface ShapeSink {
  addShapes(sightings: ReadonlyArray<{ domain: string; shape: string; n: number }>): Promise<void>;
}

export interface ShapeLearnerOptions {
  /** How often sightings are written (default 5 s). */
  flushMs?: number;
  /** The most (domain, shape) pairs held between writes; a new pair past it is not counted (default 10,000). */
  maxPending?: number;
  /** Where a failed write is reported (its sightings are dropped: evidence, not records). */
  warn?: (err: unknown, lost: number) => void;
}

/**
 * Learns shapes from fresh verdicts (the verifier's observer: every probe of validations, jobs and
 * finds, a cached answer not again): a `valid` address on a domain that does not accept everything
 * adds one sighting of its shape. Buffered in memory and written every flushMs in one statement,
 * so the probing path pays a map update.
 */
export class ShapeLearner {
  readonly #sink: ShapeSink;
  readonly #flushMs: number;
  readonly #maxPending: number;
  readonly #warn: ((err: unknown, lost: number) => void) | undefined;
  #pending = new Map<string, { domain: string; shape: string; n: number }>();
  #timer: NodeJS.Timeout | undefined;
  #writing: Promise<void> = Promise.resolve();

  constructor(sink: ShapeSink, opts: ShapeLearnerOptions = {}) {
    this.#sink = sink;
    this.#flushMs = opts.flushMs ?? 5_000;
    this.#maxPending = opts.maxPending ?? 10_000;
    this.#warn = opts.warn;
  }

  /** A fresh verdict of `local@domain` (domain in ASCII, lower case). */
  verdict(domain: string, local: string, v: Pick<Verdict, 'result' | 'is_catchall'>): void {
    if (v.result !== 'valid' || v.is_catchall) return;
    const shape = shapeOf(local);
    if (!shape) return;
    const key = `${domain}\n${shape}`;
    const had = this.#pending.get(key);
    if (had) had.n++;
    else if (this.#pending.size < this.#maxPending) this.#pending.set(key, { domain, shape, n: 1 });
    this.#timer ??= setTimeout(() => void this.flush(), this.#flushMs).unref();
  }

  /** Writes what is pending (and waits for a write under way). */
  flush(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const batch = [...this.#pending.values()];
    this.#pending = new Map();
    this.#writing = this.#writing.then(async () => {
      if (batch.length === 0) return;
      try {
        await this.#sink.addShapes(batch);
      } catch (err) {
        this.#warn?.(err, batch.length);
      }
    });
    return this.#writing;
  }
}

/** Pattern evidence for the finder: proven patterns plus shapes (global and the account's delivered addresses). */
export function findEvidence(proven: PatternCounts, shapes: Readonly<Record<string, number>>, delivered: Iterable<string> = []): Record<string, number> {
  const named = proven instanceof Map ? Object.fromEntries(proven) : { ...proven };
  return addCounts(named as Record<string, number>, shapeEvidence(shapes), shapeEvidence(shapesOf(delivered)));
}
