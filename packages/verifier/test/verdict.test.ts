// The result table (docs/api.md), row by row: result, quality, credits, layer and flags.

import t from 'tap';
import type { SessionFailure } from '../src/ports.ts';
import type { ProbeOutcome } from '../src/ports.ts';
import type { RcptClass } from '../src/smtp/classify.ts';
import { parseAddress } from '../src/syntax.ts';
import type { Verdict } from '../src/types.ts';
import { buildVerdict, type Evidence } from '../src/verdict.ts';
import { parseReply } from '../src/smtp/reply.ts';

const reply = (...lines: string[]) => parseReply(lines);

const verdict = (email: string, evidence: Evidence): Verdict => buildVerdict(email, parseAddress(email), evidence);
const smtp = (outcome: ProbeOutcome, implicitMx = false): Evidence => ({ layer: 'smtp', outcome, implicitMx });
const answerOf = (cls: RcptClass, wire: string, extra: Partial<Extract<ProbeOutcome, { kind: 'answer' }>> = {}): ProbeOutcome => ({
  kind: 'answer',
  cls,
  reply: reply(wire),
  mxIndex: 0,
  attempts: 1,
  // By default the catch-all probe showed the domain is not catch-all (the usual evidence).
  catchall: { catchall: false, mxIndex: 0 },
  ...extra,
});
const failure = (f: SessionFailure): Evidence => smtp({ kind: 'failure', failure: f });

const PERSON = 'john.smith@acme-industries.com';
/** The fields every verdict on PERSON shares. */
const personBase = {
  email: PERSON,
  syntax_valid: true,
  is_role_based: false,
  is_free_provider: false,
  is_disposable: false,
  flags: [] as string[],
};

t.test('valid: a personal address accepted by the server is the only chargeable result', async (t) => {
  t.strictSame(verdict(PERSON, smtp(answerOf('accepted', '250 2.1.5 Ok'))), {
    ...personBase,
    result: 'valid',
    reason: '',
    reason_code: 'accepted',
    dns_valid: true,
    smtp_valid: true,
    is_catchall: false,
    b2b_outbound_quality: 'high',
    b2b_quality: 'high',
    validation_layer: 'smtp',
    smtp_response: '250 2.1.5 Ok',
    chargeable: true,
  });
  // A probe that showed the domain is NOT catch-all keeps the address valid.
  const v = verdict(PERSON, smtp(answerOf('accepted', '250 Ok', { catchall: { catchall: false, mxIndex: 0 } })));
  t.equal(v.result, 'valid');
  t.equal(v.is_catchall, false);
  t.equal(v.catchall_confidence, undefined);
  t.equal(v.chargeable, true);
  t.equal(v.smtp_response, '250 Ok');
  // No catch-all evidence (the probe was deferred or refused): the acceptance proves nothing.
  const nv = verdict(PERSON, smtp(answerOf('accepted', '250 Ok', { catchall: undefined })));
  t.same([nv.result, nv.reason_code, nv.b2b_outbound_quality, nv.chargeable, nv.smtp_valid, nv.is_catchall], ['unknown', 'catchall_unverified', 'unknown', false, false, false]);
  // 251 (will forward) is accepted too: classification happens before, verdict sees the class.
  t.equal(verdict(PERSON, smtp(answerOf('accepted', '251 2.1.5 User not local; will forward'))).result, 'valid');
});

t.test('valid_role_based: low quality, role_type, not chargeable', async (t) => {
  t.strictSame(verdict('info@acme-industries.com', smtp(answerOf('accepted', '250 2.1.5 Ok'))), {
    ...personBase,
    email: 'info@acme-industries.com',
    result: 'valid_role_based',
    reason: 'Role-based address: a shared inbox, not a person',
    reason_code: 'role_account',
    dns_valid: true,
    smtp_valid: true,
    is_role_based: true,
    role_type: 'information',
    is_catchall: false,
    b2b_outbound_quality: 'low',
    b2b_quality: 'low',
    validation_layer: 'smtp',
    smtp_response: '250 2.1.5 Ok',
    chargeable: false,
  });
  const roles: Array<[string, string]> = [
    ['support@acme-industries.com', 'support'],
    ['sales+eu@acme-industries.com', 'sales'],
  ];
  for (const [email, role] of roles) {
    const v = verdict(email, smtp(answerOf('accepted', '250 Ok')));
    t.strictSame([v.result, v.role_type, v.is_role_based, v.b2b_outbound_quality, v.chargeable], ['valid_role_based', role, true, 'low', false], email);
  }
  // "info" is the mailbox info (its quotes add nothing): a role like info@.
  const q = verdict('"info"@acme-industries.com', smtp(answerOf('accepted', '250 Ok')));
  t.strictSame([q.result, q.is_role_based, q.role_type, q.flags], ['valid_role_based', true, 'information', []]);
  // A local part that needs its quotes is never a role.
  const qq = verdict('"info desk"@acme-industries.com', smtp(answerOf('accepted', '250 Ok')));
  t.strictSame([qq.result, qq.is_role_based, qq.role_type, qq.flags], ['valid', false, undefined, ['quoted_local_part']]);
  // A role address that is rejected is invalid, and still reports its role.
  const r = verdict('info@acme-industries.com', smtp(answerOf('rejected', '550 5.1.1 User unknown')));
  t.strictSame([r.result, r.is_role_based, r.role_type, r.b2b_outbound_quality], ['invalid', true, 'information', 'none']);
});

t.test('risky catch-all: is_catchall, smtp_valid false, confidence from the evidence', async (t) => {
  const cases: Array<[number, number, 'high' | 'medium' | 'low']> = [
    [0, 0, 'high'], // probe and address both accepted by the primary MX
    [1, 1, 'medium'], // both on a backup MX
    [0, 1, 'low'], // probe on MX0, address on MX1
    [1, 0, 'low'],
  ];
  for (const [probeMx, answerMx, confidence] of cases) {
    const v = verdict(PERSON, smtp(answerOf('accepted', '250 2.1.5 Ok', { mxIndex: answerMx, catchall: { catchall: true, mxIndex: probeMx } })));
    t.strictSame(
      v,
      {
        ...personBase,
        result: 'risky',
        reason: 'Catch-all domain: the mail server accepts any address, so this one cannot be confirmed',
        reason_code: 'catch_all',
        dns_valid: true,
        smtp_valid: false,
        is_catchall: true,
        catchall_confidence: confidence,
        b2b_outbound_quality: 'none',
        b2b_quality: 'none',
        validation_layer: 'catchall',
        smtp_response: '250 2.1.5 Ok',
        chargeable: false,
      },
      `probe on MX${probeMx}, answer on MX${answerMx}: ${confidence}`,
    );
  }
  // A role address on a catch-all domain is risky, not valid_role_based.
  const role = verdict('info@acme-industries.com', smtp(answerOf('accepted', '250 Ok', { catchall: { catchall: true, mxIndex: 0 } })));
  t.strictSame([role.result, role.is_catchall, role.catchall_confidence, role.role_type, role.chargeable], ['risky', true, 'high', 'information', false]);
  // A rejected address on a domain whose probe was accepted is still invalid (not catch-all for it).
  const rej = verdict(PERSON, smtp(answerOf('rejected', '550 5.1.1 no such user', { catchall: { catchall: true, mxIndex: 0 } })));
  t.strictSame([rej.result, rej.is_catchall, rej.catchall_confidence], ['invalid', false, undefined]);
});

t.test('invalid at the syntax layer', async (t) => {
  t.strictSame(verdict('not-an-email', { layer: 'syntax', reason: 'Missing @' }), {
    email: 'not-an-email',
    result: 'invalid',
    reason: 'Invalid syntax: Missing @',
    reason_code: 'invalid_syntax',
    syntax_valid: false,
    dns_valid: false,
    smtp_valid: false,
    is_role_based: false,
    is_free_provider: false,
    is_disposable: false,
    is_catchall: false,
    b2b_outbound_quality: 'none',
    b2b_quality: 'none',
    validation_layer: 'syntax',
    flags: [],
    chargeable: false,
  });
  // The reason comes from the parser, whatever it is.
  const p = parseAddress('john..smith@acme-industries.com');
  t.equal(p.ok, false);
  if (!p.ok) {
    const v = buildVerdict('john..smith@acme-industries.com', p, { layer: 'syntax', reason: p.reason });
    t.equal(v.reason, `Invalid syntax: ${p.reason}`);
    t.equal(v.validation_layer, 'syntax');
    t.equal(v.did_you_mean, undefined);
  }
});

t.test('DNS layer: invalid for facts about the domain, unknown for failed lookups', async (t) => {
  const dnsBase = {
    ...personBase,
    dns_valid: false,
    smtp_valid: false,
    is_catchall: false,
    validation_layer: 'dns',
    chargeable: false,
  };
  const invalid = { result: 'invalid', b2b_outbound_quality: 'none', b2b_quality: 'none' };
  const unknown = { result: 'unknown', b2b_outbound_quality: 'unknown', b2b_quality: 'unknown' };
  t.strictSame(verdict(PERSON, { layer: 'dns', answer: { kind: 'nxdomain' } }), { ...dnsBase, ...invalid, reason_code: 'nxdomain', reason: 'Domain does not exist (NXDOMAIN), so it has no MX records' });
  t.strictSame(verdict(PERSON, { layer: 'dns', answer: { kind: 'no_records' } }), { ...dnsBase, ...invalid, reason_code: 'no_mail_records', reason: 'Domain has no MX records and no A/AAAA record to fall back on' });
  t.strictSame(verdict(PERSON, { layer: 'dns', answer: { kind: 'null_mx' } }), { ...dnsBase, ...invalid, reason_code: 'null_mx', reason: 'Domain publishes a null MX (RFC 7505): it accepts no mail' });
  t.strictSame(verdict(PERSON, { layer: 'dns', answer: { kind: 'servfail' } }), { ...dnsBase, ...unknown, reason_code: 'dns_servfail', reason: 'DNS lookup failed (SERVFAIL); the domain may still be valid' });
  t.strictSame(verdict(PERSON, { layer: 'dns', answer: { kind: 'timeout' } }), { ...dnsBase, ...unknown, reason_code: 'dns_timeout', reason: 'DNS lookup timed out; the domain may still be valid' });
  t.strictSame(verdict(PERSON, { layer: 'dns', answer: { kind: 'error', detail: 'EREFUSED' } }), { ...dnsBase, ...unknown, reason_code: 'dns_error', reason: 'DNS lookup failed (EREFUSED)' });
});

t.test('SMTP layer: invalid mailbox answers', async (t) => {
  const smtpInvalid = {
    ...personBase,
    result: 'invalid',
    dns_valid: true,
    smtp_valid: false,
    is_catchall: false,
    b2b_outbound_quality: 'none',
    b2b_quality: 'none',
    validation_layer: 'smtp',
    chargeable: false,
  };
  t.strictSame(verdict(PERSON, smtp(answerOf('rejected', '550 5.1.1 <john.smith@acme-industries.com>: Recipient address rejected: User unknown'))), {
    ...smtpInvalid,
    reason_code: 'mailbox_not_found',
    reason: 'Mailbox does not exist',
    smtp_response: '550 5.1.1 <john.smith@acme-industries.com>: Recipient address rejected: User unknown',
  });
  t.strictSame(verdict(PERSON, smtp(answerOf('disabled', '550 5.2.1 The email account that you tried to reach is disabled.'))), {
    ...smtpInvalid,
    reason_code: 'mailbox_disabled',
    reason: 'Google: the email account is disabled',
    smtp_response: '550 5.2.1 The email account that you tried to reach is disabled.',
  });
  t.strictSame(verdict(PERSON, smtp(answerOf('disabled', '550 5.2.1 <john.smith@acme-industries.com>: Mailbox disabled'))), {
    ...smtpInvalid,
    reason_code: 'mailbox_disabled',
    reason: 'Mailbox is disabled',
    smtp_response: '550 5.2.1 <john.smith@acme-industries.com>: Mailbox disabled',
  });
  // 501/553 5.1.3: the server says the address is malformed (regression: 501 was unclassified).
  t.strictSame(verdict(PERSON, smtp(answerOf('malformed', '501 5.1.3 Bad recipient address syntax'))), {
    ...smtpInvalid,
    reason_code: 'address_malformed',
    reason: 'Mail server says the address is malformed',
    smtp_response: '501 5.1.3 Bad recipient address syntax',
  });
  t.strictSame(verdict('josé@acme-industries.com', smtp({ kind: 'smtputf8_unsupported', mxIndex: 0 })), {
    ...smtpInvalid,
    email: 'josé@acme-industries.com',
    reason_code: 'smtputf8_unsupported',
    reason: 'The address needs SMTPUTF8 (RFC 6531), which its mail server does not offer',
    flags: ['utf8_local_part'],
  });
  // A multi-line reply is rendered on one line.
  const ml = verdict(PERSON, smtp({ kind: 'answer', cls: 'rejected', reply: reply('550-5.1.1 The email account that you tried to reach does not exist.', '550 5.1.1 Please try again. - gsmtp'), mxIndex: 0, attempts: 1 }));
  t.equal(ml.smtp_response, '550 5.1.1 The email account that you tried to reach does not exist. Please try again. - gsmtp');
});

t.test('SMTP layer: unknown answers keep the server reply', async (t) => {
  const smtpUnknown = {
    ...personBase,
    result: 'unknown',
    dns_valid: true,
    smtp_valid: false,
    is_catchall: false,
    b2b_outbound_quality: 'unknown',
    b2b_quality: 'unknown',
    validation_layer: 'smtp',
    chargeable: false,
  };
  t.strictSame(verdict(PERSON, smtp(answerOf('policy', '550 5.7.1 Service unavailable, Client host [192.0.2.10] blocked using Spamhaus'))), {
    ...smtpUnknown,
    reason_code: 'smtp_policy_block',
    reason: 'Mail server refused to verify the address (policy or block list)',
    smtp_response: '550 5.7.1 Service unavailable, Client host [192.0.2.10] blocked using Spamhaus',
  });
  t.strictSame(verdict(PERSON, smtp(answerOf('full', '552 5.2.2 Mailbox full'))), {
    ...smtpUnknown,
    reason_code: 'mailbox_full',
    reason: 'Mailbox is full: it exists but cannot receive mail now',
    smtp_response: '552 5.2.2 Mailbox full',
  });
  t.strictSame(verdict(PERSON, smtp(answerOf('tempfail', '450 4.2.0 Greylisted', { attempts: 3 }))), {
    ...smtpUnknown,
    reason_code: 'smtp_tempfail',
    reason: 'Mail server deferred the check (greylisting or rate limit), still deferred after 3 attempts',
    smtp_response: '450 4.2.0 Greylisted',
  });
  t.strictSame(verdict(PERSON, smtp(answerOf('unclassified', '252 2.1.5 Cannot VRFY user'))), {
    ...smtpUnknown,
    reason_code: 'smtp_unclassified',
    reason: 'Mail server gave an answer that does not say whether the mailbox exists',
    smtp_response: '252 2.1.5 Cannot VRFY user',
  });
});

t.test('SMTP layer: session failures are unknown, with the phase in the reason', async (t) => {
  const failBase = {
    ...personBase,
    result: 'unknown',
    dns_valid: true,
    smtp_valid: false,
    is_catchall: false,
    b2b_outbound_quality: 'unknown',
    b2b_quality: 'unknown',
    validation_layer: 'smtp',
    chargeable: false,
  };
  t.strictSame(verdict(PERSON, failure({ phase: 'greeting', kind: 'timeout', detail: 'no reply within 1000 ms' })), {
    ...failBase,
    reason_code: 'smtp_timeout',
    reason: 'Mail server did not answer in time (the greeting)',
  });
  t.strictSame(verdict(PERSON, failure({ phase: 'connect', kind: 'connection', detail: 'ECONNREFUSED' })), {
    ...failBase,
    reason_code: 'smtp_connection_failed',
    reason: 'Could not connect to any mail server (ECONNREFUSED)',
  });
  t.strictSame(verdict(PERSON, failure({ phase: 'rcpt', kind: 'connection', detail: 'ECONNRESET' })), {
    ...failBase,
    reason_code: 'smtp_connection_failed',
    reason: 'Mail server closed the connection during RCPT TO',
  });
  t.strictSame(verdict(PERSON, failure({ phase: 'mail', kind: 'protocol', detail: 'malformed reply line' })), {
    ...failBase,
    reason_code: 'smtp_protocol_error',
    reason: 'Mail server broke the SMTP protocol during MAIL FROM',
  });
  t.strictSame(verdict(PERSON, failure({ phase: 'greeting', kind: 'reply', detail: 'server refused the session', reply: reply('421 4.7.0 Try again later') })), {
    ...failBase,
    reason_code: 'smtp_tempfail',
    reason: 'Mail server refused the session during the greeting',
    smtp_response: '421 4.7.0 Try again later',
  });
  const phases: Array<[SessionFailure['phase'], string]> = [
    ['ehlo', 'EHLO'],
    ['helo', 'HELO'],
    ['starttls', 'STARTTLS'],
    ['rset', 'RSET'],
    ['quit', 'QUIT'],
  ];
  for (const [phase, name] of phases) {
    t.equal(verdict(PERSON, failure({ phase, kind: 'timeout', detail: 'x' })).reason, `Mail server did not answer in time (${name})`);
  }
});

t.test('disposable domains are downgraded to risky, never chargeable', async (t) => {
  const d = verdict('john@mailinator.com', smtp(answerOf('accepted', '250 2.1.5 Ok')));
  t.strictSame(d, {
    email: 'john@mailinator.com',
    result: 'risky',
    reason: 'Disposable (temporary) email domain',
    reason_code: 'disposable_domain',
    syntax_valid: true,
    dns_valid: true,
    smtp_valid: true,
    is_role_based: false,
    is_free_provider: false,
    is_disposable: true,
    is_catchall: false,
    b2b_outbound_quality: 'none',
    b2b_quality: 'none',
    validation_layer: 'smtp',
    smtp_response: '250 2.1.5 Ok',
    flags: [],
    chargeable: false,
  });
  // A subdomain of a listed disposable domain, a role address: both downgraded.
  const sub = verdict('info@eu.mailinator.com', smtp(answerOf('accepted', '250 Ok')));
  t.strictSame([sub.result, sub.reason_code, sub.is_disposable, sub.role_type, sub.chargeable], ['risky', 'disposable_domain', true, 'information', false]);
  // Disposable and catch-all: risky, catch-all evidence kept, smtp_valid stays false.
  const ca = verdict('john@mailinator.com', smtp(answerOf('accepted', '250 Ok', { catchall: { catchall: true, mxIndex: 0 } })));
  t.strictSame([ca.result, ca.reason_code, ca.smtp_valid, ca.is_catchall, ca.catchall_confidence, ca.validation_layer], ['risky', 'disposable_domain', false, true, 'high', 'catchall']);
  // Invalid and unknown are not upgraded to risky.
  const inv = verdict('john@mailinator.com', smtp(answerOf('rejected', '550 5.1.1 no such user')));
  t.strictSame([inv.result, inv.reason_code, inv.is_disposable], ['invalid', 'mailbox_not_found', true]);
  const unk = verdict('john@mailinator.com', { layer: 'dns', answer: { kind: 'servfail' } });
  t.strictSame([unk.result, unk.reason_code, unk.is_disposable], ['unknown', 'dns_servfail', true]);
});

t.test('did_you_mean for a mistyped provider domain', async (t) => {
  const v = verdict('john@gmial.com', { layer: 'dns', answer: { kind: 'nxdomain' } });
  t.equal(v.did_you_mean, 'john@gmail.com');
  t.equal(v.result, 'invalid');
  t.equal(verdict('John.Smith@gmail.con', { layer: 'dns', answer: { kind: 'nxdomain' } }).did_you_mean, 'John.Smith@gmail.com');
  t.equal(verdict('john@hotmial.com', smtp(answerOf('accepted', '250 Ok'))).did_you_mean, 'john@hotmail.com');
  // No suggestion for a correct or unrelated domain.
  const g = verdict('john@gmail.com', smtp(answerOf('accepted', '250 Ok')));
  t.equal(g.did_you_mean, undefined);
  t.equal('did_you_mean' in g, false);
  t.equal(g.is_free_provider, true);
  t.equal(g.result, 'valid');
  t.equal('did_you_mean' in verdict(PERSON, smtp(answerOf('accepted', '250 Ok'))), false);
});

t.test('flags', async (t) => {
  const ok = answerOf('accepted', '250 Ok');
  t.strictSame(verdict('"john doe"@acme-industries.com', smtp(ok)).flags, ['quoted_local_part']);
  t.strictSame(verdict('josé@acme-industries.com', smtp(ok)).flags, ['utf8_local_part']);
  t.strictSame(verdict('user@bücher.de', smtp(ok)).flags, ['idn_domain']);
  t.strictSame(verdict(PERSON, smtp(ok, true)).flags, ['implicit_mx']);
  t.strictSame(verdict('josé@bücher.de', smtp(ok, true)).flags, ['utf8_local_part', 'idn_domain', 'implicit_mx']);
  t.strictSame(verdict(PERSON, smtp(ok)).flags, []);
  // implicit_mx is about the SMTP evidence only.
  t.strictSame(verdict('user@bücher.de', { layer: 'dns', answer: { kind: 'nxdomain' } }).flags, ['idn_domain']);
});

t.test('invariants over every kind of evidence', async (t) => {
  const emails = [PERSON, 'info@acme-industries.com', 'john@mailinator.com', 'john@gmail.com'];
  const evidence: Evidence[] = [
    smtp(answerOf('accepted', '250 Ok')),
    smtp(answerOf('accepted', '250 Ok', { catchall: { catchall: true, mxIndex: 0 } })),
    ...(['rejected', 'disabled', 'full', 'policy', 'tempfail', 'unclassified'] as const).map((c) => smtp(answerOf(c, '550 x'))),
    smtp({ kind: 'smtputf8_unsupported', mxIndex: 0 }),
    failure({ phase: 'rcpt', kind: 'timeout', detail: 'x' }),
    { layer: 'dns', answer: { kind: 'nxdomain' } },
    { layer: 'dns', answer: { kind: 'timeout' } },
  ];
  const quality = { valid: 'high', valid_role_based: 'low', risky: 'none', invalid: 'none', unknown: 'unknown' } as const;
  let n = 0;
  let charged = 0;
  for (const email of emails) {
    for (const e of evidence) {
      const v = verdict(email, e);
      n++;
      if (v.chargeable) charged++;
      if (v.b2b_quality !== v.b2b_outbound_quality) t.fail(`${email}: b2b_quality differs`);
      if (v.b2b_outbound_quality !== quality[v.result]) t.fail(`${email}: ${v.result} has quality ${v.b2b_outbound_quality}`);
      if (v.chargeable !== (v.result === 'valid')) t.fail(`${email}: chargeable ${v.chargeable} for ${v.result}`);
      if ((v.catchall_confidence !== undefined) !== v.is_catchall) t.fail(`${email}: catchall_confidence without is_catchall`);
      if ((v.role_type !== undefined) !== v.is_role_based) t.fail(`${email}: role_type without is_role_based`);
      if (v.is_catchall && (v.smtp_valid || v.result !== 'risky')) t.fail(`${email}: catch-all must be risky with smtp_valid false`);
    }
  }
  t.equal(n, 48);
  // Only PERSON and the gmail address, accepted by a non-catch-all server, are chargeable.
  t.equal(charged, 2);
});

t.test('SMTP layer: the big mail systems, exact result, code and reason (docs/smtp-replies.md)', async (t) => {
  const invalid = { result: 'invalid', reason_code: 'mailbox_not_found', smtp_valid: false, chargeable: false };
  const cases: Array<[string[], RcptClass, Record<string, unknown>]> = [
    [['550 5.4.1 Recipient address rejected: Access denied. AS(201806281) [BN1NAM02FT022.eop-nam02.prod.protection.outlook.com]'], 'rejected', { ...invalid, reason: "Microsoft 365 directory-based edge blocking: the recipient is not in the tenant's directory" }],
    [['550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup'], 'rejected', { ...invalid, reason: 'Microsoft Exchange: the recipient was not found by SMTP address lookup' }],
    [['550 #5.1.0 Address rejected.'], 'rejected', { ...invalid, reason: "Cisco Secure Email (IronPort): the recipient address was rejected, it is not in the organisation's directory", smtp_response: '550 5.1.0 Address rejected.' }],
    [['552 1 Requested mail action aborted, mailbox not found'], 'rejected', { ...invalid, reason: 'Yahoo / AOL: mailbox not found' }],
    [['550-5.1.1 The email account that you tried to reach does not exist. Please try', '550 5.1.1 double-checking the recipient\'s email address. a1si - gsmtp'], 'rejected', { ...invalid, reason: 'Google: the email account does not exist' }],
    [['550 Invalid Recipient - https://community.mimecast.com/docs/DOC-1369#550'], 'rejected', { ...invalid, reason: 'Mimecast: invalid recipient, not an address of the organisation' }],
    [['550 No such user (john.smith@acme-industries.com)'], 'rejected', { ...invalid, reason: 'Barracuda: no such user' }],
    // No provider marker: the generic reason.
    [['550 5.1.1 User Unknown'], 'rejected', { ...invalid, reason: 'Mailbox does not exist' }],
    [['550 5.1.1 User does not exist - <john.smith@acme-industries.com>'], 'rejected', { ...invalid, reason: 'Mailbox does not exist' }],
    [['550 Benutzer unbekannt'], 'rejected', { ...invalid, reason: 'Mailbox does not exist' }],
    // Policy and rate replies stay unknown, with the provider in the reason.
    [['550 5.7.606 Access denied, banned sending IP [192.0.2.10]'], 'policy', { result: 'unknown', reason_code: 'smtp_policy_block', reason: 'Microsoft 365 refused to verify the address: the sending IP or sender is on its block list' }],
    [["553 5.7.1 [BL21] Connections will not be accepted from 192.0.2.10, because the ip is in Spamhaus's list"], 'policy', { result: 'unknown', reason_code: 'smtp_policy_block', reason: 'Yahoo refused to verify the address on policy (block list or reputation of the sending IP)' }],
    [['554 5.7.9 Message not accepted for policy reasons'], 'policy', { result: 'unknown', reason_code: 'smtp_policy_block', reason: 'Yahoo refused to verify the address on policy (block list or reputation of the sending IP)' }],
    [['550 Administrative prohibition - envelope blocked'], 'policy', { result: 'unknown', reason_code: 'smtp_policy_block', reason: 'Mimecast refused to verify the address: a block policy (administrative prohibition, envelope blocked)' }],
    [['554 Service unavailable; Client host [192.0.2.10] blocked using Barracuda Reputation'], 'policy', { result: 'unknown', reason_code: 'smtp_policy_block', reason: "Barracuda refused to verify the address: the sending IP is on Barracuda Reputation's block list" }],
    [['554 5.7.1 Blocked by policy: mx0a-001b2d01.pphosted.com'], 'policy', { result: 'unknown', reason_code: 'smtp_policy_block', reason: 'Proofpoint refused to verify the address on policy or reputation' }],
    [['550 5.4.1 Relay Access Denied ATTR35'], 'policy', { result: 'unknown', reason_code: 'smtp_policy_block', reason: 'Mail server refused to verify the address (policy or block list)' }],
    [['421 4.7.0 [TSS04] Messages from 192.0.2.10 temporarily deferred due to unexpected volume or user complaints'], 'tempfail', { result: 'unknown', reason_code: 'smtp_tempfail', reason: 'Yahoo deferred the check (a [TS] code: volume, complaints or reputation of the sending IP), still deferred after 2 attempts' }],
  ];
  for (const [lines, cls, expected] of cases) {
    const v = verdict(PERSON, smtp({ kind: 'answer', cls, reply: reply(...lines), mxIndex: 0, attempts: 2, catchall: { catchall: false, mxIndex: 0 } }));
    const picked = Object.fromEntries(Object.keys(expected).map((k) => [k, v[k as keyof Verdict]]));
    t.strictSame(picked, expected, lines[0] ?? '');
  }
  // The reason names a provider rule only when that rule gives the class the outcome has: a
  // refused MAIL FROM (read as unclassified by the engine) keeps the generic reason.
  const viaMail = verdict(PERSON, smtp({ kind: 'answer', cls: 'unclassified', reply: reply('552 1 Requested mail action aborted, mailbox not found'), mxIndex: 0, attempts: 1, catchall: { catchall: false, mxIndex: 0 } }));
  t.equal(viaMail.reason, 'Mail server gave an answer that does not say whether the mailbox exists');
  t.equal(viaMail.reason_code, 'smtp_unclassified');
  // A session refused with a provider's own deferral names it too; a plain refusal does not.
  const tss04 = reply('421 4.7.0 [TSS04] Messages from 192.0.2.10 temporarily deferred due to unexpected volume or user complaints');
  const refused = verdict(PERSON, failure({ phase: 'mail', kind: 'reply', detail: '421', reply: tss04 }));
  t.strictSame([refused.result, refused.reason_code, refused.reason], ['unknown', 'smtp_tempfail', 'Yahoo deferred the check (a [TS] code: volume, complaints or reputation of the sending IP), during MAIL FROM']);
  const plain = verdict(PERSON, failure({ phase: 'mail', kind: 'reply', detail: '421', reply: reply('421 4.3.2 Service not available') }));
  t.strictSame([plain.result, plain.reason_code, plain.reason], ['unknown', 'smtp_tempfail', 'Mail server refused the session during MAIL FROM']);
});
