// An MX actor owns the SMTP sessions to one MX host (DESIGN 4). Recipients of every domain routed
// to the host wait in one queue; up to `limit` sessions take them in pipelined rounds (MAIL FROM
// with the first RCPT batch, later batches added to the same transaction), each session within a
// budget learnt for this host so the server's error and junk-command limits never bite, kept warm
// for `idleMs` and retired with a QUIT that nobody waits for. The limit itself adapts: fewer
// sessions after a 421 at the banner, a refused connection or a 4.7.x rate reply, one more after
// each cool-down.

import { classifyRcpt, smtpSession, type SendResult, type SessionFailure, type SmtpConnector, type SmtpSession } from '@svc/verifier';
import type { SentCommand, SessionBudget, SessionState } from '@svc/verifier';

const { abandon, capacity, initialState, plan, step } = smtpSession;
import type { EngineConfig, Item, ItemSink } from './types.ts';
import type { MxThrottle } from './throttle.ts';

/** Items waiting for a session, oldest first: a ring-free deque (push back, take front, put back at the front). */
class Queue {
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

export interface MxActorDeps {
  smtp: SmtpConnector;
  throttle: MxThrottle;
  config: EngineConfig;
  addresses: (host: string) => Promise<string[]>;
  sinkOf: (item: Item) => ItemSink;
  /** The engine is closing: warm sessions end as soon as the queue is empty. */
  closing: () => boolean;
  /** Called when the actor has no session, no queue and nothing opening. */
  idle: () => void;
  /** Aborted when the engine closes: from then on a session permit is taken if one is free, never waited for. */
  signal?: AbortSignal;
  nextSessionId: () => number;
  counters: EngineCounters;
}

export interface EngineCounters {
  sessionsOpened: number;
  transactions: number;
  rcpts: number;
  requeuedForCap: number;
  requeuedForClosing: number;
  throttled: number;
  slowReplies: number;
  /** close() found the engine idle on its own periodic check, not by an actor's word: a missed notification (should stay 0). */
  closeIdleByCheck: number;
}

/** A reply this much later than the session's round trip is a server sleeping on purpose (Postfix's soft error limit). */
const SLOW_REPLY_MS = 800;
/** A 421 at the banner with none of our sessions open: asked again this many times before failing over. */
const BANNER_RETRIES = 2;
/** A banner 421 saying "too many connections" (or any, this soon after our own sessions ended) is waited out this many times in a row. */
const CAP_RETRIES = 8;
/** Our sessions ended this recently: the server may still count them. */
const RECENT_SESSION_MS = 5_000;
/** Replies that ask a client to slow down (rate limits), as opposed to greylisting's "come back later". */
const RATE_TEXT = /\brate\b|too (fast|frequent)|too many (messages|mails|requests|commands|recipients per)|slow down/i;
/** A recipient whose sessions keep breaking under it is failed over after this many. */
const MAX_INTERRUPTIONS = 3;

export class MxActor {
  readonly queue = new Queue();
  #sessions = new Set<number>();
  #opening = 0;
  #idleWaiters: Array<() => void> = [];
  /** Sessions allowed now (adaptive, at most config.maxConnectionsPerMx). */
  limit: number;
  #cooldownUntil = 0;
  #downUntil = 0;
  #downFailure: SessionFailure | undefined;
  #bannerRetries = 0;
  #retryTimer: NodeJS.Timeout | undefined;
  /** Sessions whose QUIT is written and whose socket is not closed yet. */
  #closing = 0;
  /** The host refused a connection for being over its per-client cap (421 at the banner): closing sessions count until their sockets close. */
  #capSeen = false;
  #lastSessionEndAt = 0;
  /**
   * The throttle refused a permit (the engine is closing and none was free, or the throttle is
   * closed): no more opens while a session of ours can take the queue; with none, one more try,
   * and the recipients are answered if that is refused too.
   */
  #noPermit = false;
  /** What a session may spend on this host, learnt from its replies. */
  readonly budget: SessionBudget;

  constructor(
    readonly host: string,
    readonly deps: MxActorDeps,
  ) {
    const c = deps.config;
    this.limit = c.maxConnectionsPerMx;
    this.budget = { errors: c.errorBudget, junk: c.junkBudget, rcptsPerTransaction: c.maxRcptsPerTransaction, pipelineDepth: c.pipelineDepth };
  }

  get sessions(): number {
    return this.#sessions.size;
  }

  get busy(): boolean {
    return this.#sessions.size > 0 || this.#opening > 0 || this.queue.live() > 0 || this.#retryTimer !== undefined;
  }

  enqueue(item: Item): void {
    if (Date.now() < this.#downUntil && this.#downFailure) {
      this.deps.sinkOf(item).hostFailed(item, this.#downFailure);
      return;
    }
    this.queue.push(item);
    this.#pump();
  }

  /** Wakes idle sessions and opens new ones while there is more work than sessions. */
  #pump(): void {
    for (const w of this.#idleWaiters.splice(0)) w();
    const now = Date.now();
    if (this.limit < this.deps.config.maxConnectionsPerMx && now >= this.#cooldownUntil) {
      this.limit++;
      this.#cooldownUntil = now + this.deps.config.throttleCooldownMs;
    }
    if (this.#retryTimer) return;
    if (this.#noPermit && this.#sessions.size + this.#opening > 0) return;
    // A server that caps connections per client still counts a session whose QUIT is on its way.
    const held = () => this.#sessions.size + this.#opening + (this.#capSeen ? this.#closing : 0);
    while (held() < this.limit && this.queue.live() > (this.#sessions.size + this.#opening) * 2) {
      void this.#open();
      if (this.#noPermit) break;
    }
  }

  /** The most sessions this host has held open at once for us. */
  #peak = 0;

  /**
   * Fewer sessions for a cool-down. A connection refused at the banner says we hold as many as
   * the server allows: as many as are open, or as many as it once allowed (a session we just
   * ended may still count on the server's side until its QUIT lands). A rate reply (4.7.x) says
   * slow down: one fewer.
   */
  #throttle(kind: 'connections' | 'rate'): void {
    this.deps.counters.throttled++;
    const cap = kind === 'connections' ? Math.max(this.#sessions.size, this.#peak) : this.limit - 1;
    this.limit = Math.max(1, Math.min(this.limit, cap));
    this.#cooldownUntil = Date.now() + this.deps.config.throttleCooldownMs;
  }

  #failHost(failure: SessionFailure): void {
    this.#downUntil = Date.now() + this.deps.config.hostDownMs;
    this.#downFailure = failure;
    for (const item of this.queue.drain()) this.deps.sinkOf(item).hostFailed(item, failure);
  }

  // Every way out of #open ends in #afterSession (or leaves a retry timer that calls it): the
  // actor's last step to idle must reach the engine, or close() waits for ever. (An early return
  // once missed it: a permit that came from Redis after the work had gone to another session.)
  async #open(): Promise<void> {
    this.#opening++;
    const { smtp, throttle, config } = this.deps;
    let release: (() => void) | undefined;
    let opened: Awaited<ReturnType<SmtpConnector['open']>> | undefined;
    let refused: unknown;
    try {
      try {
        release = await throttle.acquire(this.host, this.deps.signal);
        this.#noPermit = false;
      } catch (err) {
        refused = err ?? new Error('refused');
      }
      if (release && this.queue.live() > 0) {
        // (No work left: it went elsewhere while we waited for the permit.)
        const ips = await this.deps.addresses(this.host);
        if (ips.length === 0) this.#failHost({ phase: 'connect', kind: 'connection', detail: `MX host ${this.host} has no address` });
        // Every address of the host in turn while the connection itself fails (RFC 5321 5.1); a
        // server that answered and refused is not asked again on another address.
        else
          for (const ip of ips) {
            opened = await smtp.open({ host: ip, servername: this.host, port: config.smtpPort, heloName: config.heloName, timeoutMs: config.smtpTimeoutMs });
            if (opened.ok || opened.failure.phase !== 'connect') break;
          }
      }
    } catch (err) {
      // A port that threw (a bug): nobody may be left waiting on this host for it.
      this.#failHost({ phase: 'connect', kind: 'protocol', detail: `internal error: ${(err as Error)?.message ?? String(err)}` });
    } finally {
      this.#opening--;
      if (!opened?.ok) release?.();
    }
    if (refused !== undefined) return this.#withoutPermit(refused);
    if (!opened) return this.#afterSession();
    if (!opened.ok) {
      const f = opened.failure;
      const refusedAtBanner = f.phase === 'greeting' && f.reply?.code === 421;
      if ((f.phase === 'connect' && f.kind === 'connection') || refusedAtBanner) {
        // A 421 that names the per-client connection cap.
        const capped = refusedAtBanner && /too many connections|connection (limit|count)/i.test(f.reply?.text ?? '');
        if (capped) this.#capSeen = true;
        if (this.#sessions.size > 0) {
          // Our other sessions are alive: this is the server's per-client cap, not an outage.
          // The recipients wait for a session.
          this.#throttle('connections');
          return this.#afterSession();
        }
        // No session of ours is open. A 421 that names the connection cap, or any refusal right
        // after our own sessions ended (the server may still count them), is waited out: the
        // recipients are not failed over for it. Another 421 (someone else holds the server's
        // connections, a server starting up) is asked again twice, then the next MX is.
        const recent = Date.now() - this.#lastSessionEndAt < RECENT_SESSION_MS;
        // Refusals of connections opened together count once: a retry is already planned.
        if (this.#retryTimer && (capped || recent || refusedAtBanner)) return;
        const retries = capped || recent ? CAP_RETRIES : refusedAtBanner ? BANNER_RETRIES : 0;
        if (this.#bannerRetries < retries) {
          this.#bannerRetries++;
          this.#throttle('connections');
          this.#retryTimer = setTimeout(() => {
            this.#retryTimer = undefined;
            this.#pump();
            this.#afterSession();
          }, Math.min(4_000, 100 * 2 ** this.#bannerRetries));
          return;
        }
      }
      this.#bannerRetries = 0;
      this.#failHost(f);
      return this.#afterSession();
    }
    this.#bannerRetries = 0;
    this.deps.counters.sessionsOpened++;
    const id = this.deps.nextSessionId();
    this.#sessions.add(id);
    this.#peak = Math.max(this.#peak, this.#sessions.size);
    // Opened while another open was refused: the server allows at least this many.
    if (this.#sessions.size > this.limit) this.limit = Math.min(this.deps.config.maxConnectionsPerMx, this.#sessions.size);
    try {
      await this.#converse(opened.session, id, release!);
    } finally {
      this.#sessions.delete(id);
      this.#afterSession();
    }
  }

  #afterSession(): void {
    if (this.queue.live() > 0) this.#pump();
    if (!this.busy) this.deps.idle();
  }

  /**
   * No permit: the throttle would not give one without a wait (the engine is closing) or is
   * closed. A session of ours still open takes the queue; with none (and none opening or about
   * to be retried), the recipients are answered now, so close() never waits for a permit.
   */
  #withoutPermit(err: unknown): void {
    this.#noPermit = true;
    if (this.#sessions.size === 0 && this.#opening === 0 && !this.#retryTimer) {
      const failure: SessionFailure = { phase: 'connect', kind: 'connection', detail: `no SMTP session permit for ${this.host}: ${(err as Error)?.message ?? String(err)}` };
      for (const item of this.queue.drain()) this.deps.sinkOf(item).hostFailed(item, failure);
    }
    this.#afterSession();
  }

  /** Waits up to idleMs for more recipients; false when none came. */
  #waitForWork(): Promise<boolean> {
    if (this.deps.closing() || this.deps.config.idleMs <= 0) return Promise.resolve(false);
    return new Promise((resolve) => {
      const waiter = () => {
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(() => {
        const i = this.#idleWaiters.indexOf(waiter);
        if (i >= 0) this.#idleWaiters.splice(i, 1);
        resolve(false);
      }, this.deps.config.idleMs);
      this.#idleWaiters.push(waiter);
    });
  }

  /** Wakes warm sessions so they notice the engine is closing. */
  wake(): void {
    for (const w of this.#idleWaiters.splice(0)) w();
  }

  async #converse(session: SmtpSession, id: number, release: () => void): Promise<void> {
    const { config, counters } = this.deps;
    const smtputf8 = session.extensions.has('SMTPUTF8');
    const pipelining = session.extensions.has('PIPELINING');
    let state: SessionState = initialState();
    const inFlight = new Map<number, Item>();
    /** The fastest reply seen: the round trip, against which a sleeping server shows. */
    let rtt = Infinity;
    let ended = false;
    /** Recipients answered on this session: a session that made progress is no fault of those it left. */
    let answeredHere = 0;
    const end = (failure: SessionFailure | undefined) => {
      ended = true;
      const r = abandon(state);
      state = r.state;
      for (const itemId of r.requeue) {
        const item = inFlight.get(itemId);
        inFlight.delete(itemId);
        if (item) this.#requeueBroken(item, failure, answeredHere > 0);
      }
    };
    try {
      for (;;) {
        const room = capacity(state, this.budget);
        if (room === 0) break;
        let batch = this.queue.take(room, (item) => item.notSession !== id);
        batch = batch.filter((item) => {
          if (item.utf8 && !smtputf8) {
            item.done = true;
            this.deps.sinkOf(item).smtputf8Unsupported(item);
            return false;
          }
          return true;
        });
        if (batch.length === 0) {
          // Only recipients this session must not take (it deferred them): retire, a new session takes them.
          if (this.queue.live() > 0) break;
          if (await this.#waitForWork()) continue;
          break;
        }
        const planned = plan(state, this.budget, batch.map((i) => i.id));
        state = planned.state;
        for (const item of batch) inFlight.set(item.id, item);
        if (planned.send[0]?.kind === 'mail' || planned.send[1]?.kind === 'mail') counters.transactions++;
        counters.rcpts += batch.length;
        const lines = planned.send.map((c) => this.#line(c, inFlight, smtputf8));
        // RFC 2920: MAIL, RCPT and RSET may be pipelined; without PIPELINING, one at a time.
        const results: Promise<SendResult>[] = pipelining ? session.write('rcpt', lines) : [];
        let last = performance.now();
        for (let i = 0; i < lines.length; i++) {
          const cmd = planned.send[i]!;
          const r = pipelining ? await results[i]! : await session.send(cmd.kind === 'rcpt' ? 'rcpt' : cmd.kind === 'mail' ? 'mail' : 'rset', lines[i]!);
          const now = performance.now();
          const gap = now - last;
          last = now;
          if (!r.ok) {
            end(r.failure);
            return;
          }
          if (i === 0) rtt = Math.min(rtt, gap);
          const errorsBefore = state.errors;
          const firstAcceptOfTxn = cmd.kind === 'rcpt' && state.txnRcpts === 0 && r.reply.code < 300;
          if (gap > rtt + SLOW_REPLY_MS && errorsBefore > 0 && !firstAcceptOfTxn && cmd.kind === 'rcpt') {
            // Replies came a second late after `errorsBefore` rejections: the server's soft error
            // limit (Postfix: smtpd_soft_error_limit). Stay below it from now on. (The first
            // accepted RCPT of a transaction may be late for another reason: in_flow_delay.)
            counters.slowReplies++;
            this.budget.errors = Math.max(1, Math.min(this.budget.errors, errorsBefore - 1));
          }
          const stepped = step(state, r.reply);
          state = stepped.state;
          for (const e of stepped.effects) {
            if (e.type === 'answer') {
              const item = inFlight.get(e.id);
              inFlight.delete(e.id);
              if (!item) continue;
              answeredHere++;
              // A 4.7.x that says "too fast" (not greylisting, which says "try again later"): slow down.
              if (r.reply.code >= 400 && r.reply.code < 500 && r.reply.enhanced?.startsWith('4.7.') && RATE_TEXT.test(r.reply.text)) this.#throttle('rate');
              this.deps.sinkOf(item).answered(item, e.reply, id, e.viaMail === true);
            } else if (e.type === 'requeue') {
              const item = inFlight.get(e.id);
              inFlight.delete(e.id);
              if (!item) continue;
              if (e.why === 'rcpt_cap') {
                counters.requeuedForCap++;
                this.queue.unshift([item]);
              } else this.#requeueBroken(item, { phase: 'rcpt', kind: 'reply', detail: 'server closing', ...(state.closedBy ? { reply: state.closedBy } : {}) }, answeredHere > 0);
            } else if (e.type === 'rcpt_cap') {
              this.budget.rcptsPerTransaction = Math.max(1, Math.min(this.budget.rcptsPerTransaction, e.rcpts));
            } else if (e.type === 'closed') {
              if (/too many connections/i.test(e.reply.text)) this.#throttle('connections');
              else if (RATE_TEXT.test(e.reply.text)) this.#throttle('rate');
            }
          }
          if (state.phase === 'closed') {
            end(undefined);
            return;
          }
        }
        if (this.queue.live() > 0) this.#pump();
      }
    } catch (err) {
      // A bug: no recipient may be left hanging on this session.
      end({ phase: 'rcpt', kind: 'protocol', detail: `internal error: ${(err as Error).message}` });
      throw err;
    } finally {
      // The permit goes back now; the QUIT's reply is not waited for (a server past its soft
      // error limit would hold it a second).
      release();
      this.#lastSessionEndAt = Date.now();
      if (ended || state.phase === 'closed') session.destroy();
      else {
        this.#closing++;
        void session.quit().finally(() => {
          this.#closing--;
          if (this.#capSeen && this.queue.live() > 0) this.#pump();
        });
      }
    }
  }

  #line(c: SentCommand, inFlight: Map<number, Item>, smtputf8: boolean): string {
    switch (c.kind) {
      case 'mail':
        return `MAIL FROM:<${this.deps.config.mailFrom}>${smtputf8 ? ' SMTPUTF8' : ''}`;
      case 'rset':
        return 'RSET';
      case 'quit':
        return 'QUIT';
      case 'rcpt': {
        const item = inFlight.get(c.id)!;
        return `RCPT TO:<${item.local}@${item.domain}>`;
      }
    }
  }

  /** A recipient whose session ended under it: again here, unless that keeps happening or the host stalls. */
  #requeueBroken(item: Item, failure: SessionFailure | undefined, progress: boolean): void {
    // A session that answered others before it ended (Postfix's 421 after its error limit, a
    // per-session recipient cap) is no sign against this recipient: it goes back without a count.
    if (!progress) item.interruptions++;
    this.deps.counters.requeuedForClosing++;
    const f = failure ?? { phase: 'rcpt', kind: 'connection', detail: 'session ended' };
    // A host that stops answering (a timeout) is not asked again for this recipient: the next
    // MX is, at once. A dropped line or a 421 is asked again on a new session, a few times.
    if (f.kind === 'timeout' || item.interruptions >= MAX_INTERRUPTIONS) this.deps.sinkOf(item).hostFailed(item, f);
    else this.queue.unshift([item]);
  }
}

/** What a refused MAIL FROM says about the recipients behind it: never that they do not exist. */
export function mailRefusalClass(reply: Parameters<typeof classifyRcpt>[0]) {
  const cls = classifyRcpt(reply);
  return cls === 'rejected' || cls === 'malformed' ? 'unclassified' : cls;
}
