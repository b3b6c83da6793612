// Domain actors: one per domain at a time, holding that domain's MX list, catch-all verdict and
// SMTP session. Every recipient of a domain that arrives while the actor works joins the same
// session (many RCPT per transaction, RSET between transactions), so a bulk list costs one
// connection per domain, not one per address. Sessions per MX host are throttled.

import type { CachePort, DnsPort, SendResult, SessionFailure, SmtpConnector, SmtpPhase, SmtpSession } from './ports.ts';
import { classifyRcpt, type RcptClass } from './smtp/classify.ts';
import { KeyedSemaphore } from './throttle.ts';
import type { MxHost, SmtpReply } from './types.ts';

export interface ProberConfig {
  smtpPort: number;
  heloName: string;
  mailFrom: string;
  /** Per-phase SMTP timeout (connect, greeting, EHLO, STARTTLS, MAIL, RCPT, RSET, QUIT). */
  smtpTimeoutMs: number;
  /** How often a 4xx answer is retried before the verdict becomes unknown. */
  smtpRetries: number;
  smtpRetryDelayMs: number;
  maxConnectionsPerMx: number;
  maxRcptsPerTransaction: number;
  catchallTtlMs: number;
  /** How long the addresses of an MX host are reused (default 5 min). */
  addressCacheTtlMs?: number;
}

export interface CatchallEvidence {
  catchall: boolean;
  /** Index in the MX list of the host that answered the probe. */
  mxIndex: number;
}

export type ProbeOutcome =
  | { kind: 'answer'; cls: RcptClass; reply: SmtpReply; mxIndex: number; attempts: number; catchall?: CatchallEvidence }
  | { kind: 'smtputf8_unsupported'; mxIndex: number }
  | { kind: 'failure'; failure: SessionFailure };

interface Job {
  local: string;
  utf8: boolean;
  attempts: number;
  retries: number;
  resolve: (o: ProbeOutcome) => void;
}

export interface ProberDeps {
  dns: DnsPort;
  smtp: SmtpConnector;
  cache: CachePort;
  config: ProberConfig;
  randomLocal?: () => string;
}

/** New sessions to the same MX after one that made progress was cut short, per queue run. */
const MAX_RECONNECTS = 50;

const defaultRandomLocal = () => `svc-probe-${Math.random().toString(36).slice(2, 10)}${Date.now().toString(36)}`;

class DomainActor {
  #queue: Job[] = [];
  #running = false;
  #timers = new Set<NodeJS.Timeout>();
  #catchall: CatchallEvidence | undefined;
  #catchallLoadedAt: number | undefined;
  #retrying = new Set<Job>();
  /** Recipients answered so far (progress, to tell a session cut short from a dead server). */
  #answered = 0;

  constructor(
    readonly domain: string,
    readonly hosts: MxHost[],
    readonly prober: Prober,
  ) {}

  get idle(): boolean {
    return !this.#running && this.#queue.length === 0 && this.#timers.size === 0;
  }

  /** Jobs given to this actor and not yet answered, wherever they are (queue, batch, retry timer). */
  #open = new Set<Job>();
  /** One probe local part per actor, so a retried probe is the same (sender, recipient) pair that greylisting remembers. */
  #probeLocal: string | undefined;

  check(local: string, utf8: boolean, retries: number): Promise<ProbeOutcome> {
    return new Promise((resolve) => {
      const job: Job = {
        local,
        utf8,
        attempts: 0,
        retries,
        resolve: (o) => {
          this.#open.delete(job);
          resolve(o);
        },
      };
      this.#open.add(job);
      this.#enqueue(job);
    });
  }

  #enqueue(job: Job): void {
    this.#queue.push(job);
    if (!this.#running) {
      this.#running = true;
      void this.#run();
    }
  }

  async #run(): Promise<void> {
    try {
      while (this.#queue.length > 0) await this.#session();
    } catch (err) {
      // A bug or a failing port (a cache adapter that throws): no job may be left hanging.
      this.#queue.length = 0;
      const failure: SessionFailure = { phase: 'rcpt', kind: 'protocol', detail: `internal error: ${(err as Error).message}` };
      for (const job of [...this.#open]) if (!this.#retrying.has(job)) job.resolve({ kind: 'failure', failure });
    } finally {
      this.#running = false;
      this.prober.settled(this);
    }
  }

  /** Works the queue on the first MX that answers, failing over in priority order. */
  async #session(): Promise<void> {
    const { smtp, config, cache } = this.prober.deps;
    // Load the domain's catch-all evidence, again once it is older than its TTL (a busy domain's
    // actor can live for hours).
    if (this.#catchallLoadedAt === undefined || Date.now() - this.#catchallLoadedAt > config.catchallTtlMs) {
      this.#catchall = await cache.get<CatchallEvidence>(`ca:${this.domain}`);
      this.#catchallLoadedAt = Date.now();
    }
    let last: SessionFailure = { phase: 'connect', kind: 'connection', detail: 'no MX host could be reached' };
    let reconnects = 0;
    for (let mxIndex = 0; mxIndex < this.hosts.length && this.#queue.length > 0; mxIndex++) {
      const host = this.hosts[mxIndex]!;
      const ips = await this.#addresses(host.exchange);
      if (ips.length === 0) {
        last = { phase: 'connect', kind: 'connection', detail: `MX host ${host.exchange} has no address` };
        continue;
      }
      const release = await this.prober.throttle.acquire(host.exchange);
      try {
        // Every address of the host in turn while the connection itself fails (RFC 5321 5.1);
        // a server that answered and refused is not asked again on another address.
        let open: Awaited<ReturnType<SmtpConnector['open']>> | undefined;
        for (const ip of ips) {
          open = await smtp.open({ host: ip, servername: host.exchange, port: config.smtpPort, heloName: config.heloName, timeoutMs: config.smtpTimeoutMs });
          if (open.ok || open.failure.phase !== 'connect') break;
        }
        if (!open || !open.ok) {
          if (open) last = open.failure;
          continue;
        }
        this.prober.sessionsOpened++;
        const answeredBefore = this.#answered;
        const session = open.session;
        const failure = await this.#converse(session, mxIndex).catch((err: unknown) => {
          session.destroy();
          throw err;
        });
        if (!failure) return;
        // A session that failed is never used again: close it now rather than leave the socket
        // open until the server times out (destroy is idempotent).
        open.session.destroy();
        last = failure;
        // A server that ends a session that was making progress (Postfix's 421 after
        // smtpd_hard_error_limit rejected recipients, a per-session recipient cap, a dropped line)
        // is asked again for the rest on a new session; each such session must answer someone.
        if (this.#answered > answeredBefore && failure.phase !== 'connect' && reconnects < MAX_RECONNECTS && !this.prober.closing) {
          reconnects++;
          mxIndex--;
        }
      } finally {
        release();
      }
    }
    for (const job of this.#queue.splice(0)) job.resolve({ kind: 'failure', failure: last });
  }

  /** Addresses of an MX host, cached: thousands of domains share a few MX hosts. */
  async #addresses(host: string): Promise<string[]> {
    const { dns, cache, config } = this.prober.deps;
    const key = `addr:${host}`;
    const cached = await cache.get<string[]>(key);
    if (cached) return cached;
    const ips = await dns.resolveAddresses(host);
    if (ips.length > 0) await cache.set(key, ips, config.addressCacheTtlMs ?? 300_000);
    return ips;
  }

  /** One connection: transactions of up to maxRcptsPerTransaction recipients, RSET between. */
  async #converse(session: SmtpSession, mxIndex: number): Promise<SessionFailure | undefined> {
    const { config, cache } = this.prober.deps;
    const smtputf8 = session.extensions.has('SMTPUTF8');
    let probed = false;
    let first = true;
    while (this.#queue.length > 0) {
      if (!first) {
        const rset = await session.send('rset', 'RSET');
        if (!rset.ok) return rset.failure;
        if (rset.reply.code !== 250) {
          session.destroy();
          return { phase: 'rset', kind: 'reply', detail: 'RSET refused', reply: rset.reply };
        }
      }
      first = false;
      const batch = this.#queue.splice(0, config.maxRcptsPerTransaction);
      // The session cannot go on when a send failed or the server answered 421 (RFC 5321 3.8:
      // it is closing the channel): the unanswered jobs go back to the queue for the next MX.
      const replyOr = (r: SendResult, phase: SmtpPhase, requeue: Job[]): { reply: SmtpReply } | { failure: SessionFailure } => {
        if (r.ok && r.reply.code !== 421) return { reply: r.reply };
        this.#queue.unshift(...requeue);
        if (!r.ok) return { failure: r.failure };
        session.destroy();
        return { failure: { phase, kind: 'reply', detail: 'server closing', reply: r.reply } };
      };
      const mail = replyOr(await session.send('mail', `MAIL FROM:<${config.mailFrom}>${smtputf8 ? ' SMTPUTF8' : ''}`), 'mail', batch);
      if ('failure' in mail) return mail.failure;
      if (mail.reply.code !== 250) {
        // A refused sender says nothing about the recipients: never 'rejected' or 'malformed' from here.
        const cls = classifyRcpt(mail.reply);
        for (const job of batch) this.#answer(job, cls === 'rejected' || cls === 'malformed' ? 'unclassified' : cls, mail.reply, mxIndex);
        continue;
      }
      const targets: Job[] = [];
      for (const job of batch) {
        if (job.utf8 && !smtputf8) job.resolve({ kind: 'smtputf8_unsupported', mxIndex });
        else targets.push(job);
      }
      // Catch-all probe: a random local part that cannot exist, first in the same transaction (DESIGN 5).
      const probe = !probed && this.#catchall === undefined ? (this.#probeLocal ??= (this.prober.deps.randomLocal ?? defaultRandomLocal)()) : undefined;
      if (probe !== undefined) probed = true;
      const lines = [...(probe !== undefined ? [probe] : []), ...targets.map((j) => j.local)].map((local) => `RCPT TO:<${local}@${this.domain}>`);
      const replies = await this.#rcpts(session, lines);
      let k = 0;
      if (probe !== undefined) {
        const r = replyOr(replies[k++]!, 'rcpt', targets);
        if ('failure' in r) return r.failure;
        const cls = classifyRcpt(r.reply);
        if (cls === 'accepted' || cls === 'rejected') {
          this.#catchall = { catchall: cls === 'accepted', mxIndex };
          this.#catchallLoadedAt = Date.now();
          await cache.set(`ca:${this.domain}`, this.#catchall, config.catchallTtlMs);
        }
      }
      for (let i = 0; i < targets.length; i++) {
        const r = replyOr(replies[k++]!, 'rcpt', targets.slice(i));
        if ('failure' in r) return r.failure;
        this.#answer(targets[i]!, classifyRcpt(r.reply), r.reply, mxIndex);
      }
    }
    await session.quit();
    this.prober.sessionsQuit++;
    return undefined;
  }

  /**
   * RCPT commands of one transaction: all at once where the server offers PIPELINING (RFC 2920),
   * else one by one, stopping at the first reply that ends the session.
   */
  async #rcpts(session: SmtpSession, lines: string[]): Promise<SendResult[]> {
    if (lines.length === 0) return [];
    if (session.extensions.has('PIPELINING')) return session.sendMany('rcpt', lines);
    const out: SendResult[] = [];
    for (const line of lines) {
      const r = await session.send('rcpt', line);
      out.push(r);
      if (!r.ok || r.reply.code === 421) break;
    }
    return out;
  }

  #answer(job: Job, cls: RcptClass, reply: SmtpReply, mxIndex: number): void {
    const { config } = this.prober.deps;
    this.#answered++;
    if (cls === 'tempfail' && job.attempts < job.retries && !this.prober.closing) {
      // Greylisting (RFC 6647) wants the same triple again later: retry on a later session.
      job.attempts++;
      this.#retrying.add(job);
      const timer = setTimeout(() => {
        this.#timers.delete(timer);
        this.#retrying.delete(job);
        this.#enqueue(job);
      }, config.smtpRetryDelayMs);
      this.#timers.add(timer);
      return;
    }
    const outcome: ProbeOutcome = { kind: 'answer', cls, reply, mxIndex, attempts: job.attempts + 1 };
    if (this.#catchall) outcome.catchall = this.#catchall;
    job.resolve(outcome);
  }
}

export class Prober {
  readonly throttle: KeyedSemaphore;
  #actors = new Map<string, DomainActor>();
  #idleWaiters: Array<() => void> = [];
  closing = false;
  sessionsOpened = 0;
  sessionsQuit = 0;

  constructor(readonly deps: ProberDeps) {
    this.throttle = new KeyedSemaphore(deps.config.maxConnectionsPerMx);
  }

  /** Checks one recipient of `domain` (ASCII) through that domain's actor. */
  check(domain: string, hosts: MxHost[], local: string, utf8: boolean, retries = this.deps.config.smtpRetries): Promise<ProbeOutcome> {
    let actor = this.#actors.get(domain);
    if (!actor) {
      actor = new DomainActor(domain, hosts, this);
      this.#actors.set(domain, actor);
    }
    return actor.check(local, utf8, retries);
  }

  /** Called by an actor whose queue ran dry. */
  settled(actor: DomainActor): void {
    if (actor.idle && this.#actors.get(actor.domain) === actor) this.#actors.delete(actor.domain);
    if (this.#actors.size === 0) for (const w of this.#idleWaiters.splice(0)) w();
  }

  get activeDomains(): number {
    return this.#actors.size;
  }

  /** Stops retrying, lets every actor finish its queue and QUIT its session. */
  async close(): Promise<void> {
    this.closing = true;
    if (this.#actors.size === 0) return;
    await new Promise<void>((resolve) => this.#idleWaiters.push(resolve));
  }
}
