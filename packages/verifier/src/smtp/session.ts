// The SMTP conversation of one probe session after EHLO, as a reducer over parsed replies
// (no sockets here): `plan` says which commands to write next, `step` takes each reply in order and says
// what it means for the recipients. No socket, no timer: the engine's session driver writes the
// commands (pipelined, RFC 2920) and feeds the replies back one at a time.
//
// What it keeps track of is what real servers hold against a client that never sends DATA:
// - the error count (Postfix's smtpd_error_count: every 4xx/5xx reply). Past the soft limit
//   (smtpd_soft_error_limit, 10) Postfix answers each command a second late, at the hard limit
//   (20) it says 421 and hangs up; `plan` never sends more recipients than the budget can absorb
//   if every one of them were rejected;
// - junk commands (RSET, NOOP: Postfix's smtpd_junk_command_limit, 100, beyond which they count
//   as errors);
// - the recipients of the open transaction, against a learnt cap: `452`/`451` with enhanced code
//   4.5.3 ("too many recipients", RFC 5321 4.5.3.1.10) ends the transaction without saying
//   anything about the mailbox, so those recipients go into a new transaction (RSET, MAIL).

import type { SmtpReply } from '../types.ts';

/** What a session may spend, learnt per MX host by the engine. */
export interface SessionBudget {
  /** Rejected commands allowed in one session (kept below the server's soft error limit). */
  errors: number;
  /** RSET/NOOP allowed in one session (kept below the server's junk-command limit). */
  junk: number;
  /** Recipients per transaction (RFC 5321 4.5.3.1.8 asks servers for at least 100). */
  rcptsPerTransaction: number;
  /** Most RCPT commands written at once. */
  pipelineDepth: number;
}

/** A command written and not yet answered. `id` names a recipient (the engine's item). */
export type SentCommand = { kind: 'mail' } | { kind: 'rcpt'; id: number } | { kind: 'rset' } | { kind: 'quit' };

export interface SessionState {
  /** `open`: greeted, no transaction; `txn`: MAIL accepted; `mail_sent`: MAIL written, not answered; `closed`: the server ended it (421) or `plan` retired it. */
  phase: 'open' | 'mail_sent' | 'txn' | 'closed';
  /** Replies of class 4 or 5 so far (the server's error count, as far as we can tell). */
  errors: number;
  junk: number;
  /** Recipients answered in the open transaction. */
  txnRcpts: number;
  /** Recipients accepted (2xx) in the open transaction: what Postfix's smtpd_recipient_limit counts. */
  txnAccepted: number;
  /** RCPTs written in the open transaction, answered or not. */
  txnSent: number;
  /** The transaction must end (a recipient cap was hit) before more RCPTs. */
  mustReset: boolean;
  /** Commands written, oldest first. */
  inFlight: SentCommand[];
  /** The reply that refused MAIL in this round: every RCPT behind it gets it. */
  mailRefusal?: SmtpReply;
  /** Why the session ended. */
  closedBy?: SmtpReply;
}

export type SessionEffect =
  /** A reply to this recipient's RCPT (or the refusal of the MAIL before it): an answer. */
  | { type: 'answer'; id: number; reply: SmtpReply; viaMail?: boolean }
  /** Not answered, through no fault of the recipient: ask again (no attempt counted). */
  | { type: 'requeue'; id: number; why: 'rcpt_cap' | 'closing' }
  /** The server takes at most this many recipients per transaction. */
  | { type: 'rcpt_cap'; rcpts: number }
  /** The server ended the session (421, RFC 5321 3.8). */
  | { type: 'closed'; reply: SmtpReply };

export function initialState(): SessionState {
  return { phase: 'open', errors: 0, junk: 0, txnRcpts: 0, txnAccepted: 0, txnSent: 0, mustReset: false, inFlight: [] };
}

/** Is this reply "too many recipients" (RFC 5321 4.5.3.1.10; Postfix 452, Exim ACLs 451)? */
export function isRecipientCap(reply: SmtpReply): boolean {
  if (reply.code !== 452 && reply.code !== 451) return false;
  return reply.enhanced === '4.5.3' || /too many recipients/i.test(reply.text);
}

/** How many more recipients this session may take now without risking the server's limits. */
export function capacity(state: SessionState, budget: SessionBudget): number {
  if (state.phase === 'closed') return 0;
  const errorsLeft = budget.errors - state.errors;
  // A new transaction costs a RSET (a junk command) and may be refused (an error).
  const needsReset = state.mustReset || (state.phase === 'txn' && state.txnSent >= budget.rcptsPerTransaction);
  if (needsReset && state.junk + 1 > budget.junk) return 0;
  const inTxn = needsReset ? budget.rcptsPerTransaction : budget.rcptsPerTransaction - state.txnSent;
  return Math.max(0, Math.min(errorsLeft, inTxn, budget.pipelineDepth));
}

/**
 * The commands for the next round: RSET where the transaction must end, MAIL where none is open,
 * then up to `capacity` RCPTs of `ids`. Returns the ids that fit (the rest stay queued).
 */
export function plan(state: SessionState, budget: SessionBudget, ids: readonly number[]): { state: SessionState; send: SentCommand[]; taken: number[] } {
  if (state.inFlight.length > 0) throw new Error('plan: replies still outstanding');
  const room = capacity(state, budget);
  const taken = ids.slice(0, room);
  if (taken.length === 0) return { state, send: [], taken };
  const next: SessionState = { ...state, inFlight: [] };
  delete next.mailRefusal;
  const send: SentCommand[] = [];
  if (next.mustReset || (next.phase === 'txn' && next.txnSent >= budget.rcptsPerTransaction)) {
    send.push({ kind: 'rset' });
    next.junk++;
    next.phase = 'open';
    next.mustReset = false;
    next.txnRcpts = 0;
    next.txnAccepted = 0;
    next.txnSent = 0;
  }
  if (next.phase === 'open') {
    send.push({ kind: 'mail' });
    next.phase = 'mail_sent';
  }
  for (const id of taken) send.push({ kind: 'rcpt', id });
  next.txnSent += taken.length;
  next.inFlight = [...send];
  return { state: next, send, taken };
}

/** Marks QUIT as written (pipelined behind the last round); its reply is not waited for. */
export function quit(state: SessionState): SessionState {
  return { ...state, phase: 'closed' };
}

/** Everything still unanswered, when the line broke: ask again elsewhere. */
export function abandon(state: SessionState): { state: SessionState; requeue: number[] } {
  const requeue = state.inFlight.flatMap((c) => (c.kind === 'rcpt' ? [c.id] : []));
  return { state: { ...state, phase: 'closed', inFlight: [] }, requeue };
}

/** One reply, to the oldest command in flight. */
export function step(state: SessionState, reply: SmtpReply): { state: SessionState; effects: SessionEffect[] } {
  const [cmd, ...rest] = state.inFlight;
  if (!cmd) throw new Error('step: a reply with no command in flight');
  const next: SessionState = { ...state, inFlight: rest };
  const effects: SessionEffect[] = [];
  if (reply.code >= 400) next.errors++;
  if (reply.code === 421 && cmd.kind !== 'quit') {
    // RFC 5321 3.8: the server is closing the channel. Nothing behind it will be answered.
    next.phase = 'closed';
    next.closedBy = reply;
    if (cmd.kind === 'rcpt') effects.push({ type: 'requeue', id: cmd.id, why: 'closing' });
    for (const c of rest) if (c.kind === 'rcpt') effects.push({ type: 'requeue', id: c.id, why: 'closing' });
    next.inFlight = [];
    effects.push({ type: 'closed', reply });
    return { state: next, effects };
  }
  switch (cmd.kind) {
    case 'rset':
      if (reply.code !== 250) {
        next.phase = 'closed';
        next.closedBy = reply;
        for (const c of rest) if (c.kind === 'rcpt') effects.push({ type: 'requeue', id: c.id, why: 'closing' });
        next.inFlight = [];
        effects.push({ type: 'closed', reply });
      }
      break;
    case 'mail':
      if (reply.code === 250) next.phase = 'txn';
      else {
        // The RCPTs pipelined behind a refused MAIL get "503 need MAIL": the refusal is their answer.
        next.phase = 'open';
        next.mailRefusal = reply;
      }
      break;
    case 'rcpt':
      if (next.mailRefusal) {
        effects.push({ type: 'answer', id: cmd.id, reply: next.mailRefusal, viaMail: true });
      } else if (isRecipientCap(reply) && next.txnRcpts > 0) {
        // The cap says nothing about the mailbox. Servers count the recipients they accepted
        // (Postfix's smtpd_recipient_limit), so that is the cap learnt.
        if (!next.mustReset) effects.push({ type: 'rcpt_cap', rcpts: Math.max(1, next.txnAccepted) });
        next.mustReset = true;
        effects.push({ type: 'requeue', id: cmd.id, why: 'rcpt_cap' });
      } else {
        next.txnRcpts++;
        if (reply.code < 300) next.txnAccepted++;
        effects.push({ type: 'answer', id: cmd.id, reply });
      }
      break;
    case 'quit':
      break;
  }
  return { state: next, effects };
}
