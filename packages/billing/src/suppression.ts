// The account's suppression list in front of the verifier (docs/decisions/outcomes.md): an address
// the account suppressed after a confirmed hard bounce, a complaint or an unsubscribe is answered
// from that evidence, without probing, and never charged. Sync requests apply it to their plan;
// the job worker to each MX message.

import type { SuppressionKind } from '@svc/contracts';
import type { Store } from '@svc/store';
import { buildVerdict, type Plan, type Verdict, type ParsedAddress } from '@svc/verifier';

/** The verdict of a suppressed address. */
export const suppressedVerdict = (email: string, parsed: ParsedAddress, kind: SuppressionKind): Verdict => buildVerdict(email, parsed, { layer: 'suppression', kind });

/**
 * Answers the plan's suppressed addresses in place and prices the plan again (maxCost counts
 * each mailbox still open or chargeable once; settled when every item has its verdict). Returns
 * how many items it answered: at once (0) when the account has no suppression by the store's
 * fresh reading, as nearly every request finds, else once the addresses are looked up.
 */
export function applySuppressions(store: Pick<Store, 'outcomes'>, accountId: string, plan: Plan): number | Promise<number> {
  if (!plan.items.some((i) => i.key !== undefined)) return 0;
  const may = store.outcomes.mayHaveSuppressions(accountId);
  return may === false ? 0 : answerSuppressed(store, accountId, plan, may);
}

async function answerSuppressed(store: Pick<Store, 'outcomes'>, accountId: string, plan: Plan, may: boolean | Promise<boolean>): Promise<number> {
  if (!(await may)) return 0;
  const keys = plan.items.flatMap((i) => (i.key === undefined ? [] : [i.key]));
  const suppressed = await store.outcomes.suppressedAmong(accountId, keys);
  if (suppressed.size === 0) return 0;
  let answered = 0;
  for (const item of plan.items) {
    const kind = item.key === undefined ? undefined : suppressed.get(item.key);
    if (kind === undefined) continue;
    item.verdict = suppressedVerdict(item.email, item.parsed, kind);
    answered++;
  }
  const open = new Set<string>();
  let settled = true;
  for (const item of plan.items) {
    if (!item.verdict) settled = false;
    if (item.key !== undefined && (!item.verdict || item.verdict.chargeable)) open.add(item.key);
  }
  plan.maxCost = open.size;
  plan.settled = settled;
  return answered;
}
