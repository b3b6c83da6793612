// One end-to-end check per simulated-internet behaviour, through HTTP: POST /v1/validate with
// the exact verdict, reason class, quality, credits, charge reason and layer.

import t from 'tap';
import { startStack } from '../helpers/stack.ts';

interface Case {
  name: string;
  email: string;
  result: string;
  reason_code: string;
  quality: string;
  credits: 0 | 1;
  charge_reason: string;
  layer: string;
  smtp_valid: boolean;
  dns_valid: boolean;
  extra?: Record<string, unknown>;
  /** smtp_response must start with this; null: no smtp_response at all. */
  smtp?: string | null;
}

const V = { result: 'valid', reason_code: 'accepted', quality: 'high', credits: 1, charge_reason: 'high_value_validation', layer: 'smtp', smtp_valid: true, dns_valid: true } as const;
const UNKNOWN_SMTP = { result: 'unknown', quality: 'unknown', credits: 0, charge_reason: 'unknown_not_charged', layer: 'smtp', smtp_valid: false, dns_valid: true } as const;
const INVALID_SMTP = { result: 'invalid', reason_code: 'mailbox_not_found', quality: 'none', credits: 0, charge_reason: 'invalid_not_charged', layer: 'smtp', smtp_valid: false, dns_valid: true } as const;
const INVALID_DNS = { result: 'invalid', quality: 'none', credits: 0, charge_reason: 'invalid_not_charged', layer: 'dns', smtp_valid: false, dns_valid: false, smtp: null } as const;
const UNKNOWN_DNS = { result: 'unknown', quality: 'unknown', credits: 0, charge_reason: 'unknown_not_charged', layer: 'dns', smtp_valid: false, dns_valid: false, smtp: null } as const;

const cases: Case[] = [
  { name: 'accepting MX, personal mailbox', email: 'jane.doe@accept.test', ...V, smtp: '250 2.1.5', extra: { reason: '', is_role_based: false, is_free_provider: false, is_catchall: false, is_disposable: false } },
  { name: '550 5.1.1 unknown mailbox', email: 'no.such.person@accept.test', ...INVALID_SMTP, smtp: '550 5.1.1' },
  { name: 'role address', email: 'info@accept.test', result: 'valid_role_based', reason_code: 'role_account', quality: 'low', credits: 0, charge_reason: 'role_based_not_charged', layer: 'smtp', smtp_valid: true, dns_valid: true, extra: { is_role_based: true, role_type: 'information' } },
  { name: 'catch-all domain (high confidence on the primary MX)', email: 'anyone@catchall.test', result: 'risky', reason_code: 'catch_all', quality: 'none', credits: 0, charge_reason: 'catchall_not_charged', layer: 'catchall', smtp_valid: false, dns_valid: true, extra: { is_catchall: true, catchall_confidence: 'high' } },
  { name: 'catch-all on a backup MX (medium confidence)', email: 'anyone@catchall-backup.test', result: 'risky', reason_code: 'catch_all', quality: 'none', credits: 0, charge_reason: 'catchall_not_charged', layer: 'catchall', smtp_valid: false, dns_valid: true, extra: { is_catchall: true, catchall_confidence: 'medium' } },
  { name: 'greylisting 450 4.7.1 then accept (retried)', email: 'jane.doe@greylist.test', ...V, smtp: '250 2.1.5' },
  { name: 'greylisting that never clears', email: 'jane.doe@greylist-forever.test', ...UNKNOWN_SMTP, reason_code: 'smtp_tempfail', smtp: '450 4.7.1' },
  { name: '421 at banner', email: 'jane.doe@banner421.test', ...UNKNOWN_SMTP, reason_code: 'smtp_tempfail', smtp: '421 4.3.2' },
  { name: 'tarpit (RCPT reply too late)', email: 'jane.doe@tarpit.test', ...UNKNOWN_SMTP, reason_code: 'smtp_timeout', smtp: null },
  { name: 'slow banner within the timeout', email: 'jane.doe@slowbanner.test', ...V },
  { name: 'connection dropped mid-dialogue', email: 'jane.doe@dropped.test', ...UNKNOWN_SMTP, reason_code: 'smtp_connection_failed', smtp: null },
  { name: 'STARTTLS required', email: 'jane.doe@starttls.test', ...V },
  { name: '5.7.1 policy block', email: 'jane.doe@policy.test', ...UNKNOWN_SMTP, reason_code: 'smtp_policy_block', smtp: '550 5.7.1' },
  { name: 'block list text without enhanced code', email: 'jane.doe@blocklist-text.test', ...UNKNOWN_SMTP, reason_code: 'smtp_policy_block', smtp: '554 Your IP address is listed' },
  { name: '552 mailbox full', email: 'jane.doe@mailboxfull.test', ...UNKNOWN_SMTP, reason_code: 'mailbox_full', smtp: '552 5.2.2' },
  { name: 'multi-MX with a dead primary', email: 'jane.doe@multimx.test', ...V },
  { name: 'every MX dead', email: 'jane.doe@alldead.test', ...UNKNOWN_SMTP, reason_code: 'smtp_connection_failed', smtp: null },
  { name: 'null MX (RFC 7505)', email: 'jane.doe@nullmx.test', ...INVALID_DNS, reason_code: 'null_mx' },
  { name: 'A-only domain (implicit MX)', email: 'jane.doe@aonly.test', ...V, extra: { flags: ['implicit_mx'] } },
  { name: 'no MX and no A (NODATA)', email: 'jane.doe@nodata.test', ...INVALID_DNS, reason_code: 'no_mail_records' },
  { name: 'NXDOMAIN', email: 'jane.doe@nxdomain.test', ...INVALID_DNS, reason_code: 'nxdomain' },
  { name: 'SERVFAIL is unknown, never invalid', email: 'jane.doe@servfail.test', ...UNKNOWN_DNS, reason_code: 'dns_servfail' },
  { name: 'DNS timeout is unknown, never invalid', email: 'jane.doe@timeout.test', ...UNKNOWN_DNS, reason_code: 'dns_timeout' },
  { name: 'IDN domain', email: 'jane.doe@bücher.test', ...V, extra: { flags: ['idn_domain'] } },
  { name: 'free provider', email: 'sim.person.one@gmail.com', ...V, extra: { is_free_provider: true } },
  { name: 'disposable domain', email: 'someone@mailinator.com', result: 'risky', reason_code: 'disposable_domain', quality: 'none', credits: 0, charge_reason: 'disposable_not_charged', layer: 'catchall', smtp_valid: false, dns_valid: true, extra: { is_disposable: true, is_catchall: true } },
  { name: 'quoted local part (accepted, flagged)', email: '"john..doe"@accept.test', ...V, extra: { flags: ['quoted_local_part'] } },
  { name: 'SMTPUTF8 local part on an MX that offers SMTPUTF8', email: 'josé@utf8.test', ...V, extra: { flags: ['utf8_local_part'] } },
  { name: 'SMTPUTF8 local part on an MX without SMTPUTF8', email: 'josé@accept.test', result: 'invalid', reason_code: 'smtputf8_unsupported', quality: 'none', credits: 0, charge_reason: 'invalid_not_charged', layer: 'smtp', smtp_valid: false, dns_valid: true, smtp: null },
  { name: 'EHLO refused, HELO fallback', email: 'jane.doe@heloonly.test', ...V },
  { name: 'multi-line 550 reply', email: 'nobody@multiline.test', ...INVALID_SMTP, smtp: '550 5.1.1 The email account that you tried to reach does not exist. Please try' },
  { name: 'user unknown in text, no enhanced code', email: 'nobody@usertext.test', ...INVALID_SMTP, smtp: '550 Requested action not taken' },
  { name: '553 5.1.3: the server calls the address malformed', email: 'nobody@badaddr553.test', ...INVALID_SMTP, reason_code: 'address_malformed', smtp: '553 5.1.3' },
  { name: 'typo of a common domain', email: 'jane.doe@gmial.com', ...INVALID_DNS, reason_code: 'nxdomain', extra: { did_you_mean: 'jane.doe@gmail.com' } },
  { name: 'bad syntax is 200 invalid', email: 'jane..doe@accept.test', result: 'invalid', reason_code: 'invalid_syntax', quality: 'none', credits: 0, charge_reason: 'invalid_not_charged', layer: 'syntax', smtp_valid: false, dns_valid: false, smtp: null, extra: { syntax_valid: false } },
  { name: 'slow replies on every command', email: 'jane.doe@slowmx.test', ...V },
];

const stack = await startStack();
t.teardown(() => stack.close());

for (const c of cases) {
  t.test(c.name, async (t) => {
    const before = (await stack.call('GET', '/v1/credits')).body.balance;
    const res = await stack.call('POST', '/v1/validate', { body: { email: c.email } });
    t.equal(res.status, 200);
    const b = res.body;
    t.equal(b.email, c.email);
    t.equal(b.result, c.result, 'result');
    t.equal(b.reason_code, c.reason_code, 'reason_code');
    t.equal(b.b2b_outbound_quality, c.quality, 'b2b_outbound_quality');
    t.equal(b.b2b_quality, c.quality, 'b2b_quality mirrors b2b_outbound_quality');
    t.equal(b.credits_charged, c.credits, 'credits_charged');
    t.equal(b.charge_reason, c.charge_reason, 'charge_reason');
    t.equal(b.validation_layer, c.layer, 'validation_layer');
    t.equal(b.smtp_valid, c.smtp_valid, 'smtp_valid');
    t.equal(b.dns_valid, c.dns_valid, 'dns_valid');
    t.equal(typeof b.reason, 'string');
    if (c.result !== 'valid') t.not(b.reason, '', 'non-valid results explain themselves');
    if (c.smtp === null) t.notOk('smtp_response' in b, 'no smtp_response');
    else if (c.smtp !== undefined) t.equal(String(b.smtp_response).slice(0, c.smtp.length), c.smtp, 'smtp_response');
    if (!b.is_catchall) t.notOk('catchall_confidence' in b, 'catchall_confidence only with is_catchall');
    if (!b.is_role_based) t.notOk('role_type' in b, 'role_type only with is_role_based');
    for (const [k, v] of Object.entries(c.extra ?? {})) t.same(b[k], v, k);
    const after = (await stack.call('GET', '/v1/credits')).body.balance;
    t.equal(before - after, c.credits, 'the balance moved by exactly credits_charged');
  });
}

t.test('SMTP etiquette over the whole run: never DATA, every session ends with QUIT', async (t) => {
  const stats = Object.values(stack.sim.stats());
  t.equal(stats.reduce((n, s) => n + s.data, 0), 0, 'no DATA command was ever sent');
  const ehloNames = stats.reduce((n, s) => n + s.ehlo + s.helo, 0);
  t.ok(ehloNames > 0);
});
