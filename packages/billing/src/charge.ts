// Validation with money attached: price the work (Verifier.plan), hold that many credits, do the
// work, charge exactly the High-Value Validations and release the rest. Every path settles the
// reservation, including a crash of the work itself; a process crash leaves an open reservation
// that the next start releases (LedgerRepo.releaseStale). Sync requests, jobs and agent tools
// all come through here: a route only translates HTTP to this use case and back.

import { ServiceError } from '@svc/contracts';
import type { IdempotentCompletion, Store } from '@svc/store';
import { settledVerdicts, type Verifier } from '@svc/verifier';
import { recordDecisions, syncDecisions, type SyncDecisionContext } from './decisions.ts';
import { upstream } from './failures.ts';
import { creditsOf, priced, type ChargedResult } from './pricing.ts';
import { applySuppressions } from './suppression.ts';

/**
 * An idempotent request's response: rendered from the results and recorded in the same
 * transaction as the charge, with the status it is sent with (a replay answers the same status).
 */
export interface Completion<T = ChargedResult[]> {
  key: string;
  /** The claim's owner (a claim another request took over cannot be completed). */
  owner: string;
  status: number;
  render: (response: T) => string;
}

export interface ChargeOptions {
  /** What the credits are for (ledger note and reservation purpose); 'sync' by default. */
  purpose?: string;
  completion?: Completion;
  /**
   * Analytics: once the charge is committed, one decision per result goes to the sink (buffered;
   * never awaited, never failing the request).
   */
  decisions?: SyncDecisionContext;
}

/** 402 insufficient_credits: the most the request can cost, and what is available. */
export function insufficient(required: number, available: number): ServiceError {
  return new ServiceError('insufficient_credits', `This request needs up to ${required} credits; ${available} available`, { required, available });
}

/**
 * Whether an account whose subscription is in this state may not spend (402
 * subscription_inactive): one that ended, whose credits expired with it. The REST gate, the
 * dashboard's routes and a refused charge all ask here.
 */
export const subscriptionEnded = (status: string | undefined): boolean => status === 'canceled';

/**
 * Why credits were refused: the subscription ended (its credits expired; the gate's short key
 * cache may not have seen it yet), else too few credits (`insufficient`).
 */
export async function refusal(store: Partial<Pick<Store, 'ledger'>>, accountId: string, insufficient: ServiceError): Promise<ServiceError> {
  const b = await store.ledger?.balance(accountId).catch(() => undefined);
  return subscriptionEnded(b?.subscription_status) ? new ServiceError('subscription_inactive') : insufficient;
}

/** The Idempotency-Key's completion of a response, recorded with its charge (none without a key). */
export function completionOf<T>(accountId: string, completion: Completion<T> | undefined, response: T): IdempotentCompletion | undefined {
  return completion && { accountId, key: completion.key, owner: completion.owner, status: completion.status, body: completion.render(response) };
}

/** Hands the results' decisions to analytics (when asked for), and returns the results. */
function decided(d: SyncDecisionContext | undefined, accountId: string, results: ChargedResult[]): ChargedResult[] {
  if (d) recordDecisions(d.sink, () => syncDecisions(results, accountId, d.requestId, d.source), d.log, { request_id: d.requestId });
  return results;
}

export async function validateAndCharge(store: Store, verifier: Verifier, accountId: string, emails: readonly string[], opts: ChargeOptions = {}): Promise<ChargedResult[]> {
  const { ledger, idempotency } = store;
  const purpose = opts.purpose ?? 'sync';
  const completion = opts.completion;
  const plan = await verifier.plan(emails);
  // The account's suppressed addresses are answered from its own evidence, never probed or charged.
  const suppressing = applySuppressions(store, accountId, plan);
  if (suppressing instanceof Promise) await upstream(suppressing);
  // With an Idempotency-Key the response is recorded in the same transaction as the money, so a
  // crash can never leave a charge without its stored response (and a later retry re-charging).
  const known = settledVerdicts(plan);
  if (known) {
    // Every verdict is known already (syntax, cache, suppression): the cost is exact, so take it
    // in one statement instead of a reservation and a settlement.
    const results = priced(known, plan);
    const completes = completionOf(accountId, completion, results);
    // Exactly what the results say was charged (never more than the plan priced).
    const cost = creditsOf(results);
    if (cost > 0) {
      const d = await upstream(ledger.debit(accountId, cost, purpose, completes));
      if (!d.ok) throw await refusal(store, accountId, insufficient(cost, d.available));
    } else if (completes) {
      await upstream(idempotency.complete(completes));
    }
    return decided(opts.decisions, accountId, results);
  }
  let reservationId: string | undefined;
  if (plan.maxCost > 0) {
    const r = await upstream(ledger.reserve(accountId, plan.maxCost, purpose));
    if (!r.ok) throw await refusal(store, accountId, insufficient(plan.maxCost, r.available));
    reservationId = r.reservationId;
  }
  let charged = 0;
  let completes: IdempotentCompletion | undefined;
  let out: ChargedResult[];
  try {
    out = priced(await verifier.run(plan), plan);
    // Render first: if that throws, nothing is charged (the key is freed and a retry pays once).
    completes = completionOf(accountId, completion, out);
    charged = creditsOf(out);
  } finally {
    if (reservationId) {
      // false: the reservation was no longer open (released by the stale sweep), so nothing was
      // charged and no response recorded; the client must retry rather than get a free result.
      if (!(await upstream(ledger.settle(reservationId, charged, completes)))) throw new ServiceError('validation_upstream_failed', 'The credit hold expired before the validation finished; retry');
    } else if (completes) await upstream(idempotency.complete(completes));
  }
  return decided(opts.decisions, accountId, out);
}
