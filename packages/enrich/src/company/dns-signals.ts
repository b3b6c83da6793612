// What a domain's public DNS gives away about the SaaS it runs, for the company-enrichment
// endpoint's `technologies` list.
//
// Three kinds of record are read, all already fetched by the caller (this module never resolves
// anything, reads no environment and has no I/O):
//   - MX hosts say who receives the domain's mail: a mailbox provider (Google Workspace,
//     Microsoft 365, Zoho...) or a secure email gateway placed in front of one (Proofpoint,
//     Mimecast...). The gateway is what the MX shows, so it is reported as the mail provider.
//   - The SPF record lists, through `include:` and `redirect=`, every service allowed to send
//     mail as the domain: marketing, support desk, CRM, transactional mail.
//   - Ownership-verification TXT records are left behind when an administrator claims the domain
//     in a SaaS admin console (Atlassian, Slack, DocuSign...); each vendor uses a fixed prefix.
//
// Matching is deliberately strict so that a hostile or sloppy zone cannot fake a signal:
// host names match a known suffix only on a label boundary (`evilgoogle.com` is not
// `google.com`, `aspmx.l.google.com.evil.test` is not Google), TXT prefixes only at the very
// start of the record, and ASCII-only case folding is used so that no locale or Unicode rule can
// turn a foreign character into a match. Input sizes are capped and nothing here throws.

export type DnsRuleKind = 'mx' | 'spf' | 'txt';

export interface DnsRule {
  readonly kind: DnsRuleKind;
  /**
   * `mx` and `spf`: a host-name suffix, matched on a label boundary (the name itself or any name
   * ending in `.` + suffix). `txt`: the start of the record, compared case-insensitively and
   * followed by a non-empty token.
   */
  readonly match: string;
  /** The name the endpoint returns (in `technologies`, and as `mail_provider` for `mx`). */
  readonly product: string;
}

export interface DnsSignalsInput {
  /** MX exchange host names, in any case, with or without the trailing root dot. */
  mx: string[];
  /** The domain's TXT records, each one already joined from its character-strings. */
  txt: string[];
}

export type DnsEvidence = 'mx' | 'spf' | 'txt';

export interface DnsSignals {
  /** The product most MX hosts belong to (ties: the one met first); absent when none is known. */
  mail_provider?: string;
  /** Distinct product names in order of discovery: MX, then SPF, then TXT verifications. */
  technologies: string[];
  /** `include:` and `redirect=` targets of the `v=spf1` record(s), lower-cased, first seen first. */
  spf_includes: string[];
  /** Which kinds of record produced any of the above, always in the order mx, spf, txt. */
  evidence: DnsEvidence[];
}

/** Input beyond these bounds is not looked at: records past the counts, TXT strings longer than the length. */
export const DNS_SIGNAL_LIMITS = Object.freeze({
  maxMx: 50,
  maxTxt: 200,
  maxTxtLength: 4096,
});

const GOOGLE_WORKSPACE = 'Google Workspace';
const MICROSOFT_365 = 'Microsoft 365';
const ZOHO_MAIL = 'Zoho Mail';
const PROOFPOINT = 'Proofpoint';
const MIMECAST = 'Mimecast';
const BARRACUDA = 'Barracuda Email Protection';
const CISCO_SECURE_EMAIL = 'Cisco Secure Email';
const TREND_MICRO = 'Trend Micro Email Security';
const SOPHOS = 'Sophos Email';
const FORCEPOINT = 'Forcepoint Email Security';
const HORNETSECURITY = 'Hornetsecurity';
const SYMANTEC = 'Symantec Email Security.cloud';
const FASTMAIL = 'Fastmail';
const PROTON = 'Proton Mail';
const YANDEX_360 = 'Yandex 360';
const MAIL_RU = 'Mail.ru';
const OVH = 'OVHcloud Mail';
const IONOS = 'IONOS';
const GODADDY = 'GoDaddy Email';
const RACKSPACE = 'Rackspace Email';
const CLOUDFLARE_ROUTING = 'Cloudflare Email Routing';
const IMPROVMX = 'ImprovMX';
const MAILGUN = 'Mailgun';
const SENDGRID = 'SendGrid';
const POSTMARK = 'Postmark';
const BREVO = 'Brevo';
const ATLASSIAN = 'Atlassian';
const WEBEX = 'Webex';
const GLOBALSIGN = 'GlobalSign';

function mx(match: string, product: string): DnsRule {
  return Object.freeze({ kind: 'mx', match, product });
}
function spf(match: string, product: string): DnsRule {
  return Object.freeze({ kind: 'spf', match, product });
}
function txt(match: string, product: string): DnsRule {
  return Object.freeze({ kind: 'txt', match, product });
}

/**
 * The recognised records. Every entry comes from the vendor's own public DNS setup
 * documentation (the MX hosts, SPF include or verification record a customer is told to
 * publish); `product` is the name the enrichment endpoint returns. To extend, add a row:
 * `mx`/`spf` entries are lower-case host-name suffixes without a leading or trailing dot,
 * `txt` entries are the record's leading text up to and including its separator (`=`, `:`,
 * `_` or `.`). When two entries of a kind match, the longer one wins.
 */
export const DNS_RULES: readonly DnsRule[] = Object.freeze([
  // ── MX: mailbox providers ──────────────────────────────────────────────────────────────
  mx('aspmx.l.google.com', GOOGLE_WORKSPACE), // aspmx + alt1..alt4.aspmx.l.google.com
  mx('googlemail.com', GOOGLE_WORKSPACE), // aspmx2..aspmx5.googlemail.com (older setups)
  mx('smtp.google.com', GOOGLE_WORKSPACE), // the single-record setup
  mx('mail.protection.outlook.com', MICROSOFT_365), // <tenant>.mail.protection.outlook.com
  mx('mx.microsoft', MICROSOFT_365), // <tenant>.<x>-v1.mx.microsoft (DNSSEC / DANE inbound)
  mx('zoho.com', ZOHO_MAIL), // mx.zoho.com, mx2.zoho.com, mx3.zoho.com
  mx('zoho.eu', ZOHO_MAIL),
  mx('zoho.in', ZOHO_MAIL),
  mx('zoho.com.au', ZOHO_MAIL),
  mx('zoho.jp', ZOHO_MAIL),
  mx('messagingengine.com', FASTMAIL), // in1-smtp / in2-smtp.messagingengine.com
  mx('protonmail.ch', PROTON), // mail.protonmail.ch, mailsec.protonmail.ch
  mx('mail.icloud.com', 'iCloud Mail'), // mx01 / mx02.mail.icloud.com (custom email domain)
  mx('mx.yandex.net', YANDEX_360),
  mx('mx.yandex.ru', YANDEX_360),
  mx('emx.mail.ru', MAIL_RU), // Mail.ru for Business / VK WorkSpace
  mx('mail.ovh.net', OVH), // mx0..mx3.mail.ovh.net
  mx('ionos.com', IONOS), // mx00 / mx01.ionos.<tld>
  mx('ionos.de', IONOS),
  mx('ionos.co.uk', IONOS),
  mx('ionos.es', IONOS),
  mx('secureserver.net', GODADDY), // mailstore1 / smtp.secureserver.net
  mx('emailsrvr.com', RACKSPACE), // mx1 / mx2.emailsrvr.com
  mx('privateemail.com', 'Namecheap Private Email'),
  mx('registrar-servers.com', 'Namecheap Email Forwarding'), // eforward1..5.registrar-servers.com
  mx('titan.email', 'Titan Email'),
  mx('migadu.com', 'Migadu'),
  mx('mx.cloudflare.net', CLOUDFLARE_ROUTING), // route1..3.mx.cloudflare.net
  mx('improvmx.com', IMPROVMX),
  // ── MX: inbound processing of sending platforms ────────────────────────────────────────
  mx('mailgun.org', MAILGUN), // mxa / mxb.mailgun.org, mxa.eu.mailgun.org
  mx('mx.sendgrid.net', SENDGRID), // Inbound Parse
  mx('inbound.postmarkapp.com', POSTMARK), // inbound processing
  // ── MX: secure email gateways in front of the mailbox provider ─────────────────────────
  mx('pphosted.com', PROOFPOINT), // mx0a-<id>.pphosted.com (Proofpoint Enterprise)
  mx('ppe-hosted.com', PROOFPOINT), // mx1-us1.ppe-hosted.com (Proofpoint Essentials)
  mx('mimecast.com', MIMECAST), // <region>-smtp-inbound-1.mimecast.com
  mx('mimecast.co.za', MIMECAST), // za-smtp-inbound-1.mimecast.co.za
  mx('barracudanetworks.com', BARRACUDA), // <id>.ess.barracudanetworks.com
  mx('iphmx.com', CISCO_SECURE_EMAIL), // mx1.<hc>.iphmx.com
  mx('tmes.trendmicro.com', TREND_MICRO), // <name>.in.tmes.trendmicro.com
  mx('tmes.trendmicro.eu', TREND_MICRO),
  mx('hydra.sophos.com', SOPHOS), // mx-01-<region>.prod.hydra.sophos.com
  mx('mailcontrol.com', FORCEPOINT), // <cluster>.in.mailcontrol.com
  mx('hornetsecurity.com', HORNETSECURITY), // mx01..mx04.hornetsecurity.com
  mx('messagelabs.com', SYMANTEC), // cluster<n>.<region>.messagelabs.com

  // ── SPF include / redirect targets ─────────────────────────────────────────────────────
  spf('_spf.google.com', GOOGLE_WORKSPACE),
  spf('aspmx.googlemail.com', GOOGLE_WORKSPACE), // the older recommendation
  spf('spf.protection.outlook.com', MICROSOFT_365),
  spf('zoho.com', ZOHO_MAIL),
  spf('zoho.eu', ZOHO_MAIL),
  spf('zohomail.com', ZOHO_MAIL),
  spf('spf.messagingengine.com', FASTMAIL),
  spf('_spf.protonmail.ch', PROTON),
  spf('_spf.yandex.net', YANDEX_360),
  spf('_spf.mail.ru', MAIL_RU),
  spf('mx.ovh.com', OVH),
  spf('ionos.com', IONOS), // _spf-us.ionos.com, _spf-eu.ionos.com
  spf('secureserver.net', GODADDY),
  spf('emailsrvr.com', RACKSPACE),
  spf('_spf.mx.cloudflare.net', CLOUDFLARE_ROUTING),
  spf('spf.improvmx.com', IMPROVMX),
  spf('sendgrid.net', SENDGRID),
  spf('mcsv.net', 'Mailchimp'), // servers.mcsv.net
  spf('mandrillapp.com', 'Mandrill'), // spf.mandrillapp.com
  spf('mailgun.org', MAILGUN), // mailgun.org, eu.mailgun.org
  spf('amazonses.com', 'Amazon SES'),
  spf('spf.mtasv.net', POSTMARK),
  spf('sparkpostmail.com', 'SparkPost'), // _spf.sparkpostmail.com
  spf('spf.brevo.com', BREVO),
  spf('spf.sendinblue.com', BREVO),
  spf('spf.mailjet.com', 'Mailjet'),
  spf('_spf.mlsend.com', 'MailerLite'),
  spf('_spf.createsend.com', 'Campaign Monitor'),
  spf('spf.constantcontact.com', 'Constant Contact'),
  spf('spf.smtp2go.com', 'SMTP2GO'),
  spf('relay.mailchannels.net', 'MailChannels'),
  spf('_spf.salesforce.com', 'Salesforce'),
  spf('cust-spf.exacttarget.com', 'Salesforce Marketing Cloud'),
  spf('aspmx.pardot.com', 'Pardot'),
  spf('hubspotemail.net', 'HubSpot'), // <id>.spf<nn>.hubspotemail.net
  spf('mktomail.com', 'Marketo'),
  spf('mail.zendesk.com', 'Zendesk'),
  spf('email.freshdesk.com', 'Freshdesk'),
  spf('helpscoutemail.com', 'Help Scout'),
  spf('_spf.atlassian.net', ATLASSIAN),
  spf('shops.shopify.com', 'Shopify'),
  spf('mailsenders.netsuite.com', 'NetSuite'),
  spf('pphosted.com', PROOFPOINT), // <macros>.spf.has.pphosted.com
  spf('ppe-hosted.com', PROOFPOINT),
  spf('_netblocks.mimecast.com', MIMECAST), // also the regional us./eu./de./au./za. forms
  spf('barracudanetworks.com', BARRACUDA), // spf.ess.barracudanetworks.com
  spf('messagelabs.com', SYMANTEC), // spf.messagelabs.com

  // ── TXT domain-ownership verification ──────────────────────────────────────────────────
  txt('google-site-verification=', 'Google Search Console'),
  txt('MS=ms', MICROSOFT_365), // MS=ms12345678
  txt('atlassian-domain-verification=', ATLASSIAN),
  txt('status-page-domain-verification=', 'Atlassian Statuspage'),
  txt('facebook-domain-verification=', 'Meta Business Manager'),
  txt('workplace-domain-verification=', 'Workplace from Meta'),
  txt('docusign=', 'DocuSign'),
  txt('adobe-idp-site-verification=', 'Adobe'),
  txt('adobe-sign-verification=', 'Adobe Acrobat Sign'),
  txt('apple-domain-verification=', 'Apple'),
  txt('stripe-verification=', 'Stripe'),
  txt('ZOOM_verify_', 'Zoom'),
  txt('hubspot-developer-verification=', 'HubSpot'),
  txt('miro-verification=', 'Miro'),
  txt('slack-domain-verification=', 'Slack'),
  txt('onetrust-domain-verification=', 'OneTrust'),
  txt('dropbox-domain-verification=', 'Dropbox'),
  txt('openai-domain-verification=', 'OpenAI'),
  txt('canva-site-verification=', 'Canva'),
  txt('airtable-verification=', 'Airtable'),
  txt('notion-domain-verification=', 'Notion'),
  txt('webexdomainverification.', WEBEX),
  txt('cisco-ci-domain-verification=', WEBEX),
  txt('duo_sso_verification=', 'Duo Security'),
  txt('globalsign-domain-verification=', GLOBALSIGN),
  txt('_globalsign-domain-verification=', GLOBALSIGN),
  txt('have-i-been-pwned-verification=', 'Have I Been Pwned'),
  txt('yandex-verification:', 'Yandex'),
  txt('mailru-verification:', MAIL_RU),
  txt('pinterest-site-verification=', 'Pinterest'),
  txt('postman-domain-verification=', 'Postman'),
  txt('logmein-verification-code=', 'LogMeIn'),
  txt('teamviewer-sso-verification=', 'TeamViewer'),
  txt('knowbe4-site-verification=', 'KnowBe4'),
  txt('ahrefs-site-verification_', 'Ahrefs'),
  txt('twilio-domain-verification=', 'Twilio'),
  txt('segment-site-verification=', 'Segment'),
  txt('bugcrowd-verification=', 'Bugcrowd'),
  txt('h1-domain-verification=', 'HackerOne'),
  txt('krisp-domain-verification=', 'Krisp'),
  txt('brevo-code:', BREVO),
  txt('sendinblue-code:', BREVO),
  txt('mongodb-site-verification=', 'MongoDB Atlas'),
  txt('jamf-site-verification=', 'Jamf'),
  txt('protonmail-verification=', PROTON),
  txt('shopify-verification-code=', 'Shopify'),
]);

interface CompiledRule {
  readonly match: string;
  readonly product: string;
}

/** Lower-cases A-Z only: no locale, and no non-ASCII character can fold into an ASCII one. */
function asciiLower(s: string): string {
  return s.replace(/[A-Z]+/g, (m) => m.toLowerCase());
}

/** One kind's rules, lower-cased, longest first so that the most specific entry wins. */
function compile(kind: DnsRuleKind): readonly CompiledRule[] {
  return DNS_RULES.filter((r) => r.kind === kind)
    .map((r) => ({ match: asciiLower(r.match), product: r.product }))
    .sort((a, b) => b.match.length - a.match.length);
}

const MX_RULES = compile('mx');
const SPF_RULES = compile('spf');
const TXT_RULES = compile('txt');

function bySuffix(host: string, rules: readonly CompiledRule[]): string | undefined {
  for (const rule of rules) {
    if (host === rule.match || host.endsWith(`.${rule.match}`)) return rule.product;
  }
  return undefined;
}

function byPrefix(record: string, rules: readonly CompiledRule[]): string | undefined {
  const lower = asciiLower(record);
  for (const rule of rules) {
    if (lower.startsWith(rule.match) && lower.slice(rule.match.length).trim() !== '') return rule.product;
  }
  return undefined;
}

/** Up to `max` string entries of what should be an array; anything else yields nothing. */
function strings(value: unknown, max: number): string[] {
  if (!Array.isArray(value)) return [];
  const out: string[] = [];
  for (const item of value.slice(0, max)) {
    if (typeof item === 'string') out.push(item);
  }
  return out;
}

/** An MX exchange as a lower-case name without the root dot; undefined for the null MX (`.`) and junk. */
function mxHost(raw: string): string | undefined {
  const trimmed = raw.trim();
  if (trimmed.length > 254 || /\s/.test(trimmed)) return undefined;
  const host = asciiLower(trimmed.endsWith('.') ? trimmed.slice(0, -1) : trimmed);
  return host === '' ? undefined : host;
}

/** Characters of a domain-spec: host-name characters plus those of SPF macros (`%{ir}.%{v}`). */
const DOMAIN_SPEC = /^[a-z0-9._\-%{}+,/=]+$/;

function spfTarget(value: string): string | undefined {
  const domain = value.endsWith('.') ? value.slice(0, -1) : value;
  if (domain.length === 0 || domain.length > 253) return undefined;
  if (!DOMAIN_SPEC.test(domain) || !/[a-z0-9]/.test(domain)) return undefined;
  return domain;
}

/** The `include:` and `redirect=` targets of one TXT string, or nothing when it is not SPF version 1. */
function spfTargets(record: string): string[] {
  const terms = asciiLower(record).trim().split(/\s+/);
  if (terms[0] !== 'v=spf1') return [];
  const out: string[] = [];
  for (const term of terms.slice(1)) {
    let value: string | undefined;
    const include = /^[+\-~?]?include:(.*)$/.exec(term);
    if (include) value = include[1];
    else if (term.startsWith('redirect=')) value = term.slice('redirect='.length);
    const target = value === undefined ? undefined : spfTarget(value);
    if (target !== undefined) out.push(target);
  }
  return out;
}

/** What the MX and TXT records of one domain say about the services it uses. Pure; never throws. */
export function dnsSignals(input: DnsSignalsInput): DnsSignals {
  const source: Partial<Record<'mx' | 'txt', unknown>> =
    input !== null && typeof input === 'object' ? input : {};
  const mxHosts = strings(source.mx, DNS_SIGNAL_LIMITS.maxMx);
  const txtRecords = strings(source.txt, DNS_SIGNAL_LIMITS.maxTxt).filter(
    (record) => record.length <= DNS_SIGNAL_LIMITS.maxTxtLength,
  );

  const technologies: string[] = [];
  const seenTechnologies = new Set<string>();
  const addTechnology = (product: string): void => {
    if (seenTechnologies.has(product)) return;
    seenTechnologies.add(product);
    technologies.push(product);
  };
  const evidence: DnsEvidence[] = [];

  // MX: count the hosts of each product, in order of first appearance.
  const hostsPerProduct = new Map<string, number>();
  for (const raw of mxHosts) {
    const host = mxHost(raw);
    const product = host === undefined ? undefined : bySuffix(host, MX_RULES);
    if (product !== undefined) hostsPerProduct.set(product, (hostsPerProduct.get(product) ?? 0) + 1);
  }
  let mailProvider: string | undefined;
  let mostHosts = 0;
  for (const [product, count] of hostsPerProduct) {
    if (count > mostHosts) {
      mailProvider = product;
      mostHosts = count;
    }
    addTechnology(product);
  }
  if (mailProvider !== undefined) evidence.push('mx');

  // SPF: every v=spf1 string, in order (more than one is a misconfiguration, but still says who sends).
  const spfIncludes: string[] = [];
  const seenIncludes = new Set<string>();
  for (const record of txtRecords) {
    for (const target of spfTargets(record)) {
      if (seenIncludes.has(target)) continue;
      seenIncludes.add(target);
      spfIncludes.push(target);
      const product = bySuffix(target, SPF_RULES);
      if (product !== undefined) addTechnology(product);
    }
  }
  if (spfIncludes.length > 0) evidence.push('spf');

  // TXT: ownership-verification tokens, by the record's leading text.
  let verified = false;
  for (const record of txtRecords) {
    const product = byPrefix(record.trimStart(), TXT_RULES);
    if (product === undefined) continue;
    verified = true;
    addTechnology(product);
  }
  if (verified) evidence.push('txt');

  return {
    ...(mailProvider === undefined ? {} : { mail_provider: mailProvider }),
    technologies,
    spf_includes: spfIncludes,
    evidence,
  };
}
