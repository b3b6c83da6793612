// An MX actor owns the SMTP sessions to one MX host (DESIGN 4). Recipients of every domain routed
// to the host wait in one queue; up to `limit` sessions take them in pipelined rounds (MAIL FROM
// with the first RCPT batch, later batches added to the same transaction), each session within a
// budget learnt for this host so the server's error and junk-command limits never bite, kept warm
// for `idleMs` and retired with a QUIT that nobody waits for. The limit itself adapts: fewer
// sessions after a 421 at the banner, a refused connection or a 4.7.x rate reply, one more after
// each cool-down.

import { classifyRcpt, smtpConversation, type SendResult, type SessionFailure, type SmtpConnector, type SmtpSession } from '@svc/verifier';
import type { ConversationEffect, ConversationState, SessionBudget } from '@svc/verifier';

const { conversationStart, finish, interrupt, offer, receive, room } = smtpConversation;
import type { EngineConfig, Item, ItemSink } from './types.ts';
import type { MxThrottle } from './throttle.ts';
import { Queue } from './queue.ts';

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

/** A 421 at the banner with none of our sessions open: asked again this many times before failing over. */
const BANNER_RETRIES = 2;
/** A banner 421 saying "too many connections" (or any, this soon after our own sessions ended) is waited out this many times in a row. */
const CAP_RETRIES = 8;
/** Our sessions ended this recently: the server may still count them. */
const RECENT_SESSION_MS = 5_000;
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

  /**
   * Runs the conversation reducer (@svc/verifier smtpConversation) over an open session: takes
   * recipients from the queue as it has room, writes what it says, feeds back every reply with
   * how long it took, and performs its effects. Every protocol decision is the reducer's.
   */
  async #converse(session: SmtpSession, id: number, release: () => void): Promise<void> {
    const { counters } = this.deps;
    let state: ConversationState = conversationStart(session.extensions, this.deps.config.mailFrom);
    const inFlight = new Map<number, Item>();
    const perform = (effects: ConversationEffect[]): void => {
      for (const e of effects) this.#perform(e, inFlight, id);
    };
    try {
      for (;;) {
        const n = room(state, this.budget);
        if (n === 0) break;
        const batch = this.queue.take(n, (item) => item.notSession !== id);
        for (const item of batch) inFlight.set(item.id, item);
        const offered = offer(state, this.budget, batch);
        state = offered.state;
        perform(offered.effects);
        if (offered.taken.length === 0) {
          // Only recipients this session must not take (it deferred them): retire, a new session takes them.
          if (this.queue.live() > 0) break;
          if (await this.#waitForWork()) continue;
          break;
        }
        const write = offered.effects.find((e) => e.type === 'write')!;
        const commands = write.commands;
        if (commands[0]?.kind === 'mail' || commands[1]?.kind === 'mail') counters.transactions++;
        counters.rcpts += offered.taken.length;
        const results: Promise<SendResult>[] = write.pipelined ? session.write(write.phase, commands.map((c) => c.line)) : [];
        let last = performance.now();
        for (let i = 0; i < commands.length && !state.end; i++) {
          const r = write.pipelined ? await results[i]! : await session.send(commands[i]!.phase, commands[i]!.line);
          const now = performance.now();
          const received = receive(state, r, now - last);
          last = now;
          state = received.state;
          perform(received.effects);
        }
        if (state.end) return;
        if (this.queue.live() > 0) this.#pump();
      }
    } catch (err) {
      // A bug: no recipient may be left hanging on this session.
      const r = interrupt(state, { phase: 'rcpt', kind: 'protocol', detail: `internal error: ${(err as Error).message}` });
      state = r.state;
      perform(r.effects);
      throw err;
    } finally {
      const done = finish(state);
      state = done.state;
      // The permit goes back now; the QUIT's reply is not waited for (a server past its soft
      // error limit would hold it a second).
      release();
      this.#lastSessionEndAt = Date.now();
      if (state.end === 'close') session.destroy();
      else {
        this.#closing++;
        void session.quit().finally(() => {
          this.#closing--;
          if (this.#capSeen && this.queue.live() > 0) this.#pump();
        });
      }
    }
  }

  /** One effect of the conversation: a recipient's answer or return, or a sign about the host. */
  #perform(e: ConversationEffect, inFlight: Map<number, Item>, session: number): void {
    const { counters } = this.deps;
    const take = (itemId: number): Item | undefined => {
      const item = inFlight.get(itemId);
      inFlight.delete(itemId);
      return item;
    };
    switch (e.type) {
      case 'smtputf8_unsupported': {
        const item = take(e.id);
        if (!item) return;
        item.done = true;
        this.deps.sinkOf(item).smtputf8Unsupported(item);
        return;
      }
      case 'answer': {
        const item = take(e.id);
        if (item) this.deps.sinkOf(item).answered(item, e.reply, session, e.viaMail);
        return;
      }
      case 'requeue': {
        const item = take(e.id);
        if (!item) return;
        counters.requeuedForCap++;
        this.queue.unshift([item]);
        return;
      }
      case 'interrupted': {
        const item = take(e.id);
        if (item) this.#requeueBroken(item, e.failure, e.progress);
        return;
      }
      case 'rcpt_cap':
        this.budget.rcptsPerTransaction = Math.max(1, Math.min(this.budget.rcptsPerTransaction, e.rcpts));
        return;
      case 'error_budget':
        counters.slowReplies++;
        this.budget.errors = Math.max(1, Math.min(this.budget.errors, e.errors));
        return;
      case 'throttle':
        this.#throttle(e.kind);
        return;
      case 'write':
      case 'end':
        return; // performed by #converse
    }
  }

  /** A recipient whose session ended under it: again here, unless that keeps happening or the host stalls. */
  #requeueBroken(item: Item, f: SessionFailure, progress: boolean): void {
    // A session that answered others before it ended (Postfix's 421 after its error limit, a
    // per-session recipient cap) is no sign against this recipient: it goes back without a count.
    if (!progress) item.interruptions++;
    this.deps.counters.requeuedForClosing++;
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
