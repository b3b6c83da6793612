// The parser on real bounce messages (packages/outcomes/test/corpus: 62 messages of eighteen
// mailers and providers from sisimai/set-of-emails, BSD-2-Clause, addresses rewritten, and 9 that
// Debian's Postfix 3.7 and Exim 4.96 wrote here against the simulated internet; see its README):
// each whole message, imported as `dsn_message`, gives exactly the label (and enhanced code) or
// the row error code decided for it in expected.json by reading it against the label rules of
// docs/decisions/outcomes.md ("Outcome evidence"). A message without a delivery-status part is also imported as `diagnostic` (its text part,
// textPartOf) and must give the same label.

import { readFileSync, readdirSync } from 'node:fs';
import t from 'tap';
import { deliveryStatusOf, parseOutcomeRow, textPartOf } from '../src/index.ts';

interface Expectation {
  email: string;
  expect: string;
  code?: string;
  why: string;
}

const DIR = new URL('./corpus/', import.meta.url);
const expected = JSON.parse(readFileSync(new URL('expected.json', DIR), 'utf8')) as Record<string, Expectation>;
// After every message's dates (the newest, generated here, are of 2026-11-26).
const NOW = new Date('2026-12-01T00:00:00Z');
const read = (file: string): string => readFileSync(new URL(file, DIR), 'latin1');
const row = (file: string, email: string, extra: Record<string, string>) => parseOutcomeRow({ email, outcome: 'bounced', source: 'smtp_log', external_id: file, ...extra }, { now: NOW });
const labelOrCode = (r: ReturnType<typeof parseOutcomeRow>): string => (r.ok ? r.event.label : r.code);
/** A Content-Type header line naming a delivery-status part, read without the MIME code. */
const HAS_DSN_PART = /^content-type:[ \t]*message\/(global-)?delivery-status/im;

t.test('every message in the corpus has an expectation, and every expectation a message', async (t) => {
  t.strictSame(readdirSync(DIR).filter((f) => f.endsWith('.eml')).sort(), Object.keys(expected).sort());
});

for (const [file, want] of Object.entries(expected)) {
  t.test(`${file}: ${want.expect} (${want.why})`, async (t) => {
    const text = read(file);
    t.ok(text.includes('\r\n') && !/[^\r]\n/.test(text) && !/\r(?!\n)/.test(text), 'CRLF as on the wire');
    const dsnPart = deliveryStatusOf(text);
    t.equal(dsnPart !== null, HAS_DSN_PART.test(text), 'a delivery-status part is found exactly when the message has one');
    const r = row(file, want.email, { dsn_message: text });
    t.equal(labelOrCode(r), want.expect, 'label or row error code');
    if (want.code) t.equal(r.ok ? r.event.smtp_enhanced_code : null, want.code, 'the enhanced code that decided');
    if (r.ok) t.equal(r.event.suppresses, r.event.label === 'bounced_hard' ? 'hard_bounce' : null, 'only a confirmed hard bounce suppresses');
    if (dsnPart === null) {
      // A bounce without a DSN part: its text part as a legacy diagnostic says the same.
      const d = row(file, want.email, { diagnostic: textPartOf(text).slice(0, 64 * 1024) });
      t.equal(labelOrCode(d), want.expect, 'the same label from `diagnostic: textPartOf(message)`');
      if (want.code) t.equal(d.ok ? d.event.smtp_enhanced_code : null, want.code, 'the same enhanced code from the text part');
    }
  });
}

t.test('the corpus covers every label and the strict rejections', async (t) => {
  const seen = new Set(Object.values(expected).map((e) => e.expect));
  for (const l of ['bounced_hard', 'bounced_soft', 'blocked_policy', 'unknown', 'invalid_dsn_semantics', 'invalid_timestamp']) t.ok(seen.has(l), l);
});

t.test('the same message with bare LF line breaks is refused as structured evidence (rule 4)', async (t) => {
  const text = read('lhost-postfix-04.eml').replace(/\r\n/g, '\n');
  t.equal(labelOrCode(row('lf', 'person5@example.org', { dsn_message: text })), 'invalid_classification_evidence');
});

t.test('the same message with CR-only line breaks (classic Mac): its DSN part is found, and refused (rule 4)', async (t) => {
  const text = read('lhost-postfix-04.eml').replace(/\r\n/g, '\r');
  t.not(deliveryStatusOf(text), null);
  t.equal(labelOrCode(row('cr-only', 'person5@example.org', { dsn_message: text })), 'invalid_classification_evidence');
});

t.test('a bare CR in the delivery-status part is refused (rule 4)', async (t) => {
  const text = read('lhost-sendmail-01.eml').replace('Action: failed\r\n', 'Action: failed\r');
  t.equal(labelOrCode(row('cr', 'person4@example.net', { dsn_message: text })), 'invalid_classification_evidence');
});

t.test('an unindented continuation in the delivery-status part is refused (rule 4)', async (t) => {
  // A line with no field name (no colon) that does not start with a blank.
  const text = read('rhost-yahooinc-02.eml').replace('\r\n    temporarily deferred due to', '\r\ntemporarily deferred due to');
  t.not(text, read('rhost-yahooinc-02.eml'), 'the fold was there');
  t.equal(labelOrCode(row('unindented', 'person4@example.net', { dsn_message: text })), 'invalid_classification_evidence');
});

t.test('a Status not in RFC 3464 form with a recognized action is refused (rule 3)', async (t) => {
  for (const bad of ['5.1.01', '5.01.1', '5.1', 'five']) {
    const text = read('lhost-postfix-04.eml').replace(/^Status: 5\.1\.1/m, `Status: ${bad}`);
    t.equal(labelOrCode(row('status', 'person5@example.org', { dsn_message: text })), 'invalid_dsn_semantics', bad);
  }
});

t.test('a recipient other than the DSN\'s is refused (rule 5)', async (t) => {
  t.equal(labelOrCode(row('x', 'somebody.else@example.com', { dsn_message: read('lhost-sendmail-01.eml') })), 'invalid_recipient_identity');
});

/**
 * Plain-text bounces (no DSN part) naming two recipients with different replies: the row of the
 * second recipient must be read from that recipient's own line. The label rules make `bounced_hard`
 * decision-grade only as confirmed evidence about the row's mailbox; another recipient's reply is
 * not. The text is read in the section led by the row's address (ownSection); an address no
 * section names gets no evidence from the text.
 */
const OTHER_RECIPIENTS: { file: string; email: string; expect: string; code: string | null; why: string }[] = [
  { file: 'lhost-opensmtpd-02.eml', email: 'person5@example.org', expect: 'bounced_hard', code: '5.1.1', why: 'its line: 550 5.1.1 User Unknown (the first line, 5.2.2 Mailbox Full, is person4\'s)'},
  { file: 'lhost-opensmtpd-02.eml', email: 'person4@example.net', expect: 'bounced_soft', code: '5.2.2', why: 'its line: 550 5.2.2 Mailbox Full' },
  { file: 'lhost-qmail-02.eml', email: 'person5@example.org', expect: 'unknown', code: '5.2.1', why: 'its line: 550 5.2.1 (disabled; the first line, 5.1.1, is person4\'s): a confirmed hard bounce must not come from another recipient'},
  { file: 'lhost-qmail-02.eml', email: 'person4@example.net', expect: 'bounced_hard', code: '5.1.1', why: 'its section: 550 5.1.1 User Unknown' },
  { file: 'lhost-postfix-07.eml', email: 'person4@example.net', expect: 'unknown', code: null, why: 'the postmaster address the text asks you to contact, not a recipient: the only section is person5\'s' },
];

for (const o of OTHER_RECIPIENTS) {
  t.test(`${o.file} for ${o.email}: ${o.expect} ${o.code} (${o.why})`, async (t) => {
    const r = row(o.file, o.email, { dsn_message: read(o.file) });
    t.equal(labelOrCode(r), o.expect, 'label');
    t.equal(r.ok ? r.event.smtp_enhanced_code : null, o.code, 'enhanced code');
    t.equal(r.ok ? r.event.suppresses : 'row error', o.expect === 'bounced_hard' ? 'hard_bounce' : null, 'only its own hard bounce suppresses');
  });
}

t.test('each recipient of a two-recipient DSN gets its own group (rule 5)', async (t) => {
  const text = read('lhost-sendmail-31.eml');
  for (const email of ['person5@example.org', 'person6@example.com']) {
    const r = row('two', email, { dsn_message: text });
    t.equal(labelOrCode(r), 'blocked_policy', email);
  }
});
