// The simulated internet as data: every domain, what DNS answers for it, which loopback address
// each MX host has, how the SMTP server there behaves, and the verdict a correct verifier should
// reach. index.ts builds the DNS zone and the SMTP servers from this table, so the table, the
// servers, the README and the tests cannot drift apart.
//
// Addresses: DNS on 127.0.0.1; live MX hosts on 127.0.10.N; dead MX hosts on 127.0.254.N (nothing
// listens there, so a connection is refused at once). Every 127.x.y.z is local on Linux.

import type { ProviderId } from './providers.ts';

/** Mirrors `ValidationResult` in packages/verifier/src/types.ts (kept local: the sim does not depend on the code it tests). */
export type SimResult = 'valid' | 'valid_role_based' | 'risky' | 'invalid' | 'unknown';

/** The subset of `ReasonCode` (packages/verifier/src/types.ts) that the sim's domains are expected to produce. */
export type SimReasonCode =
  | 'accepted'
  | 'role_account'
  | 'catch_all'
  | 'disposable_domain'
  | 'nxdomain'
  | 'no_mail_records'
  | 'null_mx'
  | 'dns_servfail'
  | 'dns_timeout'
  | 'mailbox_not_found'
  | 'address_malformed'
  | 'smtputf8_unsupported'
  | 'mailbox_full'
  | 'smtp_policy_block'
  | 'smtp_tempfail'
  | 'smtp_timeout'
  | 'smtp_connection_failed';

export interface SimExpectation {
  result: SimResult;
  reason_code: SimReasonCode;
}

/** How the SMTP server on one MX address behaves. `dead`: nothing listens on that address. */
export type SmtpKind =
  | 'normal' // smtp-server: known mailboxes 250 2.1.5, others 550 5.1.1
  | 'catchall' // smtp-server: every RCPT 250 2.1.5
  | 'greylist' // smtp-server: 450 4.7.1 until greylistMs after the first attempt of a (sender, recipient) pair
  | 'greylist-forever' // smtp-server: every RCPT 450 4.7.1
  | 'banner421' // raw: 421 4.3.2 banner, then closes
  | 'tarpit' // smtp-server: the RCPT reply comes after tarpitMs
  | 'slow-banner' // smtp-server: the 220 banner comes after slowBannerMs
  | 'drop-on-rcpt' // smtp-server: RCPT destroys the connection without a reply
  | 'starttls-required' // smtp-server: MAIL before STARTTLS is 530 5.7.0
  | 'policy-block' // smtp-server: every RCPT 550 5.7.1 (Spamhaus listing)
  | 'blocklist-text' // raw, no ENHANCEDSTATUSCODES: every RCPT "554 Your IP address is listed on a blocklist"
  | 'mailbox-full' // smtp-server: known mailboxes 552 5.2.2, others 550 5.1.1
  | 'smtputf8' // smtp-server: normal, advertises SMTPUTF8, knows josé
  | 'helo-only' // raw: EHLO is 502 5.5.2, HELO works
  | 'multiline' // raw: multi-line banner, EHLO and 550 reply
  | 'user-text' // raw, no ENHANCEDSTATUSCODES: "550 Requested action not taken: mailbox unavailable (user unknown)"
  | 'bad-address-553' // smtp-server: unknown mailboxes 553 5.1.3
  | 'slow-replies' // smtp-server: normal, every reply (and the banner) 150 ms late
  | 'postfix-limits' // raw: normal mailboxes, with the limits Postfix applies to a client that never sends DATA (SimMx.limits)
  | 'provider' // raw (providers.ts): a big mail system's own replies (SimMx.provider)
  | 'dead';

/**
 * What a real Postfix (postconf(5)) or Exim does to a client that only probes: every limit here
 * bites a validator, none a sender that delivers mail. Defaults are Postfix's own.
 */
export interface MxLimits {
  /** smtpd_soft_error_limit (10): once a session has made more errors than this, every reply waits errorSleepMs (smtpd_error_sleep_time, 1 s). */
  softErrors?: number;
  /** smtpd_hard_error_limit (20): at this many errors the server sends `421 4.7.0 <host> Error: too many errors` and closes. */
  hardErrors?: number;
  /** smtpd_junk_command_limit (100): RSET, NOOP, VRFY and ETRN beyond this many each count as an error. */
  junkCommands?: number;
  /** smtpd_recipient_limit (1000): recipients of one transaction beyond this get `<code> 4.5.3 … too many recipients`. */
  recipientsPerTransaction?: number;
  /** 452 (Postfix) or 451 (an Exim ACL). */
  recipientLimitCode?: 451 | 452;
  /** smtpd_client_connection_count_limit (50): a client's connection beyond this many open ones gets `421 4.7.0` at the banner. */
  connectionsPerClient?: number;
  /**
   * in_flow_delay: the first accepted RCPT of a transaction takes a flow token from the server's
   * pool (shared by its sessions), and once none is left waits the sim's inFlowDelayMs. Probes never
   * deliver, so tokens never come back. (Postfix 3.7 by hand: about 100 transactions, then 1 s each.)
   */
  inFlowDelay?: boolean;
  /** Flow tokens the server starts with (100); a server of a shared instance (MxServerSpec.instance) uses the instance's pool instead. */
  flowTokens?: number;
  /**
   * How long anvil keeps counting a connection after the session ended (0). Postfix's smtpd tells
   * anvil when it hangs up, and anvil is a separate process: under load the count-down lands later,
   * so a client that reconnects at once can meet `421 too many connections` though it holds fewer.
   */
  anvilLagMs?: number;
}

/** What the DNS server does for the domain name itself. */
export type DnsKind =
  | 'mx' // MX records, each exchange with an A record
  | 'implicit-mx' // no MX; an A record on the domain itself (RFC 5321 5.1)
  | 'null-mx' // MX 0 "." (RFC 7505)
  | 'nodata' // the name exists, NOERROR with no records of any type
  | 'nxdomain' // rcode 3
  | 'servfail' // rcode 2
  | 'timeout'; // the server never answers

export interface SimMx {
  priority: number;
  /** Host name as served in the MX record ('.' for the null MX; the domain itself for an implicit MX). */
  exchange: string;
  /** A record of the exchange, or null (null MX). */
  ip: string | null;
  smtp: SmtpKind | null;
  /** For `postfix-limits`: the limits that differ from Postfix's defaults. */
  limits?: MxLimits;
  /** For `provider`: whose replies the server gives (test/sim/providers.ts). */
  provider?: ProviderId;
}

export interface SimDomain {
  /** The name as DNS serves it (ASCII, punycode for an IDN). */
  domain: string;
  /** Unicode form, for an IDN. */
  unicode?: string;
  /** Stable name of the behaviour this domain demonstrates. */
  behaviour: string;
  dns: DnsKind;
  /** MX hosts in priority order (for an implicit MX: the domain itself, priority 0, not served as an MX record). */
  mx: SimMx[];
  /** One line for people (README, `npm run sim`). */
  description: string;
  /** Expected verdict for a known personal mailbox: `jane.doe@<domain>`. */
  known: SimExpectation;
  /** Expected verdict for a mailbox that does not exist: `${SIM_UNKNOWN_LOCAL}@<domain>`. */
  unknown: SimExpectation;
  note?: string;
}

/** Mailboxes that exist on every server that knows mailboxes. Compared case-insensitively; `"john..doe"` is a quoted local part. */
export const SIM_KNOWN_MAILBOXES: readonly string[] = [
  'jane.doe',
  'john.smith',
  'info',
  'support',
  'sales',
  'admin',
  'postmaster',
  '"john..doe"',
];
/** Extra mailboxes on the gmail.com MX. */
export const SIM_GMAIL_MAILBOXES: readonly string[] = ['sim.person.one', 'sim.person.two'];
/** Extra mailbox on the SMTPUTF8 server (utf8.test). */
export const SIM_UTF8_MAILBOXES: readonly string[] = ['josé'];
/**
 * Extra mailboxes on people.test, one B2B address pattern each, for the email finder: Maria
 * Garcia ({f}{last}), Omar Haddad ({first}), Lena Fischer ({first}_{last}), Wei Chen
 * ({last}.{first}), Zoë O'Neil ({first}.{last} without the accent and apostrophe), José Müller
 * ({first}.{last}), Ana Lima ({f}.{last}). All fictional.
 */
export const SIM_PEOPLE_MAILBOXES: readonly string[] = ['mgarcia', 'omar', 'lena_fischer', 'chen.wei', 'zoe.oneil', 'jose.muller', 'a.lima'];
/** A local part no server knows (catch-all servers accept it anyway). */
export const SIM_UNKNOWN_LOCAL = 'no.such.user';

export const SIM_DNS_IP = '127.0.0.1';
export const SIM_TTL = 300;
/** Extra delay of every reply of the slowmx.test server. */
export const SLOW_MX_LATENCY_MS = 150;

const live = (n: number): string => `127.0.10.${n}`;
const dead = (n: number): string => `127.0.254.${n}`;

const VALID: SimExpectation = { result: 'valid', reason_code: 'accepted' };
const NOT_FOUND: SimExpectation = { result: 'invalid', reason_code: 'mailbox_not_found' };
const CATCH_ALL: SimExpectation = { result: 'risky', reason_code: 'catch_all' };
const both = (e: SimExpectation): { known: SimExpectation; unknown: SimExpectation } => ({ known: e, unknown: e });

function mx1(domain: string, n: number, smtp: SmtpKind, priority = 10): SimMx {
  return { priority, exchange: `mx1.${domain}`, ip: live(n), smtp };
}

const POLICY_BLOCK: SimExpectation = { result: 'unknown', reason_code: 'smtp_policy_block' };

/** A domain whose MX speaks a big mail system's replies (providers.ts; docs/smtp-replies.md). */
function providerDomain(domain: string, n: number, provider: ProviderId, description: string, expect: { known: SimExpectation; unknown: SimExpectation }): SimDomain {
  return { domain, behaviour: `provider-${provider}`, dns: 'mx', mx: [{ ...mx1(domain, n, 'provider'), provider }], description, ...expect };
}
const NO_SUCH_USER = { known: VALID, unknown: NOT_FOUND };

export const SIM_DOMAINS: readonly SimDomain[] = [
  {
    domain: 'accept.test',
    behaviour: 'accept',
    dns: 'mx',
    mx: [mx1('accept.test', 1, 'normal')],
    description: 'normal server, no SMTPUTF8',
    known: VALID,
    unknown: NOT_FOUND,
  },
  {
    domain: 'catchall.test',
    behaviour: 'catchall',
    dns: 'mx',
    mx: [mx1('catchall.test', 2, 'catchall')],
    description: 'accepts every RCPT',
    ...both(CATCH_ALL),
  },
  {
    domain: 'greylist.test',
    behaviour: 'greylist',
    dns: 'mx',
    mx: [mx1('greylist.test', 3, 'greylist')],
    description: '450 4.7.1 for a (sender, recipient) pair until greylistMs after its first attempt, then normal',
    known: VALID,
    unknown: NOT_FOUND,
    note: 'for a verifier that retries after greylistMs; one that gives up after the first 450 gets unknown/smtp_tempfail',
  },
  {
    domain: 'greylist-forever.test',
    behaviour: 'greylist-forever',
    dns: 'mx',
    mx: [mx1('greylist-forever.test', 4, 'greylist-forever')],
    description: 'every RCPT 450 4.7.1 greylisted',
    ...both({ result: 'unknown', reason_code: 'smtp_tempfail' }),
  },
  {
    domain: 'banner421.test',
    behaviour: 'banner-421',
    dns: 'mx',
    mx: [mx1('banner421.test', 5, 'banner421')],
    description: '421 4.3.2 banner, then closes',
    ...both({ result: 'unknown', reason_code: 'smtp_tempfail' }),
  },
  {
    domain: 'tarpit.test',
    behaviour: 'tarpit',
    dns: 'mx',
    mx: [mx1('tarpit.test', 6, 'tarpit')],
    description: 'normal, but the RCPT reply comes only after tarpitMs (30 s)',
    ...both({ result: 'unknown', reason_code: 'smtp_timeout' }),
    note: 'assumes the verifier RCPT timeout is shorter than tarpitMs',
  },
  {
    domain: 'slowbanner.test',
    behaviour: 'slow-banner',
    dns: 'mx',
    mx: [mx1('slowbanner.test', 7, 'slow-banner')],
    description: '220 banner only after slowBannerMs (400 ms), then normal',
    known: VALID,
    unknown: NOT_FOUND,
  },
  {
    domain: 'dropped.test',
    behaviour: 'drop-on-rcpt',
    dns: 'mx',
    mx: [mx1('dropped.test', 8, 'drop-on-rcpt')],
    description: 'normal until RCPT, then the connection is destroyed without a reply',
    ...both({ result: 'unknown', reason_code: 'smtp_connection_failed' }),
  },
  {
    domain: 'starttls.test',
    behaviour: 'starttls-required',
    dns: 'mx',
    mx: [mx1('starttls.test', 9, 'starttls-required')],
    description: 'MAIL before STARTTLS is 530 5.7.0; normal after STARTTLS and EHLO',
    known: VALID,
    unknown: NOT_FOUND,
  },
  {
    domain: 'policy.test',
    behaviour: 'policy-block',
    dns: 'mx',
    mx: [mx1('policy.test', 10, 'policy-block')],
    description: 'every RCPT 550 5.7.1 blocked using zen.spamhaus.org',
    ...both({ result: 'unknown', reason_code: 'smtp_policy_block' }),
  },
  {
    domain: 'blocklist-text.test',
    behaviour: 'blocklist-text',
    dns: 'mx',
    mx: [mx1('blocklist-text.test', 11, 'blocklist-text')],
    description: 'no enhanced codes; every RCPT "554 Your IP address is listed on a blocklist"',
    ...both({ result: 'unknown', reason_code: 'smtp_policy_block' }),
  },
  {
    domain: 'mailboxfull.test',
    behaviour: 'mailbox-full',
    dns: 'mx',
    mx: [mx1('mailboxfull.test', 12, 'mailbox-full')],
    description: 'known mailboxes 552 5.2.2 Mailbox full, others 550 5.1.1',
    known: { result: 'unknown', reason_code: 'mailbox_full' },
    unknown: NOT_FOUND,
  },
  {
    domain: 'multimx.test',
    behaviour: 'mx-failover',
    dns: 'mx',
    mx: [
      { priority: 10, exchange: 'mx1.multimx.test', ip: dead(1), smtp: 'dead' },
      { priority: 20, exchange: 'mx2.multimx.test', ip: live(13), smtp: 'normal' },
    ],
    description: 'MX 10 dead, MX 20 normal: failover',
    known: VALID,
    unknown: NOT_FOUND,
  },
  {
    domain: 'alldead.test',
    behaviour: 'all-mx-dead',
    dns: 'mx',
    mx: [
      { priority: 10, exchange: 'mx1.alldead.test', ip: dead(2), smtp: 'dead' },
      { priority: 20, exchange: 'mx2.alldead.test', ip: dead(3), smtp: 'dead' },
    ],
    description: 'both MX hosts dead (connection refused)',
    ...both({ result: 'unknown', reason_code: 'smtp_connection_failed' }),
  },
  {
    domain: 'catchall-backup.test',
    behaviour: 'catchall-backup-mx',
    dns: 'mx',
    mx: [
      { priority: 10, exchange: 'mx1.catchall-backup.test', ip: dead(4), smtp: 'dead' },
      { priority: 20, exchange: 'mx2.catchall-backup.test', ip: live(14), smtp: 'catchall' },
    ],
    description: 'MX 10 dead, MX 20 accepts everything',
    ...both(CATCH_ALL),
  },
  {
    domain: 'nullmx.test',
    behaviour: 'null-mx',
    dns: 'null-mx',
    mx: [{ priority: 0, exchange: '.', ip: null, smtp: null }],
    description: 'MX 0 "." (RFC 7505 null MX)',
    ...both({ result: 'invalid', reason_code: 'null_mx' }),
  },
  {
    domain: 'aonly.test',
    behaviour: 'implicit-mx',
    dns: 'implicit-mx',
    mx: [{ priority: 0, exchange: 'aonly.test', ip: live(15), smtp: 'normal' }],
    description: 'no MX; A record of the domain itself (implicit MX) -> normal server',
    known: VALID,
    unknown: NOT_FOUND,
  },
  {
    domain: 'nodata.test',
    behaviour: 'nodata',
    dns: 'nodata',
    mx: [],
    description: 'name exists, NOERROR with no MX/A/AAAA',
    ...both({ result: 'invalid', reason_code: 'no_mail_records' }),
  },
  {
    domain: 'nxdomain.test',
    behaviour: 'nxdomain',
    dns: 'nxdomain',
    mx: [],
    description: 'NXDOMAIN (as is every name not in this table, e.g. gmial.com)',
    ...both({ result: 'invalid', reason_code: 'nxdomain' }),
  },
  {
    domain: 'servfail.test',
    behaviour: 'servfail',
    dns: 'servfail',
    mx: [],
    description: 'SERVFAIL',
    ...both({ result: 'unknown', reason_code: 'dns_servfail' }),
  },
  {
    domain: 'timeout.test',
    behaviour: 'dns-timeout',
    dns: 'timeout',
    mx: [],
    description: 'the DNS server never answers',
    ...both({ result: 'unknown', reason_code: 'dns_timeout' }),
  },
  {
    domain: 'xn--bcher-kva.test',
    unicode: 'bücher.test',
    behaviour: 'idn',
    dns: 'mx',
    mx: [mx1('xn--bcher-kva.test', 16, 'normal')],
    description: 'IDN bücher.test, normal server',
    known: VALID,
    unknown: NOT_FOUND,
  },
  {
    domain: 'utf8.test',
    behaviour: 'smtputf8',
    dns: 'mx',
    mx: [mx1('utf8.test', 17, 'smtputf8')],
    description: 'normal, advertises SMTPUTF8, also knows josé',
    known: VALID,
    unknown: NOT_FOUND,
  },
  {
    domain: 'heloonly.test',
    behaviour: 'helo-only',
    dns: 'mx',
    mx: [mx1('heloonly.test', 18, 'helo-only')],
    description: 'EHLO 502 5.5.2, HELO 250, then normal (no STARTTLS)',
    known: VALID,
    unknown: NOT_FOUND,
  },
  {
    domain: 'multiline.test',
    behaviour: 'multiline',
    dns: 'mx',
    mx: [mx1('multiline.test', 19, 'multiline')],
    description: 'multi-line banner, EHLO and 550 5.1.1 reply',
    known: VALID,
    unknown: NOT_FOUND,
  },
  {
    domain: 'usertext.test',
    behaviour: 'user-text',
    dns: 'mx',
    mx: [mx1('usertext.test', 20, 'user-text')],
    description: 'no enhanced codes; "550 Requested action not taken: mailbox unavailable (user unknown)"',
    known: VALID,
    unknown: NOT_FOUND,
  },
  {
    domain: 'badaddr553.test',
    behaviour: 'bad-address-553',
    dns: 'mx',
    mx: [mx1('badaddr553.test', 21, 'bad-address-553')],
    description: 'unknown mailboxes 553 5.1.3 Bad recipient address syntax',
    known: VALID,
    unknown: { result: 'invalid', reason_code: 'address_malformed' },
  },
  {
    domain: 'gmail.com',
    behaviour: 'free-provider',
    dns: 'mx',
    mx: [{ priority: 5, exchange: 'gmail-smtp-in.l.google.com.sim', ip: live(22), smtp: 'normal' }],
    description: 'normal server that also knows sim.person.one and sim.person.two; the readiness domain',
    known: VALID,
    unknown: NOT_FOUND,
    note: 'free provider: is_free_provider true',
  },
  {
    domain: 'mailinator.com',
    behaviour: 'disposable',
    dns: 'mx',
    mx: [mx1('mailinator.com', 23, 'catchall')],
    description: 'disposable provider, accepts every RCPT',
    ...both({ result: 'risky', reason_code: 'disposable_domain' }),
  },
  {
    domain: 'postfix.test',
    behaviour: 'postfix-limits',
    dns: 'mx',
    mx: [{ ...mx1('postfix.test', 25, 'postfix-limits'), limits: { inFlowDelay: true, flowTokens: 2 } }],
    description: "Postfix's defaults for a client that never sends DATA: after 10 errors every reply 1 s late, 421 to the command after the 20th, RSET/NOOP beyond 100 count as errors, the first accepted RCPT of a transaction 1 s late once the server's flow tokens are spent (2 here; about 100 on a real Postfix)",
    known: VALID,
    unknown: NOT_FOUND,
  },
  {
    domain: 'rcptlimit.test',
    behaviour: 'recipient-limit-452',
    dns: 'mx',
    mx: [{ ...mx1('rcptlimit.test', 26, 'postfix-limits'), limits: { recipientsPerTransaction: 3 } }],
    description: 'Postfix with smtpd_recipient_limit=3: the 4th RCPT of a transaction is 452 4.5.3 Error: too many recipients',
    known: VALID,
    unknown: NOT_FOUND,
  },
  {
    domain: 'rcptlimit451.test',
    behaviour: 'recipient-limit-451',
    dns: 'mx',
    mx: [{ ...mx1('rcptlimit451.test', 27, 'postfix-limits'), limits: { recipientsPerTransaction: 3, recipientLimitCode: 451 } }],
    description: 'an Exim ACL: the 4th RCPT of a transaction is 451 4.5.3 Too many recipients',
    known: VALID,
    unknown: NOT_FOUND,
  },
  {
    domain: 'connlimit.test',
    behaviour: 'connection-limit',
    dns: 'mx',
    mx: [{ ...mx1('connlimit.test', 28, 'postfix-limits'), limits: { connectionsPerClient: 2 } }],
    description: 'Postfix allowing 2 connections per client: a 3rd open one gets 421 4.7.0 at the banner',
    known: VALID,
    unknown: NOT_FOUND,
  },
  {
    domain: 'slowmx.test',
    behaviour: 'slow-replies',
    dns: 'mx',
    mx: [mx1('slowmx.test', 24, 'slow-replies')],
    description: `normal, every reply (banner included) ${SLOW_MX_LATENCY_MS} ms late`,
    known: VALID,
    unknown: NOT_FOUND,
  },
  // The big mail systems (providers.ts): their "no such user" is invalid, their blocks and
  // deferrals stay unknown.
  providerDomain('m365.test', 29, 'microsoft-365', 'Microsoft 365: unknown 550 5.4.1 Recipient address rejected: Access denied. AS(201806281) (directory-based edge blocking)', NO_SUCH_USER),
  providerDomain('exchange.test', 30, 'exchange-resolver', 'Microsoft Exchange: unknown 550 5.1.10 RESOLVER.ADR.RecipientNotFound', NO_SUCH_USER),
  providerDomain('m365-banned.test', 31, 'microsoft-banned-ip', 'Microsoft 365: every RCPT 550 5.7.606 Access denied, banned sending IP', both(POLICY_BLOCK)),
  providerDomain('ironport.test', 32, 'cisco-ironport', "Cisco Secure Email (IronPort), no ENHANCEDSTATUSCODES: unknown 550 #5.1.0 Address rejected.", NO_SUCH_USER),
  providerDomain('yahoo.test', 33, 'yahoo', 'Yahoo / AOL: unknown 552 1 Requested mail action aborted, mailbox not found', NO_SUCH_USER),
  providerDomain('yahoo-deferred.test', 34, 'yahoo-deferred', 'Yahoo: MAIL FROM 421 4.7.0 [TSS04] ... temporarily deferred, then closes', both({ result: 'unknown', reason_code: 'smtp_tempfail' })),
  providerDomain('yahoo-blocked.test', 35, 'yahoo-blocked', "Yahoo: every RCPT 553 5.7.1 [BL21] ... because the ip is in Spamhaus's list", both(POLICY_BLOCK)),
  providerDomain('workspace.test', 36, 'google', 'Google: unknown 550-5.1.1 The email account that you tried to reach does not exist (4 lines)', NO_SUCH_USER),
  providerDomain('proofpoint.test', 37, 'proofpoint', 'Proofpoint: unknown 550 5.1.1 User Unknown', NO_SUCH_USER),
  providerDomain('proofpoint-blocked.test', 38, 'proofpoint-blocked', 'Proofpoint: every RCPT 554 5.7.1 Blocked by policy: ...pphosted.com', both(POLICY_BLOCK)),
  providerDomain('mimecast.test', 39, 'mimecast', 'Mimecast, no enhanced codes: unknown 550 Invalid Recipient - https://community.mimecast.com/...', NO_SUCH_USER),
  providerDomain('mimecast-blocked.test', 40, 'mimecast-blocked', 'Mimecast: every RCPT 550 Administrative prohibition - envelope blocked', both(POLICY_BLOCK)),
  providerDomain('barracuda.test', 41, 'barracuda', 'Barracuda, no enhanced codes: unknown 550 No such user (<addr>)', NO_SUCH_USER),
  providerDomain('barracuda-blocked.test', 42, 'barracuda-blocked', 'Barracuda: every RCPT 554 Service unavailable; Client host [<ip>] blocked using Barracuda Reputation', both(POLICY_BLOCK)),
  providerDomain('zoho.test', 43, 'zoho', 'Zoho: unknown 550 5.1.1 User does not exist - <addr>', NO_SUCH_USER),
  providerDomain('latin1.test', 44, 'german-latin1', 'German server writing Latin-1, no enhanced codes: unknown 550 Empfänger unbekannt (ä is the byte 0xE4)', NO_SUCH_USER),
  providerDomain('cyrillic.test', 45, 'russian-utf8', 'Russian server writing UTF-8, no enhanced codes: unknown 550 Пользователь не найден', NO_SUCH_USER),
  providerDomain('qmail.test', 46, 'qmail-chkuser', 'qmail with chkuser, the enhanced code last: unknown 511 sorry, no mailbox here by that name (#5.1.1 - chkuser)', NO_SUCH_USER),
  {
    domain: 'people.test',
    behaviour: 'people',
    dns: 'mx',
    mx: [mx1('people.test', 47, 'normal')],
    description: 'normal server whose extra mailboxes follow one address pattern each (SIM_PEOPLE_MAILBOXES: the email finder)',
    known: VALID,
    unknown: NOT_FOUND,
  },
];

export interface SimExample {
  email: string;
  result: SimResult;
  reason_code: SimReasonCode;
  note?: string;
}

/** Addresses beyond `jane.doe@` / `no.such.user@` worth trying by hand and in end-to-end tests. */
export const SIM_EXAMPLES: readonly SimExample[] = [
  { email: 'info@accept.test', result: 'valid_role_based', reason_code: 'role_account' },
  { email: '"john..doe"@accept.test', result: 'valid', reason_code: 'accepted', note: 'quoted local part, flagged' },
  { email: 'sim.person.one@gmail.com', result: 'valid', reason_code: 'accepted', note: 'free provider' },
  { email: 'jane.doe@gmial.com', result: 'invalid', reason_code: 'nxdomain', note: 'did_you_mean gmail.com' },
  { email: 'jane.doe@bücher.test', result: 'valid', reason_code: 'accepted', note: 'IDN, DNS name xn--bcher-kva.test' },
  { email: 'josé@utf8.test', result: 'valid', reason_code: 'accepted', note: 'MX advertises SMTPUTF8' },
  { email: 'josé@accept.test', result: 'invalid', reason_code: 'smtputf8_unsupported', note: 'MX has no SMTPUTF8' },
];

/** The domain whose MX `SVC_READY_DOMAIN` should point at. */
export const SIM_READY_DOMAIN = 'gmail.com';
