// When an MX actor opens one more session (docs/decisions/smtp-engine.md, "Sessions are spent
// sparingly"). A session costs a connection, a transaction and, on a Postfix whose flow tokens are
// spent, a second of in_flow_delay before its first accepted recipient: on such a server sessions
// are the scarce resource. So one more opens only when the sessions already open (or opening)
// cannot take the queue: their error budgets would run out before it is empty, or writing it would
// take them longer than a new session costs. The last recipients of a host are spread over the
// sessions that remain, not one new session per rejection. A plain function over numbers; the
// tracker below keeps the numbers for one host.

/** What the decision looks at. */
export interface OpenInputs {
  /** Recipients waiting for a session. */
  queued: number;
  /** Sessions the limit counts now (open, opening, and closing ones the server may still count). */
  held: number;
  /** Sessions allowed at once. */
  limit: number;
  /** Sessions being opened: each will have a whole budget. */
  opening: number;
  /** Rejections each open session can still take: its error budget, less the errors it has seen and the expected rejections of the RCPTs it has in flight. */
  errorsLeft: readonly number[];
  /** Rejections a session may take in all (the host's learnt error budget). */
  budget: number;
  /** Most RCPTs a session writes in one round (pipeline depth, recipients per transaction). */
  perRound: number;
  /** Expected share of rejections among this host's answers. */
  rejectRate: number;
  /** What a new session costs before it has done a round's work, in rounds of the open ones (SessionLoad.roundsPerOpen). */
  roundsPerOpen: number;
}

/** What a new session costs in rounds until the host's rounds have been timed: connect, banner and EHLO on a link where a pipelined round is one round trip. */
export const DEFAULT_ROUNDS_PER_OPEN = 3;
/** Never cheaper than this (a quarter of a round: about the old rule, a session per 2 recipients queued), however slow rounds look. */
export const MIN_ROUNDS_PER_OPEN = 0.25;
/** The rejection rate is taken as at least this (an all-valid host still ends sessions on other limits). */
export const MIN_REJECT_RATE = 0.02;

/** Should one more session open now? */
export function openAnother(i: OpenInputs): boolean {
  if (i.queued <= 0 || i.held >= i.limit) return false;
  if (i.errorsLeft.length + i.opening === 0) return true;
  const left = i.errorsLeft.reduce((s, e) => s + Math.max(0, e), 0) + i.opening * i.budget;
  // What the sessions can still take before their error budgets run out, at this host's rate.
  const absorbable = left / Math.max(MIN_REJECT_RATE, i.rejectRate);
  if (i.queued > absorbable) return true;
  // What they write per round (a session writes at most as many RCPTs as it can see rejected).
  const round = i.errorsLeft.reduce((s, e) => s + Math.min(i.perRound, Math.max(0, Math.floor(e))), 0) + i.opening * Math.min(i.perRound, i.budget);
  return i.queued > i.roundsPerOpen * round;
}

/** Answers seen before the host's own rate counts fully: a prior of PRIOR_REJECTED in PRIOR_ANSWERS. */
const PRIOR_ANSWERS = 8;
const PRIOR_REJECTED = 2;

/** Weight of the newest round in the running averages of round times. */
const ROUND_WEIGHT = 0.2;
/** Round trips a new session spends before its first round: connect and banner (2), EHLO (1). */
const SETUP_ROUND_TRIPS = 3;

interface SessionNumbers {
  errors: number;
  inFlight: number;
  /** Rounds done, and when the round in progress began (undefined: none in progress). */
  rounds: number;
  roundStart?: number;
}

/** The numbers openAnother needs about one host's sessions, kept as their replies come. */
export class SessionLoad {
  #sessions = new Map<number, SessionNumbers>();
  #answers = 0;
  #rejected = 0;
  /** Running averages: a session's later rounds, and its first (which may wait for a flow token); 0 until timed. */
  #roundMs = 0;
  #firstRoundMs = 0;
  /** Running average of the sessions' round trips (each session's fastest first reply of a round), 0 until measured. */
  #rttMs = 0;

  #session(id: number): SessionNumbers {
    let s = this.#sessions.get(id);
    if (!s) this.#sessions.set(id, (s = { errors: 0, inFlight: 0, rounds: 0 }));
    return s;
  }

  /** Session `id` has seen `errors` errors and has `inFlight` RCPTs unanswered. */
  progress(id: number, errors: number, inFlight: number): void {
    const s = this.#session(id);
    s.errors = errors;
    s.inFlight = inFlight;
  }

  /** Session `id` wrote a round at `now` (ms, monotonic). */
  roundStarted(id: number, now: number): void {
    this.#session(id).roundStart = now;
  }

  /** Session `id` has every reply of its round at `now`; `rtt`: its round trip so far. */
  roundEnded(id: number, now: number, rtt: number): void {
    const s = this.#session(id);
    if (s.roundStart === undefined) return;
    const ms = now - s.roundStart;
    delete s.roundStart;
    const avg = (old: number, x = ms) => (old === 0 ? x : old + ROUND_WEIGHT * (x - old));
    if (Number.isFinite(rtt)) this.#rttMs = avg(this.#rttMs, rtt);
    if (s.rounds++ === 0) this.#firstRoundMs = avg(this.#firstRoundMs);
    else this.#roundMs = avg(this.#roundMs);
  }

  ended(id: number): void {
    this.#sessions.delete(id);
  }

  /** A recipient of this host was answered: rejected (4xx/5xx) or not. */
  answered(rejected: boolean): void {
    this.#answers++;
    if (rejected) this.#rejected++;
  }

  get rejectRate(): number {
    return (this.#rejected + PRIOR_REJECTED) / (this.#answers + PRIOR_ANSWERS);
  }

  /** Rejections left per open session (`ids`), within `budget` errors each. */
  errorsLeft(ids: Iterable<number>, budget: number): number[] {
    const rate = this.rejectRate;
    const out: number[] = [];
    for (const id of ids) {
      const s = this.#sessions.get(id);
      out.push(s ? budget - s.errors - rate * s.inFlight : budget);
    }
    return out;
  }

  /**
   * What a new session costs before it does a round's work, in rounds of the sessions already
   * open, at `now`: connect, banner and EHLO, plus what a first round takes beyond an ordinary
   * round (a flow token's wait on a Postfix whose tokens are spent), as first rounds took it or
   * as one still in progress already has. Round trips and rounds are both running averages, so a
   * loaded machine that stretches both does not make sessions look cheap. On a link where a pipelined round is one round trip
   * that is about 3 rounds, or 20 more with in_flow_delay; on a server that answers one RCPT per
   * round trip, a fraction of a round.
   */
  roundsPerOpen(now: number): number {
    if (this.#roundMs <= 0 || this.#rttMs <= 0) return DEFAULT_ROUNDS_PER_OPEN;
    let first = this.#firstRoundMs;
    for (const s of this.#sessions.values()) if (s.rounds === 0 && s.roundStart !== undefined) first = Math.max(first, now - s.roundStart);
    return Math.max(MIN_ROUNDS_PER_OPEN, (SETUP_ROUND_TRIPS * this.#rttMs + Math.max(0, first - this.#roundMs)) / this.#roundMs);
  }
}
