// Accuracy reports end to end (the acceptance test "reports after a scripted campaign (sent, bounced, replied
// events against earlier validations) with exact matrix counts"), in the profile of TEST_PROFILE
// (SQL analytics embedded, ClickHouse in cluster). A campaign: five addresses validated, then
// their outcomes imported; the summary and the per-domain report must count exactly that.

import t from 'tap';
import { makeKey, startStack } from '../helpers/stack.ts';

t.setTimeout(180_000);

type Json = Record<string, any>;
const LABELS = ['delivered', 'bounced_hard', 'bounced_soft', 'blocked_policy', 'unknown'] as const;
const row = (counts: Partial<Record<(typeof LABELS)[number], number>> = {}): Json => Object.fromEntries(LABELS.map((l) => [l, counts[l] ?? 0]));

t.test('a scripted campaign gives exact report counts', async (t) => {
  const stack = await startStack();
  t.teardown(() => stack.close());
  const all = await makeKey(stack, { scopes: null, credits: 100 });
  const readOnly = (await stack.store.keys.create({ accountId: all.accountId, kind: 'test', scopes: ['email:outcomes:read'] })).key;
  const analytics = stack.svc.services.analytics;
  const from = new Date(Date.now() - 60_000).toISOString();
  const to = new Date(Date.now() + 3_600_000).toISOString();
  const q = `from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`;

  // The validations (decisions made before the outcomes).
  const v = await stack.call('POST', '/v1/validate/bulk', {
    key: all.key,
    body: { emails: ['jane.doe@accept.test', 'john.smith@accept.test', 'no.such.user@accept.test', 'info@accept.test', 'someone@catchall.test'] },
  });
  t.strictSame(
    v.body.results.map((r: Json) => r.result),
    ['valid', 'valid', 'invalid', 'valid_role_based', 'risky'],
  );
  await analytics.flush();
  await new Promise((r) => setTimeout(r, 20)); // outcomes strictly after the decisions
  const at = new Date(Date.now() + 1000).toISOString();
  const outcome = (email: string, id: string, extra: Json) => ({ email, source: 'api', external_id: id, occurred_at: at, ...extra });

  // Outcomes before any `sent`: counts, but every accuracy figure null.
  const first = await stack.call('POST', '/v1/outcomes/email/import', {
    key: all.key,
    body: {
      outcomes: [
        outcome('jane.doe@accept.test', 'o-1', { outcome: 'replied' }),
        outcome('john.smith@accept.test', 'o-2', { outcome: 'bounced', action: 'failed', smtp_enhanced_code: '5.1.1' }),
        outcome('no.such.user@accept.test', 'o-3', { outcome: 'bounced', action: 'failed', smtp_enhanced_code: '5.1.1' }),
        outcome('info@accept.test', 'o-4', { outcome: 'delivered' }),
        outcome('someone@catchall.test', 'o-5', { outcome: 'bounced', action: 'delayed', smtp_enhanced_code: '4.2.2' }),
        outcome('never.checked@accept.test', 'o-6', { outcome: 'bounced', action: 'failed', smtp_enhanced_code: '5.7.1' }),
      ],
    },
  });
  t.equal(first.body.accepted, 6, first.text);
  await analytics.flush();
  const denied = await stack.call('GET', `/v1/outcomes/email/reports/summary?${q}`, { key: (await stack.store.keys.create({ accountId: all.accountId, kind: 'test', scopes: ['email:outcomes:write'] })).key });
  t.strictSame([denied.status, denied.body.code], [403, 'insufficient_scope'], 'write cannot read reports');
  const before = await stack.call('GET', `/v1/outcomes/email/reports/summary?${q}`, { key: readOnly });
  t.equal(before.status, 200, before.text);
  t.equal(before.body.denominator_status, 'sent_event_missing');
  t.strictSame(before.body.matrix, {
    valid: row({ delivered: 1, bounced_hard: 1 }),
    valid_role_based: row({ delivered: 1 }),
    risky: row({ bounced_soft: 1 }),
    invalid: row({ bounced_hard: 1 }),
    unknown: row(),
    not_validated: row({ blocked_policy: 1 }),
  });
  t.equal(before.body.precision.valid.value, null, 'no accuracy figure without a denominator');
  t.equal(before.body.by_result.valid.hard_bounce_rate, null);

  // The sends arrive: the denominator exists.
  const sends = ['jane.doe@accept.test', 'john.smith@accept.test', 'no.such.user@accept.test', 'info@accept.test', 'someone@catchall.test'].map((e, i) => outcome(e, `s-${i}`, { outcome: 'sent' }));
  const second = await stack.call('POST', '/v1/outcomes/email/import', { key: all.key, body: { outcomes: [...sends, outcome('jane.doe@accept.test', 'op-1', { outcome: 'opened' })] } });
  t.equal(second.body.accepted, 6, second.text);
  await analytics.flush();
  const after = await stack.call('GET', `/v1/outcomes/email/reports/summary?${q}`, { key: readOnly });
  t.equal(after.status, 200, after.text);
  t.equal(after.body.denominator_status, 'ok');
  t.strictSame(after.body.matrix, before.body.matrix, 'sends and opens are not claims: the matrix is unchanged');
  t.match(after.body.totals, { claims: 6, sent: 5, opens: 1, not_validated: 1 });
  t.match(after.body.by_result.valid, { sent: 2, bounced_hard: 1, hard_bounce_rate: 0.5 });
  const [lo, hi] = after.body.by_result.valid.hard_bounce_rate_ci95;
  t.ok(Math.abs(lo - 0.0945) < 0.001 && Math.abs(hi - 0.9055) < 0.001, `Wilson 95% interval of 1/2 is [0.0945, 0.9055]: got [${lo}, ${hi}]`);
  t.match(after.body.by_result.invalid, { sent: 1, bounced_hard: 1, hard_bounce_rate: 1 });
  t.match(after.body.precision.valid, { value: 0.5, delivered: 1, bounced_hard: 1 });
  t.match(after.body.precision.invalid, { value: 1, delivered: 0, bounced_hard: 1 });

  const domains = await stack.call('GET', `/v1/outcomes/email/reports/domains?${q}`, { key: readOnly });
  t.equal(domains.status, 200, domains.text);
  const byDomain = Object.fromEntries(domains.body.domains.map((d: Json) => [d.domain, d]));
  t.strictSame(Object.keys(byDomain), ['accept.test', 'catchall.test'], 'most outcomes first');
  t.strictSame(byDomain['catchall.test'].matrix.risky, row({ bounced_soft: 1 }));
  t.strictSame(byDomain['accept.test'].matrix.valid, row({ delivered: 1, bounced_hard: 1 }));

  // Bad windows.
  for (const bad of ['from=yesterday', `from=${encodeURIComponent(to)}&to=${encodeURIComponent(from)}`, 'from=2020-01-01T00:00:00Z&to=2026-01-01T00:00:00Z']) {
    const r = await stack.call('GET', `/v1/outcomes/email/reports/summary?${bad}`, { key: readOnly });
    t.strictSame([r.status, r.body.code], [400, 'invalid_outcome_query'], bad);
  }
});
