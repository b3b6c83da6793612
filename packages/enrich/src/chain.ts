// A family's providers, tried in the configured order (SVC_COMPANY_PROVIDERS=native,pdl): the
// first that finds an answer wins, a provider that finds nothing hands over to the next, and a
// provider that fails (timeout, 5xx, 429 after its retries, an open circuit) is skipped. When
// every provider failed and none answered "not found", the request fails with
// provider_unavailable (503, retried by clients, never charged); when at least one said "not
// found" and none found, the answer is not found.
//
// Each provider has a circuit breaker: after `failuresToOpen` failures in a row its calls fail at
// once for `openMs` (a dead vendor costs microseconds, not a timeout per request), then one trial
// call is let through; its success closes the circuit, its failure opens it again.

/** What a provider answers: found (with the value), or not found (with why, for the response's `error`). */
export type ProviderAnswer<T> = { found: true; value: T } | { found: false; error?: string };

/**
 * A provider's failure. `retryable`: the same call may succeed later (timeout, 429, 5xx, a
 * connection refused); `retryAfterMs` is the provider's own hint (a 429's Retry-After).
 */
export class ProviderError extends Error {
  constructor(
    message: string,
    readonly retryable: boolean,
    readonly retryAfterMs?: number,
  ) {
    super(message);
    this.name = 'ProviderError';
  }
}

export interface BreakerOptions {
  failuresToOpen: number;
  openMs: number;
  now?: () => number;
}

export class CircuitBreaker {
  #failures = 0;
  #openUntil = 0;
  #trial = false;
  readonly #o: Required<BreakerOptions>;

  constructor(opts: BreakerOptions) {
    this.#o = { now: () => Date.now(), ...opts };
  }

  /** Whether a call may go out now (while half-open: only the one trial). */
  allow(): boolean {
    if (this.#failures < this.#o.failuresToOpen) return true;
    if (this.#o.now() < this.#openUntil || this.#trial) return false;
    this.#trial = true;
    return true;
  }

  success(): void {
    this.#failures = 0;
    this.#trial = false;
  }

  failure(): void {
    this.#failures++;
    this.#trial = false;
    if (this.#failures >= this.#o.failuresToOpen) this.#openUntil = this.#o.now() + this.#o.openMs;
  }

  get state(): 'closed' | 'open' | 'half_open' {
    if (this.#failures < this.#o.failuresToOpen) return 'closed';
    return this.#o.now() < this.#openUntil ? 'open' : 'half_open';
  }
}

export interface ChainOptions {
  /** One attempt of one provider may take this long (ms). */
  timeoutMs: number;
  /** Attempts per provider for a retryable failure (1 = no retry). */
  attempts: number;
  /** First back-off (ms), doubled per retry, with jitter; a provider's retryAfterMs wins when longer, up to maxBackoffMs. */
  backoffMs: number;
  maxBackoffMs: number;
  breaker: Omit<BreakerOptions, 'now'>;
  /** A provider's own time cap and attempts, by its name (a website is not a vendor's API). */
  perProvider?: Readonly<Record<string, Partial<Pick<ChainOptions, 'timeoutMs' | 'attempts'>>>>;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

export const DEFAULT_CHAIN_OPTIONS: ChainOptions = {
  timeoutMs: 10_000,
  attempts: 3,
  backoffMs: 200,
  maxBackoffMs: 2_000,
  breaker: { failuresToOpen: 5, openMs: 30_000 },
};

export interface Named {
  readonly name: string;
}

export type ChainResult<T> =
  | { found: true; value: T; provider: string; tried: string[] }
  /** `failures`: the providers that failed meanwhile (their answer is unknown, so the miss may not be one). */
  | { found: false; error?: string; tried: string[]; failures: string[] }
  | { failed: true; tried: string[]; errors: string[] };

/** A family's providers with one breaker each. */
export class ProviderChain<P extends Named> {
  readonly #breakers = new Map<string, CircuitBreaker>();
  readonly #o: ChainOptions;

  constructor(
    readonly providers: readonly P[],
    opts: Partial<ChainOptions> = {},
  ) {
    this.#o = { ...DEFAULT_CHAIN_OPTIONS, ...opts };
    for (const p of providers) this.#breakers.set(p.name, new CircuitBreaker({ ...this.#o.breaker, ...(this.#o.now ? { now: this.#o.now } : {}) }));
  }

  get configured(): boolean {
    return this.providers.length > 0;
  }

  breaker(name: string): CircuitBreaker | undefined {
    return this.#breakers.get(name);
  }

  /**
   * Asks the providers in order. `call` gets a signal that aborts at the attempt's timeout (or
   * when `outer` aborts); `accepts` may refuse a provider's found answer (e.g. too little
   * confidence) so the next provider is asked, keeping the refused one as the fallback.
   */
  async run<T>(call: (p: P, signal: AbortSignal) => Promise<ProviderAnswer<T>>, opts: { signal?: AbortSignal; accepts?: (value: T) => boolean } = {}): Promise<ChainResult<T>> {
    const tried: string[] = [];
    const errors: string[] = [];
    let notFound: { error?: string } | undefined;
    let fallback: { value: T; provider: string } | undefined;
    for (const p of this.providers) {
      tried.push(p.name);
      const breaker = this.#breakers.get(p.name)!;
      if (!breaker.allow()) {
        errors.push(`${p.name}: circuit open`);
        continue;
      }
      const r = await this.#attempt(p, call, opts.signal);
      if ('failed' in r) {
        breaker.failure();
        errors.push(`${p.name}: ${r.error}`);
        if (opts.signal?.aborted) break;
        continue;
      }
      breaker.success();
      const { answer } = r;
      if (answer.found) {
        if (!opts.accepts || opts.accepts(answer.value)) return { found: true, value: answer.value, provider: p.name, tried };
        fallback ??= { value: answer.value, provider: p.name };
        continue;
      }
      notFound ??= answer.error === undefined ? {} : { error: answer.error };
    }
    if (fallback) return { found: true, value: fallback.value, provider: fallback.provider, tried };
    if (notFound) return { found: false, ...notFound, tried, failures: errors };
    return { failed: true, tried, errors };
  }

  async #attempt<T>(p: P, call: (p: P, signal: AbortSignal) => Promise<ProviderAnswer<T>>, outer?: AbortSignal): Promise<{ answer: ProviderAnswer<T> } | { failed: true; error: string }> {
    const sleep = this.#o.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
    const { timeoutMs, attempts } = { timeoutMs: this.#o.timeoutMs, attempts: this.#o.attempts, ...this.#o.perProvider?.[p.name] };
    let last = 'no attempt';
    for (let attempt = 1; attempt <= attempts; attempt++) {
      // A timer of our own (AbortSignal.timeout's does not keep the process alive while a call hangs).
      const ac = new AbortController();
      const timer = setTimeout(() => ac.abort(timeoutError(timeoutMs)), timeoutMs);
      const signal = outer ? AbortSignal.any([outer, ac.signal]) : ac.signal;
      try {
        const answer = await raceAbort(call(p, signal), signal, timeoutMs);
        clearTimeout(timer);
        return { answer };
      } catch (err) {
        clearTimeout(timer);
        const retryable = err instanceof ProviderError ? err.retryable : isTimeout(err);
        last = err instanceof Error ? err.message : String(err);
        if (!retryable || attempt === attempts || outer?.aborted) break;
        const hint = err instanceof ProviderError ? (err.retryAfterMs ?? 0) : 0;
        const backoff = Math.min(this.#o.maxBackoffMs, Math.max(hint, this.#o.backoffMs * 2 ** (attempt - 1) * (0.5 + Math.random() / 2)));
        await sleep(backoff);
      }
    }
    return { failed: true, error: last };
  }
}

function isTimeout(err: unknown): boolean {
  const name = (err as { name?: string })?.name;
  return name === 'TimeoutError' || name === 'AbortError';
}

/** The call's answer, or a TimeoutError once the signal aborts (a provider that ignores its signal still loses). */
function raceAbort<T>(p: Promise<T>, signal: AbortSignal, timeoutMs: number): Promise<T> {
  if (signal.aborted) return Promise.reject(timeoutError(timeoutMs));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(timeoutError(timeoutMs));
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

function timeoutError(ms: number): Error {
  const e = new Error(`no answer within ${ms} ms`);
  e.name = 'TimeoutError';
  return e;
}
