// The big mail systems end to end (docs/smtp-replies.md): the simulated internet's provider
// servers (test/sim/providers.ts) answer in each provider's own words, and POST /v1/validate
// turns every "no such user" into invalid / mailbox_not_found with the provider in the reason,
// every block or deferral into unknown with its exact code, and never charges for either.

import t from 'tap';
import { startStack } from '../helpers/stack.ts';
import { SIM_DOMAINS, SIM_UNKNOWN_LOCAL } from '../sim/index.ts';

interface Expect {
  result: string;
  reason_code: string;
  reason: string;
  /** smtp_response exactly (the reply on one line, as formatReply renders it). */
  smtp: string;
}

const NOT_FOUND = (reason: string, smtp: string): Expect => ({ result: 'invalid', reason_code: 'mailbox_not_found', reason, smtp });
const GENERIC = 'Mailbox does not exist';

const UNKNOWN_MAILBOX: Record<string, Expect> = {
  'm365.test': NOT_FOUND("Microsoft 365 directory-based edge blocking: the recipient is not in the tenant's directory", '550 5.4.1 Recipient address rejected: Access denied. AS(201806281) [BN1NAM02FT022.eop-nam02.prod.protection.outlook.com]'),
  'exchange.test': NOT_FOUND('Microsoft Exchange: the recipient was not found by SMTP address lookup', '550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup'),
  'ironport.test': NOT_FOUND("Cisco Secure Email (IronPort): the recipient address was rejected, it is not in the organisation's directory", '550 5.1.0 Address rejected.'),
  'yahoo.test': NOT_FOUND('Yahoo / AOL: mailbox not found', '552 1 Requested mail action aborted, mailbox not found'),
  'workspace.test': NOT_FOUND(
    'Google: the email account does not exist',
    "550 5.1.1 The email account that you tried to reach does not exist. Please try double-checking the recipient's email address for typos or unnecessary spaces. For more information, go to https://support.google.com/mail/?p=NoSuchUser a1si.123 - gsmtp",
  ),
  'proofpoint.test': NOT_FOUND(GENERIC, '550 5.1.1 User Unknown'),
  'mimecast.test': NOT_FOUND('Mimecast: invalid recipient, not an address of the organisation', '550 Invalid Recipient - https://community.mimecast.com/docs/DOC-1369#550'),
  'barracuda.test': NOT_FOUND('Barracuda: no such user', '550 No such user (no.such.user@barracuda.test)'),
  'zoho.test': NOT_FOUND(GENERIC, '550 5.1.1 User does not exist - <no.such.user@zoho.test>'),
  'latin1.test': NOT_FOUND(GENERIC, '550 Empfänger unbekannt'),
  'cyrillic.test': NOT_FOUND(GENERIC, '550 Пользователь не найден'),
  'qmail.test': NOT_FOUND(GENERIC, '511 5.1.1 sorry, no mailbox here by that name (#5.1.1 - chkuser)'),
};

const POLICY = (reason: string, smtp: string): Expect => ({ result: 'unknown', reason_code: 'smtp_policy_block', reason, smtp });
const BLOCKED: Record<string, Expect> = {
  'm365-banned.test': POLICY(
    'Microsoft 365 refused to verify the address: the sending IP or sender is on its block list',
    '550 5.7.606 Access denied, banned sending IP [127.0.0.1]. To request removal from this list please visit https://sender.office.com/ and follow the directions. For more information please go to http://go.microsoft.com/fwlink/?LinkID=526655 AS(1430)',
  ),
  'yahoo-blocked.test': POLICY(
    'Yahoo refused to verify the address on policy (block list or reputation of the sending IP)',
    "553 5.7.1 [BL21] Connections will not be accepted from 127.0.0.1, because the ip is in Spamhaus's list; see https://postmaster.yahooinc.com/error-codes",
  ),
  'proofpoint-blocked.test': POLICY('Proofpoint refused to verify the address on policy or reputation', '554 5.7.1 Blocked by policy: mx0a-00000001.pphosted.com'),
  'mimecast-blocked.test': POLICY(
    'Mimecast refused to verify the address: a block policy (administrative prohibition, envelope blocked)',
    '550 Administrative prohibition - envelope blocked - https://community.mimecast.com/docs/DOC-1369#550',
  ),
  'barracuda-blocked.test': POLICY(
    "Barracuda refused to verify the address: the sending IP is on Barracuda Reputation's block list",
    '554 Service unavailable; Client host [127.0.0.1] blocked using Barracuda Reputation; https://www.barracudanetworks.com/reputation/?pr=1&ip=127.0.0.1',
  ),
};

const stack = await startStack();
t.teardown(() => stack.close());

const providerDomains = SIM_DOMAINS.filter((d) => d.mx.some((m) => m.smtp === 'provider'));

t.test('every provider domain of the sim is covered here', async (t) => {
  const covered = new Set([...Object.keys(UNKNOWN_MAILBOX), ...Object.keys(BLOCKED), 'yahoo-deferred.test']);
  t.strictSame(providerDomains.map((d) => d.domain).sort(), [...covered].sort());
});

async function validate(email: string): Promise<Record<string, any>> {
  const res = await stack.call('POST', '/v1/validate', { body: { email } });
  if (res.status !== 200) throw new Error(`${email}: ${res.status} ${res.text}`);
  return res.body;
}

for (const d of providerDomains) {
  t.test(`${d.domain} (${d.description})`, async (t) => {
    const known = await validate(`jane.doe@${d.domain}`);
    const unknown = await validate(`${SIM_UNKNOWN_LOCAL}@${d.domain}`);
    // The table's expectations (what jobs.test.ts checks in bulk too).
    t.strictSame([known.result, known.reason_code], [d.known.result, d.known.reason_code], 'known mailbox: the table verdict');
    t.strictSame([unknown.result, unknown.reason_code], [d.unknown.result, d.unknown.reason_code], 'unknown mailbox: the table verdict');
    const exp = UNKNOWN_MAILBOX[d.domain];
    if (exp) {
      t.strictSame([known.result, known.reason_code, known.credits_charged], ['valid', 'accepted', 1], 'the known mailbox is valid and charged');
      t.strictSame(
        { result: unknown.result, reason_code: unknown.reason_code, reason: unknown.reason, smtp: unknown.smtp_response },
        { result: exp.result, reason_code: exp.reason_code, reason: exp.reason, smtp: exp.smtp },
      );
      t.strictSame([unknown.validation_layer, unknown.smtp_valid, unknown.credits_charged, unknown.charge_reason], ['smtp', false, 0, 'invalid_not_charged']);
    }
    const block = BLOCKED[d.domain];
    if (block) {
      for (const v of [known, unknown]) {
        t.strictSame(
          { result: v.result, reason_code: v.reason_code, reason: v.reason, smtp: v.smtp_response },
          { result: block.result, reason_code: block.reason_code, reason: block.reason, smtp: block.smtp },
        );
        t.strictSame([v.credits_charged, v.charge_reason], [0, 'unknown_not_charged']);
      }
    }
    if (d.domain === 'yahoo-deferred.test') {
      for (const v of [known, unknown]) {
        t.strictSame([v.result, v.reason_code, v.credits_charged], ['unknown', 'smtp_tempfail', 0]);
        t.match(v.smtp_response, /^421 4\.7\.0 \[TSS04\] Messages from 127\.0\.0\.1 temporarily deferred/);
        t.match(v.reason, /^Yahoo deferred the check \(a \[TS\] code: volume, complaints or reputation of the sending IP\), during (MAIL FROM|RCPT TO)$/);
      }
    }
  });
}
