// The decision to open one more session to an MX host, without sockets: the open sessions' error
// budgets and rounds against the queue, and the numbers kept per host for it.

import t from 'tap';
import { DEFAULT_ROUNDS_PER_OPEN, MIN_REJECT_RATE, MIN_ROUNDS_PER_OPEN, SessionLoad, openAnother, type OpenInputs } from '../src/open-policy.ts';

const base: OpenInputs = { queued: 100, held: 0, limit: 5, opening: 0, errorsLeft: [], budget: 9, perRound: 50, rejectRate: 0.2, roundsPerOpen: 4 };

t.test('nothing queued, or the limit held: no; no session at all: yes for one recipient', async (t) => {
  t.equal(openAnother({ ...base, queued: 0 }), false);
  t.equal(openAnother({ ...base, held: 5, errorsLeft: [0, 0, 0, 0, 0] }), false, 'at the limit even with every budget spent');
  t.equal(openAnother({ ...base, held: 4, limit: 4, errorsLeft: [1] }), false, 'closing sessions the server counts are held too');
  t.equal(openAnother({ ...base, queued: 1 }), true);
});

t.test('the error budgets left: one more session when the queue exceeds what they absorb at the host rate', async (t) => {
  // Two sessions with 6 and 4 rejections left at a 50% rate absorb 20 recipients (and write 10 a round).
  const two = { ...base, held: 2, errorsLeft: [6, 4], rejectRate: 0.5 };
  t.equal(openAnother({ ...two, queued: 20 }), false, '20: the open ones take them');
  t.equal(openAnother({ ...two, queued: 21 }), true, '21: a budget runs out first');
  // An opening session counts with a whole budget: 9 / 0.5 = 18.
  t.equal(openAnother({ ...base, rejectRate: 0.5, held: 1, opening: 1, queued: 18 }), false);
  t.equal(openAnother({ ...base, rejectRate: 0.5, held: 1, opening: 1, queued: 19 }), true);
  // Spent budgets and negative estimates count as nothing.
  t.equal(openAnother({ ...base, held: 2, errorsLeft: [0, -0.5], queued: 1 }), true, 'every open session is spent');
});

t.test('the rounds: one more session when writing the queue would take the open ones longer than a new session costs (here 4 rounds)', async (t) => {
  // An all-valid host: the rate is floored, so the budgets absorb 9 / 0.02 = 450 each; the rounds decide.
  const valid = { ...base, held: 1, errorsLeft: [9], rejectRate: 0 };
  t.equal(MIN_REJECT_RATE, 0.02);
  t.equal(openAnother({ ...valid, queued: 36 }), false, '36 = 4 rounds of 9');
  t.equal(openAnother({ ...valid, queued: 37 }), true, '37: a fifth round');
  // A round is at most perRound RCPTs (a recipient cap of 3), and whole rejections: 2.7 left writes 2.
  t.equal(openAnother({ ...valid, perRound: 3, queued: 12 }), false);
  t.equal(openAnother({ ...valid, perRound: 3, queued: 13 }), true);
  t.equal(openAnother({ ...valid, errorsLeft: [2.7], queued: 8 }), false);
  t.equal(openAnother({ ...valid, errorsLeft: [2.7], queued: 9 }), true);
  // Opening ones write min(perRound, budget) each.
  t.equal(openAnother({ ...valid, errorsLeft: [], opening: 2, queued: 72 }), false);
  t.equal(openAnother({ ...valid, errorsLeft: [], opening: 2, queued: 73 }), true);
});

t.test("the last host's tail: five sessions with a few rejections left take the last recipients, none opens", async (t) => {
  const tail = { ...base, held: 5, limit: 6, errorsLeft: [1, 2, 1, 3, 2] };
  // 9 rejections left at 20%: 45 recipients; 9 per round, 36 in 4 rounds.
  t.equal(openAnother({ ...tail, queued: 12 }), false);
  t.equal(openAnother({ ...tail, queued: 36 }), false);
  t.equal(openAnother({ ...tail, queued: 46 }), true);
  // The old rule (queue > 2 × sessions) opened a sixth session for 11.
  t.equal(openAnother({ ...tail, queued: 11 }), false);
  // A new session that would wait a second for a flow token costs some 23 rounds of 50 ms: only the budgets open one.
  t.equal(openAnother({ ...tail, roundsPerOpen: 23, queued: 45 }), false);
  t.equal(openAnother({ ...tail, roundsPerOpen: 23, queued: 46 }), true);
  // A server that answers one RCPT per round trip: a round of 9 costs 9 round trips, a new session 3.
  t.equal(openAnother({ ...base, held: 1, errorsLeft: [9], rejectRate: 0, roundsPerOpen: 1 / 3, queued: 3 }), false);
  t.equal(openAnother({ ...base, held: 1, errorsLeft: [9], rejectRate: 0, roundsPerOpen: 1 / 3, queued: 4 }), true);
});

t.test('SessionLoad: the rate with its prior, each session’s rejections left with its RCPTs in flight', async (t) => {
  const load = new SessionLoad();
  t.equal(load.rejectRate, 0.25, 'the prior: 2 in 8');
  for (let i = 0; i < 12; i++) load.answered(i % 4 === 0);
  t.equal(load.rejectRate, (3 + 2) / (12 + 8));
  load.progress(1, 2, 4);
  load.progress(2, 9, 0);
  t.strictSame(load.errorsLeft([1, 2, 3], 9), [9 - 2 - 0.25 * 4, 0, 9], 'session 3 has not reported: a whole budget');
  load.ended(1);
  t.strictSame(load.errorsLeft([1], 9), [9], 'an ended session is forgotten');
});

t.test('SessionLoad.roundsPerOpen: setup (3 round trips) and the first round’s extra wait, in ordinary rounds', async (t) => {
  const load = new SessionLoad();
  /** Session `id` does a round of `ms` ending at `end`, with a 50 ms round trip. */
  const round = (l: SessionLoad, id: number, ms: number, end: number, rtt = 50) => {
    l.roundStarted(id, end - ms);
    l.roundEnded(id, end, rtt);
  };
  t.equal(load.roundsPerOpen(0), DEFAULT_ROUNDS_PER_OPEN, 'no round timed yet');
  t.equal(DEFAULT_ROUNDS_PER_OPEN, 3);
  round(load, 1, 50, 1000);
  t.equal(load.roundsPerOpen(1000), 3, 'only a first round: still the default');
  round(load, 1, 50, 1100);
  t.equal(load.roundsPerOpen(1100), 3, '150 ms of setup / 50 ms rounds');
  // A first round in progress for 700 ms already says what a new session would wait.
  load.roundStarted(2, 1000);
  t.equal(load.roundsPerOpen(1700), (150 + 700 - 50) / 50);
  // First rounds that waited a second for a flow token: the running average moves by a fifth each time.
  load.roundEnded(2, 2050, 50);
  t.equal(load.roundsPerOpen(2050), (150 + (50 + 0.2 * 1000) - 50) / 50);
  for (let id = 3; id < 40; id++) round(load, id, 1050, 3000 + id);
  t.ok(Math.abs(load.roundsPerOpen(4000) - 23) < 0.01, `about 23 (${load.roundsPerOpen(4000)})`);
  load.ended(2);
  t.ok(Math.abs(load.roundsPerOpen(4000) - 23) < 0.01, 'the averages outlive their sessions');
  // A serial server: rounds of 9 RCPTs take 9 round trips.
  const serial = new SessionLoad();
  round(serial, 1, 450, 500);
  round(serial, 1, 450, 1000);
  t.equal(serial.roundsPerOpen(1000), 150 / 450);
  round(serial, 1, 100, 1200, Infinity);
  // Later rounds average 380 ms; first rounds 450 ms: 70 ms more for a new session.
  const later = 450 + 0.2 * (100 - 450);
  t.equal(serial.roundsPerOpen(1200), (150 + 450 - later) / later, 'a round without a round trip measured still counts (the round trip stays 50)');
  serial.roundEnded(1, 1300, 50);
  t.equal(serial.roundsPerOpen(1300), (150 + 450 - later) / later, 'a round that never started is not timed');
  // Round trips are averaged like rounds: 50, then 100 ms (a loaded machine).
  const loaded = new SessionLoad();
  round(loaded, 1, 50, 100);
  round(loaded, 1, 50, 200);
  round(loaded, 1, 100, 400, 100);
  const rtt = 50 + 0.2 * 50;
  const r = 50 + 0.2 * 50;
  t.equal(loaded.roundsPerOpen(400), (3 * rtt + Math.max(0, 50 - r)) / r);
  // Rounds that look very slow (a stalled process) make a session no cheaper than a quarter round.
  const stalled = new SessionLoad();
  round(stalled, 1, 50, 100);
  round(stalled, 1, 5000, 6000, 10);
  t.equal(stalled.roundsPerOpen(6000), MIN_ROUNDS_PER_OPEN);
  t.equal(MIN_ROUNDS_PER_OPEN, 0.25);
});
