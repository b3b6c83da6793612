// The evidence parser (docs/decisions/outcomes.md, "Outcome evidence"): one test per DSN rule
// (accepted and rejected variants), per label and per row error code, each with
// the exact label or code; then a property test (any row: a label or a coded error, never an
// exception) and a fuzz test of the DSN parser (mutated DSNs, many seeds).

import t from 'tap';
import { OUTCOME_LABELS, OUTCOME_ROW_ERRORS } from '@svc/contracts';
import { parseOutcomeRow, type ParseResult } from '../src/index.ts';
import { seededRandom } from '../../../test/helpers/random.ts';

const NOW = new Date('2026-03-01T12:00:00Z');
const base = { email: 'jane.doe@example.com', outcome: 'bounced', source: 'smtp_log', external_id: 'ev-1' };
const parse = (row: Record<string, unknown>): ParseResult => parseOutcomeRow({ ...base, ...row }, { now: NOW });
const label = (row: Record<string, unknown>): string => {
  const r = parse(row);
  return r.ok ? r.event.label : `error:${r.code}`;
};
const code = (row: Record<string, unknown>): string => {
  const r = parse(row);
  return r.ok ? `label:${r.event.label}` : r.code;
};

/** A delivery-status body: per-message fields, a blank line, the per-recipient fields; CRLF. */
const dsn = (perRecipient: string[], perMessage: string[] = ['Reporting-MTA: dns; mx.example.net']): string => [...perMessage, '', ...perRecipient, ''].join('\r\n');
const recipient = (extra: string[]): string[] => ['Final-Recipient: rfc822; jane.doe@example.com', ...extra];

t.test('rule 1: Action is one of five, case-insensitive; anything else rejects', async (t) => {
  t.equal(label({ action: 'FAILED', smtp_enhanced_code: '5.1.1' }), 'bounced_hard');
  t.equal(label({ action: 'Delayed', smtp_enhanced_code: '4.4.1' }), 'bounced_soft');
  for (const a of ['delivered', 'relayed', 'expanded']) t.equal(label({ action: a }), 'unknown', a);
  t.equal(code({ action: 'bounced' }), 'invalid_dsn_semantics');
  t.equal(code({ dsn_message: dsn(recipient(['Action: exploded', 'Status: 5.1.1'])) }), 'invalid_dsn_semantics');
});

t.test('rule 2: comments are removed and never supply a value; a malformed one rejects', async (t) => {
  t.equal(label({ action: 'failed (permanent)', smtp_enhanced_code: '5.1.1 (no such user)' }), 'bounced_hard');
  t.equal(label({ dsn_message: dsn(recipient(['Action: (was delayed) failed', 'Status: 5.1.1'])) }), 'bounced_hard');
  t.equal(label({ dsn_message: dsn(recipient(['Action: failed', 'Status: (5.1.1) 4.4.7'])) }), 'bounced_soft', 'the status in the comment is not read');
  t.equal(code({ dsn_message: dsn(recipient(['Action: (failed)', 'Status: 5.1.1'])) }), 'label:bounced_hard', 'an action that is only a comment is absent: the status alone decides');
  t.equal(code({ action: 'failed (unbalanced', smtp_enhanced_code: '5.1.1' }), 'invalid_dsn_semantics');
  t.equal(code({ action: 'failed', smtp_enhanced_code: '5.1.1)' }), 'invalid_dsn_semantics');
  t.equal(code({ dsn_message: dsn(recipient(['Action: failed', 'Status: 5.1.1', 'Remote-MTA: dns; (mx.example.org'])) }), 'invalid_dsn_semantics');
  t.equal(label({ action: 'failed', smtp_enhanced_code: '5.1.1 (nested (comment) here)' }), 'bounced_hard');
});

t.test('rule 3: Status form beside an RFC action; failed + 4.x is soft; vendor status without action is legacy', async (t) => {
  t.equal(label({ action: 'failed', status: '5.1.10' }), 'bounced_hard');
  t.equal(label({ action: 'failed', status: '4.2.2' }), 'bounced_soft');
  const soft = parse({ action: 'failed', status: '4.0.0' });
  t.ok(soft.ok && soft.event.suppresses === null, 'failed + 4.x creates no suppression');
  for (const bad of ['5.01.1', '5.1.01', '5.1', '6.1.1', '5.1.1234', 'x.1.1', '5.1.1.1']) t.equal(code({ action: 'failed', status: bad }), 'invalid_dsn_semantics', bad);
  t.equal(label({ status: 'hard bounce: mailbox does not exist, 550 5.1.1' }), 'bounced_hard', 'vendor text: legacy parser');
  t.equal(label({ status: 'soft' }), 'bounced_soft', 'a coarse vendor word');
});

t.test('rule 4: folding is CRLF + SP/HTAB only; bare LF, bare CR, unindented continuation reject the evidence', async (t) => {
  t.equal(label({ dsn_message: dsn(recipient(['Action: failed', 'Status:', '\t5.1.1', 'Diagnostic-Code: smtp; 550 5.1.1', '  user unknown'])) }), 'bounced_hard');
  t.equal(code({ dsn_message: dsn(recipient(['Action: failed', 'Status: 5.1.1'])).replace(/\r\n/g, '\n') }), 'invalid_classification_evidence');
  t.equal(code({ dsn_message: dsn(recipient(['Action: failed', 'Status: 5.1.1'])).replace('Action', 'X\rAction') }), 'invalid_classification_evidence');
  t.equal(code({ dsn_message: dsn(recipient(['Action: failed', 'Status: 5.1.1', 'Diagnostic-Code: smtp; 550 5.1.1', 'user unknown'])) }), 'invalid_classification_evidence');
});

t.test('rule 5: recipients must be rfc822 and agree with email (Original-Recipient first)', async (t) => {
  t.equal(label({ dsn_message: dsn(['Final-Recipient: RFC822; <JANE.DOE@example.com>', 'Action: failed', 'Status: 5.1.1']) }), 'bounced_hard', 'type and address case-insensitive, brackets tolerated');
  t.equal(label({ dsn_message: dsn(['Original-Recipient: rfc822; jane.doe@example.com', 'Final-Recipient: rfc822; jd@forward.example', 'Action: failed', 'Status: 5.1.1']) }), 'bounced_hard', 'Original-Recipient matches: Final may differ');
  t.equal(code({ dsn_message: dsn(['Original-Recipient: rfc822; other@example.com', 'Final-Recipient: rfc822; jane.doe@example.com', 'Action: failed', 'Status: 5.1.1']) }), 'invalid_recipient_identity');
  t.equal(code({ dsn_message: dsn(['Final-Recipient: rfc822; other@example.com', 'Action: failed', 'Status: 5.1.1']) }), 'invalid_recipient_identity');
  t.equal(code({ dsn_message: dsn(['Final-Recipient: x400; jane.doe@example.com', 'Action: failed', 'Status: 5.1.1']) }), 'invalid_recipient_identity', 'foreign type');
  t.equal(code({ dsn_message: dsn(['Final-Recipient: rfc822; not an address', 'Action: failed', 'Status: 5.1.1']) }), 'invalid_recipient_identity', 'malformed');
  t.equal(code({ action: 'failed', status: '5.1.1', final_recipient: 'rfc822; jane.doe@example.com', dsn_message: dsn(['Final-Recipient: rfc822; jane.doe@example.com', 'Action: failed', 'Status: 4.4.1']) }), 'invalid_dsn_semantics', 'conflicting status between the row and the DSN');
  // Several recipient groups: the one of this address is used.
  const two = dsn(['Final-Recipient: rfc822; other@example.com', 'Action: failed', 'Status: 5.7.1', '', 'Final-Recipient: rfc822; jane.doe@example.com', 'Action: failed', 'Status: 5.1.1']);
  t.equal(label({ dsn_message: two }), 'bounced_hard');
});

t.test('rule 6: the issuer is a valid Remote-MTA, else Reporting-MTA; lookalikes, IPs, foreign types attribute nothing', async (t) => {
  const issuer = (row: Record<string, unknown>) => {
    const r = parse({ action: 'failed', status: '5.1.1', ...row });
    return r.ok ? r.event.issuer : `error:${r.code}`;
  };
  t.equal(issuer({ remote_mta: 'dns; MX1.Example.NET.', reporting_mta: 'dns; relay.example.org' }), 'mx1.example.net');
  t.equal(issuer({ reporting_mta: 'dns; relay.example.org' }), 'relay.example.org', 'Reporting-MTA when Remote-MTA is absent');
  t.equal(issuer({ remote_mta: 'dns; [192.0.2.1]', reporting_mta: 'dns; relay.example.org' }), null, 'an invalid Remote-MTA blocks the fallback');
  t.equal(issuer({ remote_mta: 'x-local; mx1', reporting_mta: 'dns; relay.example.org' }), null, 'foreign type');
  t.equal(issuer({ remote_mta: 'dns; gmail-smtp-in.l.google.com' }), 'gmail-smtp-in.l.google.com');
  t.equal(issuer({ remote_mta: 'dns; gmail.com.attacker.example' }), null, 'a provider lookalike');
  t.equal(issuer({ remote_mta: 'dns; not_a_host' }), null, 'malformed host');
  t.equal(issuer({ dsn_gateway: 'dns; gw.example.org', received_from_mta: 'dns; in.example.org' }), null, 'gateways are never the issuer');
});

t.test('rule 7: typed diagnostics (comments first; foreign types opaque), untyped ones through the legacy parser', async (t) => {
  t.equal(label({ diagnostic_code: 'smtp; 550 5.1.1 (comment 5.7.1) <jane.doe@example.com>: user unknown' }), 'bounced_hard');
  t.equal(label({ diagnostic_code: 'smtp; 550 5.7.1 Message rejected as spam' }), 'blocked_policy');
  t.equal(label({ diagnostic_code: 'X-Postfix; user unknown 550 5.1.1' }), 'unknown', 'a foreign type stays opaque');
  t.equal(label({ diagnostic_code: '550 5.1.1 The email account that you tried to reach does not exist' }), 'bounced_hard', 'untyped: legacy');
  t.equal(label({ diagnostic_code: '552 Mailbox full' }), 'bounced_soft');
  t.equal(label({ bounce_reason: 'Host or domain name not found. Name service error for name=example.com' }), 'bounced_soft', 'a DNS failure without a status');
});

t.test('rule 7: a Status of X.0.0 gives way to the typed diagnostic\'s specific code of its class, which is reported', async (t) => {
  const ev = (status: string, diag: string) => {
    const r = parse({ dsn_message: dsn(recipient(['Action: failed', `Status: ${status}`, `Diagnostic-Code: smtp; ${diag}`])) });
    return r.ok ? [r.event.label, r.event.smtp_enhanced_code] : [r.code, null];
  };
  t.strictSame(ev('5.0.0', '550 5.1.1 user unknown'), ['bounced_hard', '5.1.1']);
  t.strictSame(ev('5.0.0', '550 5.7.1 rejected by policy'), ['blocked_policy', '5.7.1']);
  t.strictSame(ev('5.0.0', '550 4.2.2 over quota'), ['bounced_soft', '4.2.2'], 'another class: the legacy reading of the diagnostic decides (soft, no suppression), and its code is reported');
  t.strictSame(ev('5.2.1', '550 5.1.1 user unknown'), ['unknown', '5.2.1'], 'a specific Status keeps deciding');
  t.strictSame(ev('4.0.0', '450 4.2.2 mailbox full'), ['bounced_soft', '4.2.2']);
});

t.test('legacy words: "user unknown" beside a specific enhanced code that says otherwise is not a hard bounce', async (t) => {
  const ev = (text: string) => {
    const r = parse({ diagnostic: text });
    return r.ok ? [r.event.label, r.event.smtp_enhanced_code, r.event.suppresses] : [r.code];
  };
  t.strictSame(ev('550 5.2.1 <jane.doe@example.com>... User Unknown'), ['unknown', '5.2.1', null]);
  t.strictSame(ev('550 Unknown user jane.doe@example.com. (#5.5.0)'), ['bounced_hard', '5.5.0', 'hard_bounce'], 'X.Y.0 names no detail: the words decide');
  t.strictSame(ev('550 User unknown'), ['bounced_hard', null, 'hard_bounce']);
});

t.test('plain-text bounces: only the section led by the row\'s address is read', async (t) => {
  const text = [
    'I was not able to deliver your message to the following addresses.',
    '',
    '<other.person@example.com>:',
    'Remote host said: 550 5.1.1 <other.person@example.com>... User Unknown',
    '',
    '<jane.doe@example.com>:',
    'Remote host said: 452 4.2.2 <jane.doe@example.com>... Mailbox full',
    '',
    '--- Below this line is a copy of the message.',
  ].join('\r\n');
  const ev = (email: string, key: string) => {
    const r = parseOutcomeRow({ ...base, email, [key]: text }, { now: NOW });
    return r.ok ? [r.event.label, r.event.smtp_enhanced_code] : [r.code];
  };
  for (const key of ['diagnostic', 'bounce_reason']) {
    t.strictSame(ev('jane.doe@example.com', key), ['bounced_soft', '4.2.2'], key);
    t.strictSame(ev('Other.Person@example.com', key), ['bounced_hard', '5.1.1'], `${key}: addresses compare case-insensitively`);
    t.strictSame(ev('third@example.com', key), ['unknown', null], `${key}: an address no section names gets nothing from the text`);
  }
  t.strictSame(ev('third@example.com', 'diagnostic').length, 2);
  const single = 'Delivery failed: 550 5.1.1 user unknown';
  t.equal(parseOutcomeRow({ ...base, diagnostic: single }, { now: NOW }).ok && (parseOutcomeRow({ ...base, diagnostic: single }, { now: NOW }) as { event: { label: string } }).event.label, 'bounced_hard', 'text without lead lines is read whole');
});

t.test('a whole message whose own header block holds an Original-recipient trace header is still a whole message', async (t) => {
  const message = [
    'Return-path: <>',
    'Original-recipient: rfc822;jane.doe@example.com',
    'From: postmaster@example.net',
    'Subject: Delivery Notification: Delivery has failed',
    'MIME-version: 1.0',
    'Content-type: multipart/report; report-type=delivery-status; boundary="b1"',
    '',
    '--b1',
    'Content-type: text/plain',
    '',
    'This report relates to a message you sent.',
    '',
    '--b1',
    'Content-type: message/delivery-status',
    '',
    'Reporting-MTA: dns; mx.example.net',
    '',
    'Original-recipient: rfc822;jane.doe@example.com',
    'Final-recipient: rfc822;jane.doe@example.com',
    'Action: failed',
    'Status: 5.1.10 (recipient not found)',
    '',
    '--b1--',
    '',
  ].join('\r\n');
  const r = parse({ dsn_message: message });
  t.strictSame(r.ok ? [r.event.label, r.event.smtp_enhanced_code, r.event.action] : [r.code], ['bounced_hard', '5.1.10', 'failed']);
});

t.test('rule 8: occurred_at is RFC 3339, normalised, microseconds kept', async (t) => {
  const at = (v: string) => {
    const r = parse({ occurred_at: v });
    return r.ok ? [r.event.occurred_at, r.event.occurred_at_us, r.event.local_zone_unknown] : r.code;
  };
  t.strictSame(at('2026-01-05t10:00:00z'), ['2026-01-05T10:00:00Z', Date.parse('2026-01-05T10:00:00Z') * 1000, false]);
  t.strictSame(at('2026-01-05T10:00:00+00:00'), ['2026-01-05T10:00:00Z', Date.parse('2026-01-05T10:00:00Z') * 1000, false]);
  t.strictSame(at('2026-01-05T10:00:00-00:00'), ['2026-01-05T10:00:00Z', Date.parse('2026-01-05T10:00:00Z') * 1000, true]);
  t.strictSame(at('2026-01-05T11:00:00.123456+01:00'), ['2026-01-05T11:00:00.123456+01:00', Date.parse('2026-01-05T10:00:00Z') * 1000 + 123456, false]);
  t.strictSame(at('2026-01-05T10:00:00.123456000Z'), ['2026-01-05T10:00:00.123456Z', Date.parse('2026-01-05T10:00:00Z') * 1000 + 123456, false], 'zeros beyond six digits dropped');
  for (const bad of ['2026-01-05T10:00:00.1234567Z', '2026-12-31T23:59:60Z', '2026-01-05 10:00:00Z', '2026-02-30T10:00:00Z', '2026-01-05T10:00:00', 'yesterday', '2026-03-01T12:06:00Z']) t.equal(at(bad), 'invalid_timestamp', bad);
  t.strictSame(at('2026-03-01T12:04:00Z')[0], '2026-03-01T12:04:00Z', 'within five minutes ahead is clock skew');
});

t.test('rule 9: DSN dates (RFC 5322, numeric zone, weekday) and their ordering', async (t) => {
  const r = parse({ source: 'esp_webhook', action: 'failed', status: '5.1.1', last_attempt_date: 'Mon, 5 Jan 2026 10:00:00 -0000' });
  t.ok(r.ok && r.event.occurred_at === '2026-01-05T10:00:00Z' && r.event.local_zone_unknown, 'Last-Attempt-Date supplies the time; -0000 marks the zone unknown');
  const pre = parse({ occurred_at: '2026-01-06T00:00:00Z', action: 'failed', status: '5.1.1', last_attempt_date: 'Mon, 5 Jan 2026 10:00:00 +0000' });
  t.ok(pre.ok && pre.event.occurred_at === '2026-01-06T00:00:00Z', 'occurred_at takes precedence');
  t.equal(code({ action: 'failed', status: '5.1.1', last_attempt_date: 'Mon, 5 Jan 2026 10:00:00 GMT' }), 'invalid_timestamp', 'alphabetic zone');
  t.equal(code({ action: 'failed', status: '5.1.1', last_attempt_date: 'Tue, 5 Jan 2026 10:00:00 +0000' }), 'invalid_timestamp', 'wrong weekday');
  t.equal(code({ action: 'failed', status: '5.1.1', last_attempt_date: 'Mon, 5 Jan 2027 10:00:00 +0000' }), 'invalid_timestamp', 'in the future');
  t.equal(code({ action: 'failed', status: '5.1.1', arrival_date: '5 Jan 2026 11:00:00 +0000', last_attempt_date: '5 Jan 2026 10:00:00 +0000' }), 'invalid_dsn_semantics', 'arrival after the last attempt');
  t.equal(code({ action: 'failed', status: '5.1.1', arrival_date: 'Jan 5 2026' }), 'invalid_timestamp');
  t.equal(label({ action: 'delayed', status: '4.4.1', arrival_date: '5 Jan 2026 09:00:00 +0100', last_attempt_date: '5 Jan 2026 10:00:00 +0000', will_retry_until: '10 Jan 2027 10:00:00 +0000' }), 'bounced_soft', 'Will-Retry-Until may be in the future');
  t.equal(code({ action: 'failed', status: '5.1.1', will_retry_until: '10 Jan 2026 10:00:00 +0000' }), 'invalid_dsn_semantics', 'only with delayed');
  t.equal(code({ action: 'delayed', status: '4.4.1', last_attempt_date: '5 Jan 2026 10:00:00 +0000', will_retry_until: '4 Jan 2026 10:00:00 +0000' }), 'invalid_dsn_semantics', 'earlier than the last attempt');
});

t.test('every row of the 2.3 label table', async (t) => {
  t.equal(label({ outcome: 'delivered' }), 'delivered', 'confirmed delivery');
  for (const o of ['replied']) t.equal(label({ outcome: o }), 'delivered', o);
  for (const w of ['reply', 'replied', 'positive_reply', 'negative_reply', 'interested']) t.equal(label({ outcome: 'delivered', bounce_type: w }), 'delivered', `reply kind ${w}`);
  t.equal(label({ action: 'failed', status: '5.1.1' }), 'bounced_hard', 'DSN failed + 5.1.1');
  t.equal(label({ smtp_enhanced_code: '5.1.10' }), 'bounced_hard', 'recipient-not-found code alone');
  t.equal(label({ action: 'delayed', status: '5.1.1' }), 'bounced_soft', 'delayed even with 5.x');
  t.equal(label({ smtp_enhanced_code: '4.7.0' }), 'bounced_soft', 'temporary 4.x');
  t.equal(label({ bounce_reason: 'mailbox full' }), 'bounced_soft', 'mailbox full');
  t.equal(label({ outcome: 'deferred' }), 'bounced_soft', 'routing deferral');
  t.equal(label({ bounce_reason: 'DNS error' }), 'bounced_soft', 'unqualified DNS error');
  t.equal(label({ action: 'failed', status: '5.7.26' }), 'blocked_policy', '5.7.x');
  t.equal(label({ bounce_reason: '550 sender reputation too low' }), 'blocked_policy', 'reputation');
  for (const o of ['bounced', 'bounced_hard']) t.equal(label({ outcome: o }), 'unknown', `coarse ${o}`);
  for (const w of ['hard', 'hard_bounce', 'invalid', 'undeliverable', 'rejected', 'bounce']) t.equal(label({ bounce_type: w }), 'unknown', `coarse ${w}`);
  for (const w of ['sent', 'accepted', 'success', 'ok', 'no_bounce']) {
    const r = parse({ outcome: 'delivered', bounce_type: w, action: undefined });
    t.ok(r.ok, w);
  }
  const sent = parse({ outcome: 'sent' });
  t.ok(sent.ok && sent.event.label === 'unknown' && sent.event.signal === 'sent', 'sender-side sent: unknown, signal sent');
  for (const a of ['delivered', 'relayed', 'expanded']) {
    const r = parse({ action: a, status: '2.0.0' });
    t.ok(r.ok && r.event.label === 'unknown' && r.event.suppresses === null, `DSN ${a} in a bounce row: unknown, no suppression`);
  }
  for (const o of ['opened', 'clicked']) {
    const r = parse({ outcome: o });
    t.ok(r.ok && r.event.label === 'unknown' && r.event.signal === 'open', `${o}: unknown, signal open`);
  }
  t.equal(code({ action: 'nope' }), 'invalid_dsn_semantics', 'invalid non-empty action');
  t.equal(code({ action: 'failed', status: '55' }), 'invalid_dsn_semantics', 'invalid status with a recognized action');
  t.equal(label({ outcome: 'bounced_hard', smtp_enhanced_code: '5.1.1', bounce_type: 'soft' }), 'bounced_hard', 'specific DSN evidence outranks a coarse label');
});

t.test('suppression kinds', async (t) => {
  const s = (row: Record<string, unknown>) => {
    const r = parse(row);
    return r.ok ? r.event.suppresses : r.code;
  };
  t.equal(s({ action: 'failed', status: '5.1.1' }), 'hard_bounce');
  t.equal(s({ outcome: 'complaint' }), 'complaint');
  t.equal(s({ outcome: 'unsubscribed' }), 'unsubscribed');
  for (const row of [{ action: 'failed', status: '4.2.2' }, { action: 'failed', status: '5.7.1' }, { outcome: 'bounced' }, { outcome: 'delivered' }]) t.equal(s(row), null, JSON.stringify(row));
});

t.test('every row error code of 2.5', async (t) => {
  t.equal(code({ email: 'no-at-sign' }), 'invalid_email');
  t.equal(code({ email: undefined }), 'invalid_email');
  t.equal(code({ outcome: 'exploded' }), 'missing_outcome');
  t.equal(code({ outcome: '' }), 'missing_outcome');
  t.equal(code({ source: 'pigeon' }), 'invalid_source');
  t.equal(parseOutcomeRow({ ...base, source: undefined }, { now: NOW, defaultSource: 'csv_import' }).ok, true, 'the default source');
  t.equal(code({ occurred_at: '2026-13-01T00:00:00Z' }), 'invalid_timestamp');
  t.equal(code({ source: 'esp_webhook' }), 'missing_event_timestamp');
  t.equal(code({ source: 'emailbison' }), 'missing_event_timestamp');
  t.equal(code({ action: 'failed', status: '5.1.1', will_retry_until: '10 Jan 2026 10:00:00 +0000' }), 'invalid_dsn_semantics');
  t.equal(code({ external_id: 'x'.repeat(256) }), 'invalid_external_id');
  t.equal(code({ external_id: 'tab\there' }), 'invalid_external_id');
  t.equal(code({ external_id: 'é' }), 'invalid_external_id');
  t.equal(code({ external_id: '' }), 'missing_external_id');
  t.equal(code({ external_id: undefined }), 'missing_external_id');
  t.equal(code({ metadata: [1, 2] }), 'invalid_metadata');
  t.equal(code({ metadata: '{not json' }), 'invalid_metadata');
  t.equal(code({ metadata: { smtp_code: 550 } }), 'label:unknown', 'a number is taken as text');
  t.equal(code({ metadata: { smtp_enhanced_code: { x: 1 } } }), 'invalid_metadata');
  t.equal(code({ metadata: JSON.stringify({ smtp_enhanced_code: '5.1.1' }) }), 'label:bounced_hard', 'CSV metadata: a JSON object in a cell');
  t.equal(code({ final_recipient: 'rfc822; someone.else@example.com', action: 'failed' }), 'invalid_recipient_identity');
  t.equal(code({ smtp_enhanced_code: '5.1' }), 'invalid_classification_evidence');
  t.equal(code({ smtp_code: '5500' }), 'invalid_classification_evidence');
  t.equal(parseOutcomeRow('a string', { now: NOW }).ok ? 'ok' : (parseOutcomeRow('a string', { now: NOW }) as { code: string }).code, 'invalid_row');
  t.equal(code({ action: ['failed'] }), 'invalid_row', 'a field of the wrong type');
  // event_identity_conflict is decided by the store: the same content has the same fingerprint, other content another.
  const a = parse({ action: 'failed', status: '5.1.1' });
  const b = parse({ action: 'failed', status: '5.1.1' });
  const c = parse({ action: 'failed', status: '5.1.2' });
  const d = parse({ action: 'failed', status: '5.1.1', external_id: 'ev-2' });
  t.ok(a.ok && b.ok && c.ok && d.ok);
  if (a.ok && b.ok && c.ok && d.ok) {
    t.equal(a.event.fingerprint, b.event.fingerprint);
    t.not(a.event.fingerprint, c.event.fingerprint);
    t.equal(a.event.fingerprint, d.event.fingerprint, 'the external id is not content');
  }
  t.ok(OUTCOME_ROW_ERRORS.includes('invalid_row'));
});

t.test('the raw diagnostic is never in the event', async (t) => {
  const r = parse({ action: 'failed', status: '5.1.1', diagnostic_code: 'smtp; 550 5.1.1 SECRET-DIAGNOSTIC-TEXT', bounce_reason: 'ANOTHER-SECRET' });
  t.ok(r.ok);
  t.notMatch(JSON.stringify(r), /SECRET/);
});


const valid = (r: ParseResult): boolean => (r.ok ? (OUTCOME_LABELS as readonly string[]).includes(r.event.label) : (OUTCOME_ROW_ERRORS as readonly string[]).includes(r.code) && r.reason.length > 0);

t.test('property: any row gives a label or a coded error, never an exception', async (t) => {
  const keys = ['email', 'lead_email', 'outcome', 'source', 'external_id', 'occurred_at', 'action', 'status', 'smtp_enhanced_code', 'diagnostic_code', 'bounce_type', 'smtp_code', 'bounce_reason', 'dsn_message', 'last_attempt_date', 'arrival_date', 'will_retry_until', 'final_recipient', 'original_recipient', 'remote_mta', 'reporting_mta', 'metadata', 'junk'];
  const values: unknown[] = ['jane.doe@example.com', 'bounced', 'delivered', 'failed', 'delayed', '5.1.1', '4.2.2', '5.7.1', 'smtp; 550 5.1.1 x', 'rfc822; jane.doe@example.com', 'dns; mx.example.net', 'Mon, 5 Jan 2026 10:00:00 +0000', '2026-01-05T10:00:00Z', 'api', 'esp_webhook', 'x', '', ' ', '(', ')', '\r\n', '\n', '\u0000', '\ud800', 5, -1, 1e308, NaN, null, true, [], {}, { a: 1 }, 'é'.repeat(300), dsn(recipient(['Action: failed', 'Status: 5.1.1']))];
  const rand = seededRandom(20261124);
  let n = 0;
  for (let i = 0; i < 5000; i++) {
    const row: Record<string, unknown> = {};
    const k = 1 + Math.floor(rand() * 8);
    for (let j = 0; j < k; j++) row[keys[Math.floor(rand() * keys.length)]!] = values[Math.floor(rand() * values.length)];
    if (rand() < 0.7) Object.assign(row, { ...base, ...row });
    let r: ParseResult;
    try {
      r = parseOutcomeRow(rand() < 0.02 ? [row] : row, { now: NOW });
    } catch (err) {
      t.fail(`threw on ${JSON.stringify(row)}: ${String(err)}`);
      continue;
    }
    if (!valid(r)) t.fail(`neither a label nor a known code: ${JSON.stringify(r)}`);
    else n++;
  }
  t.equal(n, 5000);
});

t.test('fuzz: mutated DSNs never throw', async (t) => {
  const seedDsn = dsn(
    ['Original-Recipient: rfc822; jane.doe@example.com', 'Final-Recipient: rfc822; <jane.doe@example.com>', 'Action: failed (x)', 'Status: 5.1.1', 'Remote-MTA: dns; mx1.example.net', 'Diagnostic-Code: smtp; 550 5.1.1 <jane.doe@example.com>:', ' Recipient address rejected (in reply to RCPT TO)', 'Last-Attempt-Date: Mon, 5 Jan 2026 10:00:00 +0000', 'Will-Retry-Until: Tue, 6 Jan 2026 10:00:00 +0000'],
    ['Reporting-MTA: dns; mx.example.net', 'Arrival-Date: Mon, 5 Jan 2026 09:59:00 +0000', 'DSN-Gateway: dns; gw.example.org'],
  );
  const inserts = ['(', ')', '\r', '\n', '\r\n', '\r\n ', ':', ';', '<', '>', '\\', '"', '\u0000', '5.', '\t'];
  const rand = seededRandom(7);
  const seen = new Set<string>();
  for (let i = 0; i < 4000; i++) {
    let s = seedDsn;
    const edits = 1 + Math.floor(rand() * 4);
    for (let e = 0; e < edits; e++) {
      const at = Math.floor(rand() * s.length);
      const op = rand();
      if (op < 0.3) s = s.slice(0, at) + String.fromCharCode(Math.floor(rand() * 128)) + s.slice(at + 1);
      else if (op < 0.5) s = s.slice(0, at);
      else if (op < 0.8) s = s.slice(0, at) + inserts[Math.floor(rand() * inserts.length)] + s.slice(at);
      else s = s.slice(0, at) + s.slice(at + 1 + Math.floor(rand() * 10));
    }
    let r: ParseResult;
    try {
      r = parseOutcomeRow({ ...base, dsn_message: s }, { now: NOW });
    } catch (err) {
      t.fail(`threw on ${JSON.stringify(s)}: ${String(err)}`);
      continue;
    }
    if (!valid(r)) t.fail(`bad result ${JSON.stringify(r)}`);
    seen.add(r.ok ? r.event.label : r.code);
  }
  t.ok(seen.size >= 4, `the mutations reach several outcomes (${[...seen].join(', ')})`);
});
