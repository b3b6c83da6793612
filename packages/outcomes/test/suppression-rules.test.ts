// The suppression rules (rules/suppression.ts), without a database: which events' suppressions
// apply or are stale, and which kind a mailbox keeps. The store's outcome suite runs them on both
// adapters through an import.

import t from 'tap';
import type { OutcomeEvent } from '@svc/contracts';
import { decideSuppressions, outranks, SUPPRESSION_STRENGTH } from '../src/index.ts';

const ev = (mailbox: string, o: Partial<OutcomeEvent>): OutcomeEvent => ({ mailbox, label: 'bounced_hard', suppresses: 'hard_bounce', occurred_at_us: null, ...o }) as OutcomeEvent;

t.test('the stronger kind wins: hard bounce over complaint over unsubscribe', async (t) => {
  t.strictSame(SUPPRESSION_STRENGTH, ['unsubscribed', 'complaint', 'hard_bounce']);
  t.ok(outranks('hard_bounce', 'unsubscribed'));
  t.ok(outranks('complaint', 'unsubscribed'));
  t.notOk(outranks('unsubscribed', 'hard_bounce'));
  t.notOk(outranks('complaint', 'complaint'), 'the same kind does not replace itself');
});

t.test('a suppression older than the newest delivery evidence (stored or in the batch) is stale', async (t) => {
  const events = [
    ev('a@x.example', { occurred_at_us: 10 }), // before the stored delivery at 20: stale
    ev('b@x.example', { occurred_at_us: 30 }), // after it: applies
    ev('c@x.example', { label: 'delivered', suppresses: null, occurred_at_us: 50 }),
    ev('c@x.example', { occurred_at_us: 40 }), // before the delivery in this batch: stale
    ev('d@x.example', { suppresses: 'complaint' }), // no time: counts as now
    ev('e@x.example', { label: 'bounced_soft', suppresses: null }),
    ev('f@x.example', { occurred_at_us: 1 }), // not fresh (a duplicate): not considered
  ];
  const { applies, stale } = decideSuppressions(events, [0, 1, 2, 3, 4, 5], new Map([['a@x.example', 20], ['b@x.example', 20], ['d@x.example', 99]]), 100);
  t.strictSame([...applies], [[1, 'hard_bounce'], [4, 'complaint']]);
  t.strictSame([...stale], [0, 3]);
});
