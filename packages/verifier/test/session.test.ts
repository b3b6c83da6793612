// The session reducer without sockets: budgets, pipelined rounds, caps, 421, refused MAIL.

import t from 'tap';
import { parseReply } from '../src/smtp/reply.ts';
import { abandon, capacity, initialState, isRecipientCap, plan, step, type SessionBudget, type SessionEffect, type SessionState } from '../src/smtp/session.ts';

const reply = (line: string) => parseReply([line]);
const BUDGET: SessionBudget = { errors: 9, junk: 90, rcptsPerTransaction: 100, pipelineDepth: 50 };
const OK = reply('250 2.1.5 Ok');
const UNKNOWN = reply('550 5.1.1 <x>: Recipient address rejected: User unknown');

function feed(state: SessionState, replies: ReturnType<typeof reply>[]): { state: SessionState; effects: SessionEffect[] } {
  const effects: SessionEffect[] = [];
  for (const r of replies) {
    const s = step(state, r);
    state = s.state;
    effects.push(...s.effects);
  }
  return { state, effects };
}

t.test('the first round is MAIL + RCPTs; later rounds add RCPTs to the open transaction', async (t) => {
  let p = plan(initialState(), BUDGET, [1, 2, 3]);
  t.strictSame(p.send.map((c) => c.kind), ['mail', 'rcpt', 'rcpt', 'rcpt']);
  let f = feed(p.state, [reply('250 2.1.0 Ok'), OK, UNKNOWN, OK]);
  t.strictSame(f.effects, [
    { type: 'answer', id: 1, reply: OK },
    { type: 'answer', id: 2, reply: UNKNOWN },
    { type: 'answer', id: 3, reply: OK },
  ]);
  t.equal(f.state.phase, 'txn');
  t.equal(f.state.errors, 1);
  p = plan(f.state, BUDGET, [4]);
  t.strictSame(p.send, [{ kind: 'rcpt', id: 4 }]);
});

t.test('capacity: never more RCPTs than rejections the budget can absorb', async (t) => {
  let s = initialState();
  t.equal(capacity(s, BUDGET), 9);
  const p = plan(s, BUDGET, Array.from({ length: 20 }, (_, i) => i));
  t.equal(p.taken.length, 9);
  s = feed(p.state, [reply('250 Ok'), ...Array(7).fill(UNKNOWN), OK, OK]).state;
  t.equal(s.errors, 7);
  t.equal(capacity(s, BUDGET), 2);
  s = feed(plan(s, BUDGET, [20, 21]).state, [UNKNOWN, UNKNOWN]).state;
  t.equal(capacity(s, BUDGET), 0, 'retire: the next rejection would reach the soft limit');
  t.strictSame(plan(s, BUDGET, [22]).taken, []);
});

t.test('452/451 4.5.3: requeued without an answer, cap learnt, RSET + MAIL before the next RCPT', async (t) => {
  for (const cap of ['452 4.5.3 Error: too many recipients', '451 4.5.3 Too many recipients']) {
    t.ok(isRecipientCap(reply(cap)));
    const p = plan(initialState(), BUDGET, [1, 2, 3, 4, 5]);
    const f = feed(p.state, [reply('250 Ok'), OK, OK, OK, reply(cap), reply(cap)]);
    t.strictSame(f.effects.slice(3), [
      { type: 'rcpt_cap', rcpts: 3 },
      { type: 'requeue', id: 4, why: 'rcpt_cap' },
      { type: 'requeue', id: 5, why: 'rcpt_cap' },
    ]);
    const next = plan(f.state, BUDGET, [4, 5]);
    t.strictSame(next.send.map((c) => c.kind), ['rset', 'mail', 'rcpt', 'rcpt']);
    t.equal(next.state.junk, 1);
  }
  t.notOk(isRecipientCap(reply('452 4.2.2 Mailbox full')));
  t.notOk(isRecipientCap(reply('450 4.2.0 Greylisted')));
});

t.test('a cap reply on the first recipient of a transaction is an answer (a 4xx), not a cap', async (t) => {
  const f = feed(plan(initialState(), BUDGET, [1]).state, [reply('250 Ok'), reply('452 4.5.3 Error: too many recipients')]);
  t.strictSame(f.effects.map((e) => e.type), ['answer']);
});

t.test('421 mid-round: the rest of the round is requeued and the session is closed', async (t) => {
  const p = plan(initialState(), BUDGET, [1, 2, 3]);
  const r421 = reply('421 4.7.0 mx.test Error: too many errors');
  const f = feed(p.state, [reply('250 Ok'), OK, r421]);
  t.strictSame(f.effects, [
    { type: 'answer', id: 1, reply: OK },
    { type: 'requeue', id: 2, why: 'closing' },
    { type: 'requeue', id: 3, why: 'closing' },
    { type: 'closed', reply: r421 },
  ]);
  t.equal(f.state.phase, 'closed');
  t.equal(capacity(f.state, BUDGET), 0);
});

t.test('a refused MAIL answers every RCPT behind it with its own reply', async (t) => {
  const refusal = reply('451 4.3.0 Temporary lookup failure');
  const f = feed(plan(initialState(), BUDGET, [1, 2]).state, [refusal, reply('503 5.5.1 Error: need MAIL command'), reply('503 5.5.1 Error: need MAIL command')]);
  t.strictSame(f.effects, [
    { type: 'answer', id: 1, reply: refusal, viaMail: true },
    { type: 'answer', id: 2, reply: refusal, viaMail: true },
  ]);
  t.equal(f.state.errors, 3, 'the 503s count as errors on the server too');
  t.strictSame(plan(f.state, BUDGET, [3]).send.map((c) => c.kind), ['mail', 'rcpt'], 'the next round opens a new transaction');
});

t.test('junk budget: no RSET past it', async (t) => {
  const s: SessionState = { ...initialState(), phase: 'txn', junk: 90, mustReset: true };
  t.equal(capacity(s, BUDGET), 0);
});

t.test('abandon: everything unanswered is requeued', async (t) => {
  const p = plan(initialState(), BUDGET, [7, 8]);
  const f = feed(p.state, [reply('250 Ok'), OK]);
  t.strictSame(abandon(f.state).requeue, [8]);
  t.throws(() => step(abandon(f.state).state, OK));
});
