// SVC_VALIDATION_TIMEOUT_MS bounds one validation end to end, whatever the per-phase timeouts.

import t from 'tap';
import { startStack } from '../helpers/stack.ts';

const stack = await startStack({ env: { SVC_SMTP_TIMEOUT_MS: '5000', SVC_VALIDATION_TIMEOUT_MS: '600' } });
t.teardown(() => stack.close());

t.test('a tarpit answers unknown at the deadline, not after the phase timeout', async (t) => {
  const started = Date.now();
  const r = await stack.call('POST', '/v1/validate', { body: { email: 'jane.doe@tarpit.test' } });
  const took = Date.now() - started;
  t.equal(r.status, 200);
  t.same([r.body.result, r.body.reason_code, r.body.credits_charged, r.body.charge_reason], ['unknown', 'smtp_timeout', 0, 'unknown_not_charged']);
  t.equal(r.body.reason, 'Validation did not finish within 0.6 s');
  t.ok(took >= 550 && took < 3000, `answered in ${took} ms`);
  const b = (await stack.call('GET', '/v1/credits')).body;
  t.equal(b.reserved, 0, 'the reservation was settled');
});

t.test('a normal validation is unaffected', async (t) => {
  const r = await stack.call('POST', '/v1/validate', { body: { email: 'jane.doe@accept.test' } });
  t.same([r.body.result, r.body.credits_charged], ['valid', 1]);
});
