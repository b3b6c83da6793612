// The four-layer pipeline: syntax, DNS, SMTP, catch-all. Pure orchestration over ports.
// Two steps so the caller can price the work before it is done: plan() parses and reads the
// verdict cache (so the most the work can cost is known), run() does the rest.

import type { CachePort, DnsPort, ProbePort } from './ports.ts';
import { parseAddress } from './syntax.ts';
import type { MxAnswer, ParsedAddress, Verdict } from './types.ts';
import { buildVerdict } from './verdict.ts';

export interface VerifierConfig {
  /** How long a definite verdict (valid, invalid, risky…) is reused. Unknown is never cached. */
  resultCacheTtlMs: number;
  mxCacheTtlMs: number;
  /** NXDOMAIN, no records and null MX: cached shorter. SERVFAIL and timeouts are not cached. */
  negativeDnsCacheTtlMs: number;
  /** Sync requests: how often a 4xx RCPT answer (greylisting) is asked again before `unknown`. */
  smtpRetries: number;
  /**
   * The most one address may take end to end (every MX, every phase, retries). Past it the
   * answer is `unknown`; the SMTP session goes on in the background within its own timeouts.
   */
  deadlineMs?: number;
}

/** The production settings that are not operator configuration; callers may override any. */
export function verifierConfig(c: Partial<VerifierConfig> = {}): VerifierConfig {
  return {
    smtpRetries: 1,
    resultCacheTtlMs: 6 * 3_600_000,
    mxCacheTtlMs: 300_000,
    negativeDnsCacheTtlMs: 60_000,
    deadlineMs: 30_000,
    ...c,
  };
}

export interface VerifierDeps {
  dns: DnsPort;
  /** The SMTP layer: the probe engine (@svc/engine). */
  probe: ProbePort;
  cache: CachePort;
  config: VerifierConfig;
  /**
   * Told of every fresh verdict (DNS or SMTP, not the cache's): the email finder learns the shapes
   * of existing addresses from it. Called synchronously, so it must only note the verdict; what
   * it throws is ignored.
   */
  observe?: (fresh: { domain: string; local: string; verdict: Omit<Verdict, 'email'> }) => void;
}

type Stored = Omit<Verdict, 'email'>;

/**
 * How a verdict returned by Verifier.run was reached, for analytics (every decision
 * goes to analytics). Kept beside the verdict (verdictTrace), never on it: the verdict is what
 * the API serialises and the cache stores.
 */
export interface VerdictTrace {
  /** The canonical mailbox (exact local part, lower-case ASCII domain); absent when the syntax failed. */
  key?: string;
  /** The ASCII domain; absent when the syntax failed. */
  domain?: string;
  /** The MX host whose SMTP answer decided it; null when no SMTP answer did (syntax, DNS, a session failure, the cache). */
  mx_host: string | null;
  /** From plan() to this verdict's answer, in milliseconds. */
  latency_ms: number;
  /** A catchall_unverified whose catch-all probe was deferred (4xx) or cut off: a later probe may settle it. */
  catchall_deferred?: true;
}

/** A base class whose constructor returns the object it is given: a subclass's private field is then added to that object. */
class Slot {
  constructor(o: object) {
    return o as Slot;
  }
}

/**
 * The trace of each verdict object of a run, in a private field of that object: invisible to
 * JSON, to Object.keys and to a spread (a copy has none), and gone with the object, as a WeakMap's
 * entry would be; but a WeakMap.set and get of a new object cost ~0.5-1.2 µs on every cached
 * validation, and a private field costs about nothing.
 */
class Traced extends Slot {
  #trace: VerdictTrace;
  private constructor(v: object, trace: VerdictTrace) {
    super(v);
    this.#trace = trace;
  }

  static set(v: object, trace: VerdictTrace): void {
    if (#trace in v) (v as Traced).#trace = trace;
    else new Traced(v, trace);
  }

  static get(v: object): VerdictTrace | undefined {
    return #trace in v ? (v as Traced).#trace : undefined;
  }
}

/** The trace of a verdict returned by Verifier.run (or of the same object priced in place); undefined for any other object. */
export const verdictTrace = (v: object): VerdictTrace | undefined => Traced.get(v);

/**
 * Notes how the plan's item got its verdict, and returns the verdict. (A module function, not a
 * closure made per run: the TypeScript loader names every named closure it creates, an
 * Object.defineProperty per call that also turns the function into a slow dictionary object.)
 */
function traced(plan: Plan, item: PlanItem, v: Verdict, mxHost: string | null, catchallDeferred?: true): Verdict {
  const p = item.parsed;
  const latency_ms = performance.now() - plan.startedAt;
  Traced.set(v, p.ok ? { key: item.key!, domain: p.asciiDomain, mx_host: mxHost, latency_ms, ...(catchallDeferred ? { catchall_deferred: true } : {}) } : { mx_host: null, latency_ms });
  return v;
}

/** A fresh verdict of one mailbox, and the MX host that answered it. */
interface Fresh {
  stored: Stored;
  mxHost: string | null;
  catchallDeferred?: true;
}

export interface RunOptions {
  /**
   * How often a 4xx RCPT answer (greylisting) is retried inside the engine before the verdict is
   * `unknown` with reason_code `smtp_tempfail`. Jobs pass 0 and schedule their own durable
   * re-probe after SVC_JOB_GREYLIST_DELAY_MS; sync requests use the configured default.
   */
  smtpRetries?: number;
  /**
   * The most one address may take, overriding the configured deadline; 0 = none. Jobs pass 0:
   * their recipients wait in the MX actors' queues for as long as the hosts' limits require, and
   * every SMTP phase still has its own timeout.
   */
  deadlineMs?: number;
}

/** Where an address's SMTP probe goes, and the MX answer that says so (plain data: it can ride on a bus message). */
export interface Route {
  /** The ASCII domain (lower case): the key of `verifyRouted`'s answers. */
  domain: string;
  /** Its first MX host (lower case); null when no SMTP probe would be made. */
  host: string | null;
  mx: MxAnswer;
}

/** MX answers already known, by ASCII domain (lower case). Only `mx` and `implicit` answers are used. */
export type KnownMx = Readonly<Record<string, MxAnswer | undefined>>;

export interface PlanItem {
  email: string;
  parsed: ParsedAddress;
  /** Cache and in-request dedupe key: exact local part, lower-case ASCII domain. */
  key?: string;
  verdict?: Verdict;
}

export interface Plan {
  items: PlanItem[];
  /** When plan() began (performance.now()): the start of its verdicts' latencies. */
  startedAt: number;
  /** Unique addresses whose verdict may still turn out chargeable: the most the work can cost. */
  maxCost: number;
  /** Every verdict is already known (syntax or cache): maxCost is then the exact cost. */
  settled: boolean;
}

const withEmail = (email: string, s: Stored): Verdict => ({ email, ...s });

/** An input string parsed, with its mailbox key and verdict-cache key when the syntax passed. */
interface Parsed {
  parsed: ParsedAddress;
  /** `local@ascii-domain`: the mailbox (cache and in-request dedupe key). */
  key?: string;
  /** `v:` + key: where the mailbox's verdict is cached. */
  cacheKey?: string;
}

function parsedOf(email: string): Parsed {
  const parsed = parseAddress(email);
  if (!parsed.ok) return { parsed };
  const key = `${parsed.local}@${parsed.asciiDomain}`;
  return { parsed, key, cacheKey: `v:${key}` };
}

/**
 * The verdicts of a plan whose every verdict is known already (plan.settled: syntax, cache,
 * suppression), at once, as Verifier.run would answer them; undefined for a plan that needs work.
 */
export function settledVerdicts(plan: Plan): Verdict[] | undefined {
  if (!plan.settled) return undefined;
  return plan.items.map((item) => traced(plan, item, item.verdict!, null));
}

export class Verifier {
  #inflight = new Map<string, Promise<Fresh>>();
  #mxInflight = new Map<string, Promise<MxAnswer>>();
  /** Parsed addresses (and their keys) by input string: the hot path of cached validations parses the same few. */
  #parsed = new Map<string, Parsed>();

  constructor(readonly deps: VerifierDeps) {}

  async plan(emails: readonly string[]): Promise<Plan> {
    const startedAt = performance.now();
    const items: PlanItem[] = [];
    // A request of several addresses: each mailbox is read from the cache once (a repeated
    // address must be priced and answered from the same entry) and priced once.
    const open = emails.length > 1 ? new Set<string>() : undefined;
    const seen = emails.length > 1 ? new Map<string, Stored | undefined>() : undefined;
    let maxCost = 0;
    let settled = true;
    for (const email of emails) {
      const { parsed, key, cacheKey } = this.#parse(email);
      if (!parsed.ok) {
        items.push({ email, parsed, verdict: buildVerdict(email, parsed, { layer: 'syntax', reason: parsed.reason }) });
        continue;
      }
      const item: PlanItem = { email, parsed, key };
      let cached: Stored | undefined;
      if (seen?.has(key!)) cached = seen.get(key!);
      else {
        // The in-process cache answers at once; only a remote one (Redis) is waited for.
        const got = this.deps.cache.get<Stored>(cacheKey!);
        cached = got instanceof Promise ? await got : got;
        seen?.set(key!, cached);
      }
      if (cached) item.verdict = withEmail(email, cached);
      else settled = false;
      if (!open?.has(key!) && (!cached || cached.chargeable)) {
        open?.add(key!);
        maxCost++;
      }
      items.push(item);
    }
    return { items, startedAt, maxCost, settled };
  }

  #parse(email: string): Parsed {
    // Only address-sized strings are remembered: a 1 MiB "email" must not be kept 10,000 times.
    if (email.length > 320) return parsedOf(email);
    let p = this.#parsed.get(email);
    if (!p) {
      p = parsedOf(email);
      if (this.#parsed.size >= 10_000) this.#parsed.clear();
      this.#parsed.set(email, p);
    }
    return p;
  }

  /** Verdicts in input order, one per submitted string. */
  run(plan: Plan, opts: RunOptions = {}): Promise<Verdict[]> {
    return this.#run(plan, opts, undefined);
  }

  async #run(plan: Plan, opts: RunOptions, known: KnownMx | undefined): Promise<Verdict[]> {
    const settled = settledVerdicts(plan);
    if (settled) return settled;
    return Promise.all(
      plan.items.map(async (item) => {
        if (item.verdict) return traced(plan, item, item.verdict, null);
        const fresh = await this.#verifyKey(item.key!, item.parsed, opts, known);
        return traced(plan, item, withEmail(item.email, fresh.stored), fresh.mxHost, fresh.catchallDeferred);
      }),
    );
  }

  async verify(emails: readonly string[], opts: RunOptions = {}): Promise<Verdict[]> {
    return this.run(await this.plan(emails), opts);
  }

  /**
   * verify() for addresses whose MX answers are already known (from routes(), on another stage
   * or process): the SMTP probe goes to the hosts given, with no second MX lookup. A domain
   * missing from `mx`, or whose answer is not `mx`/`implicit` (a failed lookup is worth asking
   * again), is looked up as verify() does. Same verdicts, same caching.
   */
  async verifyRouted(emails: readonly string[], mx: KnownMx, opts: RunOptions = {}): Promise<Verdict[]> {
    return this.#run(await this.plan(emails), opts, mx);
  }

  /**
   * Where each address's SMTP probe would go: its ASCII domain, the MX answer (for a later
   * verifyRouted(), keyed by `domain`) and its first MX host (lower case; null when the answer
   * names no mail host: no SMTP probe would be made); null for bad syntax or a lookup that threw.
   * The job pipeline keys its MX work by the host, so one worker
   * owns each host's sessions, and carries the answer to the probe stage. Reads the MX cache and
   * DNS as verify() does (one lookup per domain at a time), not the verdict cache: a cached
   * verdict is answered wherever the address is routed.
   */
  async routes(emails: readonly string[]): Promise<Array<Route | null>> {
    return Promise.all(
      emails.map(async (email): Promise<Route | null> => {
        const { parsed } = this.#parse(email);
        if (!parsed.ok) return null;
        try {
          const mx = await this.#mx(parsed.asciiDomain);
          const host = mx.kind === 'mx' || mx.kind === 'implicit' ? (mx.hosts[0]?.exchange.toLowerCase() ?? null) : null;
          return { domain: parsed.asciiDomain, host, mx };
        } catch {
          return null;
        }
      }),
    );
  }

  #verifyKey(key: string, parsed: ParsedAddress, opts: RunOptions, known: KnownMx | undefined): Promise<Fresh> {
    // Jobs (no in-session greylist retry) and sync requests do not share a probe in flight.
    const flightKey = opts.smtpRetries === undefined && opts.deadlineMs === undefined ? key : `${key}\u0000${opts.smtpRetries}\u0000${opts.deadlineMs}`;
    let p = this.#inflight.get(flightKey);
    if (!p) {
      p = this.#fresh(key, parsed, opts, known).finally(() => this.#inflight.delete(flightKey));
      this.#inflight.set(flightKey, p);
    }
    return p;
  }

  async #fresh(key: string, parsed: ParsedAddress, opts: RunOptions, known: KnownMx | undefined): Promise<Fresh> {
    const ok = parsed as Extract<ParsedAddress, { ok: true }>;
    const given = known?.[ok.asciiDomain];
    const mx = given && (given.kind === 'mx' || given.kind === 'implicit') ? given : await this.#mx(ok.asciiDomain);
    let verdict: Verdict;
    let mxHost: string | null = null;
    let catchallDeferred: true | undefined;
    if (mx.kind === 'mx' || mx.kind === 'implicit') {
      const outcome = await this.deps.probe.check({
        domain: ok.asciiDomain,
        hosts: mx.hosts,
        local: ok.local,
        utf8: ok.utf8Local,
        retries: opts.smtpRetries ?? this.deps.config.smtpRetries,
        ...this.#deadline(opts),
      });
      verdict = buildVerdict(key, parsed, { layer: 'smtp', outcome, implicitMx: mx.kind === 'implicit' });
      // The engine says which MX (by index in the list it was given) answered.
      if (outcome.kind !== 'failure') mxHost = mx.hosts[outcome.mxIndex]?.exchange.toLowerCase() ?? null;
      if (outcome.kind === 'answer' && outcome.catchallDeferred && verdict.reason_code === 'catchall_unverified') catchallDeferred = true;
    } else {
      verdict = buildVerdict(key, parsed, { layer: 'dns', answer: mx });
    }
    const { email: _drop, ...stored } = verdict;
    if (stored.result !== 'unknown') await this.deps.cache.set(`v:${key}`, stored, this.deps.config.resultCacheTtlMs);
    if (this.deps.observe) {
      try {
        this.deps.observe({ domain: ok.asciiDomain, local: ok.local, verdict: stored });
      } catch {
        // An observer's failure is not the verdict's.
      }
    }
    return { stored, mxHost, ...(catchallDeferred ? { catchallDeferred } : {}) };
  }

  #deadline(opts: RunOptions): { deadlineMs?: number } {
    const ms = opts.deadlineMs ?? this.deps.config.deadlineMs ?? 30_000;
    return ms > 0 ? { deadlineMs: ms } : {};
  }

  /** One MX lookup per domain at a time: a bulk of 100 addresses of one domain asks DNS once. */
  #mx(domain: string): Promise<MxAnswer> {
    let p = this.#mxInflight.get(domain);
    if (!p) {
      p = this.#mxLookup(domain).finally(() => this.#mxInflight.delete(domain));
      this.#mxInflight.set(domain, p);
    }
    return p;
  }

  async #mxLookup(domain: string): Promise<MxAnswer> {
    const cached = await this.deps.cache.get<MxAnswer>(`mx:${domain}`);
    if (cached) return cached;
    const answer = await this.deps.dns.resolveMail(domain);
    const { config } = this.deps;
    if (answer.kind === 'mx' || answer.kind === 'implicit') await this.deps.cache.set(`mx:${domain}`, answer, config.mxCacheTtlMs);
    else if (answer.kind === 'nxdomain' || answer.kind === 'no_records' || answer.kind === 'null_mx') await this.deps.cache.set(`mx:${domain}`, answer, config.negativeDnsCacheTtlMs);
    return answer;
  }

  /** Drains: no new retries, every recipient answered, every session ended with QUIT. */
  close(): Promise<void> {
    return this.deps.probe.close();
  }
}
