// Pricing (docs/api.md, "Credits"): one credit per High-Value Validation, and a stable reason for every
// result that is not charged.

import type { BulkSummary, ChargeReason, ValidationResultBody } from '@svc/contracts';
import type { Plan, Verdict } from '@svc/verifier';

/** A verdict with its price: what the API renders. */
export type ChargedResult = ValidationResultBody;

export function chargeReasonFor(v: Pick<Verdict, 'result' | 'reason_code'>): ChargeReason {
  if (v.reason_code.startsWith('suppressed_')) return 'suppressed_not_charged';
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

/**
 * Credits per result: 1 for the first High-Value Validation of each mailbox the plan priced.
 * The verdicts are fresh objects of this request (Verifier.run copies cached ones), so they are
 * completed in place: this runs on every request and copies would only feed the collector. The
 * leftover `chargeable` flag never reaches the wire: the response schema lists the fields.
 */
export function priced(verdicts: Verdict[], plan: Plan): ChargedResult[] {
  const seen = new Set<string>();
  return verdicts.map((v, i) => {
    // The plan's key (canonical mailbox: local part, ASCII domain) is what it priced: the same mailbox twice is charged once.
    const k = plan.items[i]!.key ?? `#${i}`;
    const dup = seen.has(k);
    seen.add(k);
    const r = v as Verdict & ChargedResult;
    r.credits_charged = v.chargeable && !dup ? 1 : 0;
    r.charge_reason = dup && v.chargeable ? 'duplicate_in_request' : chargeReasonFor(v);
    return r;
  });
}

/** Credits the results say were charged. */
export const creditsOf = (results: readonly ChargedResult[]): number => results.reduce((n, r) => n + r.credits_charged, 0);

export function summarize(results: readonly ChargedResult[]): BulkSummary {
  const s: BulkSummary = { total: results.length, valid: 0, valid_role_based: 0, risky: 0, invalid: 0, unknown: 0, credits_charged: 0 };
  for (const r of results) {
    s[r.result]++;
    s.credits_charged += r.credits_charged;
  }
  return s;
}
