// Validation with money attached: price the work (Verifier.plan), hold that many credits, do the
// work, charge exactly the High-Value Validations and release the rest. Every path settles the
// reservation, including a crash of the work itself; a process crash leaves an open reservation
// that the next start releases (Store.releaseStale).

import type { IdempotentCompletion, Store } from '@svc/store';
import type { Plan, Verifier } from '@svc/verifier/verifier.ts';
import type { Verdict } from '@svc/verifier/types.ts';
import { ApiError } from './errors.ts';

export type ChargeReason =
  | 'high_value_validation'
  | 'role_based_not_charged'
  | 'catchall_not_charged'
  | 'disposable_not_charged'
  | 'invalid_not_charged'
  | 'unknown_not_charged'
  | 'duplicate_in_request';

export type ChargedResult = Omit<Verdict, 'chargeable'> & { credits_charged: 0 | 1; charge_reason: ChargeReason };

function reasonFor(v: Pick<Verdict, 'result' | 'reason_code'>): ChargeReason {
  switch (v.result) {
    case 'valid':
      return 'high_value_validation';
    case 'valid_role_based':
      return 'role_based_not_charged';
    case 'risky':
      return v.reason_code === 'disposable_domain' ? 'disposable_not_charged' : 'catchall_not_charged';
    case 'invalid':
      return 'invalid_not_charged';
    case 'unknown':
      return 'unknown_not_charged';
  }
}

/** A failing database during validation is a temporary dependency failure (spec core 7), not a bug. */
async function upstream<T>(p: Promise<T>): Promise<T> {
  try {
    return await p;
  } catch (err) {
    if (err instanceof ApiError) throw err;
    throw new ApiError('validation_upstream_failed', undefined, {}, {}, err);
  }
}

/** An idempotent request's response, rendered from the results and recorded with the charge. */
export interface Completion {
  key: string;
  render: (results: ChargedResult[]) => string;
}

export async function validateAndCharge(
  store: Store,
  verifier: Verifier,
  accountId: string,
  emails: readonly string[],
  purpose = 'sync',
  completion?: Completion,
): Promise<ChargedResult[]> {
  const plan = await verifier.plan(emails);
  const insufficient = (required: number, available: number) =>
    new ApiError('insufficient_credits', `This request needs up to ${required} credits; ${available} available`, { required, available });
  // With an Idempotency-Key the response is recorded in the same transaction as the money, so a
  // crash can never leave a charge without its stored response (and a later retry re-charging).
  const record = (results: ChargedResult[]): IdempotentCompletion | undefined =>
    completion ? { accountId, key: completion.key, status: 200, body: completion.render(results) } : undefined;
  if (plan.settled) {
    // Every verdict is known already (syntax, cache): the cost is exact, so take it in one
    // statement instead of a reservation and a settlement.
    const results = priced(await verifier.run(plan), plan);
    const completes = record(results);
    // Exactly what the results say was charged (never more than the plan priced).
    const cost = results.reduce((n, r) => n + r.credits_charged, 0);
    if (cost > 0) {
      const d = await upstream(store.debit(accountId, cost, purpose, completes));
      if (!d.ok) throw insufficient(cost, d.available);
    } else if (completes) {
      await upstream(store.completeIdempotent(accountId, completes.key, completes.status, completes.body));
    }
    return results;
  }
  let reservationId: string | undefined;
  if (plan.maxCost > 0) {
    const r = await upstream(store.reserve(accountId, plan.maxCost, purpose));
    if (!r.ok) throw insufficient(plan.maxCost, r.available);
    reservationId = r.reservationId;
  }
  let charged = 0;
  let completes: IdempotentCompletion | undefined;
  try {
    const out = priced(await verifier.run(plan), plan);
    // Render first: if that throws, nothing is charged (the key is freed and a retry pays once).
    completes = record(out);
    charged = out.reduce((n, r) => n + r.credits_charged, 0);
    return out;
  } finally {
    if (reservationId) {
      // false: the reservation was no longer open (released by the stale sweep), so nothing was
      // charged and no response recorded; the client must retry rather than get a free result.
      if (!(await upstream(store.settle(reservationId, charged, completes)))) throw new ApiError('validation_upstream_failed', 'The credit hold expired before the validation finished; retry');
    } else if (completes) await upstream(store.completeIdempotent(accountId, completes.key, completes.status, completes.body));
  }
}

/**
 * Credits per result: 1 for the first High-Value Validation of each mailbox the plan priced.
 * The verdicts are fresh objects of this request (Verifier.run copies cached ones), so they are
 * completed in place: this runs on every request and copies would only feed the collector. The
 * leftover `chargeable` flag never reaches the wire: the response schema lists the fields.
 */
function priced(verdicts: Verdict[], plan: Plan): ChargedResult[] {
  const seen = new Set<string>();
  return verdicts.map((v, i) => {
    // The plan's key (exact local part, ASCII domain) is what it priced: the same mailbox twice is charged once.
    const k = plan.items[i]!.key ?? `#${i}`;
    const dup = seen.has(k);
    seen.add(k);
    const r = v as Verdict & ChargedResult;
    r.credits_charged = v.chargeable && !dup ? 1 : 0;
    r.charge_reason = dup && v.chargeable ? 'duplicate_in_request' : reasonFor(v);
    return r;
  });
}
