// The probe conversation reducer without sockets: wire lines, SMTPUTF8, pipelining, the slow-reply
// watch, 4.7.x rate replies, 421 (connection cap, rate, other), recipient caps and broken lines.

import t from 'tap';
import type { SendResult } from '../src/ports.ts';
import { conversationStart, finish, interrupt, offer, receive, room, type ConversationEffect, type ConversationState, type Recipient } from '../src/smtp/conversation.ts';
import { parseReply } from '../src/smtp/reply.ts';
import type { SessionBudget } from '../src/smtp/session.ts';

const ok = (line: string): SendResult => ({ ok: true, reply: parseReply([line]) });
const BUDGET: SessionBudget = { errors: 9, junk: 90, rcptsPerTransaction: 100, pipelineDepth: 50 };
const rcpt = (id: number, local = `u${id}`, utf8 = false): Recipient => ({ id, local, domain: 'a.test', utf8 });
const MAIL_OK = ok('250 2.1.0 Ok');
const RCPT_OK = ok('250 2.1.5 Ok');
const UNKNOWN = ok('550 5.1.1 <x>: Recipient address rejected: User unknown');

/** Feeds [result, gapMs] pairs; returns the state and every effect. */
function feed(state: ConversationState, results: Array<[SendResult, number]>): { state: ConversationState; effects: ConversationEffect[] } {
  const effects: ConversationEffect[] = [];
  for (const [r, gap] of results) {
    const s = receive(state, r, gap);
    state = s.state;
    effects.push(...s.effects);
  }
  return { state, effects };
}

t.test('the first round: MAIL FROM (with SMTPUTF8 when offered) and the RCPTs, pipelined', async (t) => {
  const s = conversationStart(['PIPELINING', 'SMTPUTF8'], 'probe@verifier.test');
  const o = offer(s, BUDGET, [rcpt(1), rcpt(2, 'josé', true)]);
  t.strictSame(o.taken, [1, 2]);
  t.strictSame(o.effects, [
    {
      type: 'write',
      phase: 'rcpt',
      pipelined: true,
      commands: [
        { kind: 'mail', phase: 'mail', line: 'MAIL FROM:<probe@verifier.test> SMTPUTF8' },
        { kind: 'rcpt', phase: 'rcpt', line: 'RCPT TO:<u1@a.test>' },
        { kind: 'rcpt', phase: 'rcpt', line: 'RCPT TO:<josé@a.test>' },
      ],
    },
  ]);
  const f = feed(o.state, [
    [MAIL_OK, 5],
    [RCPT_OK, 1],
    [UNKNOWN, 1],
  ]);
  t.strictSame(f.effects, [
    { type: 'answer', id: 1, reply: parseReply(['250 2.1.5 Ok']), viaMail: false },
    { type: 'answer', id: 2, reply: parseReply(['550 5.1.1 <x>: Recipient address rejected: User unknown']), viaMail: false },
  ]);
  t.equal(f.state.rtt, 5, 'the round trip is the first reply of a round');
  t.equal(f.state.answered, 2);
  t.strictSame(finish(f.state).effects, [{ type: 'end', how: 'quit' }]);
});

t.test('no SMTPUTF8: a recipient that needs it is answered at once, no PIPELINING: one at a time', async (t) => {
  const s = conversationStart([], 'probe@verifier.test');
  const o = offer(s, BUDGET, [rcpt(1, 'ñandú', true), rcpt(2)]);
  t.strictSame(o.effects, [
    { type: 'smtputf8_unsupported', id: 1 },
    {
      type: 'write',
      phase: 'rcpt',
      pipelined: false,
      commands: [
        { kind: 'mail', phase: 'mail', line: 'MAIL FROM:<probe@verifier.test>' },
        { kind: 'rcpt', phase: 'rcpt', line: 'RCPT TO:<u2@a.test>' },
      ],
    },
  ]);
  const only = offer(s, BUDGET, [rcpt(3, 'ñandú', true)]);
  t.strictSame([only.taken, only.effects], [[], [{ type: 'smtputf8_unsupported', id: 3 }]], 'nothing to write');
});

t.test('slow replies after rejections: the error budget comes down to one below them', async (t) => {
  let s = offer(conversationStart(['PIPELINING'], 'p@v.test'), { ...BUDGET, pipelineDepth: 1 }, [rcpt(1)]).state;
  s = feed(s, [
    [MAIL_OK, 10],
    [UNKNOWN, 10],
  ]).state;
  for (let id = 2; id <= 4; id++) s = feed(offer(s, BUDGET, [rcpt(id)]).state, [[UNKNOWN, 10]]).state;
  t.equal(s.session.errors, 4);
  // The 5th RCPT's reply comes 900 ms after a round trip of 10: the server may sleep past 4
  // errors, or the client's own loop stalled. The 6th comes late too: it sleeps before every reply.
  const late = feed(offer(s, BUDGET, [rcpt(5)]).state, [[UNKNOWN, 900]]);
  t.strictSame(late.effects.map((e) => e.type), ['answer'], 'one late reply: not yet');
  const slow = feed(offer(late.state, BUDGET, [rcpt(6)]).state, [[UNKNOWN, 900]]);
  t.strictSame(slow.effects[0], { type: 'error_budget', errors: 3 }, 'the second in a row: one below the count the first came at');
  // A stall: one late reply, then the rest of the chunk at once. No budget is lowered.
  const stalled = feed(offer(s, BUDGET, [rcpt(5), rcpt(6), rcpt(7)]).state, [
    [UNKNOWN, 1500],
    [UNKNOWN, 0],
    [UNKNOWN, 0],
  ]);
  t.strictSame(stalled.effects.map((e) => e.type), ['answer', 'answer', 'answer'], 'a stalled client loop lowers nothing');
  t.equal(stalled.state.slowSince, undefined, 'and forgets the late reply');
  // A late reply with no error yet is not; nor is a late first acceptance of a transaction (in_flow_delay).
  const fresh = offer(conversationStart([], 'p@v.test'), BUDGET, [rcpt(1)]).state;
  t.strictSame(feed(fresh, [[MAIL_OK, 10], [RCPT_OK, 2000]]).effects.map((e) => e.type), ['answer'], 'no error yet');
  const refused = feed(offer(conversationStart([], 'p@v.test'), BUDGET, [rcpt(1)]).state, [[ok('451 4.3.0 Try later'), 10], [ok('503 5.5.1 need MAIL'), 10]]);
  t.equal(refused.state.session.errors, 2);
  t.strictSame(feed(offer(refused.state, BUDGET, [rcpt(2)]).state, [[MAIL_OK, 10], [RCPT_OK, 2000]]).effects.map((e) => e.type), ['answer'], 'first acceptance of the transaction');
  // The first acceptance after rejections in the same transaction waits for the flow token too
  // (Postfix opens the queue file at the first accepted RCPT): not an error sleep either.
  const mixed = feed(offer(conversationStart(['PIPELINING'], 'p@v.test'), BUDGET, [rcpt(1), rcpt(2), rcpt(3)]).state, [
    [MAIL_OK, 10],
    [UNKNOWN, 10],
    [RCPT_OK, 1010],
    [UNKNOWN, 1],
  ]);
  t.equal(mixed.state.session.errors, 2);
  t.strictSame(mixed.effects.map((e) => e.type), ['answer', 'answer', 'answer'], 'a late first acceptance after a rejection lowers no budget');
  // A second acceptance that late in the same transaction, and another reply after it, is the
  // error sleep again.
  const second = feed(offer(mixed.state, BUDGET, [rcpt(4), rcpt(5)]).state, [
    [RCPT_OK, 1010],
    [UNKNOWN, 1010],
  ]);
  t.strictSame(second.effects.map((e) => e.type), ['answer', 'error_budget', 'answer']);
  t.strictSame(second.effects[1], { type: 'error_budget', errors: 1 });
});

t.test('a 4.7.x rate reply slows the host down; greylisting does not', async (t) => {
  const s = offer(conversationStart(['PIPELINING'], 'p@v.test'), BUDGET, [rcpt(1), rcpt(2)]).state;
  const f = feed(s, [
    [MAIL_OK, 1],
    [ok('450 4.7.1 Rate limit exceeded, slow down'), 1],
    [ok('450 4.7.1 Greylisted, please come back later'), 1],
  ]);
  t.strictSame(
    f.effects.map((e) => e.type),
    ['throttle', 'answer', 'answer'],
  );
  t.strictSame(f.effects[0], { type: 'throttle', kind: 'rate' });
});

t.test('421 mid-round: the rest is interrupted (with the 421), the host is told why, the line closed', async (t) => {
  for (const [text, throttle] of [
    ['421 4.7.0 mx Error: too many connections from 192.0.2.1', [{ type: 'throttle', kind: 'connections' }]],
    ['421 4.7.0 Sending rate too high', [{ type: 'throttle', kind: 'rate' }]],
    ['421 4.4.2 mx Error: timeout exceeded', []],
  ] as const) {
    const s = offer(conversationStart(['PIPELINING'], 'p@v.test'), BUDGET, [rcpt(1), rcpt(2), rcpt(3)]).state;
    const closing = parseReply([text]);
    const f = feed(s, [
      [MAIL_OK, 1],
      [RCPT_OK, 1],
      [{ ok: true, reply: closing }, 1],
    ]);
    const failure = { phase: 'rcpt', kind: 'reply', detail: 'server closing', reply: closing };
    t.strictSame(f.effects.slice(1), [{ type: 'interrupted', id: 2, failure, progress: true }, { type: 'interrupted', id: 3, failure, progress: true }, ...throttle, { type: 'end', how: 'close' }], text);
    t.equal(f.state.end, 'close');
    t.equal(room(f.state, BUDGET), 0);
    t.strictSame(finish(f.state).effects, [], 'already ended');
  }
});

t.test('a recipient cap: requeued, the cap learnt, RSET + MAIL next', async (t) => {
  const s = offer(conversationStart(['PIPELINING'], 'p@v.test'), BUDGET, [rcpt(1), rcpt(2), rcpt(3)]).state;
  const f = feed(s, [
    [MAIL_OK, 1],
    [RCPT_OK, 1],
    [ok('452 4.5.3 Error: too many recipients'), 1],
    [ok('452 4.5.3 Error: too many recipients'), 1],
  ]);
  t.strictSame(f.effects.slice(1), [{ type: 'rcpt_cap', rcpts: 1 }, { type: 'requeue', id: 2 }, { type: 'requeue', id: 3 }]);
  const next = offer(f.state, BUDGET, [rcpt(2)]);
  t.strictSame(next.effects[0]?.type === 'write' && next.effects[0].commands.map((c) => c.line), ['RSET', 'MAIL FROM:<p@v.test>', 'RCPT TO:<u2@a.test>']);
});

t.test('a broken line: everything unanswered is interrupted with its failure', async (t) => {
  const s = offer(conversationStart(['PIPELINING'], 'p@v.test'), BUDGET, [rcpt(1), rcpt(2)]).state;
  const failure = { phase: 'rcpt', kind: 'timeout', detail: 'no reply within 1000 ms' } as const;
  const f = feed(s, [
    [MAIL_OK, 1],
    [{ ok: false, failure }, 1],
  ]);
  t.strictSame(f.effects, [{ type: 'interrupted', id: 1, failure, progress: false }, { type: 'interrupted', id: 2, failure, progress: false }, { type: 'end', how: 'close' }]);
  t.strictSame(interrupt(offer(conversationStart([], 'p@v.test'), BUDGET, [rcpt(7)]).state, failure).effects[0], { type: 'interrupted', id: 7, failure, progress: false });
});
