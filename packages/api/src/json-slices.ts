// A JSON body parser that gives the event loop a turn while it works: a 500,000-address batch
// (about 19 MiB) parsed by one JSON.parse call blocks every other request for 100 ms or more, and
// the strings it creates are collected in one long pause (bench/jobs/ingest.ts measured 300-450
// ms). This one walks the top-level object itself and parses each value of it with JSON.parse,
// except the elements of large arrays, which it takes a slice at a time with a turn in between.
// The result equals JSON.parse's (duplicate keys: the last wins); anything JSON.parse would
// refuse is refused with a SyntaxError (the error handler's `invalid_json`).

const WS = new Set([0x20, 0x09, 0x0a, 0x0d]);
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/** Elements parsed between two turns of the event loop. */
export const SLICE_ELEMENTS = 10_000;

class Scanner {
  i = 0;
  constructor(readonly b: Buffer) {}

  ws(): void {
    while (this.i < this.b.length && WS.has(this.b[this.i]!)) this.i++;
  }

  fail(what: string): never {
    throw new SyntaxError(`Unexpected ${this.i < this.b.length ? `byte at position ${this.i}` : 'end of JSON input'} (${what})`);
  }

  expect(byte: number, what: string): void {
    this.ws();
    if (this.b[this.i] !== byte) this.fail(what);
    this.i++;
  }

  /** End (exclusive) of the JSON string starting at i (a quote), and whether it holds an escape. */
  stringEnd(): { end: number; escaped: boolean } {
    const b = this.b;
    let escaped = false;
    for (let j = this.i + 1; j < b.length; j++) {
      const c = b[j];
      if (c === BACKSLASH) {
        escaped = true;
        j++;
      } else if (c === QUOTE) return { end: j + 1, escaped };
    }
    this.fail('unterminated string');
  }

  /** End (exclusive) of any JSON value starting at i: strings, and nesting counted outside strings. */
  valueEnd(): number {
    const start = this.i;
    let depth = 0;
    let j = start;
    while (j < this.b.length) {
      const c = this.b[j]!;
      if (c === QUOTE) {
        this.i = j;
        j = this.stringEnd().end;
        if (depth === 0) return j;
        continue;
      }
      if (c === 0x7b || c === 0x5b) depth++;
      else if (c === 0x7d || c === 0x5d) {
        if (depth === 0) return j; // the container around this value closes: a scalar ended
        depth--;
        if (depth === 0) return j + 1;
      } else if (depth === 0 && (c === 0x2c || WS.has(c))) return j;
      j++;
    }
    return j;
  }

  /** Parses the value at i with JSON.parse (any JSON value), and moves past it. */
  value(): unknown {
    this.ws();
    const start = this.i;
    const end = this.valueEnd();
    this.i = end;
    if (end === start) this.fail('value expected');
    return JSON.parse(this.b.toString('utf8', start, end));
  }
}

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** An array value, its elements parsed a slice at a time. */
async function array(s: Scanner): Promise<unknown[]> {
  s.expect(0x5b, "'['");
  const out: unknown[] = [];
  s.ws();
  if (s.b[s.i] === 0x5d) {
    s.i++;
    return out;
  }
  for (;;) {
    s.ws();
    if (s.b[s.i] === QUOTE) {
      const start = s.i;
      const { end, escaped } = s.stringEnd();
      s.i = end;
      // Most addresses have no escape: decode the bytes between the quotes directly. JSON.parse
      // still checks what a string may not hold (control characters) when there is an escape.
      const raw = s.b.toString('utf8', start + 1, end - 1);
      out.push(escaped || /[\u0000-\u001f]/.test(raw) ? JSON.parse(s.b.toString('utf8', start, end)) : raw);
    } else out.push(s.value());
    s.ws();
    const c = s.b[s.i];
    if (c === 0x2c) {
      s.i++;
      if (out.length % SLICE_ELEMENTS === 0) await turn();
      continue;
    }
    if (c === 0x5d) {
      s.i++;
      return out;
    }
    s.fail("',' or ']'");
  }
}

/**
 * Parses a JSON body whose top level is an object, giving the event loop a turn every
 * SLICE_ELEMENTS elements of its array members. Any other top level goes to JSON.parse whole.
 */
export async function parseJsonInSlices(body: Buffer): Promise<unknown> {
  const s = new Scanner(body);
  // A UTF-8 byte order mark is skipped, as Fastify's own JSON parser does.
  if (body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf) s.i = 3;
  s.ws();
  if (s.b[s.i] !== 0x7b) return JSON.parse(body.toString('utf8', s.i));
  s.i++;
  const out: Record<string, unknown> = {};
  s.ws();
  if (s.b[s.i] === 0x7d) s.i++;
  else {
    for (;;) {
      s.ws();
      if (s.b[s.i] !== QUOTE) s.fail('a key');
      const key = s.value() as string;
      // Fastify's parser refuses these (prototype poisoning); so does this one.
      if (key === '__proto__' || key === 'constructor') throw new SyntaxError(`forbidden property name in JSON: ${key}`);
      s.expect(0x3a, "':'");
      s.ws();
      const v = s.b[s.i] === 0x5b ? await array(s) : s.value();
      // JSON.parse keeps the last of duplicate keys, and treats __proto__ as a plain key.
      Object.defineProperty(out, key, { value: v, enumerable: true, writable: true, configurable: true });
      s.ws();
      const c = s.b[s.i];
      if (c === 0x2c) {
        s.i++;
        continue;
      }
      if (c === 0x7d) {
        s.i++;
        break;
      }
      s.fail("',' or '}'");
    }
  }
  s.ws();
  if (s.i !== s.b.length) s.fail('end of input');
  return out;
}

/** Bytes of a request body copied into its one buffer between two turns of the event loop. */
export const COPY_TURN_BYTES = 1_048_576;

/**
 * Reads a request body as fastify's `parseAs: 'buffer'` does (the route's body limit, checked on
 * the declared length and on what arrives; the declared length must match), but copies the chunks
 * into one buffer COPY_TURN_BYTES at a time with a turn in between: one Buffer.concat of a 19 MiB
 * batch held the event loop 66-76 ms on this 2-core VM (the copy faults in every page of a fresh
 * allocation), a stall every request during a batch ingest waited behind (bench/jobs/ingest.ts).
 * Errors are fastify's own, so the error handler answers them as before.
 */
export async function readBodyInTurns(payload: AsyncIterable<Buffer | string>, declaredLength: string | undefined, limit: number, errors: BodyErrors): Promise<Buffer> {
  const declared = declaredLength === undefined ? Number.NaN : Number(declaredLength);
  if (declared > limit) throw new errors.FST_ERR_CTP_BODY_TOO_LARGE();
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const piece of payload) {
      const chunk = typeof piece === 'string' ? Buffer.from(piece) : piece;
      size += chunk.length;
      if (size > limit) throw new errors.FST_ERR_CTP_BODY_TOO_LARGE();
      chunks.push(chunk);
    }
  } catch (err) {
    // A stream error (the client went away mid-body) is the request's fault, as fastify says.
    const e = err as Error & { statusCode?: number };
    if (!(typeof e.statusCode === 'number' && e.statusCode >= 400)) e.statusCode = 400;
    throw e;
  }
  if (!Number.isNaN(declared) && declared !== size) throw new errors.FST_ERR_CTP_INVALID_CONTENT_LENGTH();
  if (chunks.length === 1) return chunks[0]!;
  const body = Buffer.allocUnsafeSlow(size);
  let at = 0;
  let sinceTurn = 0;
  for (let i = 0; i < chunks.length; i++) {
    const chunk = chunks[i]!;
    chunk.copy(body, at);
    at += chunk.length;
    sinceTurn += chunk.length;
    chunks[i] = EMPTY; // each chunk can go as soon as it is copied
    if (sinceTurn >= COPY_TURN_BYTES) {
      sinceTurn = 0;
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }
  return body;
}

const EMPTY = Buffer.alloc(0);

/** The fastify error classes readBodyInTurns throws (fastify's `errorCodes`). */
export interface BodyErrors {
  FST_ERR_CTP_BODY_TOO_LARGE: new () => Error;
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: new () => Error;
}
