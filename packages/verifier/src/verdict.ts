// From evidence to a verdict: the result table of docs/api.md, in one place.

import { isDisposable, isFreeProvider, roleType } from './lists.ts';
import type { ProbeOutcome } from './ports.ts';
import type { SessionFailure } from './ports.ts';
import { explainRcpt } from './smtp/classify.ts';
import { formatReply } from './smtp/reply.ts';
import { parseAddress } from './syntax.ts';
import { didYouMean } from './typo.ts';
import type { Confidence, Layer, MxAnswer, ParsedAddress, Quality, ReasonCode, ValidationResult, Verdict } from './types.ts';

type Parsed = Extract<ParsedAddress, { ok: true }>;

export type Evidence =
  | { layer: 'syntax'; reason: string }
  | { layer: 'dns'; answer: Exclude<MxAnswer, { kind: 'mx' } | { kind: 'implicit' }> }
  | { layer: 'smtp'; outcome: ProbeOutcome; implicitMx: boolean }
  /** The account suppressed the address after delivery evidence it imported (docs/decisions/outcomes.md): answered without probing. */
  | { layer: 'suppression'; kind: 'hard_bounce' | 'complaint' | 'unsubscribed' }
  /** The job pipeline gave up on the address: its message failed every attempt (a dead letter), so no layer answered. */
  | { layer: 'processing' };

const PROCESSING_FAILED: Decision = {
  result: 'unknown',
  layer: 'processing',
  dns: false,
  smtp: false,
  code: 'processing_failed',
  reason: 'Validation could not be completed: processing this address failed repeatedly (no credit is charged)',
};

const SUPPRESSED: Record<'hard_bounce' | 'complaint' | 'unsubscribed', Decision> = {
  hard_bounce: { result: 'invalid', layer: 'suppression', dns: false, smtp: false, code: 'suppressed_hard_bounce', reason: 'Suppressed: a confirmed hard bounce was reported for this address' },
  complaint: { result: 'risky', layer: 'suppression', dns: true, smtp: true, code: 'suppressed_complaint', reason: 'Suppressed: the recipient reported a complaint' },
  unsubscribed: { result: 'risky', layer: 'suppression', dns: true, smtp: true, code: 'suppressed_unsubscribed', reason: 'Suppressed: the recipient unsubscribed' },
};

const QUALITY: Record<ValidationResult, Quality> = {
  valid: 'high',
  valid_role_based: 'low',
  risky: 'none',
  invalid: 'none',
  unknown: 'unknown',
};

interface Decision {
  result: ValidationResult;
  reason: string;
  code: ReasonCode;
  layer: Layer;
  dns: boolean;
  smtp: boolean;
  catchall?: Confidence;
  reply?: string;
}

const PHASE_NAMES: Record<SessionFailure['phase'], string> = {
  connect: 'connecting',
  greeting: 'the greeting',
  ehlo: 'EHLO',
  helo: 'HELO',
  starttls: 'STARTTLS',
  mail: 'MAIL FROM',
  rcpt: 'RCPT TO',
  rset: 'RSET',
  quit: 'QUIT',
};

function failureDecision(f: SessionFailure): Decision {
  const base = { result: 'unknown' as const, layer: 'smtp' as const, dns: true, smtp: false };
  const reply = f.reply ? formatReply(f.reply) : undefined;
  const at = PHASE_NAMES[f.phase];
  switch (f.kind) {
    case 'timeout':
      return f.deadlineMs
        ? { ...base, code: 'smtp_timeout', reason: `Validation did not finish within ${f.deadlineMs / 1000} s` }
        : { ...base, code: 'smtp_timeout', reason: `Mail server did not answer in time (${at})` };
    case 'connection':
      return f.phase === 'connect'
        ? { ...base, code: 'smtp_connection_failed', reason: `Could not connect to any mail server (${f.detail})` }
        : { ...base, code: 'smtp_connection_failed', reason: `Mail server closed the connection during ${at}` };
    case 'protocol':
      return { ...base, code: 'smtp_protocol_error', reason: `Mail server broke the SMTP protocol during ${at}` };
    case 'reply': {
      // A provider's own deferral or block (Yahoo's [TSS04] 421) says which check refused.
      const rule = f.reply ? explainRcpt(f.reply).rule : undefined;
      const reason = rule && (rule.cls === 'tempfail' || rule.cls === 'policy') ? `${rule.reason}, during ${at}` : `Mail server refused the session during ${at}`;
      return { ...base, code: 'smtp_tempfail', reason, ...(reply ? { reply } : {}) };
    }
  }
}

function smtpDecision(o: ProbeOutcome, role: boolean): Decision {
  if (o.kind === 'failure') return failureDecision(o.failure);
  if (o.kind === 'smtputf8_unsupported') {
    return { result: 'invalid', layer: 'smtp', dns: true, smtp: false, code: 'smtputf8_unsupported', reason: 'The address needs SMTPUTF8 (RFC 6531), which its mail server does not offer' };
  }
  const reply = formatReply(o.reply);
  const base = { layer: 'smtp' as const, dns: true, reply };
  // A provider's own reply (docs/smtp-replies.md) says which rule decided, in the reason; only when
  // that rule gives the class the outcome carries (a refused MAIL FROM is read otherwise).
  const explained = explainRcpt(o.reply);
  const rule = explained.cls === o.cls ? explained.rule : undefined;
  switch (o.cls) {
    case 'accepted':
      if (o.catchall?.catchall) {
        // High: the random probe and the address were both accepted by the primary MX in the same
        // session. Medium: both on a backup MX (backups often queue everything). Low: the probe
        // evidence came from another host than the answer.
        const confidence: Confidence = o.catchall.mxIndex !== o.mxIndex ? 'low' : o.mxIndex === 0 ? 'high' : 'medium';
        return { ...base, result: 'risky', layer: 'catchall', smtp: false, code: 'catch_all', catchall: confidence, reason: 'Catch-all domain: the mail server accepts any address, so this one cannot be confirmed' };
      }
      if (!o.catchall) {
        // The server accepted the address but would not answer the catch-all probe (deferred it,
        // or refused it on policy): whether it accepts everything is unknown, so the acceptance
        // proves nothing and is never sold as a High-Value Validation.
        return { ...base, result: 'unknown', smtp: false, code: 'catchall_unverified', reason: 'Mail server accepted the address but would not answer the catch-all check' };
      }
      return role
        ? { ...base, result: 'valid_role_based', smtp: true, code: 'role_account', reason: 'Role-based address: a shared inbox, not a person' }
        : { ...base, result: 'valid', smtp: true, code: 'accepted', reason: '' };
    case 'rejected':
      return { ...base, result: 'invalid', smtp: false, code: 'mailbox_not_found', reason: rule?.reason ?? 'Mailbox does not exist' };
    case 'malformed':
      return { ...base, result: 'invalid', smtp: false, code: 'address_malformed', reason: 'Mail server says the address is malformed' };
    case 'disabled':
      return { ...base, result: 'invalid', smtp: false, code: 'mailbox_disabled', reason: rule?.reason ?? 'Mailbox is disabled' };
    case 'full':
      return { ...base, result: 'unknown', smtp: false, code: 'mailbox_full', reason: 'Mailbox is full: it exists but cannot receive mail now' };
    case 'policy':
      return { ...base, result: 'unknown', smtp: false, code: 'smtp_policy_block', reason: rule?.reason ?? 'Mail server refused to verify the address (policy or block list)' };
    case 'tempfail':
      return { ...base, result: 'unknown', smtp: false, code: 'smtp_tempfail', reason: `${rule?.reason ?? 'Mail server deferred the check (greylisting or rate limit)'}, still deferred after ${o.attempts} attempts` };
    case 'unclassified':
      return { ...base, result: 'unknown', smtp: false, code: 'smtp_unclassified', reason: 'Mail server gave an answer that does not say whether the mailbox exists' };
  }
}

function dnsDecision(answer: Extract<Evidence, { layer: 'dns' }>['answer']): Decision {
  const base = { layer: 'dns' as const, dns: false, smtp: false };
  switch (answer.kind) {
    case 'nxdomain':
      return { ...base, result: 'invalid', code: 'nxdomain', reason: 'Domain does not exist (NXDOMAIN), so it has no MX records' };
    case 'no_records':
      return { ...base, result: 'invalid', code: 'no_mail_records', reason: 'Domain has no MX records and no A/AAAA record to fall back on' };
    case 'null_mx':
      return { ...base, result: 'invalid', code: 'null_mx', reason: 'Domain publishes a null MX (RFC 7505): it accepts no mail' };
    case 'servfail':
      return { ...base, result: 'unknown', code: 'dns_servfail', reason: 'DNS lookup failed (SERVFAIL); the domain may still be valid' };
    case 'timeout':
      return { ...base, result: 'unknown', code: 'dns_timeout', reason: 'DNS lookup timed out; the domain may still be valid' };
    case 'error':
      return { ...base, result: 'unknown', code: 'dns_error', reason: `DNS lookup failed (${answer.detail})` };
  }
}

export function buildVerdict(email: string, parsed: ParsedAddress, evidence: Evidence): Verdict {
  const ok = parsed.ok ? (parsed as Parsed) : undefined;
  const role = ok && !ok.quoted ? roleType(ok.local) : undefined;
  let d: Decision =
    evidence.layer === 'syntax'
      ? { result: 'invalid', layer: 'syntax', dns: false, smtp: false, code: 'invalid_syntax', reason: `Invalid syntax: ${evidence.reason}` }
      : evidence.layer === 'dns'
        ? dnsDecision(evidence.answer)
        : evidence.layer === 'suppression'
          ? SUPPRESSED[evidence.kind]
          : evidence.layer === 'processing'
            ? PROCESSING_FAILED
            : smtpDecision(evidence.outcome, role !== undefined);
  const disposable = ok ? isDisposable(ok.asciiDomain) : false;
  if (disposable && (d.result === 'valid' || d.result === 'valid_role_based' || d.result === 'risky')) {
    // A throwaway inbox is never worth a B2B send, whatever the server says
    // (docs/decisions/verification.md, "Disposable domains").
    d = { ...d, result: 'risky', smtp: d.result !== 'risky' && d.smtp, code: 'disposable_domain', reason: 'Disposable (temporary) email domain' };
  }
  const quality = QUALITY[d.result];
  const flags: string[] = [];
  if (ok?.quoted) flags.push('quoted_local_part');
  if (ok?.utf8Local) flags.push('utf8_local_part');
  if (ok?.idn) flags.push('idn_domain');
  if (evidence.layer === 'smtp' && evidence.implicitMx) flags.push('implicit_mx');
  if (evidence.layer === 'suppression') flags.push('suppressed');
  const v: Verdict = {
    email,
    result: d.result,
    reason: d.reason,
    reason_code: d.code,
    syntax_valid: evidence.layer !== 'syntax' && parsed.ok,
    dns_valid: d.dns,
    smtp_valid: d.smtp,
    is_role_based: role !== undefined,
    is_free_provider: ok ? isFreeProvider(ok.asciiDomain) : false,
    is_disposable: disposable,
    is_catchall: d.catchall !== undefined,
    b2b_outbound_quality: quality,
    b2b_quality: quality,
    validation_layer: d.layer,
    flags,
    chargeable: d.result === 'valid',
  };
  if (role) v.role_type = role;
  if (d.catchall) v.catchall_confidence = d.catchall;
  if (d.reply) v.smtp_response = d.reply;
  const suggestion = ok ? didYouMean(ok.local, ok.asciiDomain) : undefined;
  if (suggestion) v.did_you_mean = suggestion;
  return v;
}

/** The verdict of an address whose processing failed every attempt (a dead-lettered job message): `unknown`, `processing_failed`, free. */
export const processingFailedVerdict = (email: string): Verdict => buildVerdict(email, parseAddress(email), { layer: 'processing' });
