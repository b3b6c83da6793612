// The data endpoints' money (docs/api.md, "Data endpoints"): hold the most a request can cost,
// do the work, charge exactly what was found and release the rest, in the same transaction as the
// Idempotency-Key's stored response. A crash between the provider's answer and the charge leaves
// only an open hold, which the next start (or the sweep) releases: never a charge without a result.
// The hold's purpose, `data:<endpoint>`, is what the ledger's `reserve`/`charge`/`release` rows
// of the request point at (credit_reservations.purpose), so the history says what each charge bought.

import { ServiceError } from '@svc/contracts';
import type { IdempotentCompletion, Store } from '@svc/store';
import { completionOf, insufficient, refusal, type Completion } from './charge.ts';
import { upstream } from './failures.ts';

/** A data endpoint's Idempotency-Key completion: charge.ts's, rendering the endpoint's response. */
export type DataCompletion<T> = Completion<T>;

export interface DataWork<T> {
  response: T;
  /** What the response charges: never more than the hold. */
  credits: number;
}

/**
 * Runs `work` with up to `maxCost` credits held for `endpoint`, then charges what it says. With
 * `maxCost` 0 nothing is held or charged (a cache hit that is free, a request that cannot find).
 */
export async function chargeData<T>(store: Pick<Store, 'ledger' | 'idempotency'>, accountId: string, endpoint: string, maxCost: number, work: () => Promise<DataWork<T>>, completion?: DataCompletion<T>): Promise<T> {
  if (maxCost <= 0) {
    const { response, credits } = await work();
    if (credits !== 0) throw new Error(`a data request without a hold charged ${credits}`);
    const completes = completionOf(accountId, completion, response);
    if (completes) await upstream(store.idempotency.complete(completes));
    return response;
  }
  const hold = await upstream(store.ledger.reserve(accountId, maxCost, `data:${endpoint}`));
  if (!hold.ok) {
    throw await refusal(store, accountId, insufficient(maxCost, hold.available));
  }
  let charged = 0;
  let completes: IdempotentCompletion | undefined;
  let response: T;
  try {
    const done = await work();
    if (!Number.isSafeInteger(done.credits) || done.credits < 0 || done.credits > maxCost) throw new Error(`a data request charged ${done.credits} of a hold of ${maxCost}`);
    response = done.response;
    // Render before settling: if that throws, nothing is charged.
    completes = completionOf(accountId, completion, response);
    charged = done.credits;
  } finally {
    // false: the hold was released meanwhile (the stale sweep): nothing charged, nothing recorded.
    if (!(await upstream(store.ledger.settle(hold.reservationId, charged, completes)))) {
      // eslint-disable-next-line no-unsafe-finally
      throw new ServiceError('validation_upstream_failed', 'The credit hold expired before the request finished; retry');
    }
  }
  return response;
}

/**
 * A data request whose cost is known before any work (a cache hit): the credits are taken in one
 * debit (group-committed with the account's other debits), or with an Idempotency-Key in the
 * same transaction as its stored response. Too few credits: 402, nothing answered.
 */
export async function chargeKnownData<T>(store: Pick<Store, 'ledger' | 'idempotency'>, accountId: string, endpoint: string, credits: number, response: T, completion?: DataCompletion<T>): Promise<T> {
  const completes = completionOf(accountId, completion, response);
  if (credits > 0) {
    const d = await upstream(store.ledger.debit(accountId, credits, `data:${endpoint}`, completes));
    if (!d.ok) throw await refusal(store, accountId, insufficient(credits, d.available));
  } else if (completes) {
    await upstream(store.idempotency.complete(completes));
  }
  return response;
}
