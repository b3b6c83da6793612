// The job worker, in two stages (one owner per domain bucket, then one per MX host):
// - route: takes work messages (unique emails of one job, keyed by domain bucket), resolves each
//   domain's MX through the verifier (cached, one lookup per domain at a time) and republishes the
//   emails on the MX topic keyed by their first MX host, so one worker at a time owns a host's
//   SMTP sessions for every domain it serves (the Kafka partition's owner). The MX answers travel
//   with the emails (WorkMessageV1.mx): a domain's MX is resolved once per job pass, here;
// - probe: takes MX work, probes it through the verifier with the hosts it carries and no
//   in-session greylist retry, prices
//   each result with @svc/billing (the same pricing as sync requests) and publishes the results
//   for the job's aggregator. Several messages of one partition run at once (MX_CONCURRENCY): a
//   partition holds several hosts, and a host's sessions are kept busy by more than one message.
// A failover to a host's next MX is made by the worker that owns the first one.
//
// Greylisting (docs/decisions/jobs-and-csv.md, "Greylisting"): a result with reason_code
// `smtp_tempfail` is stored deferred, to be probed again after `greylistDelayMs` by the scheduler
// (durably: the due time is in the store), up to `greylistAttempts` probes in all; the last one's
// `unknown` stands. A DNS timeout or SERVFAIL is deferred the same way, after at most
// DNS_RETRY_DELAY_MS; a mail server that could not be reached (`smtp_connection_failed`), after
// at most CONNECTION_RETRY_DELAY_MS.

import { chargeReasonFor, suppressedVerdict, type ChargedResult } from '@svc/billing';
import type { SuppressionKind } from '@svc/contracts';
import type { Store } from '@svc/store';
import { parseAddress, processingFailedVerdict, Semaphore, verdictTrace, type KnownMx, type Route, type RunOptions, type Verdict } from '@svc/verifier';
import { isWorkMessage, type ResultItem, type ResultsMessageV1, type RoutedMx, type WorkItem, type WorkMessageV1 } from '@svc/contracts';
import { MX_TOPIC, RESULTS_TOPIC, WORK_TOPIC } from '@svc/bus';
import { WORK_CHUNK, bucketKey, jobLane } from './publish.ts';
import type { Bus, BusMessage } from '@svc/bus';

/**
 * Answers a job probes again later instead of keeping their `unknown`: a 4xx (greylisting) after
 * SVC_JOB_GREYLIST_DELAY_MS; a DNS lookup that timed out or failed with SERVFAIL (an overloaded or
 * flapping resolver says nothing about the domain) after DNS_RETRY_DELAY_MS; a mail server that
 * could not be reached or dropped the line (a restart, a full connection table, a network blip:
 * nothing about the mailbox) after CONNECTION_RETRY_DELAY_MS. The last two, or the greylist delay
 * when that is shorter. An address accepted while the domain's catch-all probe was deferred or cut
 * off (catchall_unverified with the trace's catchall_deferred) waits the greylist delay too: the
 * probe's (sender, recipient) pair is then past a greylisting window, and only the probe's answer
 * says what the acceptance is worth. All count against SVC_JOB_GREYLIST_ATTEMPTS probes in all.
 */
const RETRY_LATER: Partial<Record<string, 'greylist' | 'dns' | 'connection'>> = {
  smtp_tempfail: 'greylist',
  dns_timeout: 'dns',
  dns_servfail: 'dns',
  smtp_connection_failed: 'connection',
};
export const DNS_RETRY_DELAY_MS = 30_000;
/** Longer than the engine's host-down window (hostDownMs, 10 s): the re-probe meets the host after it. */
export const CONNECTION_RETRY_DELAY_MS = 45_000;
const RETRY_DELAY_MS = { dns: DNS_RETRY_DELAY_MS, connection: CONNECTION_RETRY_DELAY_MS } as const;

/** The verifier as the worker uses it. */
export interface JobVerifier {
  verify(emails: readonly string[], opts?: RunOptions): Promise<Verdict[]>;
  /** verify() with the MX answers the route stage found (Verifier.verifyRouted); absent: verify() looks them up. */
  verifyRouted?(emails: readonly string[], mx: KnownMx, opts?: RunOptions): Promise<Verdict[]>;
  /** Each email's route: its first MX host and the MX answer (Verifier.routes); absent: every email is keyed by its domain bucket. */
  routes?(emails: readonly string[]): Promise<Array<Route | null>>;
}

/** MX work messages of one partition probed at once (SubscribeOptions.concurrency). */
export const MX_CONCURRENCY = 8;
/** Work messages of one partition routed at once: their emails for one host are sent together. */
export const ROUTE_CONCURRENCY = 16;
/**
 * How long the route stage holds a (job, MX host) group open for emails of other work messages
 * before sending it (sooner once it has WORK_CHUNK emails). A job's work is keyed by 64 domain
 * buckets and a bucket's emails spread over many hosts: sent one work message at a time, a
 * 2,000-address job on 10 hosts became ~640 MX messages of ~3 emails (each one a claim check,
 * a results message and an aggregator transaction), and ran at half the speed.
 */
export const ROUTE_LINGER_MS = 20;

/**
 * Work messages in the route stage's hands at once, across its partitions (SubscribeOptions.maxRunning;
 * the in-process bus). A handler waits for its turn at the routing budget (maxInFlight emails)
 * holding its parsed message: 16 partitions × ROUTE_CONCURRENCY let a 500,000-address job hold
 * ~120,000 parsed work items (~20 MiB) waiting. 64 is as many as a job of a few thousand
 * addresses has messages (64 domain buckets), so its routing still starts at once.
 */
export const ROUTE_MAX_RUNNING = 64;

/** Emails routed per turn of the event loop, across every route handler of the process (TurnBudget). */
export const ROUTE_TURN_ITEMS = 1_000;
/** Emails a route handler takes from the turn budget at a time. */
const ROUTE_SLICE = 100;

/**
 * A budget of work per turn of the event loop, shared by every caller: once `perTurn` units were
 * taken, takers wait for the next turn (one setImmediate for all of them). Routing emails whose
 * MX is cached completes in promise callbacks alone, with no turn in between: the all-in-one
 * process, handed a 500,000-address job's work at the end of its intake, routed ~128,000 emails
 * in one 1.8 s stretch and answered requests 2 s late (bench/jobs/ingest.ts, workers on).
 */
export class TurnBudget {
  #used = 0;
  #next: Promise<void> | undefined;

  constructor(readonly perTurn: number) {}

  async take(n: number): Promise<void> {
    while (this.#used >= this.perTurn) {
      this.#next ??= new Promise<void>((resolve) =>
        setImmediate(() => {
          this.#used = 0;
          this.#next = undefined;
          resolve();
        }),
      );
      await this.#next;
    }
    this.#used += n;
  }
}

/** The route stage's open groups: emails of one job for one MX key, sent as one MX work message. */
class RouteGroups {
  readonly #open = new Map<string, { items: WorkItem[]; mx: Record<string, RoutedMx>; sent: Promise<void>; send: () => void }>();

  constructor(private readonly publish: (jobId: string, key: string, items: WorkItem[], mx: Record<string, RoutedMx>, accountId: string | undefined) => Promise<void>) {}

  /** Adds `item` (and its domain's MX answer, when routed) to its group; resolves once the group's message is on the bus. */
  add(jobId: string, accountId: string | undefined, key: string, item: WorkItem, route?: { domain: string; mx: RoutedMx }): Promise<void> {
    const id = `${jobId}\u0000${key}`;
    let group = this.#open.get(id);
    if (!group) {
      let send!: () => void;
      const items: WorkItem[] = [];
      const mx: Record<string, RoutedMx> = {};
      const sent = new Promise<void>((resolve, reject) => {
        let timer: NodeJS.Timeout | undefined;
        send = () => {
          clearTimeout(timer);
          if (this.#open.get(id)?.items !== items) return; // sent already
          this.#open.delete(id);
          this.publish(jobId, key, items, mx, accountId).then(resolve, reject);
        };
        timer = setTimeout(send, ROUTE_LINGER_MS);
      });
      // Awaited by every route handler with an email in the group, perhaps not before it settles.
      sent.catch(() => {});
      group = { items, mx, sent, send };
      this.#open.set(id, group);
    }
    group.items.push(item);
    if (route) group.mx[route.domain] ??= route.mx;
    const { sent } = group;
    if (group.items.length >= WORK_CHUNK) group.send();
    return sent;
  }
}

export interface WorkerOptions {
  /** With `outcomes`, the job's account's suppressed addresses are answered without probing. */
  store: Pick<Store, 'jobs'> & Partial<Pick<Store, 'outcomes'>>;
  verifier: JobVerifier;
  bus: Bus;
  /** SVC_JOB_GREYLIST_DELAY_MS */
  greylistDelayMs: number;
  /** SVC_JOB_GREYLIST_ATTEMPTS: probes in all, the first included. */
  greylistAttempts: number;
  /**
   * Addresses probed at once across the work messages in hand (default WORK_IN_FLIGHT, 2,000).
   * Many lanes help small messages (a job's domains spread over the MX hosts); full 500-address
   * messages on 16 lanes would hold 8,000 probes, their DNS waits and their result writes at once:
   * a 500,000-address job in the embedded all-in-one process peaked at 770 MiB (480 with 4 lanes).
   */
  maxInFlight?: number;
  /** Emails of MX-host messages in probes at once, all hosts together (default SMTP_IN_FLIGHT) and per host (default HOST_IN_FLIGHT). */
  smtpInFlight?: number;
  hostInFlight?: number;
  /** MX messages waiting on the bus before the route stage waits to publish more (SubscribeOptions.maxQueued; default: no bound). */
  maxQueued?: number;
  /** Awaited before each message is probed (JobsService: while a job intake runs in this process, probing waits for it). */
  gate?: () => Promise<void>;
  now?: () => number;
}

/** A verdict with its price (the wire shape), as sync pricing makes it for a first occurrence. */
export function priceVerdict(v: Verdict): ChargedResult {
  const { chargeable, ...rest } = v;
  return { ...rest, credits_charged: chargeable ? 1 : 0, charge_reason: chargeReasonFor(v) };
}

/** The result of an email whose processing failed every attempt (WorkerOptions: JobWorker.giveUp, JobAggregator's row-by-row answer). */
export function failedResult(idx: number, email: string, attempts: number): ResultItem {
  const v = processingFailedVerdict(email);
  return { idx, email, verdict: priceVerdict(v), chargeable: false, attempts, state: 'done', mx_host: null, latency_ms: 0 };
}

/** Addresses probed at once across the work messages in hand (WorkerOptions.maxInFlight). */
export const WORK_IN_FLIGHT = 2_000;
/**
 * MX messages (the emails of one MX host) are counted apart from that budget: their probes wait
 * in the host's queue for its few sessions, so they hold little memory and finish at the host's
 * pace. Counted in WORK_IN_FLIGHT, four 500-email messages of four hosts held the whole budget
 * while the messages of the job's other hosts waited: on a real Postfix with 10 MX hosts a
 * 10,000-address job ran at 0.2-0.56 of a client feeding all ten at once. Each host may have
 * HOST_IN_FLIGHT of its emails in probes (two full messages: the next is queued while one ends),
 * and all hosts together SMTP_IN_FLIGHT.
 */
export const HOST_IN_FLIGHT = 1_000;
export const SMTP_IN_FLIGHT = 10_000;

export class JobWorker {
  readonly #now: () => number;
  /** Addresses in flight across the lanes. */
  readonly #budget: Semaphore;
  /** MX-host messages: emails in probes across hosts, and per host (with how many messages use each). */
  readonly #smtpBudget: Semaphore;
  readonly #hostBudgets = new Map<string, { sem: Semaphore; users: number }>();
  readonly #groups: RouteGroups;
  /** Emails being routed across the route handlers (as #budget for probes: memory). */
  readonly #routing: Semaphore;
  readonly #turns = new TurnBudget(ROUTE_TURN_ITEMS);

  constructor(private readonly opts: WorkerOptions) {
    this.#now = opts.now ?? Date.now;
    this.#budget = new Semaphore(opts.maxInFlight ?? WORK_IN_FLIGHT);
    this.#smtpBudget = new Semaphore(opts.smtpInFlight ?? SMTP_IN_FLIGHT);
    if (opts.hostInFlight !== undefined && (!Number.isInteger(opts.hostInFlight) || opts.hostInFlight < 1)) throw new RangeError(`hostInFlight must be a positive integer, got ${opts.hostInFlight}`);
    this.#routing = new Semaphore(opts.maxInFlight ?? WORK_IN_FLIGHT);
    this.#groups = new RouteGroups(async (jobId, key, items, mx, accountId) => {
      const message: WorkMessageV1 = { v: 1, job_id: jobId, ...(accountId ? { account_id: accountId } : {}), items, ...(Object.keys(mx).length > 0 ? { mx } : {}) };
      await opts.bus.publish(MX_TOPIC, key, message as unknown as BusMessage, jobLane(jobId, accountId));
    });
  }

  /**
   * Consumes the work topic and the MX topic on `partitions` lanes each (ROUTE_CONCURRENCY and
   * MX_CONCURRENCY messages per lane). Fewer route lanes (a quarter) left each lane routing its
   * partitions' batches one after the other, each waiting out its groups' linger: the last work
   * message of a 2,000-address job was routed 450-530 ms after the first instead of 40-180 ms.
   */
  start(partitions: number): void {
    const deadLetter = (m: BusMessage) => this.giveUp(m);
    this.opts.bus.subscribe(WORK_TOPIC, (m) => this.route(m), { partitions, concurrency: ROUTE_CONCURRENCY, maxRunning: ROUTE_MAX_RUNNING, deadLetter });
    this.opts.bus.subscribe(MX_TOPIC, (m) => this.handle(m), { partitions, concurrency: MX_CONCURRENCY, deadLetter, ...(this.opts.maxQueued ? { maxQueued: this.opts.maxQueued } : {}) });
  }

  /**
   * The dead-letter answer of a work or MX message that failed every attempt: each of its emails
   * is done, `unknown` with reason `processing_failed` and no charge (its credit is released when
   * the job settles), so the job finishes instead of waiting for it for ever.
   */
  async giveUp(message: BusMessage): Promise<void> {
    if (!isWorkMessage(message)) return; // not ours to answer: parked, nothing waits for it
    const results: ResultItem[] = message.items.map(([idx, email, before]) => failedResult(idx, email, before + 1));
    const out: ResultsMessageV1 = { v: 1, job_id: message.job_id, ...(message.account_id ? { account_id: message.account_id } : {}), results };
    await this.opts.bus.publish(RESULTS_TOPIC, message.job_id, out as unknown as BusMessage, jobLane(message.job_id, message.account_id));
  }

  /**
   * The route stage: republishes a work message's emails on the MX topic, keyed by MX host, in
   * groups shared with the other work messages of the job routed meanwhile (RouteGroups).
   * Resolves once all of its emails are on the bus.
   */
  async route(message: BusMessage): Promise<void> {
    if (!isWorkMessage(message)) throw new Error(`unknown work message v${message.v}`);
    const { store, verifier } = this.opts;
    if (!(await store.jobs.claimForWork(message.job_id))) return;
    await this.opts.gate?.();
    // At most maxInFlight emails in routing at once, and ROUTE_TURN_ITEMS per turn of the loop.
    // Each email joins its group as soon as its own route is known: the lookups of a fresh job's
    // domains queue behind each other (SVC_DNS_CONCURRENCY), and a host's first emails should not
    // wait for the rest of the message's domains.
    const { items } = message;
    await this.#routing.run(async () => {
      const sent = new Set<Promise<void>>();
      const routing: Array<Promise<void>> = [];
      for (let at = 0; at < items.length; at += ROUTE_SLICE) {
        const slice = items.slice(at, at + ROUTE_SLICE);
        await this.#turns.take(slice.length);
        for (const item of slice)
          routing.push(
            (async () => {
              const route = verifier.routes ? (await verifier.routes([item[1]]))[0] : null;
              const host = route?.host ?? null;
              const mx = route && (route.mx.kind === 'mx' || route.mx.kind === 'implicit') ? { domain: route.domain, mx: { kind: route.mx.kind, hosts: route.mx.hosts } } : undefined;
              sent.add(this.#groups.add(message.job_id, message.account_id, host ? `mx:${host}` : bucketKey(item[1]), item, mx));
            })(),
          );
      }
      await Promise.all(routing);
      await Promise.all(sent);
    }, Math.min(items.length, this.#routing.max));
  }

  /** The probe stage: probes an MX work message's emails and publishes their results. */
  async handle(message: BusMessage): Promise<void> {
    if (!isWorkMessage(message)) throw new Error(`unknown work message v${message.v}`);
    const { store, verifier, bus } = this.opts;
    // A canceled or finished job's work is dropped here (and its late results by the aggregator).
    // The route stage claimed the job; this is a read.
    if (!(await store.jobs.isProcessing(message.job_id))) return;
    await this.opts.gate?.();
    const results = await this.#probeWithin(message);
    const out: ResultsMessageV1 = { v: 1, job_id: message.job_id, ...(message.account_id ? { account_id: message.account_id } : {}), results };
    await bus.publish(RESULTS_TOPIC, message.job_id, out as unknown as BusMessage, jobLane(message.job_id, message.account_id));
  }

  /** probe() holding its share of the in-flight budgets: an MX host's own and the SMTP one, or the general one. */
  async #probeWithin(message: WorkMessageV1): Promise<ResultItem[]> {
    const n = message.items.length;
    const host = mxHostOf(message);
    if (host === undefined) return this.#budget.run(() => this.probe(message), Math.min(n, this.#budget.max));
    let budget = this.#hostBudgets.get(host);
    if (!budget) {
      budget = { sem: new Semaphore(this.opts.hostInFlight ?? HOST_IN_FLIGHT), users: 0 };
      this.#hostBudgets.set(host, budget);
    }
    budget.users++;
    try {
      return await budget.sem.run(() => this.#smtpBudget.run(() => this.probe(message), Math.min(n, this.#smtpBudget.max)), Math.min(n, budget.sem.max));
    } finally {
      if (--budget.users === 0) this.#hostBudgets.delete(host);
    }
  }

  async probe(message: WorkMessageV1): Promise<ResultItem[]> {
    const { verifier, greylistAttempts, greylistDelayMs, store } = this.opts;
    // The job's account's suppressed addresses are answered from its evidence, without probing.
    const parsed = message.items.map(([, email]) => parseAddress(email));
    const keys = parsed.map((p) => (p.ok ? `${p.local}@${p.asciiDomain}` : undefined));
    // (The per-address lookup only for an account that may have suppressions: the flag the sync
    // path reads too, at most a second old; a lookup per message cost the job's PGlite thread ~7%.
    // A message of an older producer names no account: looked up as before.)
    const suppressed =
      store.outcomes && (message.account_id === undefined || (await store.outcomes.mayHaveSuppressions(message.account_id)))
        ? await store.outcomes.suppressedForJob(message.job_id, keys.filter((k): k is string => k !== undefined))
        : new Map<string, SuppressionKind>();
    const open = message.items.filter((_, i) => !suppressed.has(keys[i]!));
    const emails = open.map(([, email]) => email);
    // No in-session greylist retry (the scheduler re-probes durably) and no sync deadline: a
    // job's recipients wait in the MX queues as long as the hosts' limits require. The MX answers
    // the route stage found ride on the message: no second lookup.
    const runOpts: RunOptions = { smtpRetries: 0, deadlineMs: 0 };
    const probed = verifier.verifyRouted ? await verifier.verifyRouted(emails, message.mx ?? {}, runOpts) : await verifier.verify(emails, runOpts);
    let next = 0;
    const verdicts = message.items.map(([, email], i) => {
      const kind = keys[i] === undefined ? undefined : suppressed.get(keys[i]!);
      return kind ? suppressedVerdict(email, parsed[i]!, kind) : probed[next++]!;
    });
    const now = this.#now();
    return message.items.map(([idx, email, before], i) => {
      const v = verdicts[i]!;
      const attempts = before + 1;
      const trace = verdictTrace(v);
      const delay = RETRY_LATER[v.reason_code] ?? (trace?.catchall_deferred ? 'greylist' : undefined);
      const again = delay !== undefined && attempts < greylistAttempts;
      return {
        idx,
        email,
        verdict: priceVerdict(v),
        chargeable: v.chargeable,
        attempts,
        state: again ? 'deferred' : 'done',
        ...(again ? { next_attempt_at: new Date(now + (delay === 'greylist' ? greylistDelayMs : Math.min(greylistDelayMs, RETRY_DELAY_MS[delay]))).toISOString() } : {}),
        mx_host: trace?.mx_host ?? null,
        latency_ms: Math.round(trace?.latency_ms ?? 0),
      };
    });
  }
}

/** The MX host an MX message was keyed by (its domains' first MX host), or undefined for work that needs no SMTP session. */
export function mxHostOf(message: WorkMessageV1): string | undefined {
  if (!message.mx) return undefined;
  for (const routed of Object.values(message.mx)) {
    let first: { exchange: string; priority: number } | undefined;
    for (const h of routed.hosts) if (!first || h.priority < first.priority) first = h;
    if (first) return first.exchange.toLowerCase();
  }
  return undefined;
}
