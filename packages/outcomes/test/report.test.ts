// The report arithmetic (parse/report.ts): Wilson intervals checked by hand, the figures of a matrix,
// and every accuracy figure null while no `sent` denominator exists.

import t from 'tap';
import { emptyOutcomeMatrix } from '@svc/contracts';
import { accuracy, domainsReport, summaryReport, wilson } from '../src/index.ts';

t.test('Wilson 95% intervals', async (t) => {
  // 1 of 2: p = 0.5, z² = 3.841459; centre = (0.5 + 0.960365) / 2.920730 = 0.5;
  // half = 1.959964 × sqrt(0.125 + 0.240091) = 1.959964 × 0.604228 = 1.184265, / 2.920730 = 0.405469.
  t.strictSame(wilson(1, 2), [0.094531, 0.905469]);
  // 0 of 10: centre = 0.192073 / 1.384146 = 0.138766, half = 0.138766: [0, 0.277533].
  t.strictSame(wilson(0, 10), [0, 0.277533]);
  t.strictSame(wilson(10, 10), [0.722467, 1]);
  t.equal(wilson(0, 0), null);
});

t.test('the figures of a campaign', async (t) => {
  const m = emptyOutcomeMatrix();
  m.claims.valid.delivered = 8;
  m.claims.valid.bounced_hard = 2;
  m.claims.valid.bounced_soft = 1;
  m.claims.invalid.bounced_hard = 3;
  m.claims.invalid.delivered = 1;
  m.claims.not_validated.blocked_policy = 1;
  m.sent.valid = 20;
  m.sent.invalid = 4;
  m.opens.valid = 5;
  const a = accuracy(m);
  t.equal(a.denominator_status, 'ok');
  t.strictSame(a.totals, { outcomes: 16 + 24 + 5, claims: 16, sent: 24, opens: 5, not_validated: 1 });
  t.strictSame(a.by_result.valid, { sent: 20, outcomes: 11, delivered: 8, bounced_hard: 2, hard_bounce_rate: 0.1, hard_bounce_rate_ci95: wilson(2, 20) });
  t.strictSame(a.by_result.invalid, { sent: 4, outcomes: 4, delivered: 1, bounced_hard: 3, hard_bounce_rate: 0.75, hard_bounce_rate_ci95: wilson(3, 4) });
  t.strictSame(a.by_result.risky, { sent: 0, outcomes: 0, delivered: 0, bounced_hard: 0, hard_bounce_rate: null, hard_bounce_rate_ci95: null });
  t.strictSame(a.precision.valid, { value: 0.8, delivered: 8, bounced_hard: 2, ci95: wilson(8, 10) });
  t.strictSame(a.precision.invalid, { value: 0.75, delivered: 1, bounced_hard: 3, ci95: wilson(3, 4) });
  t.strictSame(a.matrix.not_validated, { delivered: 0, bounced_hard: 0, bounced_soft: 0, blocked_policy: 1, unknown: 0 });
});

t.test('no sent event: the counts stay, every accuracy figure is null', async (t) => {
  const m = emptyOutcomeMatrix();
  m.claims.valid.delivered = 3;
  m.claims.valid.bounced_hard = 1;
  const a = accuracy(m);
  t.equal(a.denominator_status, 'sent_event_missing');
  t.strictSame(a.precision.valid, { value: null, delivered: 3, bounced_hard: 1, ci95: null });
  t.equal(a.by_result.valid.hard_bounce_rate, null);
  t.equal(a.by_result.valid.bounced_hard, 1);
});

t.test('the report envelopes', async (t) => {
  const w = { from: new Date('2026-01-01T00:00:00Z'), to: new Date('2026-02-01T00:00:00Z') };
  const s = summaryReport(emptyOutcomeMatrix(), w);
  t.equal(s.from, '2026-01-01T00:00:00.000Z');
  t.equal(s.to, '2026-02-01T00:00:00.000Z');
  const d = domainsReport([{ domain: 'a.example', total: 0, ...emptyOutcomeMatrix() }], w);
  t.strictSame(d.domains.map((x) => x.domain), ['a.example']);
});
