// The opening of an SMTP session as a reducer over parsed replies: greeting, EHLO (HELO when EHLO
// is not known), STARTTLS when offered and EHLO again over TLS. No socket, no timer: the network
// adapter reads and writes, performs the TLS upgrade, and feeds back what happened; every
// decision (which command, when to say QUIT, what a refusal means) is taken here.

import type { SessionFailure, SmtpPhase } from '../ports.ts';
import type { SmtpReply } from '../types.ts';
import { ehloKeywords } from './reply.ts';

export type OpeningStage = 'greeting' | 'ehlo' | 'helo' | 'starttls' | 'tls' | 'ready' | 'failed';

export interface OpeningState {
  stage: OpeningStage;
  heloName: string;
  /** The handshake over STARTTLS succeeded. */
  tls: boolean;
  /** EHLO keywords (upper case) of the last EHLO; empty after HELO. */
  extensions: string[];
}

/** What happened since the last effect: the reply awaited, a broken line, or the TLS handshake's end. */
export type OpeningInput = { type: 'reply'; reply: SmtpReply } | { type: 'failure'; failure: SessionFailure } | { type: 'tls'; failure?: SessionFailure };

export type OpeningEffect =
  /** Wait for the next reply (the greeting) without writing. */
  | { type: 'read'; phase: SmtpPhase }
  /** Write one command and wait for its reply. */
  | { type: 'send'; phase: SmtpPhase; line: string }
  /** Start the TLS handshake on the same socket (RFC 3207), then report it as a `tls` input. */
  | { type: 'upgrade' }
  /** Say QUIT (its reply bounded by the timeout), then close. */
  | { type: 'quit' }
  /** The session is open: greeted, with these extensions. */
  | { type: 'ready'; extensions: string[]; tls: boolean }
  /** The session could not be opened; the line is closed. */
  | { type: 'failed'; failure: SessionFailure };

export function openingStart(heloName: string): { state: OpeningState; effects: OpeningEffect[] } {
  return { state: { stage: 'greeting', heloName, tls: false, extensions: [] }, effects: [{ type: 'read', phase: 'greeting' }] };
}

const failed = (state: OpeningState, failure: SessionFailure, quit = false): { state: OpeningState; effects: OpeningEffect[] } => ({
  state: { ...state, stage: 'failed' },
  effects: quit ? [{ type: 'quit' }, { type: 'failed', failure }] : [{ type: 'failed', failure }],
});

const ready = (state: OpeningState): { state: OpeningState; effects: OpeningEffect[] } => ({
  state: { ...state, stage: 'ready' },
  effects: [{ type: 'ready', extensions: state.extensions, tls: state.tls }],
});

const ehlo = (state: OpeningState): { state: OpeningState; effects: OpeningEffect[] } => ({
  state: { ...state, stage: 'ehlo' },
  effects: [{ type: 'send', phase: 'ehlo', line: `EHLO ${state.heloName}` }],
});

/** The next step after `input`. */
export function openingStep(state: OpeningState, input: OpeningInput): { state: OpeningState; effects: OpeningEffect[] } {
  if (state.stage === 'ready' || state.stage === 'failed') throw new Error(`openingStep: the opening is over (${state.stage})`);
  if (input.type === 'failure') return failed(state, input.failure);
  if (input.type === 'tls') {
    if (state.stage !== 'tls') throw new Error('openingStep: a TLS handshake nobody asked for');
    if (input.failure) return failed(state, input.failure);
    return ehlo({ ...state, tls: true });
  }
  const { reply } = input;
  switch (state.stage) {
    case 'greeting':
      if (reply.code === 220) return ehlo(state);
      // RFC 5321 3.1: after a 554 greeting the client should still send QUIT; a 421 closes at once.
      return failed(state, { phase: 'greeting', kind: 'reply', detail: 'server refused the session', reply }, reply.code !== 421);
    case 'ehlo':
      if (reply.code === 250) {
        const next = { ...state, extensions: [...ehloKeywords(reply)] };
        // The EHLO over TLS is the last step; before it, STARTTLS when the server offers it.
        if (!state.tls && next.extensions.includes('STARTTLS')) return { state: { ...next, stage: 'starttls' }, effects: [{ type: 'send', phase: 'starttls', line: 'STARTTLS' }] };
        return ready(next);
      }
      // Refused over TLS: end without QUIT; before TLS a 421 closes at once, anything else is ended politely.
      if (reply.code === 421) return failed(state, { phase: 'ehlo', kind: 'reply', detail: 'server closing', reply }, false);
      // RFC 5321 4.1.4: a server that does not know EHLO answers 500/502; fall back to HELO.
      return { state: { ...state, stage: 'helo' }, effects: [{ type: 'send', phase: 'helo', line: `HELO ${state.heloName}` }] };
    case 'helo':
      if (reply.code !== 250) return failed(state, { phase: 'helo', kind: 'reply', detail: 'HELO refused', reply }, !state.tls && reply.code !== 421);
      return ready({ ...state, extensions: [] });
    case 'starttls':
      if (reply.code === 220) return { state: { ...state, stage: 'tls' }, effects: [{ type: 'upgrade' }] };
      // A refused STARTTLS (454) leaves the plain session usable: go on without TLS.
      return ready(state);
    case 'tls':
      throw new Error('openingStep: a reply during the TLS handshake');
  }
}
