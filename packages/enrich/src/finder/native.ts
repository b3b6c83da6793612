// The native email finder: a person's address at a company, proven by the company's own mail
// server through the same probe engine as validation (the verifier's plan and run: candidates of
// many contacts on one MX host share its sessions and transactions; the catch-all probe is the
// domain's), with no data vendor.
//
// Candidates come from the name by the common B2B patterns (patterns.ts), the patterns this domain
// is known to use first: the finder_patterns evidence (every address proven here before) and the
// shapes of the domain's addresses known to exist (shapes.ts: valid verdicts of validations, jobs
// and finds; the asking account's delivered addresses). Then:
// - an accepted candidate on a domain that is not catch-all is found (confidence 95, source
//   `smtp`), and its pattern becomes evidence for the domain;
// - on a catch-all domain no RCPT proves anything: a candidate the asking account has confirmed
//   delivery to (its own imported outcomes) is found (confidence 90, source `outcome`); else
//   the best-ranked candidate is the answer, its confidence what the domain's evidence gives the
//   pattern (below 70, so not charged, when there is none), source `pattern`;
// - every candidate rejected (or suppressed by the asking account's own evidence): not found;
// - otherwise (greylisting, timeouts, a policy block: no answer either way) the find fails, so
//   the next provider is asked and nothing is charged.

import type { Plan, Verdict } from '@svc/verifier';
import { ProviderError, type ProviderAnswer } from '../chain.ts';
import { candidates, patternConfidence, rankPatterns } from './patterns.ts';
import { findEvidence } from './shapes.ts';

/** A proven (or, on a catch-all domain, the likeliest) address of a person. */
export interface FoundEmail {
  email: string;
  /** 0-100. */
  confidence: number;
  pattern: string;
  /** `smtp` (the mail server accepted it) or `pattern` (a catch-all domain: the domain's evidence). */
  source_provider: string;
  /** The validation verdict of the address (for `validate: true`). */
  verdict: Verdict;
}

export interface FindQuery {
  first_name: string;
  last_name: string;
  domain: string;
  /** The asking account: its suppression list answers its own suppressed candidates (never "found"). */
  account_id?: string;
}

export interface FinderProvider {
  readonly name: string;
  find(q: FindQuery, signal: AbortSignal): Promise<ProviderAnswer<FoundEmail>>;
}

/** What the finder needs of the verifier (@svc/verifier's Verifier). */
export interface Prober {
  plan(emails: readonly string[]): Promise<Plan>;
  run(plan: Plan): Promise<Verdict[]>;
}

/** The domain's pattern evidence (@svc/store's FinderPatternsRepo). */
export interface PatternEvidence {
  counts(domain: string): Promise<Record<string, number>>;
  confirm(domain: string, pattern: string): Promise<void>;
  /** Shapes of the domain's addresses known to exist (shapes.ts). */
  shapeCounts?(domain: string): Promise<Record<string, number>>;
}

/** An accepted RCPT on a domain that does not accept everything. */
export const PROVEN_CONFIDENCE = 95;
/** A catch-all domain's candidate the account has confirmed delivery to (its own outcomes). */
export const DELIVERED_CONFIDENCE = 90;

const accepted = (v: Verdict): boolean => (v.result === 'valid' || v.result === 'valid_role_based') && !v.is_catchall;

export class NativeFinder implements FinderProvider {
  readonly name = 'native';

  constructor(
    private readonly o: {
      prober: Prober;
      evidence: PatternEvidence;
      /** SVC_FINDER_MAX_CANDIDATES (8). */
      maxCandidates: number;
      /**
       * Answers the account's suppressed addresses in the plan from its own evidence (billing's
       * applySuppressions), as a validation would: a mailbox that hard-bounced for the account is
       * never its find.
       */
      suppress?: (accountId: string, plan: Plan) => Promise<unknown>;
      /**
       * The mailboxes (plan keys) among these that the account has confirmed delivery to (its own
       * outcome imports: a reply, a delivery): on a catch-all domain, where no RCPT proves
       * anything, that is the proof.
       */
      delivered?: (accountId: string, mailboxes: string[]) => Promise<Set<string>>;
      /**
       * The domain's mailboxes the account has confirmed delivery to (its own outcome imports):
       * their shapes are evidence of the domain's convention (shapes.ts).
       */
      deliveredOn?: (accountId: string, domain: string) => Promise<string[]>;
    },
  ) {}

  async find(q: FindQuery, signal: AbortSignal): Promise<ProviderAnswer<FoundEmail>> {
    const [named, shapes, deliveredHere] = await Promise.all([
      this.o.evidence.counts(q.domain),
      this.o.evidence.shapeCounts?.(q.domain) ?? {},
      q.account_id && this.o.deliveredOn ? this.o.deliveredOn(q.account_id, q.domain) : [],
    ]);
    const counts = findEvidence(named, shapes, deliveredHere);
    const list = candidates(q.first_name, q.last_name, q.domain, { order: rankPatterns(counts), max: this.o.maxCandidates });
    if (list.length === 0) return { found: false, error: 'no address can be made from this name and domain' };
    const plan = await this.o.prober.plan(list.map((c) => c.email));
    if (q.account_id && this.o.suppress) await this.o.suppress(q.account_id, plan);
    if (signal.aborted) throw new ProviderError('the find was cancelled', false);
    const verdicts = await this.o.prober.run(plan);
    const byEmail = new Map(verdicts.map((v) => [v.email, v]));
    const pairs = list.map((c) => ({ c, v: byEmail.get(c.email) })).filter((p): p is { c: (typeof list)[number]; v: Verdict } => p.v !== undefined);

    const proven = pairs.find((p) => accepted(p.v));
    if (proven) {
      await this.o.evidence.confirm(q.domain, proven.c.pattern);
      return { found: true, value: { email: proven.c.email, confidence: PROVEN_CONFIDENCE, pattern: proven.c.pattern, source_provider: 'smtp', verdict: proven.v } };
    }
    const catchAll = pairs.find((p) => p.v.is_catchall);
    if (catchAll && q.account_id && this.o.delivered) {
      // The account's own delivery evidence for one of the candidates proves it (and its pattern).
      const keyOf = new Map(plan.items.flatMap((i) => (i.key === undefined ? [] : [[i.email, i.key] as const])));
      const delivered = await this.o.delivered(q.account_id, [...keyOf.values()]);
      const proof = pairs.find((p) => p.v.validation_layer !== 'suppression' && delivered.has(keyOf.get(p.c.email) ?? ''));
      if (proof) {
        await this.o.evidence.confirm(q.domain, proof.c.pattern);
        return { found: true, value: { email: proof.c.email, confidence: DELIVERED_CONFIDENCE, pattern: proof.c.pattern, source_provider: 'outcome', verdict: proof.v } };
      }
    }
    // On a catch-all domain the best-ranked candidate the account has not suppressed.
    const best = pairs.find((p) => p.v.validation_layer !== 'suppression');
    if (catchAll && best) {
      // Shapes add support, never take it away: a `word.word` address, shared between
      // {first}.{last} and {last}.{first}, must not put {first}.{last} below its own prior.
      const confidence = Math.max(patternConfidence(named, best.c.pattern), patternConfidence(counts, best.c.pattern));
      return { found: true, value: { email: best.c.email, confidence, pattern: best.c.pattern, source_provider: 'pattern', verdict: best.v } };
    }
    if (pairs.length > 0 && pairs.every((p) => p.v.result === 'invalid')) {
      const reason = pairs[0]!.v.reason_code;
      const suppressed = pairs.some((p) => p.v.validation_layer === 'suppression');
      const rejected = pairs.every((p) => p.v.reason_code === 'mailbox_not_found' || p.v.validation_layer === 'suppression');
      if (rejected) return { found: false, error: suppressed ? "every candidate address was rejected by the mail server or is on the account's suppression list" : 'every candidate address was rejected by the mail server' };
      return { found: false, error: `the domain cannot receive these addresses (${reason})` };
    }
    const why = pairs.find((p) => p.v.result !== 'invalid')?.v;
    throw new ProviderError(`the mail server did not say whether the addresses exist (${why?.reason_code ?? 'no verdict'})`, false);
  }
}
