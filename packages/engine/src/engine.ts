// The probe engine (docs/decisions/smtp-engine.md): domain actors and MX actors, in-process.
// A domain actor (key = domain) holds its domain's catch-all verdict and routes recipients to the
// MX actor of its first MX host, failing over in priority order; an MX actor (key = MX host) owns
// the sessions to that host, shared by every domain on it. They share no state: a domain actor
// sends an MX actor a request per routing and hears back by id. Every session holds a slot of
// the gate of the server address it connects to (key = IP address), shared by every MX name that
// resolves to it: a server counts its per-client connection limit per address. In the cluster
// profile every process runs its own engine; the jobs.mx topic, keyed by MX host, gives each
// host's job recipients to one worker, and the MxThrottle on Redis shares each address's limit.

import type { CatchallEvidence, ProbeOutcome, ProbePort, ProbeRequest, SessionFailure, SmtpReply } from '@svc/verifier';
import { systemClock, type Clock, type ClockTimer } from './clock.ts';
import { MemoryMxThrottle } from './throttle.ts';
import { MxActor, mailRefusalClass } from './mx-actor.ts';
import { AddressGate } from './address-gate.ts';
import type { EngineCounters, EngineDeps, RcptSink, Resolve } from './types.ts';
import { classifyRcpt } from '@svc/verifier';
import { createHmac, randomBytes } from 'node:crypto';
import { setMaxListeners } from 'node:events';

/**
 * The catch-all probe's local part for a domain: random-looking (no real mailbox has it), but the
 * same for the whole catch-all TTL window, so a probe asked again later (a job's greylist
 * re-probe minutes afterwards, on a new actor, after a restart) is the same (sender, recipient)
 * pair a greylisting server remembers (RFC 6647). Keyed with a salt the operator keeps secret
 * (SVC_SECRET), so a server cannot learn to recognise our probes.
 */
export function probeLocalFor(salt: string, domain: string, windowMs: number, now = Date.now()): string {
  const window = Math.floor(now / Math.max(1, windowMs));
  return `svc-${createHmac('sha256', salt).update(`${domain}\n${window}`).digest('hex').slice(0, 16)}`;
}

const NOWHERE: RcptSink = { answered() {}, smtputf8Unsupported() {}, hostFailed() {} };

/**
 * A recipient as its domain actor tracks it: the actor's own state. MX actors get a RcptRequest
 * message for each routing and report back by id; nothing here is shared with them.
 */
interface Item {
  readonly id: number;
  readonly domain: string;
  readonly local: string;
  readonly utf8: boolean;
  /** The catch-all probe of its domain (a local part that cannot exist). */
  readonly probe: boolean;
  /** Index of the MX host it is routed to. */
  mxIndex: number;
  /** 4xx answers so far. */
  attempts: number;
  readonly retries: number;
  /** Sessions that ended under it without an answer on its current MX host (the MX actor's count, as last reported). */
  interruptions: number;
  /** A session it must not use (the one that deferred it: retry on a new session). */
  notSession?: number;
  /** When its request's deadline passes (clock time); none for a job's recipients and the catch-all probe. */
  deadlineAt?: number;
  /** The catch-all probe of a domain first needed by a synchronous request: as urgent as that request. */
  urgentProbe?: boolean;
  /** Answered, or past its deadline. */
  done: boolean;
  /** The MX host holding it now (queued or in a session), told to forget it when it is answered here first. */
  at?: string;
}

interface Pending {
  item: Item;
  resolve: Resolve;
  hosts: string[];
  timer?: ClockTimer;
}

class DomainActor implements RcptSink {
  catchall: CatchallEvidence | undefined;
  #loadedAt: number | undefined;
  #loading: Promise<void> | undefined;
  /** One probe local part per actor: a retried probe is the same (sender, recipient) pair greylisting remembers. */
  #probeLocal: string | undefined;
  #probe: Item | undefined;
  /** The last probe ended without evidence because it was deferred (4xx) or its session failed: later may settle it. */
  #probeDeferred = false;
  /** Accepted recipients waiting for the catch-all probe's answer. */
  #parked: Array<{ pending: Pending; outcome: Extract<ProbeOutcome, { kind: 'answer' }> }> = [];
  /** Recipients given to this actor and not yet resolved. */
  readonly open = new Map<number, Pending>();
  #timers = new Set<ClockTimer>();

  constructor(
    readonly domain: string,
    readonly engine: Engine,
  ) {}

  get idle(): boolean {
    return this.open.size === 0 && this.#probe === undefined && this.#timers.size === 0;
  }

  /** Reads the domain's catch-all evidence from the shared cache, again once older than its TTL. */
  async ready(): Promise<void> {
    const ttl = this.engine.deps.config.catchallTtlMs;
    if (this.#loadedAt !== undefined && this.engine.clock.now() - this.#loadedAt <= ttl) return;
    this.#loading ??= (async () => {
      this.catchall = await this.engine.deps.cache.get<CatchallEvidence>(`ca:${this.domain}`);
      this.#loadedAt = this.engine.clock.now();
    })().finally(() => (this.#loading = undefined));
    await this.#loading;
  }

  submit(pending: Pending): void {
    this.open.set(pending.item.id, pending);
    this.#ensureProbe(pending.hosts, pending.item.deadlineAt !== undefined);
    this.#route(pending.item, pending.hosts);
  }

  /** One catch-all probe per domain per TTL, in the same stream as the domain's first recipients. */
  #ensureProbe(hosts: string[], urgent = false): void {
    if (this.catchall !== undefined || this.#probe !== undefined) return;
    const { deps } = this.engine;
    const local = (this.#probeLocal ??= deps.randomLocal ? deps.randomLocal() : probeLocalFor(this.engine.probeSalt, this.domain, deps.config.catchallTtlMs, this.engine.clock.now()));
    const item = this.engine.newItem(this.domain, local, false, true, 0);
    if (urgent) item.urgentProbe = true;
    this.#probe = item;
    this.#probeDeferred = false;
    this.#probeHosts = hosts;
    this.#route(item, hosts);
  }

  #probeHosts: string[] = [];

  #hostsOf(item: Item): string[] {
    return item.probe ? this.#probeHosts : (this.open.get(item.id)?.hosts ?? []);
  }

  #route(item: Item, hosts: string[]): void {
    const host = hosts[item.mxIndex]!;
    item.at = host;
    this.engine.mx(host).enqueue({
      id: item.id,
      domain: item.domain,
      local: item.local,
      utf8: item.utf8,
      interruptions: item.interruptions,
      nextHost: item.mxIndex + 1 < hosts.length,
      ...(item.notSession !== undefined ? { notSession: item.notSession } : {}),
      ...(item.deadlineAt !== undefined ? { deadlineAt: item.deadlineAt } : {}),
      ...(item.deadlineAt !== undefined || item.urgentProbe ? { urgent: true } : {}),
    });
  }

  /** The recipient (or the current probe) a report of an MX actor is about; undefined when it is no longer wanted. */
  #reported(id: number): Item | undefined {
    const item = this.#probe?.id === id ? this.#probe : this.open.get(id)?.item;
    if (!item || item.done) return undefined;
    item.at = undefined;
    return item;
  }

  answered(id: number, { reply, session, viaMail, interruptions }: { reply: SmtpReply; session: number; viaMail: boolean; interruptions: number }): void {
    const item = this.#reported(id);
    if (!item) return;
    item.interruptions = interruptions;
    const cls = viaMail ? mailRefusalClass(reply) : classifyRcpt(reply);
    if (item.probe) {
      item.done = true;
      this.#probe = undefined;
      // Conclusive: accepted (catch-all), or refused for good as a mailbox (5.1.1, 553 5.1.3 "bad
      // recipient address", 5.2.1 disabled): the server does not take every address.
      if (cls === 'accepted' || cls === 'rejected' || cls === 'malformed' || cls === 'disabled') {
        this.catchall = { catchall: cls === 'accepted', mxIndex: item.mxIndex };
        this.#loadedAt = this.engine.clock.now();
        void this.engine.deps.cache.set(`ca:${this.domain}`, this.catchall, this.engine.deps.config.catchallTtlMs);
      } else this.#probeDeferred = cls === 'tempfail';
      this.#releaseParked();
      return;
    }
    const pending = this.open.get(item.id);
    if (!pending) return;
    if (cls === 'tempfail' && item.attempts < item.retries && !this.engine.closing) {
      // Greylisting (RFC 6647) wants the same triple again later, here on a new session.
      item.attempts++;
      item.notSession = session;
      const timer = this.engine.clock.setTimeout(() => {
        this.#timers.delete(timer);
        if (item.done) {
          // Answered meanwhile (its deadline): this timer may have been all that kept the actor.
          if (this.idle) this.engine.settled(this);
          return;
        }
        this.#ensureProbe(pending.hosts, item.deadlineAt !== undefined);
        this.#route(item, pending.hosts);
      }, this.engine.deps.config.smtpRetryDelayMs);
      this.#timers.add(timer);
      return;
    }
    const outcome: Extract<ProbeOutcome, { kind: 'answer' }> = { kind: 'answer', cls, reply, mxIndex: item.mxIndex, attempts: item.attempts + 1 };
    if (cls === 'accepted' && this.catchall === undefined && this.#probe !== undefined) {
      // The probe's answer decides what this acceptance is worth: wait for it.
      this.#parked.push({ pending, outcome });
      return;
    }
    this.#finish(pending, outcome);
  }

  smtputf8Unsupported(id: number): void {
    const item = this.#reported(id);
    if (!item) return;
    const pending = this.open.get(item.id);
    if (pending) this.#finish(pending, { kind: 'smtputf8_unsupported', mxIndex: item.mxIndex });
  }

  hostFailed(id: number, failure: SessionFailure): void {
    const item = this.#reported(id);
    if (!item) return;
    const hosts = this.#hostsOf(item);
    if (item.mxIndex + 1 < hosts.length) {
      // RFC 5321 5.1: the next MX in priority order.
      item.mxIndex++;
      item.interruptions = 0;
      item.done = false;
      this.#route(item, hosts);
      return;
    }
    if (item.probe) {
      item.done = true;
      this.#probe = undefined;
      this.#probeDeferred = true;
      this.#releaseParked();
      return;
    }
    const pending = this.open.get(item.id);
    if (pending) this.#finish(pending, { kind: 'failure', failure });
  }

  #releaseParked(): void {
    for (const { pending, outcome } of this.#parked.splice(0)) this.#finish(pending, outcome);
    if (this.idle) this.engine.settled(this);
  }

  #finish(pending: Pending, outcome: ProbeOutcome): void {
    pending.item.done = true;
    // Still waiting at an MX actor (its deadline came first): it is skipped there from now on.
    if (pending.item.at !== undefined) this.engine.withdraw(pending.item.at, pending.item.id);
    pending.item.at = undefined;
    this.open.delete(pending.item.id);
    this.engine.clock.clearTimeout(pending.timer);
    if (outcome.kind === 'answer' && this.catchall) outcome.catchall = this.catchall;
    else if (outcome.kind === 'answer' && outcome.cls === 'accepted' && this.#probeDeferred) outcome.catchallDeferred = true;
    pending.resolve(outcome);
    if (this.idle) this.engine.settled(this);
  }

  /** Answered with a failure before it was routed (a port that threw). */
  fail(pending: Pending, failure: SessionFailure): void {
    if (this.open.has(pending.item.id)) this.#finish(pending, { kind: 'failure', failure });
  }

  /** Past its deadline: answered now, skipped wherever it waits. */
  expire(pending: Pending, deadlineMs: number): void {
    if (!this.open.has(pending.item.id)) return;
    const i = this.#parked.findIndex((p) => p.pending === pending);
    if (i >= 0) this.#parked.splice(i, 1);
    this.#finish(pending, { kind: 'failure', failure: { phase: 'rcpt', kind: 'timeout', detail: 'deadline', deadlineMs } });
  }

  /** Any timer or probe left when the actor is forgotten (close). */
  clearTimers(): void {
    for (const t of this.#timers) this.engine.clock.clearTimeout(t);
    this.#timers.clear();
  }
}

export class Engine implements ProbePort {
  readonly #domains = new Map<string, DomainActor>();
  readonly #mxs = new Map<string, MxActor>();
  /** One gate per server address, shared by every MX name that resolves to it. */
  readonly #gates = new Map<string, AddressGate>();
  readonly #idleWaiters: Array<() => void> = [];
  readonly throttle;
  readonly counters: EngineCounters = { sessionsOpened: 0, transactions: 0, rcpts: 0, requeuedForCap: 0, requeuedForClosing: 0, throttled: 0, slowReplies: 0, bannerRefusals: 0, slotWaits: 0, idleYields: 0, closeIdleByCheck: 0 };
  closing = false;
  /** Aborted by close(): the MX actors stop waiting for session permits. */
  readonly #closed = new AbortController();
  #nextItem = 0;
  #nextSession = 0;

  readonly clock: Clock;

  /** Keys the catch-all probe local parts (SVC_SECRET in production; random per process otherwise). */
  readonly probeSalt: string;

  constructor(readonly deps: EngineDeps) {
    this.probeSalt = deps.probeSalt ?? randomBytes(16).toString('hex');
    this.clock = deps.clock ?? systemClock;
    this.throttle = deps.throttle ?? new MemoryMxThrottle(deps.config.maxConnectionsPerMx);
    // Every slot and permit wait listens to it (more than Node's warning level of 10).
    setMaxListeners(0, this.#closed.signal);
  }

  async check(req: ProbeRequest): Promise<ProbeOutcome> {
    if (req.hosts.length === 0) return { kind: 'failure', failure: { phase: 'connect', kind: 'connection', detail: 'no MX host' } };
    let actor = this.#domains.get(req.domain);
    if (!actor) {
      actor = new DomainActor(req.domain, this);
      this.#domains.set(req.domain, actor);
    }
    const item = this.newItem(req.domain, req.local, req.utf8, false, req.retries);
    const hosts = req.hosts.map((h) => h.exchange.toLowerCase());
    return new Promise<ProbeOutcome>((resolve) => {
      const pending: Pending = { item, resolve, hosts };
      actor.open.set(item.id, pending); // counted before the cache read, so the actor stays
      if (req.deadlineMs !== undefined) {
        item.deadlineAt = this.clock.now() + req.deadlineMs;
        pending.timer = this.clock.setTimeout(() => actor.expire(pending, req.deadlineMs!), req.deadlineMs);
      }
      actor.ready().then(
        () => {
          if (!item.done) actor.submit(pending);
        },
        (err: unknown) => actor.fail(pending, { phase: 'connect', kind: 'protocol', detail: `internal error: ${(err as Error).message}` }),
      );
    });
  }

  newItem(domain: string, local: string, utf8: boolean, probe: boolean, retries: number): Item {
    return { id: ++this.#nextItem, domain, local, utf8, probe, mxIndex: 0, attempts: 0, retries, interruptions: 0, done: false };
  }

  /** The MX actor of a host, created on first use. */
  mx(host: string): MxActor {
    let actor = this.#mxs.get(host);
    if (!actor) {
      actor = new MxActor(host, {
        smtp: this.deps.smtp,
        config: this.deps.config,
        addresses: (h) => this.#addresses(h),
        gate: (ip) => this.gate(ip),
        // An item whose actor is gone (it expired, the actor went idle) is answered into the void.
        sinkOf: (domain) => this.#domains.get(domain) ?? NOWHERE,
        closing: () => this.closing,
        // An MX actor keeps what it learnt (budget, limit) while the engine runs; it only has to
        // be idle for close() to finish.
        idle: () => this.#checkIdle(),
        signal: this.#closed.signal,
        nextSessionId: () => ++this.#nextSession,
        counters: this.counters,
        clock: this.clock,
      });
      this.#mxs.set(host, actor);
    }
    return actor;
  }

  #releaseIdle(): void {
    for (const g of this.#gates.values()) g.releaseIdle();
  }

  /** Addresses backing off a server-wide refusal (Exim's daemon-wide cap), until a session of ours ends. */
  readonly #awaitingServerSlot = new Set<AddressGate>();

  #serverSlotFreed(): void {
    if (this.#awaitingServerSlot.size === 0) return;
    const gates = [...this.#awaitingServerSlot];
    this.#awaitingServerSlot.clear();
    for (const g of gates) if (g.retryNow()) this.#awaitingServerSlot.add(g);
  }

  /** The gate of a server address, created on first use. */
  gate(ip: string): AddressGate {
    let gate = this.#gates.get(ip);
    if (!gate) {
      // A daemon-wide cap (Exim's smtp_accept_max) counts every session to the server, whatever
      // address it came to, and the engine cannot tell which addresses are that server's: its
      // warm sessions with nothing to do give their slots up everywhere (each would have quit
      // within idleMs anyway; a host with work opens a new one).
      // An address backing off such a refusal tries again as soon as any session of ours ends
      // (its slot at that server may be the one freed), not only when its back-off runs out.
      const g: AddressGate = new AddressGate(ip, {
        config: this.deps.config,
        counters: this.counters,
        clock: this.clock,
        throttle: this.throttle,
        serverFull: () => {
          this.#awaitingServerSlot.add(g);
          this.#releaseIdle();
        },
        sessionClosed: () => this.#serverSlotFreed(),
      });
      gate = g;
      this.#gates.set(ip, gate);
    }
    return gate;
  }

  /** A server address's slots (for tests and operators): open, opening, closing (not yet counted down by the server), limit, waiting opens. */
  gateState(ip: string): ReturnType<AddressGate['state']> | undefined {
    return this.#gates.get(ip)?.state();
  }

  /** Tells the MX actor of `host` that recipient `id` is no longer wanted. */
  withdraw(host: string, id: number): void {
    this.#mxs.get(host)?.withdraw(id);
  }

  #addressLookups = new Map<string, Promise<string[]>>();

  /** Addresses of an MX host, cached, one lookup at a time per host: thousands of domains share a few MX hosts. */
  #addresses(host: string): Promise<string[]> {
    let p = this.#addressLookups.get(host);
    if (!p) {
      p = this.#lookupAddresses(host).finally(() => this.#addressLookups.delete(host));
      this.#addressLookups.set(host, p);
    }
    return p;
  }

  async #lookupAddresses(host: string): Promise<string[]> {
    const { dns, cache, config } = this.deps;
    const key = `addr:${host}`;
    const cached = await cache.get<string[]>(key);
    if (cached) return cached;
    const ips = await dns.resolveAddresses(host);
    if (ips.length > 0) await cache.set(key, ips, config.addressCacheTtlMs);
    return ips;
  }

  settled(actor: DomainActor): void {
    if (actor.idle && this.#domains.get(actor.domain) === actor) this.#domains.delete(actor.domain);
    this.#checkIdle();
  }

  #checkIdle(): void {
    if (!this.idle) return;
    for (const w of this.#idleWaiters.splice(0)) w();
  }

  get idle(): boolean {
    if (this.#domains.size > 0) return false;
    for (const mx of this.#mxs.values()) if (mx.busy) return false;
    return true;
  }

  get activeDomains(): number {
    return this.#domains.size;
  }

  /** MX actors (for tests and operators): host → sessions open now, the limit of its address, learnt budget. */
  mxState(host: string): { sessions: number; limit: number; budget: MxActor['budget'] } | undefined {
    const a = this.#mxs.get(host);
    return a && { sessions: a.sessions, limit: a.limit, budget: { ...a.budget } };
  }

  /**
   * Stops retrying, lets every recipient be answered, ends every warm session with QUIT. Never
   * waits for a slot or a session permit (a shared limit's may be held by other processes for as long as
   * they like): waits for one are cancelled, a permit free at once is still taken, and recipients
   * that no session of ours can take are answered as connection failures. Bounded by the SMTP
   * timeouts and the retry delays.
   *
   * Every actor reports its last step to idle; close() also checks every closeCheckMs by itself,
   * so a report that never comes costs that long, never a hang (counted in
   * counters.closeIdleByCheck, which should stay 0).
   */
  async close(): Promise<void> {
    this.closing = true;
    this.#closed.abort(new Error('the engine is closing'));
    for (const mx of this.#mxs.values()) mx.wake();
    if (this.idle) return;
    await new Promise<void>((resolve) => {
      const every = this.deps.closeCheckMs ?? 1000;
      const check = () => {
        timer = this.clock.setTimeout(check, every);
        if (!this.idle) return;
        this.counters.closeIdleByCheck++;
        this.#checkIdle();
      };
      let timer = this.clock.setTimeout(check, every);
      this.#idleWaiters.push(() => {
        this.clock.clearTimeout(timer);
        resolve();
      });
    });
  }
}
