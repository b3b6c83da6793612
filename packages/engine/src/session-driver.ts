// Runs the conversation reducer (@svc/verifier smtpConversation) over one open session: takes
// recipients from its MX actor as the session has room, writes what the reducer says, feeds back
// every reply with how long it took, and hands each effect to the actor. Every protocol decision
// is the reducer's; what a recipient or the host does next is the actor's.

import { smtpConversation, type ConversationEffect, type ConversationState, type SendResult, type SessionBudget, type SessionFailure, type SmtpReply, type SmtpSession } from '@svc/verifier';
import type { SessionLoad } from './open-policy.ts';
import type { Entry } from './queue.ts';
import type { EngineCounters } from './types.ts';

const { conversationStart, finish, interrupt, offer, receive, room } = smtpConversation;

/** What the driver needs of the MX actor that owns the session. */
export interface SessionHost {
  readonly budget: SessionBudget;
  readonly mailFrom: string;
  readonly counters: EngineCounters;
  /** A clock reading in milliseconds (how late a reply is). */
  now(): number;
  /** Up to `n` waiting recipients that session `session` may take. */
  take(n: number, session: number): Entry[];
  /** Recipients still waiting. */
  waiting(): number;
  /** Waits for more recipients (session `session`, warm); false when none came or its slot is wanted elsewhere. */
  waitForWork(session: number): Promise<boolean>;
  /** More work than sessions: open more. */
  pump(): void;
  /** Where the session's errors, RCPTs in flight and answers are kept for the decision to open another (open-policy.ts). */
  readonly load: SessionLoad;
  answered(entry: Entry, reply: SmtpReply, session: number, viaMail: boolean): void;
  smtputf8Unsupported(entry: Entry): void;
  /** Back to the front of the queue, no count (a recipient cap). */
  requeue(entry: Entry): void;
  /** The session ended under it without an answer. */
  interrupted(entry: Entry, failure: SessionFailure, progress: boolean): void;
  /** A sign about the host (a recipient cap, a lower error budget) or its address (slow down), seen on session `session`. */
  learn(e: Extract<ConversationEffect, { type: 'rcpt_cap' | 'error_budget' | 'throttle' }>, session: number): void;
}

/** Converses until the session has nothing more to do; says how it must end (`close` after a throw too). */
export async function driveSession(session: SmtpSession, id: number, host: SessionHost): Promise<'quit' | 'close'> {
  const { counters } = host;
  let state: ConversationState = conversationStart(session.extensions, host.mailFrom);
  const inFlight = new Map<number, Entry>();
  const perform = (effects: ConversationEffect[]): void => {
    for (const e of effects) {
      if (e.type === 'answer') host.load.answered(e.reply.code >= 400);
      performOne(e, inFlight, id, host);
    }
  };
  const progress = (): void => host.load.progress(id, state.session.errors, state.session.inFlight.reduce((n, c) => n + (c.kind === 'rcpt' ? 1 : 0), 0));
  try {
    progress();
    for (;;) {
      const n = room(state, host.budget);
      if (n === 0) break;
      const batch = host.take(n, id);
      for (const entry of batch) inFlight.set(entry.req.id, entry);
      const offered = offer(state, host.budget, batch.map((e) => e.req));
      state = offered.state;
      progress();
      perform(offered.effects);
      if (offered.taken.length === 0) {
        // Only recipients this session must not take (it deferred them): retire, a new session takes them.
        if (host.waiting() > 0) break;
        if (await host.waitForWork(id)) continue;
        break;
      }
      const write = offered.effects.find((e) => e.type === 'write')!;
      const commands = write.commands;
      if (commands[0]?.kind === 'mail' || commands[1]?.kind === 'mail') counters.transactions++;
      counters.rcpts += offered.taken.length;
      const results: Promise<SendResult>[] = write.pipelined ? session.write(write.phase, commands.map((c) => c.line)) : [];
      let last = host.now();
      host.load.roundStarted(id, last);
      for (let i = 0; i < commands.length && !state.end; i++) {
        const r = write.pipelined ? await results[i]! : await session.send(commands[i]!.phase, commands[i]!.line);
        const now = host.now();
        const received = receive(state, r, now - last);
        last = now;
        state = received.state;
        progress();
        perform(received.effects);
      }
      if (state.end) break;
      host.load.roundEnded(id, host.now(), state.rtt);
      if (host.waiting() > 0) host.pump();
    }
  } catch (err) {
    // A bug: no recipient may be left hanging on this session.
    const r = interrupt(state, { phase: 'rcpt', kind: 'protocol', detail: `internal error: ${(err as Error).message}` });
    perform(r.effects);
    throw err;
  } finally {
    host.load.ended(id);
  }
  return finish(state).state.end ?? 'close';
}

function performOne(e: ConversationEffect, inFlight: Map<number, Entry>, session: number, host: SessionHost): void {
  const take = (id: number): Entry | undefined => {
    const entry = inFlight.get(id);
    inFlight.delete(id);
    return entry;
  };
  switch (e.type) {
    case 'smtputf8_unsupported': {
      const entry = take(e.id);
      if (entry) host.smtputf8Unsupported(entry);
      return;
    }
    case 'answer': {
      const entry = take(e.id);
      if (entry) host.answered(entry, e.reply, session, e.viaMail);
      return;
    }
    case 'requeue': {
      const entry = take(e.id);
      if (entry) host.requeue(entry);
      return;
    }
    case 'interrupted': {
      const entry = take(e.id);
      if (entry) host.interrupted(entry, e.failure, e.progress);
      return;
    }
    case 'rcpt_cap':
    case 'error_budget':
    case 'throttle':
      host.learn(e, session);
      return;
    case 'write':
    case 'end':
      return; // performed by driveSession and its caller
  }
}
