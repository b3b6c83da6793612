// One outcome row → a labelled event or a coded row error (the rows "Outcome evidence: …" of
// docs/decisions/outcomes.md). Pure, no I/O, never throws (a last-resort catch
// answers `invalid_row`). The raw diagnostic text is read for classification only: nothing of it
// is in the event (the fingerprint is a hash).
//
// Decisions (docs/decisions/outcomes.md, "Outcome evidence: …"):
// - Keys: the row fields and aliases, case-sensitive names; `lead_email` is `email`, `bounced_at`
//   is `occurred_at`, `enhanced_status` is `smtp_enhanced_code`. Strings are trimmed; an empty
//   string (a CSV's empty cell) is absent; a number is taken as its decimal text; any other type
//   in a recognized field is `invalid_row`. Unknown keys are ignored.
// - `metadata` (absent or null, or a JSON object; in CSV a cell holding a JSON object) may carry
//   the same recognized keys as strings; the row's own keys win, metadata fills gaps; anything
//   else is `invalid_metadata`.
// - `dsn_message`: an RFC 3464 message/delivery-status body (CRLF), or a whole bounce message (its
//   delivery-status part is used). Its per-message group gives Reporting-MTA, DSN-Gateway,
//   Received-From-MTA and Arrival-Date; the per-recipient group used is the one whose
//   Original-Recipient (else Final-Recipient) is `email`, none → `invalid_recipient_identity`.
//   The flat keys give the same fields one by one; a field given both ways with different values
//   is `invalid_dsn_semantics`.
// - A malformed comment rejects the row in the fields of rule 2; in a diagnostic it only keeps the
//   text opaque.
// - The issuer (rule 6) is stored as metadata; provider lookalikes are hosts naming a big provider
//   brand outside its domains (rfc3464.ts).
// - Label of a failed status (or, without a DSN action, of the enhanced code found): 4.x.x
//   bounced_soft; 5.1.1 and 5.1.10 bounced_hard; 5.7.x blocked_policy; 5.2.2 (mailbox full) and
//   5.4.x (routing) bounced_soft; every other 5.x.x unknown (5.1.2 bad destination system, 5.1.3
//   bad syntax, 5.1.6 moved, 5.2.1 disabled, 5.3.x, 5.5.x, 5.6.x, 5.0.0: not confirmed
//   recipient-not-found evidence). Without a code, diagnostic text: "user unknown"-like text with a
//   5xx basic code is bounced_hard; mailbox-full, DNS and routing text bounced_soft; spam, block
//   list, reputation, authentication and policy text blocked_policy; a 4xx basic code bounced_soft.
// - Times in the future: more than 5 minutes ahead of `now` (clock skew) for occurred_at,
//   Last-Attempt-Date and Arrival-Date alike.

import { createHash } from 'node:crypto';
import { OUTCOME_EVIDENCE_FIELDS, OUTCOME_SOURCES, OUTCOME_VALUES, WEBHOOK_SOURCES, type OutcomeLabel, type OutcomeRowError, type OutcomeSignal, type OutcomeSource, type OutcomeValue, type SuppressionKind } from '@svc/contracts';
import { parseAddress } from '@svc/verifier';
import { parseRfc3339, parseRfc822, type Instant } from './datetime.ts';
import { deliveryStatusOf, textPartOf } from './mime.ts';
import { DSN_STATUS, fieldGroups, mtaHost, recipientAddress, smtpDiagnostic, stripComments, typed, type FieldGroup } from './rfc3464.ts';
import type { OutcomeEvent, ParseOptions, ParseResult } from './types.ts';

/** The keys a row may carry. */
const FIELDS = ['email', 'lead_email', 'outcome', 'source', 'external_id', 'occurred_at', 'bounced_at', 'emailbison_lead_id', ...OUTCOME_EVIDENCE_FIELDS] as const;
type Field = (typeof FIELDS)[number];

const ACTIONS = ['failed', 'delayed', 'delivered', 'relayed', 'expanded'];
const BOUNCE_LIKE: readonly OutcomeValue[] = ['bounced', 'bounced_hard', 'bounced_soft', 'blocked', 'deferred'];
const REPLY_WORDS = new Set(['reply', 'replied', 'positive_reply', 'negative_reply', 'interested']);
const SENT_WORDS = new Set(['sent', 'accepted', 'success', 'ok', 'no_bounce']);
const HARD_WORDS = new Set(['hard', 'hard_bounce', 'invalid', 'undeliverable', 'bounce', 'bounced', 'rejected', 'permanent']);
const SOFT_WORDS = new Set(['soft', 'soft_bounce', 'transient', 'temporary', 'deferred', 'delayed', 'mailbox_full']);
const POLICY_WORDS = new Set(['blocked', 'block', 'spam', 'policy', 'blacklisted', 'blocklisted']);
/** How far ahead of `now` an event time may be (clock skew). */
const FUTURE_SKEW_US = 5 * 60 * 1_000_000;
const MAX_TEXT = 64 * 1024;
/** A whole bounce message with the original attached can be large; the import body is 5 MiB in all. */
const MAX_MESSAGE = 1024 * 1024;

class RowError extends Error {
  constructor(
    readonly code: OutcomeRowError,
    readonly reason: string,
  ) {
    super(reason);
  }
}
const fail = (code: OutcomeRowError, reason: string): never => {
  throw new RowError(code, reason);
};

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** The row's recognized values: trimmed strings, absent when empty. */
function readFields(row: Record<string, unknown>): Partial<Record<Field, string>> {
  const out: Partial<Record<Field, string>> = {};
  const take = (src: Record<string, unknown>, fromMetadata: boolean) => {
    for (const f of FIELDS) {
      if (out[f] !== undefined || !Object.hasOwn(src, f)) continue;
      const v = src[f];
      if (v === null || v === undefined) continue;
      let s: string;
      if (typeof v === 'string') s = v;
      else if (typeof v === 'number' && Number.isFinite(v)) s = String(v);
      else return fail(fromMetadata ? 'invalid_metadata' : 'invalid_row', `${fromMetadata ? 'metadata.' : ''}${f} must be a string`);
      if (s.length > (f === 'dsn_message' ? MAX_MESSAGE : MAX_TEXT)) return fail(fromMetadata ? 'invalid_metadata' : 'invalid_row', `${f} is too long`);
      // Only the DSN body keeps its line breaks and surrounding space (rule 4 reads them).
      const t = f === 'dsn_message' ? s : s.trim();
      if (t.trim() !== '') out[f] = t;
    }
  };
  take(row, false);
  if (Object.hasOwn(row, 'metadata') && row.metadata !== null && row.metadata !== undefined && row.metadata !== '') {
    let meta: unknown = row.metadata;
    if (typeof meta === 'string') {
      try {
        meta = JSON.parse(meta);
      } catch {
        return fail('invalid_metadata', 'metadata is not valid JSON');
      }
    }
    if (!isObject(meta)) return fail('invalid_metadata', 'metadata must be a JSON object');
    take(meta, true);
  }
  if (out.email === undefined && out.lead_email !== undefined) out.email = out.lead_email;
  if (out.occurred_at === undefined && out.bounced_at !== undefined) out.occurred_at = out.bounced_at;
  if (out.smtp_enhanced_code === undefined && out.enhanced_status !== undefined) out.smtp_enhanced_code = out.enhanced_status;
  return out;
}

/** A DSN field value with its comments removed (rule 2); a malformed comment rejects the row. */
function clean(name: string, v: string | undefined): string | undefined {
  if (v === undefined) return undefined;
  const s = stripComments(v);
  if (s === undefined) return fail('invalid_dsn_semantics', `${name} has a malformed comment`);
  return s === '' ? undefined : s;
}

/** The structured DSN fields, from dsn_message and the flat keys (conflicts refused). */
interface Dsn {
  action?: string;
  status?: string;
  diagnostic?: string;
  originalRecipient?: string;
  finalRecipient?: string;
  remoteMta?: string;
  reportingMta?: string;
  gateway?: string;
  receivedFrom?: string;
  arrival?: string;
  lastAttempt?: string;
  willRetry?: string;
  /** A dsn_message was given and parsed. */
  structured: boolean;
}

/**
 * The field groups of dsn_message: a delivery-status body, or a whole bounce message (its
 * delivery-status part). A whole message without one gives no groups: its body is prose for the
 * legacy reading (`prose`).
 */
function groupsOf(text: string, prose: string[]): FieldGroup[] {
  let body = text;
  // A whole message rather than a delivery-status body: its first block names no DSN field, or it
  // holds a header no delivery-status body has (MIME-Version, Content-Type, Received, Message-ID,
  // Subject). Some MTAs (Oracle Messaging Server) add an Original-recipient trace header to the
  // message's own header block, which alone does not make it a DSN body.
  const first = text.replace(/^(\r?\n)+/, '').split(/\r?\n\r?\n/, 1)[0]!.slice(0, 65536);
  const namesDsnField = /^(reporting-mta|final-recipient|original-recipient|action|arrival-date|dsn-gateway|received-from-mta|original-envelope-id|remote-mta|last-attempt-date)\s*:/im.test(first);
  const mailHeader = /^(content-type|received|from|date|message-id|mime-version|subject|to|return-path|delivered-to|x-[a-z0-9-]+)\s*:/im;
  const messageOnlyHeader = /^(content-type|mime-version|received|message-id|subject)\s*:/im;
  if (namesDsnField ? messageOnlyHeader.test(first) : mailHeader.test(first)) {
    const part = deliveryStatusOf(text);
    if (part === null) {
      prose.push(textPartOf(text).slice(0, MAX_TEXT));
      return [];
    }
    body = part;
  }
  const parsed = fieldGroups(body.replace(/^(\r\n)+/, ''));
  if ('problem' in parsed) return fail('invalid_classification_evidence', parsed.problem.reason);
  if (parsed.groups.length === 0) return fail('invalid_classification_evidence', 'dsn_message has no fields');
  return parsed.groups;
}

function recipientMatches(v: string | undefined, email: string): boolean | undefined {
  if (v === undefined) return undefined;
  const r = recipientAddress(v);
  if ('none' in r) return fail('invalid_recipient_identity', `a recipient field is ${r.none === 'foreign' ? 'not of type rfc822' : 'malformed'}`);
  return r.address.toLowerCase() === email.toLowerCase();
}

function readDsn(f: Partial<Record<Field, string>>, email: string, prose: string[]): Dsn {
  const dsn: Dsn = { structured: false };
  let perMessage: FieldGroup = new Map();
  let perRecipient: FieldGroup = new Map();
  if (f.dsn_message !== undefined) {
    const groups = groupsOf(f.dsn_message, prose);
    dsn.structured = groups.length > 0;
    const isRecipientGroup = (g: FieldGroup) => g.has('final-recipient') || g.has('original-recipient') || g.has('action');
    let recipients: FieldGroup[];
    if (groups.length === 0) recipients = [];
    else if (isRecipientGroup(groups[0]!)) recipients = groups;
    else {
      perMessage = groups[0]!;
      recipients = groups.slice(1);
    }
    if (dsn.structured && recipients.length > 0) {
      // The group whose Original-Recipient (else Final-Recipient) is this row's address.
      const mine = recipients.filter((g) => {
        const o = clean('Original-Recipient', g.get('original-recipient'));
        const which = o ?? clean('Final-Recipient', g.get('final-recipient'));
        return which === undefined ? recipients.length === 1 : recipientMatches(which, email) === true;
      });
      if (mine.length === 0) return fail('invalid_recipient_identity', 'no recipient of the DSN is the row\'s email');
      perRecipient = mine[0]!;
    }
  }
  const pick = (name: string, flat: string | undefined, fromDsn: string | undefined): string | undefined => {
    const a = clean(name, flat);
    const b = clean(name, fromDsn);
    if (a !== undefined && b !== undefined && a.toLowerCase() !== b.toLowerCase()) return fail('invalid_dsn_semantics', `${name} differs between dsn_message and the row`);
    return a ?? b;
  };
  dsn.action = pick('Action', f.action, perRecipient.get('action'));
  // A flat `status` is a DSN Status only beside an RFC action; otherwise vendor text (legacy).
  const flatStatus = f.action !== undefined || perRecipient.has('action') ? (f.status ?? f.smtp_enhanced_code) : f.smtp_enhanced_code;
  dsn.status = pick('Status', flatStatus, perRecipient.get('status'));
  dsn.originalRecipient = pick('Original-Recipient', f.original_recipient, perRecipient.get('original-recipient'));
  dsn.finalRecipient = pick('Final-Recipient', f.final_recipient, perRecipient.get('final-recipient'));
  dsn.remoteMta = pick('Remote-MTA', f.remote_mta, perRecipient.get('remote-mta'));
  dsn.reportingMta = pick('Reporting-MTA', f.reporting_mta, perMessage.get('reporting-mta'));
  dsn.gateway = pick('DSN-Gateway', f.dsn_gateway, perMessage.get('dsn-gateway'));
  dsn.receivedFrom = pick('Received-From-MTA', f.received_from_mta, perMessage.get('received-from-mta'));
  dsn.arrival = pick('Arrival-Date', f.arrival_date, perMessage.get('arrival-date'));
  dsn.lastAttempt = pick('Last-Attempt-Date', f.last_attempt_date, perRecipient.get('last-attempt-date'));
  dsn.willRetry = pick('Will-Retry-Until', f.will_retry_until, perRecipient.get('will-retry-until'));
  const diag = f.diagnostic_code ?? perRecipient.get('diagnostic-code');
  if (diag !== undefined) dsn.diagnostic = diag;
  return dsn;
}

const LEAD_LINE = /^[ \t]*<?([^\s<>:@]+@[^\s<>:@]+?)>?:(?:[ \t]|$)/;

/**
 * The part of a plain-text bounce that is about the row's address. Bounces without a DSN part
 * (qmail, OpenSMTPD, Postfix's text) give one section per recipient, each led by a line that starts
 * with the address and a colon (`<a@example.com>:` or `a@example.com: 550 …`) and ending at the
 * next such line or a blank line. Text with no such line is read whole; text whose lead lines all
 * name other addresses says nothing about this one (''): another recipient's reply is no evidence
 * about the row's mailbox (a hard bounce is confirmed evidence about that mailbox only).
 */
export function ownSection(text: string, addresses: string[]): string {
  const mine = new Set(addresses.map((a) => a.toLowerCase()));
  const lines = text.split(/\r\n|\r|\n/);
  let leads = 0;
  const kept: string[] = [];
  let inside = false;
  for (const line of lines) {
    const lead = line.length <= 1024 ? LEAD_LINE.exec(line) : null;
    if (lead) {
      leads++;
      inside = mine.has(lead[1]!.toLowerCase());
    } else if (line.trim() === '') inside = false;
    if (inside) kept.push(line);
  }
  return leads === 0 ? text : kept.join('\n');
}

/** What a code says (the labels of codes, decisions at the top). */
function labelOfCode(code: string): { label: OutcomeLabel; evidence: string } {
  const [cls, subject, detail] = code.split('.').map(Number) as [number, number, number];
  if (cls === 4) return { label: 'bounced_soft', evidence: 'temporary_status' };
  if (cls === 2) return { label: 'unknown', evidence: 'success_status' };
  if (subject === 1 && (detail === 1 || detail === 10)) return { label: 'bounced_hard', evidence: 'recipient_not_found' };
  if (subject === 7) return { label: 'blocked_policy', evidence: 'policy_status' };
  if (subject === 2 && detail === 2) return { label: 'bounced_soft', evidence: 'mailbox_full' };
  if (subject === 4) return { label: 'bounced_soft', evidence: 'routing' };
  return { label: 'unknown', evidence: 'unspecific_status' };
}

const NOT_FOUND_TEXT = /\b(user unknown|unknown user|no such (user|mailbox|recipient|address)|(mailbox|recipient|user|address|account)( address)? (does not exist|doesn't exist|not found|unknown)|invalid (recipient|mailbox)|unknown (recipient|mailbox)|recipient (address )?rejected: (user unknown|unknown|undeliverable)|no mailbox here|user not found|mailbox not found)\b/i;
const FULL_TEXT = /\b(mailbox (is )?full|over ?quota|quota exceeded|insufficient (system )?storage|mailbox size limit)\b/i;
const POLICY_TEXT = /\b(spam|blocked|block ?list|blacklist|black list|reputation|policy|not authori[sz]ed|authentication|dmarc|spf|dkim|denied|rejected by (the )?recipient's (server|system) for policy|listed (at|in|on))\b/i;
const DNS_TEXT = /\b(host (or domain name )?not found|domain (name )?not found|name service error|dns|no mx|nxdomain|unrouteable|unroutable|routing|unable to route|mail loop)\b/i;

/** The legacy reading of untyped vendor text: codes, then words. */
function legacy(text: string): { enhanced?: string; basic?: string; label?: OutcomeLabel; evidence?: string; byCode?: true } {
  const enh = /(?:^|[^\d.])([245])\.(\d{1,3})\.(\d{1,3})(?![\d.])/.exec(text);
  const basic = /(?:^|[^\d])([245]\d\d)(?![\d])/.exec(text)?.[1];
  const enhanced = enh ? `${enh[1]}.${Number(enh[2])}.${Number(enh[3])}` : undefined;
  const out: { enhanced?: string; basic?: string; label?: OutcomeLabel; evidence?: string; byCode?: true } = {};
  if (enhanced) out.enhanced = enhanced;
  if (basic) out.basic = basic;
  if (enhanced && !/^5\.0\.0$/.test(enhanced)) {
    const l = labelOfCode(enhanced);
    if (l.label !== 'unknown') return { ...out, ...l, byCode: true };
  }
  if (FULL_TEXT.test(text)) return { ...out, label: 'bounced_soft', evidence: 'mailbox_full_text' };
  if (basic?.startsWith('4') || enhanced?.startsWith('4')) return { ...out, label: 'bounced_soft', evidence: 'temporary_code' };
  // Words alone confirm a hard bounce only beside a 5xx reply whose enhanced code, if any, has no
  // specific detail (X.Y.0, like qmail's #5.5.0): a specific one that says otherwise (5.2.1
  // "mailbox disabled" worded "User Unknown") wins.
  if (NOT_FOUND_TEXT.test(text) && (basic?.startsWith('5') || enhanced?.startsWith('5')) && (enhanced === undefined || enhanced.endsWith('.0'))) return { ...out, label: 'bounced_hard', evidence: 'diagnostic_text' };
  if (POLICY_TEXT.test(text) && (basic === undefined || basic.startsWith('5')) && !enhanced?.startsWith('4')) return { ...out, label: 'blocked_policy', evidence: 'policy_text' };
  if (DNS_TEXT.test(text) && basic === undefined && enhanced === undefined) return { ...out, label: 'bounced_soft', evidence: 'dns_text' };
  return out;
}

/** A coarse vendor word (bounce_type, or a legacy status word): its label, when it names one. */
function coarse(word: string | undefined): { label: OutcomeLabel; signal?: OutcomeSignal; evidence: string } | undefined {
  if (word === undefined) return undefined;
  const w = word.toLowerCase().replace(/[\s-]+/g, '_');
  if (REPLY_WORDS.has(w)) return { label: 'delivered', evidence: 'reply' };
  if (w === 'delivered') return { label: 'delivered', evidence: 'delivery' };
  if (SENT_WORDS.has(w)) return { label: 'unknown', signal: 'sent', evidence: 'sent' };
  if (w === 'opened' || w === 'open' || w === 'clicked' || w === 'click') return { label: 'unknown', signal: 'open', evidence: 'open' };
  if (SOFT_WORDS.has(w)) return { label: 'bounced_soft', evidence: 'coarse_soft' };
  if (POLICY_WORDS.has(w)) return { label: 'blocked_policy', evidence: 'coarse_policy' };
  if (HARD_WORDS.has(w)) return { label: 'unknown', evidence: 'coarse_bounce' };
  return undefined;
}

function checkCode(name: string, v: string | undefined, form: RegExp): string | undefined {
  if (v === undefined) return undefined;
  const s = stripComments(v) ?? v;
  if (!form.test(s)) return fail('invalid_classification_evidence', `${name} is not a valid code`);
  return s;
}

function timeOf(name: string, v: string | undefined, nowUs: number, future: boolean): Instant | undefined {
  if (v === undefined) return undefined;
  const i = parseRfc822(v);
  if (!i) return fail('invalid_timestamp', `${name} is not an RFC 5322 date-time with a numeric zone (and a matching weekday)`);
  if (!future && i.us > nowUs + FUTURE_SKEW_US) return fail('invalid_timestamp', `${name} is in the future`);
  return i;
}

const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');

function parse(row: unknown, opts: ParseOptions): OutcomeEvent {
  if (!isObject(row)) return fail('invalid_row', 'A row must be a JSON object');
  const f = readFields(row);
  const nowUs = (opts.now ?? new Date()).getTime() * 1000;

  const written = f.email;
  if (written === undefined) return fail('invalid_email', 'email is required');
  const parsed = parseAddress(written);
  if (!parsed.ok) return fail('invalid_email', `email is not a valid address: ${parsed.reason}`);
  const mailbox = `${parsed.local}@${parsed.asciiDomain}`;

  const outcome = f.outcome?.toLowerCase() as OutcomeValue | undefined;
  if (outcome === undefined || !(OUTCOME_VALUES as readonly string[]).includes(outcome)) return fail('missing_outcome', `outcome must be one of ${OUTCOME_VALUES.join(', ')}`);
  const source = (f.source?.toLowerCase() ?? opts.defaultSource) as OutcomeSource | undefined;
  if (source === undefined || !(OUTCOME_SOURCES as readonly string[]).includes(source)) return fail('invalid_source', `source must be one of ${OUTCOME_SOURCES.join(', ')}`);
  const externalId = f.external_id;
  if (externalId === undefined) return fail('missing_external_id', 'external_id is required (an immutable provider event id)');
  if (externalId.length > 255 || !/^[\x20-\x7e]+$/.test(externalId)) return fail('invalid_external_id', 'external_id must be 1-255 printable ASCII characters');

  let occurred: Instant | undefined;
  if (f.occurred_at !== undefined) {
    occurred = parseRfc3339(f.occurred_at);
    if (!occurred) return fail('invalid_timestamp', 'occurred_at must be an RFC 3339 date-time (e.g. 2026-01-05T10:00:00Z)');
    if (occurred.us > nowUs + FUTURE_SKEW_US) return fail('invalid_timestamp', 'occurred_at is in the future');
  }

  const messageProse: string[] = [];
  const dsn = readDsn(f, written, messageProse);
  // Rule 1: the action.
  let action: string | undefined;
  if (dsn.action !== undefined) {
    action = dsn.action.toLowerCase();
    if (!ACTIONS.includes(action)) return fail('invalid_dsn_semantics', 'Action must be failed, delayed, delivered, relayed or expanded');
  }
  // Rule 3: the status, beside a recognized action.
  let status: string | undefined;
  if (dsn.status !== undefined) {
    if (action !== undefined) {
      if (!DSN_STATUS.test(dsn.status)) return fail('invalid_dsn_semantics', 'Status must be class.subject.detail (e.g. 5.1.1)');
      status = dsn.status;
    } else status = checkCode('smtp_enhanced_code', dsn.status, DSN_STATUS);
  }
  const smtpCode = checkCode('smtp_code', f.smtp_code, /^[245]\d\d$/);

  // Rule 5: recipients.
  const orig = recipientMatches(dsn.originalRecipient, written);
  const fin = recipientMatches(dsn.finalRecipient, written);
  if (orig === false) return fail('invalid_recipient_identity', 'Original-Recipient is not the row\'s email');
  if (orig === undefined && fin === false) return fail('invalid_recipient_identity', 'Final-Recipient is not the row\'s email');

  // Rule 6: the issuer.
  let issuer: string | null = null;
  if (dsn.remoteMta !== undefined) {
    const r = mtaHost(dsn.remoteMta);
    if ('host' in r) issuer = r.host;
  } else if (dsn.reportingMta !== undefined) {
    const r = mtaHost(dsn.reportingMta);
    if ('host' in r) issuer = r.host;
  }

  // Rule 9: DSN dates.
  const lastAttempt = timeOf('Last-Attempt-Date', dsn.lastAttempt, nowUs, false);
  const arrival = timeOf('Arrival-Date', dsn.arrival, nowUs, false);
  const willRetry = timeOf('Will-Retry-Until', dsn.willRetry, nowUs, true);
  if (arrival && lastAttempt && arrival.us > lastAttempt.us) return fail('invalid_dsn_semantics', 'Arrival-Date is later than Last-Attempt-Date');
  if (willRetry) {
    if (action !== 'delayed') return fail('invalid_dsn_semantics', 'Will-Retry-Until is allowed only with Action delayed');
    if ((arrival && willRetry.us < arrival.us) || (lastAttempt && willRetry.us < lastAttempt.us)) return fail('invalid_dsn_semantics', 'Will-Retry-Until is earlier than Arrival-Date or Last-Attempt-Date');
  }
  const when = occurred ?? lastAttempt;
  if (!when && (WEBHOOK_SOURCES as readonly string[]).includes(source)) return fail('missing_event_timestamp', 'webhook sources need occurred_at or last_attempt_date');

  // Rule 7: the diagnostic.
  let diagCode: string | undefined;
  let diagText = '';
  let diagOpaque = false;
  if (dsn.diagnostic !== undefined) {
    const t = typed(dsn.diagnostic);
    if (t?.type === 'smtp') {
      // Comments first (a malformed one leaves the text as it is), then the codes at its start.
      const d = smtpDiagnostic(stripComments(t.value) ?? t.value);
      diagCode = d.enhanced;
      diagText = `${d.basic ?? ''} ${d.enhanced ?? ''} ${d.text}`;
    } else if (t) diagOpaque = true; // a foreign diagnostic type (x-unix, X-Postfix…) stays opaque
    else diagText = dsn.diagnostic; // untyped vendor text: the legacy parser
  }
  const own = (text: string | undefined) => (text === undefined ? undefined : ownSection(text, [written, mailbox]));
  const prose = [diagText, own(f.bounce_reason), own(f.diagnostic), action === undefined ? f.status : undefined, smtpCode, ...messageProse.map(own)].filter((x): x is string => x !== undefined && x !== '').join(' ');

  // The label.
  let label: OutcomeLabel;
  let evidence: string;
  let signal: OutcomeSignal | null = null;
  // A Status that only names its class (X.0.0, "not specific") gives way to a typed smtp diagnostic's
  // own enhanced code of the same class: that code decides, and is the one reported.
  const decisive = status !== undefined && /^[45]\.0\.0$/.test(status) && diagCode !== undefined && diagCode[0] === status[0] && !/^[45]\.0\.0$/.test(diagCode) ? diagCode : (status ?? diagCode);
  let code: string | null = decisive ?? null;
  const bounceLike = BOUNCE_LIKE.includes(outcome);
  const byCode = (c: string) => labelOfCode(c);
  if (action !== undefined && (action === 'delivered' || action === 'relayed' || action === 'expanded')) {
    if (bounceLike) {
      label = 'unknown';
      evidence = 'dsn_action_not_failure';
    } else if (outcome === 'delivered' || outcome === 'replied') {
      label = 'delivered';
      evidence = outcome === 'replied' ? 'reply' : 'delivery';
    } else ({ label, evidence } = outcomeOnly(outcome, f, (s) => (signal = s)));
  } else if (action === 'delayed') {
    label = 'bounced_soft';
    evidence = 'dsn_delayed';
  } else if (action === 'failed') {
    const c = decisive;
    if (c !== undefined && c !== '5.0.0') ({ label, evidence } = byCode(c));
    else {
      const l = legacy(prose);
      if (l.label) ({ label, evidence } = { label: l.label, evidence: l.evidence! });
      else if (c?.startsWith('4')) ({ label, evidence } = { label: 'bounced_soft', evidence: 'temporary_status' });
      else ({ label, evidence } = { label: 'unknown', evidence: 'dsn_failed_unspecific' });
      code = l.byCode ? l.enhanced! : (code ?? l.enhanced ?? null);
    }
  } else if (outcome === 'delivered' || outcome === 'replied') {
    label = 'delivered';
    evidence = outcome === 'replied' ? 'reply' : 'delivery';
  } else if (bounceLike) {
    const c = decisive;
    const l = c === undefined || c === '5.0.0' ? legacy(prose) : undefined;
    if (c !== undefined && c !== '5.0.0' && byCode(c).label !== 'unknown') ({ label, evidence } = byCode(c));
    else if (l?.label) ({ label, evidence } = { label: l.label, evidence: l.evidence! });
    else {
      const w = coarse(f.bounce_type) ?? (action === undefined ? coarse(f.status) : undefined);
      if (w && w.label !== 'unknown' && w.label !== 'delivered') ({ label, evidence } = w);
      else if (diagOpaque) ({ label, evidence } = { label: 'unknown', evidence: 'opaque_diagnostic' });
      else if (outcome === 'deferred' || outcome === 'bounced_soft') ({ label, evidence } = { label: 'bounced_soft', evidence: 'coarse_soft' });
      else if (outcome === 'blocked') ({ label, evidence } = { label: 'blocked_policy', evidence: 'coarse_policy' });
      else ({ label, evidence } = { label: 'unknown', evidence: 'coarse_bounce' });
    }
    code = l?.label !== undefined && l.byCode && label === l.label ? l.enhanced! : (code ?? l?.enhanced ?? null);
  } else ({ label, evidence } = outcomeOnly(outcome, f, (s) => (signal = s)));

  const suppresses: SuppressionKind | null = label === 'bounced_hard' ? 'hard_bounce' : outcome === 'complaint' ? 'complaint' : outcome === 'unsubscribed' ? 'unsubscribed' : null;
  const occurredText = when?.text ?? null;
  const content = {
    mailbox,
    outcome,
    source,
    occurred_at: occurredText,
    action: action ?? null,
    code,
    label,
    issuer,
    inputs: [f.dsn_message, f.diagnostic_code, f.bounce_reason, f.diagnostic, f.status, f.bounce_type, f.smtp_code, f.smtp_enhanced_code, f.arrival_date, f.last_attempt_date, f.will_retry_until, f.original_recipient, f.final_recipient, f.remote_mta, f.reporting_mta, f.dsn_gateway, f.received_from_mta, f.dsn_subject].map((x) => x ?? null),
  };
  return {
    email: written,
    mailbox,
    email_hash: sha256(mailbox),
    domain: parsed.asciiDomain,
    outcome,
    source,
    external_id: externalId,
    occurred_at: occurredText,
    occurred_at_us: when?.us ?? null,
    local_zone_unknown: when?.zoneUnknown ?? false,
    action: action ?? null,
    smtp_enhanced_code: code,
    label,
    suppresses,
    signal,
    issuer,
    evidence,
    fingerprint: sha256(JSON.stringify(content)),
  };
}

/** Outcomes that are not bounces: their own label and signal. */
function outcomeOnly(outcome: OutcomeValue, f: Partial<Record<Field, string>>, setSignal: (s: OutcomeSignal) => void): { label: OutcomeLabel; evidence: string } {
  switch (outcome) {
    case 'delivered':
      return { label: 'delivered', evidence: 'delivery' };
    case 'replied':
      return { label: 'delivered', evidence: 'reply' };
    case 'opened':
    case 'clicked':
      setSignal('open');
      return { label: 'unknown', evidence: 'open' };
    case 'sent':
      setSignal('sent');
      return { label: 'unknown', evidence: 'sent' };
    case 'complaint':
      return { label: 'unknown', evidence: 'complaint' };
    case 'unsubscribed':
      return { label: 'unknown', evidence: 'unsubscribe' };
    default: {
      const w = coarse(f.bounce_type);
      return w ? { label: w.label, evidence: w.evidence } : { label: 'unknown', evidence: 'outcome' };
    }
  }
}

/** One raw row → a labelled event, or a row error with its code (OUTCOME_ROW_ERRORS). Never throws. */
export function parseOutcomeRow(row: unknown, opts: ParseOptions = {}): ParseResult {
  try {
    return { ok: true, event: parse(row, opts) };
  } catch (err) {
    if (err instanceof RowError) return { ok: false, code: err.code, reason: err.reason };
    return { ok: false, code: 'invalid_row', reason: 'The row could not be read' };
  }
}
