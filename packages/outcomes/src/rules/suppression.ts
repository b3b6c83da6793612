// The suppression rules of outcome imports, pure: which accepted events suppress their address,
// and which suppression an address keeps. The store's outcomes repository runs them inside the
// import's transaction (it declares the SuppressionRules shape; the importer hands these in).

import type { OutcomeEvent, SuppressionKind } from '@svc/contracts';

/**
 * Suppression kinds from weakest to strongest. An address keeps the strongest it was given: a hard
 * bounce keeps answering `invalid` after an unsubscribe.
 */
export const SUPPRESSION_STRENGTH: readonly SuppressionKind[] = ['unsubscribed', 'complaint', 'hard_bounce'];

/** Whether suppression `a` replaces `b` (it is stronger). */
export const outranks = (a: SuppressionKind, b: SuppressionKind): boolean => SUPPRESSION_STRENGTH.indexOf(a) > SUPPRESSION_STRENGTH.indexOf(b);

/**
 * Of an import's new events (`fresh`: indexes into `events`), the suppressions that apply and the
 * ones that are stale. An event asks for a suppression (`suppresses`, set by the parser); it is
 * stale, and not applied, when it is older than the newest delivery evidence for its mailbox,
 * stored (`storedDelivery`: microseconds per mailbox) or in this import. An event without a time
 * counts as `nowUs`.
 */
export function decideSuppressions(
  events: readonly OutcomeEvent[],
  fresh: readonly number[],
  storedDelivery: ReadonlyMap<string, number>,
  nowUs: number,
): { applies: Map<number, SuppressionKind>; stale: Set<number> } {
  const time = (e: OutcomeEvent): number => e.occurred_at_us ?? nowUs;
  const newestDelivery = new Map(storedDelivery);
  for (const i of fresh) {
    const e = events[i]!;
    if (e.label !== 'delivered') continue;
    const t = time(e);
    if ((newestDelivery.get(e.mailbox) ?? -Infinity) < t) newestDelivery.set(e.mailbox, t);
  }
  const applies = new Map<number, SuppressionKind>();
  const stale = new Set<number>();
  for (const i of fresh) {
    const e = events[i]!;
    if (!e.suppresses) continue;
    if (time(e) < (newestDelivery.get(e.mailbox) ?? -Infinity)) stale.add(i);
    else applies.set(i, e.suppresses);
  }
  return { applies, stale };
}

/** The rules as the store's outcomes repository takes them. */
export const suppressionRules = { strength: SUPPRESSION_STRENGTH, outranks, decide: decideSuppressions } as const;
