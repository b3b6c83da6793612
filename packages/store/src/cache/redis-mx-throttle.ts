// The cluster adapter of the MxThrottle port: at most `max` SMTP sessions per (egress IP, mail
// server address) across every process that shares one Redis, sync probes of the fronts included.
// The engine asks per server address (the IP its session connects to: many MX names can share
// one, and the server's per-client limit counts the address) and gives a permit back only once
// the server can have counted the session down (QUIT's reply, the close, a cool-down). The port
// is declared once, in @svc/contracts: engine and store are siblings (neither imports the other),
// and the runtime hands this adapter to the engine.
//
// Per (egressId, address), four keys share one hash tag (one Redis Cluster slot):
//   …:held  sorted set, member = permit token, score = lease expiry (Redis clock, ms)
//   …:queue sorted set, member = waiting token, score = ticket (…:seq, INCR): the arrival order
//   …:qexp  sorted set, member = waiting token, score = expiry of the waiter's registration
//   …:seq   the ticket counter
// and one pub/sub channel …:free, published when a permit is given back while someone waits.
//
// - A permit is a lease: one heartbeat timer per instance (every leaseMs/3) pushes the expiry of
//   every held permit and every waiting registration, so the permits of a process killed with -9
//   are purged within leaseMs, and its waiters leave the queue within leaseMs too. Expiry is on
//   Redis's clock (TIME in the scripts), so the hosts' clocks do not matter.
// - acquire is one Lua script: purge expired permits and waiters, then grant if fewer than `max`
//   permits are held AND fewer live waiters stand ahead of the caller than there are free permits;
//   otherwise the caller takes a ticket (once) and waits.
// - Waking: pub/sub, not BLPOP on a token list. A blocked BLPOP takes a connection per waited host
//   (a process waits for many hosts at once; we allow ourselves one extra connection), and a token
//   list loses its tokens with the process that took them, which needs a reaper that puts them
//   back: two sources of truth. Here the sorted sets are the only truth and a message is just a
//   hint to try again, so a lost message (subscriber reconnecting) costs latency, never a permit:
//   every waiting host is also tried every pollMs, and sooner when Redis said when the earliest
//   lease or registration ahead expires (the wake-up after a kill -9 is on time, not on a poll).
//   One subscriber connection per instance (redis.duplicate(), made on the first wait),
//   subscribed to the channels of the hosts this instance waits for.
//
// Fairness (what is guaranteed): permits go in ticket order across all processes, i.e. in the
// order the waiters first reached Redis. A waiter is passed over only if its registration
// expires, which takes its process not refreshing it for leaseMs (dead, or its event loop or
// network stalled that long); it then rejoins at the back. So under any load a waiter is served
// once the permits ahead of it come back, and never starves. Best effort only in that a free
// permit may idle until the head waiter's process tries (its message, at worst its next poll:
// pollMs), and a dead waiter at the head holds the line up to leaseMs.
//
// What it does not do: a process that cannot renew for leaseMs (stalled, partitioned) loses its
// leases (counted in `stats.leasesLost`); its sessions still run, so the limit can be exceeded
// until they end. While Redis is unreachable acquire keeps waiting (the limit holds; nothing is
// probed) and retries every pollMs; the errors go to `onError` and `stats.errors`. acquire
// rejects only after close() or once its signal is aborted (then it never waits: one try, and
// its place in the queue is withdrawn).
//
// Closing: close() gives back every permit held, withdraws and rejects every waiter, and waits
// for every script still out (a first try, a give-back, a waiter's try) so nothing this instance
// took is left in Redis for the lease to expire; each of those is bounded by ioredis'
// commandTimeout.

import { createHash, randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { permitWaitCancelled, type MxThrottle } from '@svc/contracts';

export interface RedisMxThrottleOptions {
  redis: Redis;
  /** Which egress IP the permits count against (SVC_EGRESS_ID, default the host name). */
  egressId: string;
  /** Most permits per (egressId, server address) across all processes. */
  max: number;
  /** A permit not renewed for this long is free again (a killed process's permits). Default 30 s. */
  leaseMs?: number;
  keyPrefix?: string;
  /** How often a waiter tries again without a message (lost messages, expired leases). Default 1 s. */
  pollMs?: number;
  onError?: (err: unknown) => void;
}

export interface RedisMxThrottleStats {
  granted: number;
  /** Acquisitions that had to wait. */
  waited: number;
  /** Held permits whose lease had already expired when the heartbeat came (a stall of leaseMs). */
  leasesLost: number;
  errors: number;
}

// KEYS held, queue, qexp, seq. ARGV token, max, leaseMs, waiterTtlMs, keyTtlMs.
// Returns {1} granted; {0, waitMs} no permit free (waitMs: until the earliest lease expires);
// {-1, waitMs} permits free but live waiters ahead (waitMs: until the earliest registration expires).
const ACQUIRE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local held, queue, qexp, seq = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local token, max = ARGV[1], tonumber(ARGV[2])
local lease, wttl, kttl = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
redis.call('ZREMRANGEBYSCORE', held, '-inf', now)
local dead = redis.call('ZRANGEBYSCORE', qexp, '-inf', now)
for i = 1, #dead do redis.call('ZREM', queue, dead[i]) end
if #dead > 0 then redis.call('ZREMRANGEBYSCORE', qexp, '-inf', now) end
if redis.call('ZSCORE', held, token) then
  redis.call('ZADD', held, now + lease, token)
  return {1}
end
local free = max - redis.call('ZCARD', held)
local rank = redis.call('ZRANK', queue, token)
local ahead = rank
if not rank then ahead = redis.call('ZCARD', queue) end
if ahead < free then
  if rank then
    redis.call('ZREM', queue, token)
    redis.call('ZREM', qexp, token)
  end
  redis.call('ZADD', held, now + lease, token)
  redis.call('PEXPIRE', held, kttl)
  return {1}
end
if not rank then
  redis.call('ZADD', queue, redis.call('INCR', seq), token)
end
redis.call('ZADD', qexp, now + wttl, token)
redis.call('PEXPIRE', queue, kttl)
redis.call('PEXPIRE', qexp, kttl)
redis.call('PEXPIRE', seq, kttl)
if free <= 0 then
  local first = redis.call('ZRANGE', held, 0, 0, 'WITHSCORES')
  return {0, tonumber(first[2]) - now}
end
local firstw = redis.call('ZRANGE', qexp, 0, 0, 'WITHSCORES')
return {-1, tonumber(firstw[2]) - now}
`;

// KEYS held, queue, qexp. ARGV token, channel. Gives a permit back, or withdraws a waiter;
// tells the waiters when there are any.
const RELEASE = `
local n = redis.call('ZREM', KEYS[1], ARGV[1]) + redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
if n > 0 and redis.call('ZCARD', KEYS[2]) > 0 then redis.call('PUBLISH', ARGV[2], '1') end
return n
`;

// KEYS held, queue, qexp, seq. ARGV leaseMs, waiterTtlMs, keyTtlMs, nHeld, held tokens…, waiting tokens….
// Pushes the expiry of live permits and registrations; returns the held tokens that had expired.
const RENEW = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease, wttl, kttl, nheld = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local lost = {}
for i = 5, 4 + nheld do
  local s = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if s and tonumber(s) > now then redis.call('ZADD', KEYS[1], now + lease, ARGV[i])
  else
    if s then redis.call('ZREM', KEYS[1], ARGV[i]) end
    lost[#lost + 1] = ARGV[i]
  end
end
for i = 5 + nheld, #ARGV do
  local s = redis.call('ZSCORE', KEYS[3], ARGV[i])
  if s and tonumber(s) > now then redis.call('ZADD', KEYS[3], now + wttl, ARGV[i]) end
end
for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], kttl) end
return lost
`;

// KEYS held. Permits held now.
const ACTIVE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')
`;

interface Script {
  src: string;
  sha: string;
}
const script = (src: string): Script => ({ src, sha: createHash('sha1').update(src).digest('hex') });
const S = { acquire: script(ACQUIRE), release: script(RELEASE), renew: script(RENEW), active: script(ACTIVE) };

interface Waiter {
  token: string;
  resolve: (release: () => void) => void;
  reject: (err: Error) => void;
  /** Stops listening to the caller's signal. */
  detach: () => void;
}

const closedError = () => new Error('RedisMxThrottle is closed');

interface HostState {
  keys: [string, string, string, string];
  channel: string;
  held: Set<string>;
  waiters: Waiter[];
  subscribed: boolean;
  pollTimer?: NodeJS.Timeout;
  pollAt: number;
  trying: boolean;
  again: boolean;
  /** acquire calls whose first script is out. */
  pending: number;
}

export class RedisMxThrottle implements MxThrottle {
  readonly redis: Redis;
  readonly egressId: string;
  readonly max: number;
  readonly leaseMs: number;
  readonly pollMs: number;
  readonly keyPrefix: string;
  readonly stats: RedisMxThrottleStats = { granted: 0, waited: 0, leasesLost: 0, errors: 0 };
  #onError: (err: unknown) => void;
  #hosts = new Map<string, HostState>();
  #byChannel = new Map<string, string>();
  #sub: Redis | undefined;
  #heartbeat: NodeJS.Timeout | undefined;
  #closed = false;
  #tokenBase = `${process.pid.toString(36)}.${randomBytes(6).toString('hex')}.`;
  #seq = 0;
  /** Scripts still out that close() waits for: first tries, give-backs, waiters' tries. */
  #inflight = new Set<Promise<unknown>>();

  constructor(opts: RedisMxThrottleOptions) {
    if (!Number.isInteger(opts.max) || opts.max < 1) throw new RangeError('max must be a positive integer');
    if (!opts.egressId) throw new RangeError('egressId must not be empty');
    this.redis = opts.redis;
    this.egressId = opts.egressId;
    this.max = opts.max;
    this.leaseMs = opts.leaseMs ?? 30_000;
    this.pollMs = opts.pollMs ?? 1_000;
    this.keyPrefix = opts.keyPrefix ?? 'svc:mx:';
    if (!(this.leaseMs >= 100)) throw new RangeError('leaseMs must be at least 100');
    if (!(this.pollMs >= 1)) throw new RangeError('pollMs must be positive');
    this.#onError = opts.onError ?? (() => {});
  }

  /** Waiter registrations live as long as a lease: refreshed by the same heartbeat. */
  get #waiterTtlMs(): number {
    return this.leaseMs;
  }

  /** Idle keys vanish after this. */
  get #keyTtlMs(): number {
    return this.leaseMs * 4;
  }

  async acquire(address: string, signal?: AbortSignal): Promise<() => void> {
    if (this.#closed) throw closedError();
    // One limit per key: a server address (an IPv6 address in either case is one). The per-key
    // state below is called a host's.
    const name = address.toLowerCase();
    const h = this.#host(name);
    const token = this.#tokenBase + (this.#seq++).toString(36);
    this.#startHeartbeat();
    h.pending++; // keeps the host's state (and its heartbeat) while the first try is out
    // The first try, and its withdrawal when the caller may not wait or close() came meanwhile
    // (close() does not know this token yet: a permit, or a place in the queue, is given back
    // here, and close() waits for it).
    const first = this.#track(
      (async (): Promise<[number, number?] | 'closed' | 'cancelled' | undefined> => {
        let r: [number, number?] | undefined;
        try {
          r = await this.#try(h, token);
        } catch (err) {
          this.#error(err);
        } finally {
          h.pending--;
        }
        if (this.#closed || (r?.[0] !== 1 && signal?.aborted)) {
          await this.#giveBack(h, token);
          if (h.waiters.length === 0) this.#forget(name, h);
          return this.#closed ? 'closed' : 'cancelled';
        }
        return r;
      })(),
    );
    const r = await first;
    if (r === 'closed') throw closedError();
    if (r === 'cancelled') throw permitWaitCancelled(name, signal);
    if (r?.[0] === 1) return this.#granted(name, h, token);
    this.stats.waited++;
    return new Promise<() => void>((resolve, reject) => {
      const onAbort = () => this.#withdraw(name, h, w, permitWaitCancelled(name, signal));
      const w: Waiter = { token, resolve, reject, detach: () => signal?.removeEventListener('abort', onAbort) };
      h.waiters.push(w);
      if (signal?.aborted) return onAbort();
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#subscribe(name, h);
      this.#schedule(name, h, r?.[1]);
    });
  }

  /** Permits held now for `address` by every process of this egress id. */
  async active(address: string): Promise<number> {
    return (await this.#eval(S.active, [this.#host(address.toLowerCase()).keys[0]], [])) as number;
  }

  /**
   * Gives back every held permit, withdraws and rejects every waiter, waits for every script still
   * out (so nothing this instance took stays in Redis until its lease expires), stops timers and
   * the subscriber. Bounded: each script by ioredis' commandTimeout.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#heartbeat) clearInterval(this.#heartbeat);
    this.#heartbeat = undefined;
    for (const h of this.#hosts.values()) {
      for (const token of h.held) this.#track(this.#giveBack(h, token));
      h.held.clear();
      this.#cancel(h);
    }
    while (this.#inflight.size > 0) await Promise.allSettled([...this.#inflight]);
    this.#hosts.clear();
    this.#byChannel.clear();
    const sub = this.#sub;
    this.#sub = undefined;
    if (sub) await sub.quit().catch(() => sub.disconnect());
  }

  #host(name: string): HostState {
    let h = this.#hosts.get(name);
    if (!h) {
      const base = `${this.keyPrefix}{${this.egressId}|${name}}:`;
      h = { keys: [`${base}held`, `${base}queue`, `${base}qexp`, `${base}seq`], channel: `${base}free`, held: new Set(), waiters: [], subscribed: false, pollAt: 0, trying: false, again: false, pending: 0 };
      this.#hosts.set(name, h);
      this.#byChannel.set(h.channel, name);
    }
    return h;
  }

  async #try(h: HostState, token: string): Promise<[number, number?]> {
    return (await this.#eval(S.acquire, h.keys, [token, this.max, this.leaseMs, this.#waiterTtlMs, this.#keyTtlMs])) as [number, number?];
  }

  #granted(name: string, h: HostState, token: string): () => void {
    this.stats.granted++;
    h.held.add(token);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      if (!h.held.delete(token)) return; // given back by close(), or its lease was lost
      void this.#track(this.#giveBack(h, token)).then(() => this.#kick(name, h));
      this.#forget(name, h);
    };
  }

  /** Keeps `p` in the set close() waits for until it settles. */
  #track<T>(p: Promise<T>): Promise<T> {
    this.#inflight.add(p);
    const out = (): void => void this.#inflight.delete(p);
    p.then(out, out);
    return p;
  }

  /** Takes a waiter out (its signal was aborted): withdrawn from the queue in Redis, rejected. */
  #withdraw(name: string, h: HostState, w: Waiter, err: Error): void {
    const i = h.waiters.indexOf(w);
    if (i < 0) return; // granted or cancelled already
    h.waiters.splice(i, 1);
    w.detach();
    // Sent after any try of this token already out, so a permit such a try is granted goes too.
    this.#track(this.#giveBack(h, w.token));
    w.reject(err);
    if (h.waiters.length === 0) this.#forget(name, h);
  }

  async #giveBack(h: HostState, token: string): Promise<void> {
    try {
      await this.#eval(S.release, h.keys.slice(0, 3), [token, h.channel]);
    } catch (err) {
      this.#error(err); // the lease runs out on its own
    }
  }

  /** Tries this instance's waiters for `name` in arrival order, until Redis says no permit is free. */
  #kick(name: string, h: HostState): void {
    if (this.#closed || h.waiters.length === 0) return;
    if (h.trying) {
      h.again = true;
      return;
    }
    h.trying = true;
    void this.#track(
      (async () => {
        let wait: number | undefined;
        try {
          do {
            h.again = false;
            wait = undefined;
            // In arrival order; a waiter withdrawn meanwhile (close, its signal) is skipped.
            for (const w of [...h.waiters]) {
              if (this.#closed) break;
              if (!h.waiters.includes(w)) continue;
              const [ok, ms] = await this.#try(h, w.token);
              if (ok === 1) {
                const at = h.waiters.indexOf(w);
                if (this.#closed || at < 0) {
                  // Withdrawn while this try was out: its give-back went after the try and freed
                  // the permit, unless the try had to load the script first; once more, to be sure.
                  await this.#giveBack(h, w.token);
                  continue;
                }
                h.waiters.splice(at, 1);
                w.detach();
                w.resolve(this.#granted(name, h, w.token));
                continue;
              }
              if (this.#closed) break;
              wait = wait === undefined ? ms : Math.min(wait, ms ?? wait);
              if (ok === 0) break; // nothing free: the others need not ask
              // free permits, but waiters ahead: one of ours further back may be among them
            }
          } while (h.again && !this.#closed);
        } catch (err) {
          this.#error(err);
        } finally {
          h.trying = false;
        }
        if (this.#closed) return;
        if (h.waiters.length === 0) this.#forget(name, h);
        else this.#schedule(name, h, wait);
      })(),
    );
  }

  /** The next try without a message: after pollMs, or just after the earliest expiry Redis named. */
  #schedule(name: string, h: HostState, waitMs?: number): void {
    const delay = Math.max(1, Math.min(this.pollMs, waitMs === undefined ? this.pollMs : waitMs + 2));
    const at = Date.now() + delay;
    if (h.pollTimer && h.pollAt <= at) return;
    if (h.pollTimer) clearTimeout(h.pollTimer);
    h.pollAt = at;
    h.pollTimer = setTimeout(() => {
      h.pollTimer = undefined;
      this.#kick(name, h);
    }, delay);
    h.pollTimer.unref();
  }

  #subscribe(name: string, h: HostState): void {
    if (h.subscribed) return;
    h.subscribed = true;
    if (!this.#sub) {
      const sub = this.redis.duplicate();
      sub.on('error', (err) => this.#error(err));
      sub.on('message', (channel: string) => {
        const host = this.#byChannel.get(channel);
        const hs = host === undefined ? undefined : this.#hosts.get(host);
        if (host !== undefined && hs) this.#kick(host, hs);
      });
      this.#sub = sub;
    }
    // A permit given back between our refusal and the subscription has no message for us: try
    // once more when the subscription stands.
    this.#sub.subscribe(h.channel).then(
      () => this.#kick(name, h),
      (err) => this.#error(err),
    );
  }

  /** Drops the state of a host with no permits and no waiters. */
  #forget(name: string, h: HostState): void {
    if (h.waiters.length > 0 || h.held.size > 0 || h.trying || h.pending > 0) {
      if (h.waiters.length === 0) this.#unsubscribe(h);
      return;
    }
    this.#unsubscribe(h);
    // Only if it is still the host's state: a late answer about a state already dropped must not
    // drop its successor (which would then be neither renewed nor woken by messages).
    if (this.#hosts.get(name) !== h) return;
    this.#hosts.delete(name);
    this.#byChannel.delete(h.channel);
    if (this.#hosts.size === 0 && this.#heartbeat) {
      clearInterval(this.#heartbeat);
      this.#heartbeat = undefined;
    }
  }

  #unsubscribe(h: HostState): void {
    if (h.pollTimer) clearTimeout(h.pollTimer);
    h.pollTimer = undefined;
    if (!h.subscribed) return;
    h.subscribed = false;
    this.#sub?.unsubscribe(h.channel).catch((err) => this.#error(err));
  }

  /** Withdraws and rejects the waiters of a host (close). */
  #cancel(h: HostState): void {
    const waiters = h.waiters.splice(0);
    for (const w of waiters) {
      w.detach();
      this.#track(this.#giveBack(h, w.token));
      w.reject(closedError());
    }
    this.#unsubscribe(h);
  }

  #startHeartbeat(): void {
    if (this.#heartbeat) return;
    this.#heartbeat = setInterval(() => this.#renew(), Math.max(10, Math.floor(this.leaseMs / 3)));
    this.#heartbeat.unref();
  }

  #renew(): void {
    for (const [name, h] of this.#hosts) {
      if (h.held.size === 0 && h.waiters.length === 0) continue;
      const held = [...h.held];
      const waiting = h.waiters.map((w) => w.token);
      this.#eval(S.renew, h.keys, [this.leaseMs, this.#waiterTtlMs, this.#keyTtlMs, held.length, ...held, ...waiting]).then(
        (lost) => {
          for (const token of lost as string[]) {
            if (h.held.delete(token)) this.stats.leasesLost++;
          }
          if ((lost as string[]).length > 0) this.#forget(name, h);
        },
        (err) => this.#error(err),
      );
    }
  }

  async #eval(s: Script, keys: string[], args: Array<string | number>): Promise<unknown> {
    try {
      return await this.redis.evalsha(s.sha, keys.length, ...keys, ...args);
    } catch (err) {
      if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
      return await this.redis.eval(s.src, keys.length, ...keys, ...args);
    }
  }

  #error(err: unknown): void {
    this.stats.errors++;
    this.#onError(err);
  }
}
