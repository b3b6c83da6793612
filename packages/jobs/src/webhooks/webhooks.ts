// Job webhooks (docs/decisions/webhooks.md). The job finalizer puts the event in the outbox
// (store.webhooks.enqueueIn, in the transaction that completes the job, with the row built here:
// enqueueJobWebhook); a WebhookDispatcher claims due events and POSTs them with undici:
//   Content-Type: application/json
//   X-Webhook-Id: <event id>                 the same on every attempt: receivers dedupe on it
//   X-Signature: t=<unix>,v1=<hex>[,v1=<hex>] HMAC-SHA256(secret, t + "." + body), t = send time,
//                                            one v1 per current secret of the job's account
//                                            (store/src/repos/webhook-secrets.ts), newest first
// 2xx delivers. A timeout (10 s), a connection error or any other status is retried with
// exponential back-off and jitter (30 s, 1 min, 2 min … capped at 1 h) until 24 h after the event,
// then the event is given up (status failed). Targets go through the net guard at every attempt
// (@svc/egress's net-guard.ts): a URL naming a refused address is given up at once, a name
// resolving to one is retried (DNS may be fixed). Delivery is at least once; see
// docs/decisions/webhooks.md.

import { ServiceError, type Network } from '@svc/contracts';
import { Agent, request, type Dispatcher } from 'undici';
import { webhookEventId, DEFAULT_WEBHOOK_LEASE_MS, MAX_GRACE_MS, type InFinalTx, type NewWebhookEvent, type WebhookEvent, type WebhookEventType, type WebhookSecretsRepo, type WebhooksRepo } from '@svc/store';
import { guardTarget, pinnedLookup, type Resolver } from '@svc/egress';
import { jobStatus } from '../status.ts';
import { webhookSignature } from './signature.ts';

export type { WebhookEventType } from '@svc/store';

/** The body of a job webhook, `id` included so a receiver can dedupe on the body alone. */
export interface JobWebhookBody<J extends { id: string } = { id: string }> {
  id: string;
  event: WebhookEventType;
  job: J;
  created_at: string;
}

/**
 * The exact body of a job's webhook event: `{id, event, job, created_at}` with `job` the job's
 * status resource as GET /v1/csv/jobs/{id} shows it, and `id` = webhookEventId(job.id, event).
 */
export function buildJobEvent<J extends { id: string }>(event: WebhookEventType, job: J, createdAt: Date): JobWebhookBody<J> {
  return { id: webhookEventId(job.id, event), event, job, created_at: createdAt.toISOString() };
}

/**
 * The outbox row for a job's event, ready for `store.webhooks.enqueueIn(tx, …)`: the body is
 * serialised once, here, and every attempt sends these bytes.
 */
export function jobWebhookEvent<J extends { id: string }>(e: { accountId: string; url: string; event: WebhookEventType; job: J; createdAt: Date }): NewWebhookEvent {
  const body = buildJobEvent(e.event, e.job, e.createdAt);
  return { id: body.id, accountId: e.accountId, jobId: e.job.id, url: e.url, event: e.event, payload: JSON.stringify(body), createdAt: e.createdAt };
}

/**
 * The job service's onFinalTx for job webhooks: a job that completed or failed with a webhook_url
 * gets its event written to the outbox in the transaction that finalises it, so a crash can
 * neither lose it nor make a second one (its id is derived from the job and the event); the
 * dispatcher delivers it, signed, with back-off for 24 h.
 */
export function enqueueJobWebhook(webhooks: Pick<WebhooksRepo, 'enqueueIn'>, publicUrl: string): InFinalTx {
  return async (tx, job) => {
    if (!job.webhook_url || (job.status !== 'completed' && job.status !== 'failed')) return;
    const event = job.status === 'completed' ? 'job.completed' : 'job.failed';
    await webhooks.enqueueIn(tx, jobWebhookEvent({ accountId: job.account_id, url: job.webhook_url, event, job: jobStatus(job, publicUrl), createdAt: new Date(job.completed_at ?? Date.now()) }));
  };
}

export const WEBHOOK_FIRST_RETRY_MS = 30_000;
export const WEBHOOK_MAX_RETRY_MS = 3_600_000;
export const WEBHOOK_RETRY_FOR_MS = 24 * 3_600_000;

/**
 * How long to wait after failed attempt number `attempt` (1 = the first): 30 s doubled per
 * attempt (30 s, 1 min, 2 min, 4 min …), times a jitter factor in [0.8, 1.2) so receivers coming
 * back from an outage are not hit by every sender at once, capped at 1 h. `random` = 0.5 gives the
 * nominal value.
 */
export function webhookRetryDelayMs(attempt: number, random: () => number = Math.random): number {
  const n = Math.max(1, Math.floor(attempt));
  const nominal = Math.min(WEBHOOK_MAX_RETRY_MS, WEBHOOK_FIRST_RETRY_MS * 2 ** Math.min(n - 1, 30));
  return Math.min(WEBHOOK_MAX_RETRY_MS, Math.round(nominal * (0.8 + 0.4 * random())));
}

/** The part of a pino logger the dispatcher uses. */
export interface WebhookLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface WebhookDispatcherOptions {
  store: { webhooks: WebhooksRepo; webhookSecrets?: Pick<WebhookSecretsRepo, 'signing'> };
  /**
   * The HMAC keys of an account's X-Signature, newest first (one `v1` each). Default: the
   * account's current webhook secrets (store.webhookSecrets.signing).
   */
  secrets?: (accountId: string) => Promise<readonly string[]>;
  /** SVC_WEBHOOK_ALLOW_PRIVATE: loopback and private targets are called too. */
  allowPrivate?: boolean;
  /** SVC_OUTBOUND_ALLOW_NETWORKS: these networks are called too, besides public addresses. */
  allowNetworks?: readonly Network[];
  /**
   * Sends every request through this undici dispatcher (a proxy, a MockAgent in tests). The
   * target is still checked, but the connection is the dispatcher's: it is not pinned to the
   * checked addresses. Default: an Agent per attempt whose lookup answers the checked addresses.
   */
  dispatcher?: Dispatcher;
  /** Host name resolution for the guard (default dns.lookup, all addresses). */
  resolve?: Resolver;
  now?: () => Date;
  /** Jitter source for the back-off, in [0, 1). */
  random?: () => number;
  logger?: WebhookLogger;
  /** How often to look for due events when idle. Default 1 s. */
  pollMs?: number;
  /** Deliveries in flight at once. Default 8. */
  concurrency?: number;
  /** How long a claim keeps other dispatchers off an event. Default 60 s; must exceed timeoutMs. */
  leaseMs?: number;
  /** One attempt, connect to last byte of the response's head. Default 10 s. */
  timeoutMs?: number;
  /** Retries stop this long after the event was created. Default 24 h. */
  retryForMs?: number;
  /** Response bytes read (and discarded) at most; the rest is cut off. Default 64 KiB. */
  maxResponseBytes?: number;
  userAgent?: string;
}

/** What one attempt came to (runOnce returns these; the poll loop logs them). */
export type DeliveryOutcome =
  | { id: string; attempt: number; outcome: 'delivered'; status: number }
  | { id: string; attempt: number; outcome: 'retry'; error: string; nextAttemptAt: Date }
  | { id: string; attempt: number; outcome: 'failed'; error: string }
  /** The outbox row changed under us (another dispatcher holds it now): nothing recorded. */
  | { id: string; attempt: number; outcome: 'superseded'; error?: string };

type Attempt = { ok: true; status: number } | { ok: false; error: string; permanent: boolean; stopped?: boolean };

type Settings = Required<Omit<WebhookDispatcherOptions, 'dispatcher' | 'resolve' | 'allowNetworks'>> & Pick<WebhookDispatcherOptions, 'dispatcher' | 'resolve' | 'allowNetworks'>;

const NO_LOG: WebhookLogger = { info() {}, warn() {}, error() {} };
const DEFAULT_USER_AGENT = 'email-validation-service-webhooks/0.1';

/**
 * Claims due events from the outbox and delivers them. Several dispatchers (processes) may share
 * one store: a claim leases an event to one of them. start() runs the poll loop, stop() ends it
 * and waits (bounded) for the attempts in flight; runOnce() is one claim-and-deliver pass.
 */
export class WebhookDispatcher {
  readonly #o: Settings;
  readonly #inFlight = new Set<Promise<DeliveryOutcome>>();
  readonly #stopping = new AbortController();
  #loop: Promise<void> | undefined;
  #running = false;
  #wake: (() => void) | undefined;

  constructor(opts: WebhookDispatcherOptions) {
    const secretsOf = opts.secrets ?? (opts.store.webhookSecrets && ((id: string) => opts.store.webhookSecrets!.signing(id)));
    if (!secretsOf) throw new Error('WebhookDispatcher needs the accounts\' webhook secrets (store.webhookSecrets or secrets)');
    this.#o = {
      allowPrivate: false,
      now: () => new Date(),
      random: Math.random,
      logger: NO_LOG,
      pollMs: 1_000,
      concurrency: 8,
      leaseMs: DEFAULT_WEBHOOK_LEASE_MS,
      timeoutMs: 10_000,
      retryForMs: WEBHOOK_RETRY_FOR_MS,
      maxResponseBytes: 64 * 1024,
      userAgent: DEFAULT_USER_AGENT,
      ...Object.fromEntries(Object.entries(opts).filter(([, v]) => v !== undefined)),
      secrets: secretsOf,
    } as Settings;
    if (this.#o.leaseMs <= this.#o.timeoutMs) throw new RangeError('leaseMs must exceed timeoutMs: a lease must outlast the attempt it covers');
  }

  /** Starts the poll loop (once). */
  start(): void {
    if (this.#running || this.#stopping.signal.aborted) return;
    this.#running = true;
    this.#loop = this.#run();
  }

  /** Looks for due events now instead of at the next poll (after an enqueue, say). */
  kick(): void {
    this.#wake?.();
  }

  /**
   * Ends the poll loop and waits for the attempts in flight, at most `timeoutMs` (default 15 s,
   * beyond one attempt's 10 s); attempts still running then are aborted and put back for the next
   * dispatcher at once (the receiver may have got them: at least once).
   */
  async stop(timeoutMs = 15_000): Promise<void> {
    this.#running = false;
    this.#wake?.();
    await this.#loop;
    if (this.#inFlight.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      const bound = new Promise<void>((r) => (timer = setTimeout(r, timeoutMs)));
      await Promise.race([Promise.allSettled([...this.#inFlight]), bound]);
      clearTimeout(timer);
    }
    this.#stopping.abort();
    await Promise.allSettled([...this.#inFlight]);
  }

  /** Claims up to `concurrency` due events, delivers them, and returns what each attempt came to. */
  async runOnce(): Promise<DeliveryOutcome[]> {
    const events = await this.#o.store.webhooks.due(this.#o.now(), this.#o.concurrency, this.#o.leaseMs);
    return Promise.all(events.map((e) => this.#track(e)));
  }

  async #run(): Promise<void> {
    while (this.#running) {
      const free = this.#o.concurrency - this.#inFlight.size;
      let claimed = 0;
      if (free > 0) {
        try {
          const events = await this.#o.store.webhooks.due(this.#o.now(), free, this.#o.leaseMs);
          claimed = events.length;
          for (const e of events) void this.#track(e);
        } catch (err) {
          this.#o.logger.error({ err }, 'webhooks: could not claim due events');
        }
      }
      if (!this.#running) break;
      if (free > 0 && claimed === free) continue; // a full batch: more may be due
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, this.#o.pollMs);
        function done(): void {
          clearTimeout(timer);
          resolve();
        }
        this.#wake = done;
      });
      this.#wake = undefined;
    }
  }

  #track(e: WebhookEvent): Promise<DeliveryOutcome> {
    const p = this.#deliver(e).catch((err: unknown): DeliveryOutcome => {
      // The outbox write failed (database down): the lease runs out and the event is claimed again.
      this.#o.logger.error({ err, webhook_id: e.id, job_id: e.job_id }, 'webhooks: could not record an attempt');
      return { id: e.id, attempt: e.attempts, outcome: 'superseded', error: 'could not record the attempt' };
    });
    this.#inFlight.add(p);
    void p.finally(() => {
      this.#inFlight.delete(p);
      this.#wake?.(); // a slot is free
    });
    return p;
  }

  async #deliver(e: WebhookEvent): Promise<DeliveryOutcome> {
    const attempt = e.attempts;
    const res = await this.#attempt(e);
    const repo = this.#o.store.webhooks;
    const log = { webhook_id: e.id, job_id: e.job_id, event: e.event, attempt };
    const now = this.#o.now();
    if (res.ok) {
      const changed = await repo.delivered(e.id, now);
      this.#o.logger.info({ ...log, status: res.status }, 'webhook delivered');
      return changed ? { id: e.id, attempt, outcome: 'delivered', status: res.status } : { id: e.id, attempt, outcome: 'superseded' };
    }
    if (res.stopped) {
      // Stopping: hand it back at once rather than after the lease.
      await repo.retryLater(e.id, now, res.error, attempt);
      return { id: e.id, attempt, outcome: 'superseded', error: res.error };
    }
    const deadline = e.created_at.getTime() + this.#o.retryForMs;
    if (res.permanent || now.getTime() >= deadline) {
      const error = res.permanent ? `refused: ${res.error}` : `gave up after ${attempt} attempts in ${Math.round(this.#o.retryForMs / 3_600_000)} h; last: ${res.error}`;
      const changed = await repo.giveUp(e.id, error, attempt);
      this.#o.logger.warn({ ...log, error }, 'webhook given up');
      return changed ? { id: e.id, attempt, outcome: 'failed', error } : { id: e.id, attempt, outcome: 'superseded', error };
    }
    // The last retry lands on the deadline itself, so an event gets its full 24 h.
    const next = new Date(Math.min(now.getTime() + webhookRetryDelayMs(attempt, this.#o.random), deadline));
    const changed = await repo.retryLater(e.id, next, res.error, attempt);
    this.#o.logger.warn({ ...log, error: res.error, next_attempt_at: next.toISOString() }, 'webhook attempt failed');
    return changed ? { id: e.id, attempt, outcome: 'retry', error: res.error, nextAttemptAt: next } : { id: e.id, attempt, outcome: 'superseded', error: res.error };
  }

  /** One POST: the guard, then the request on a connection pinned to the checked addresses. */
  async #attempt(e: WebhookEvent): Promise<Attempt> {
    const o = this.#o;
    if (this.#stopping.signal.aborted) return { ok: false, error: 'dispatcher stopped', permanent: false, stopped: true };
    const guard = await guardTarget(e.url, { allowPrivate: o.allowPrivate, ...(o.allowNetworks ? { allowNetworks: o.allowNetworks } : {}), ...(o.resolve ? { resolve: o.resolve } : {}) });
    if (!guard.ok) return { ok: false, error: guard.message, permanent: guard.permanent };

    const body = e.payload;
    const secrets = await o.secrets(e.account_id);
    if (secrets.length === 0) return { ok: false, error: 'the account has no webhook secret (no such account)', permanent: true };
    // t is the send time, recomputed on every attempt (a receiver may refuse old signatures).
    const t = Math.floor(o.now().getTime() / 1000);
    const headers = {
      'content-type': 'application/json',
      'user-agent': o.userAgent,
      'x-webhook-id': e.id,
      'x-signature': webhookSignature(secrets, t, body),
    };
    const timeout = AbortSignal.timeout(o.timeoutMs);
    const signal = AbortSignal.any([timeout, this.#stopping.signal]);
    const agent =
      o.dispatcher ??
      new Agent({
        connect: { lookup: pinnedLookup(guard.addresses) as never, timeout: o.timeoutMs },
        headersTimeout: o.timeoutMs,
        bodyTimeout: o.timeoutMs,
        // One request per agent: nothing to keep alive.
        pipelining: 0,
      });
    try {
      // undici's request() follows no redirect: a 3xx is a failed attempt like any non-2xx.
      const res = await request(e.url, { method: 'POST', headers, body, dispatcher: agent, signal });
      await drain(res.body, o.maxResponseBytes);
      const status = res.statusCode;
      if (status >= 200 && status < 300) return { ok: true, status };
      return { ok: false, error: `HTTP ${status}`, permanent: false };
    } catch (err) {
      if (this.#stopping.signal.aborted) return { ok: false, error: 'dispatcher stopped', permanent: false, stopped: true };
      if (timeout.aborted) return { ok: false, error: `no response in ${o.timeoutMs} ms`, permanent: false };
      return { ok: false, error: describeError(err), permanent: false };
    } finally {
      if (!o.dispatcher) await agent.destroy().catch(() => {});
    }
  }
}

/** Reads and discards a response body, at most `max` bytes: a receiver cannot make us buffer or wait on a large one. */
async function drain(body: Dispatcher.ResponseData['body'], max: number): Promise<void> {
  let n = 0;
  try {
    for await (const chunk of body) {
      n += (chunk as Buffer).length;
      if (n > max) break; // leaving the loop destroys the stream
    }
  } catch {
    // The status decides; a body cut short does not change it.
  }
}

/** One line for last_error: the error's code and class, never the URL (it may carry the receiver's token). */
function describeError(err: unknown): string {
  const e = err as { code?: string; name?: string; message?: string; cause?: { code?: string } };
  const code = e?.code ?? e?.cause?.code;
  switch (code) {
    case 'UND_ERR_CONNECT_TIMEOUT':
      return 'connect timeout';
    case 'UND_ERR_HEADERS_TIMEOUT':
    case 'UND_ERR_BODY_TIMEOUT':
      return 'no response in time';
    case 'UND_ERR_SOCKET':
      return 'connection closed by the receiver';
  }
  if (code) return `connection failed (${code})`;
  return `request failed (${e?.name ?? 'Error'})`;
}

// ------------------------------------------------------------------------------------------------
// The account's signing secrets (GET /v1/webhooks/secret, POST /v1/webhooks/secret/rotate, and
// `admin webhook-secret`)

/** The grace period a rotation gives the secrets it replaces unless told otherwise (24 h). */
export const DEFAULT_SECRET_GRACE_S = 86_400;
/** The longest grace period (7 days). */
export const MAX_SECRET_GRACE_S = MAX_GRACE_MS / 1000;

export interface RotatedSecretBody {
  id: string;
  /** Shown this once. */
  secret: string;
  created_at: string;
  /** The secrets that were current, and until when each still signs. */
  previous: Array<{ id: string; expires_at: string }>;
}

export interface SecretListBody {
  secrets: Array<{ id: string; secret_prefix: string; created_at: string; expires_at: string | null }>;
}

/** A new signing secret for the account; the current ones sign for `graceSeconds` more (400 invalid_request outside 0-604800). */
export async function rotateWebhookSecret(store: { webhookSecrets: Pick<WebhookSecretsRepo, 'rotate'> }, accountId: string, graceSeconds: unknown = DEFAULT_SECRET_GRACE_S): Promise<RotatedSecretBody> {
  if (typeof graceSeconds !== 'number' || !Number.isSafeInteger(graceSeconds) || graceSeconds < 0 || graceSeconds > MAX_SECRET_GRACE_S) {
    throw new ServiceError('invalid_request', `grace_period_seconds must be a whole number from 0 to ${MAX_SECRET_GRACE_S} (7 days)`);
  }
  const r = await store.webhookSecrets.rotate(accountId, graceSeconds * 1000);
  if (!r) throw new ServiceError('invalid_api_key');
  return { id: r.id, secret: r.secret, created_at: r.created_at.toISOString(), previous: r.previous.map((p) => ({ id: p.id, expires_at: p.expires_at.toISOString() })) };
}

/** The account's current secrets, newest first, each shown by its first characters only. */
export async function listWebhookSecrets(store: { webhookSecrets: Pick<WebhookSecretsRepo, 'list'> }, accountId: string): Promise<SecretListBody> {
  const rows = await store.webhookSecrets.list(accountId);
  return { secrets: rows.map((r) => ({ id: r.id, secret_prefix: r.secret_prefix, created_at: r.created_at.toISOString(), expires_at: r.expires_at?.toISOString() ?? null })) };
}
