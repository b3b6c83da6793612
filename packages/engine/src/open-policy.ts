// When an MX actor opens one more session (docs/decisions/smtp-engine.md, "Sessions are spent
// sparingly"). A session costs a connection, a transaction and, on a Postfix whose flow tokens are
// spent, a second of in_flow_delay before its first accepted recipient: on such a server sessions
// are the scarce resource. So one more opens only when the sessions already open (or opening)
// cannot take the queue: their error budgets would run out before it is empty, or it would take
// them more than a few rounds. The last recipients of a host are spread over the sessions that
// remain, not one new session per rejection. A plain function over numbers; the tracker below
// keeps the numbers for one host.

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
}

/** A queue the open sessions would take more than this many rounds to write is worth one more session (about what opening one costs: connect, banner, EHLO). */
export const ROUNDS_BEFORE_OPEN = 4;
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
  return i.queued > ROUNDS_BEFORE_OPEN * round;
}

/** Answers seen before the host's own rate counts fully: a prior of PRIOR_REJECTED in PRIOR_ANSWERS. */
const PRIOR_ANSWERS = 8;
const PRIOR_REJECTED = 2;

/** The numbers openAnother needs about one host's sessions, kept as their replies come. */
export class SessionLoad {
  #sessions = new Map<number, { errors: number; inFlight: number }>();
  #answers = 0;
  #rejected = 0;

  /** Session `id` has seen `errors` errors and has `inFlight` RCPTs unanswered. */
  progress(id: number, errors: number, inFlight: number): void {
    this.#sessions.set(id, { errors, inFlight });
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
}
