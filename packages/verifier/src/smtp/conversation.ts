// The probe conversation of one open session (after smtp/opening.ts), as a reducer: recipients
// offered in rounds (MAIL FROM with the first RCPT batch, RSET + MAIL after a recipient cap), each
// reply taken in order, and what the replies say about the host as well as the mailboxes. No
// socket, no timer, no queue: the engine's session driver writes the commands the effects name,
// measures how long each reply took and feeds it back; the engine's limit policy acts on the
// host-level effects (a lower error budget, a recipient cap, slow down).
//
// Built on session.ts, which keeps the server's counts (errors, junk commands, recipients per
// transaction); this adds the wire lines, the SMTPUTF8 and PIPELINING extensions, the slow-reply
// watch and the throttling signs.

import type { SendResult, SessionFailure, SmtpPhase } from '../ports.ts';
import type { SmtpReply } from '../types.ts';
import { abandon, capacity, initialState, plan, step, type SentCommand, type SessionBudget, type SessionState } from './session.ts';

/** A reply this much later than the session's round trip is a server sleeping on purpose (Postfix's soft error limit). */
export const SLOW_REPLY_MS = 800;
/** Replies that ask a client to slow down (rate limits), as opposed to greylisting's "come back later". */
export const RATE_TEXT = /\brate\b|too (fast|frequent)|too many (messages|mails|requests|commands|recipients per)|slow down/i;
/** A 421 that names the server's per-client connection cap. */
export const CONNECTION_CAP_TEXT = /too many connections/i;

/** A recipient offered to the session. `id` is the caller's. */
export interface Recipient {
  id: number;
  local: string;
  domain: string;
  /** The local part needs SMTPUTF8 (RFC 6531). */
  utf8: boolean;
}

/** One command to write, with the phase its failure is reported in. */
export interface WireCommand {
  kind: SentCommand['kind'];
  phase: SmtpPhase;
  line: string;
}

export interface ConversationState {
  session: SessionState;
  mailFrom: string;
  smtputf8: boolean;
  pipelining: boolean;
  /** The fastest first reply of a round: the round trip, against which a sleeping server shows. */
  rtt: number;
  /** Replies received in the current round. */
  roundReplies: number;
  /** Recipients answered on this session: a session that made progress is no fault of those it left. */
  answered: number;
  /** The rejections counted when a reply came a second late, until the next reply confirms (late too) or clears it. */
  slowSince?: number;
  /** How the session ended; unset while it is open. */
  end?: 'quit' | 'close';
}

export type ConversationEffect =
  /** Write these commands: at once (RFC 2920) when `pipelined`, else one after another, each reply awaited. */
  | { type: 'write'; phase: SmtpPhase; commands: WireCommand[]; pipelined: boolean }
  /** The recipient needs SMTPUTF8 and the server does not offer it: answered without a RCPT. */
  | { type: 'smtputf8_unsupported'; id: number }
  /** The reply to this recipient's RCPT (or the refusal of the MAIL before it). */
  | { type: 'answer'; id: number; reply: SmtpReply; viaMail: boolean }
  /** Not answered because of the server's recipient cap: ask again in a new transaction (no attempt counted). */
  | { type: 'requeue'; id: number }
  /** The session ended under this recipient without an answer. `progress`: others were answered on it. */
  | { type: 'interrupted'; id: number; failure: SessionFailure; progress: boolean }
  /** The server takes at most this many recipients per transaction. */
  | { type: 'rcpt_cap'; rcpts: number }
  /** Replies came a second late past this many rejections: stay at or below `errors` per session. */
  | { type: 'error_budget'; errors: number }
  /** The server asks us to hold fewer sessions (`connections`) or to go slower (`rate`). */
  | { type: 'throttle'; kind: 'connections' | 'rate' }
  /** The session is over: `quit` politely (QUIT, its reply not waited for), or `close` the line. */
  | { type: 'end'; how: 'quit' | 'close' };

export type ConversationStep = { state: ConversationState; effects: ConversationEffect[] };

export function conversationStart(extensions: Iterable<string>, mailFrom: string): ConversationState {
  const ext = new Set(extensions);
  return { session: initialState(), mailFrom, smtputf8: ext.has('SMTPUTF8'), pipelining: ext.has('PIPELINING'), rtt: Infinity, roundReplies: 0, answered: 0 };
}

/** How many more recipients the session may take now (0: it should end). */
export function room(state: ConversationState, budget: SessionBudget): number {
  return state.end ? 0 : capacity(state.session, budget);
}

/**
 * The next round for these recipients (at most `room` of them): those that need SMTPUTF8 where it
 * is not offered are answered at once, the others go out in one write. `taken` are the ids written.
 */
export function offer(state: ConversationState, budget: SessionBudget, recipients: readonly Recipient[]): ConversationStep & { taken: number[] } {
  const effects: ConversationEffect[] = [];
  const sendable: Recipient[] = [];
  for (const r of recipients) {
    if (r.utf8 && !state.smtputf8) effects.push({ type: 'smtputf8_unsupported', id: r.id });
    else sendable.push(r);
  }
  const planned = plan(state.session, budget, sendable.map((r) => r.id));
  if (planned.taken.length === 0) return { state, effects, taken: [] };
  const byId = new Map(sendable.map((r) => [r.id, r]));
  const commands = planned.send.map((c): WireCommand => {
    switch (c.kind) {
      case 'mail':
        return { kind: 'mail', phase: 'mail', line: `MAIL FROM:<${state.mailFrom}>${state.smtputf8 ? ' SMTPUTF8' : ''}` };
      case 'rset':
        return { kind: 'rset', phase: 'rset', line: 'RSET' };
      case 'quit':
        return { kind: 'quit', phase: 'quit', line: 'QUIT' };
      case 'rcpt': {
        const r = byId.get(c.id)!;
        return { kind: 'rcpt', phase: 'rcpt', line: `RCPT TO:<${r.local}@${r.domain}>` };
      }
    }
  });
  effects.push({ type: 'write', phase: 'rcpt', commands, pipelined: state.pipelining });
  return { state: { ...state, session: planned.state, roundReplies: 0 }, effects, taken: planned.taken };
}

/**
 * The result of the oldest command in flight: its reply, `gapMs` after the previous reply of the
 * round (or after the write, for the first), or the failure that broke the line.
 */
export function receive(state: ConversationState, result: SendResult, gapMs: number): ConversationStep {
  if (!result.ok) return interrupt(state, result.failure);
  const { reply } = result;
  const cmd = state.session.inFlight[0];
  if (!cmd) throw new Error('receive: a reply with no command in flight');
  const effects: ConversationEffect[] = [];
  const rtt = state.roundReplies === 0 ? Math.min(state.rtt, gapMs) : state.rtt;
  const errorsBefore = state.session.errors;
  // Postfix takes a flow token (in_flow_delay) when the transaction's queue file opens, at its
  // first ACCEPTED recipient, whatever was rejected before it in the same transaction.
  const firstAcceptOfTxn = cmd.kind === 'rcpt' && state.session.txnAccepted === 0 && reply.code < 300;
  let slowSince = state.slowSince;
  if (cmd.kind === 'rcpt' && errorsBefore > 0 && !firstAcceptOfTxn) {
    if (gapMs > rtt + SLOW_REPLY_MS) {
      // A reply a second late after `errorsBefore` rejections: the server's soft error limit
      // (Postfix: smtpd_soft_error_limit) sleeps before EVERY reply from then on, so the next
      // one is late too. One late reply alone is not enough: a client whose own event loop
      // stalled (a loaded machine) sees one late gap and then the rest of the chunk at once, and
      // once cut every host's budget to one (a session per rejection). The second late reply in
      // a row confirms it: stay below the count the first one came at. (The first accepted RCPT
      // of a transaction may be late for another reason: in_flow_delay.)
      if (slowSince === undefined) slowSince = errorsBefore;
      else effects.push({ type: 'error_budget', errors: Math.max(1, Math.min(slowSince, errorsBefore) - 1) });
    } else slowSince = undefined;
  }
  const stepped = step(state.session, reply);
  let answered = state.answered;
  for (const e of stepped.effects) {
    switch (e.type) {
      case 'answer':
        answered++;
        // A 4.7.x that says "too fast" (not greylisting, which says "try again later"): slow down.
        if (reply.code >= 400 && reply.code < 500 && reply.enhanced?.startsWith('4.7.') && RATE_TEXT.test(reply.text)) effects.push({ type: 'throttle', kind: 'rate' });
        effects.push({ type: 'answer', id: e.id, reply: e.reply, viaMail: e.viaMail === true });
        break;
      case 'requeue':
        if (e.why === 'rcpt_cap') effects.push({ type: 'requeue', id: e.id });
        else {
          const closedBy = stepped.state.closedBy;
          effects.push({ type: 'interrupted', id: e.id, failure: { phase: 'rcpt', kind: 'reply', detail: 'server closing', ...(closedBy ? { reply: closedBy } : {}) }, progress: answered > 0 });
        }
        break;
      case 'rcpt_cap':
        effects.push(e);
        break;
      case 'closed':
        if (CONNECTION_CAP_TEXT.test(e.reply.text)) effects.push({ type: 'throttle', kind: 'connections' });
        else if (RATE_TEXT.test(e.reply.text)) effects.push({ type: 'throttle', kind: 'rate' });
        break;
    }
  }
  const next: ConversationState = { ...state, session: stepped.state, rtt, roundReplies: state.roundReplies + 1, answered };
  if (slowSince === undefined) delete next.slowSince;
  else next.slowSince = slowSince;
  if (stepped.state.phase === 'closed') {
    // The server ended it (421, a refused RSET): nothing is left in flight, the line is closed.
    next.end = 'close';
    effects.push({ type: 'end', how: 'close' });
  }
  return { state: next, effects };
}

/** The line broke (or the driver failed): everything unanswered was interrupted, the line is closed. */
export function interrupt(state: ConversationState, failure: SessionFailure): ConversationStep {
  const r = abandon(state.session);
  const progress = state.answered > 0;
  const effects: ConversationEffect[] = r.requeue.map((id) => ({ type: 'interrupted', id, failure, progress }));
  effects.push({ type: 'end', how: 'close' });
  return { state: { ...state, session: r.state, end: 'close' }, effects };
}

/** The session has nothing more to do: QUIT, unless the server already ended it. */
export function finish(state: ConversationState): ConversationStep {
  if (state.end) return { state, effects: [] };
  const how = state.session.phase === 'closed' ? 'close' : 'quit';
  return { state: { ...state, end: how }, effects: [{ type: 'end', how }] };
}
