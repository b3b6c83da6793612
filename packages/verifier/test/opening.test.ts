// The opening reducer without sockets: greeting, EHLO, HELO fallback, STARTTLS, and when a refusal
// is ended with QUIT. The node:net driver (smtp-net.test.ts) checks the same cases on the wire.

import t from 'tap';
import type { SessionFailure } from '../src/ports.ts';
import { openingStart, openingStep, type OpeningEffect, type OpeningInput, type OpeningState } from '../src/smtp/opening.ts';
import { parseReply } from '../src/smtp/reply.ts';

const r = (...lines: string[]): OpeningInput => ({ type: 'reply', reply: parseReply(lines) });

/** Feeds the inputs in order; returns the last state and every effect, the start's included. */
function run(inputs: OpeningInput[]): { state: OpeningState; effects: OpeningEffect[] } {
  let { state, effects } = openingStart('verifier.test');
  const all = [...effects];
  for (const input of inputs) {
    ({ state, effects } = openingStep(state, input));
    all.push(...effects);
  }
  return { state, effects: all };
}

const EHLO = { type: 'send', phase: 'ehlo', line: 'EHLO verifier.test' } as const;

t.test('greeting then EHLO: ready with the keywords', async (t) => {
  const { state, effects } = run([r('220-mx.test ESMTP', '220 no UCE'), r('250-mx.test Hello', '250-PIPELINING', '250-8BITMIME', '250 SMTPUTF8')]);
  t.strictSame(effects, [{ type: 'read', phase: 'greeting' }, EHLO, { type: 'ready', extensions: ['PIPELINING', '8BITMIME', 'SMTPUTF8'], tls: false }]);
  t.equal(state.stage, 'ready');
  t.throws(() => openingStep(state, r('250 more')), /the opening is over/);
});

t.test('a refused greeting: 554 is ended with QUIT, 421 is not', async (t) => {
  const r554 = parseReply(['554 5.7.1 No SMTP service here']);
  t.strictSame(run([{ type: 'reply', reply: r554 }]).effects.slice(1), [
    { type: 'quit' },
    { type: 'failed', failure: { phase: 'greeting', kind: 'reply', detail: 'server refused the session', reply: r554 } },
  ]);
  const r421 = parseReply(['421 4.3.2 Service not available']);
  const f = run([{ type: 'reply', reply: r421 }]);
  t.strictSame(f.effects.slice(1), [{ type: 'failed', failure: { phase: 'greeting', kind: 'reply', detail: 'server refused the session', reply: r421 } }]);
  t.equal(f.state.stage, 'failed');
});

t.test('EHLO 502: HELO, and no extensions', async (t) => {
  const { effects } = run([r('220 ready'), r('502 5.5.1 Command not implemented'), r('250 mx.test')]);
  t.strictSame(effects.slice(2), [{ type: 'send', phase: 'helo', line: 'HELO verifier.test' }, { type: 'ready', extensions: [], tls: false }]);
});

t.test('HELO refused: failure in phase helo, ended with QUIT (not after a 421)', async (t) => {
  const refusal = parseReply(['550 5.7.1 Go away']);
  t.strictSame(run([r('220 ready'), r('500 5.5.2 Syntax error'), { type: 'reply', reply: refusal }]).effects.slice(3), [
    { type: 'quit' },
    { type: 'failed', failure: { phase: 'helo', kind: 'reply', detail: 'HELO refused', reply: refusal } },
  ]);
  const closing = parseReply(['421 4.7.0 bye']);
  t.strictSame(run([r('220 ready'), r('500 5.5.2 Syntax error'), { type: 'reply', reply: closing }]).effects.slice(3), [{ type: 'failed', failure: { phase: 'helo', kind: 'reply', detail: 'HELO refused', reply: closing } }]);
});

t.test('EHLO 421: the server is closing, no HELO, no QUIT', async (t) => {
  const busy = parseReply(['421 4.7.0 Too busy']);
  t.strictSame(run([r('220 ready'), { type: 'reply', reply: busy }]).effects.slice(2), [{ type: 'failed', failure: { phase: 'ehlo', kind: 'reply', detail: 'server closing', reply: busy } }]);
});

t.test('STARTTLS offered: upgrade, then EHLO again over TLS', async (t) => {
  const { state, effects } = run([r('220 ready'), r('250-mx.test', '250-STARTTLS', '250 PIPELINING'), r('220 2.0.0 Ready to start TLS'), { type: 'tls' }, r('250-mx.test', '250-PIPELINING', '250 SMTPUTF8')]);
  t.strictSame(effects.slice(2), [{ type: 'send', phase: 'starttls', line: 'STARTTLS' }, { type: 'upgrade' }, EHLO, { type: 'ready', extensions: ['PIPELINING', 'SMTPUTF8'], tls: true }]);
  t.equal(state.tls, true);
});

t.test('STARTTLS refused (454): the plain session goes on, STARTTLS still listed', async (t) => {
  const { effects } = run([r('220 ready'), r('250-mx.test', '250-STARTTLS', '250 SMTPUTF8'), r('454 4.7.0 TLS not available')]);
  t.strictSame(effects.at(-1), { type: 'ready', extensions: ['STARTTLS', 'SMTPUTF8'], tls: false });
});

t.test('a failed handshake, or a refusal over TLS, ends the session without QUIT', async (t) => {
  const hs: SessionFailure = { phase: 'starttls', kind: 'timeout', detail: 'TLS handshake timed out' };
  const upto = [r('220 ready'), r('250-mx.test', '250 STARTTLS'), r('220 go ahead')];
  t.strictSame(run([...upto, { type: 'tls', failure: hs }]).effects.at(-1), { type: 'failed', failure: hs });
  const refusal = parseReply(['550 5.7.1 no']);
  const f = run([...upto, { type: 'tls' }, r('502 5.5.1 no EHLO'), { type: 'reply', reply: refusal }]);
  t.strictSame(f.effects.slice(-2), [
    { type: 'send', phase: 'helo', line: 'HELO verifier.test' },
    { type: 'failed', failure: { phase: 'helo', kind: 'reply', detail: 'HELO refused', reply: refusal } },
  ]);
});

t.test('a broken line at any step is the failure, without QUIT', async (t) => {
  const broken: SessionFailure = { phase: 'ehlo', kind: 'connection', detail: 'connection closed by server' };
  t.strictSame(run([r('220 ready'), { type: 'failure', failure: broken }]).effects.slice(2), [{ type: 'failed', failure: broken }]);
  t.throws(() => openingStep(openingStart('x').state, { type: 'tls' }), /TLS handshake nobody asked for/);
});
