import t from 'tap';
import { DNS_RULES, DNS_SIGNAL_LIMITS, dnsSignals, type DnsSignalsInput } from '../src/company/dns-signals.ts';

t.test('a Google Workspace domain', async (t) => {
  t.strictSame(
    dnsSignals({
      mx: [
        'aspmx.l.google.com.',
        'alt1.aspmx.l.google.com.',
        'alt2.aspmx.l.google.com.',
        'alt3.aspmx.l.google.com.',
        'alt4.aspmx.l.google.com.',
      ],
      txt: ['v=spf1 include:_spf.google.com ~all', 'google-site-verification=rXOxyZounnZasA8Z7oaD3c14JdjS9aKSWvsR1EbUSIQ'],
    }),
    {
      mail_provider: 'Google Workspace',
      technologies: ['Google Workspace', 'Google Search Console'],
      spf_includes: ['_spf.google.com'],
      evidence: ['mx', 'spf', 'txt'],
    },
  );
  t.strictSame(
    dnsSignals({ mx: ['smtp.google.com'], txt: [] }),
    { mail_provider: 'Google Workspace', technologies: ['Google Workspace'], spf_includes: [], evidence: ['mx'] },
    'the single-host setup',
  );
  t.strictSame(
    dnsSignals({ mx: ['aspmx.l.google.com', 'aspmx2.googlemail.com', 'aspmx3.googlemail.com'], txt: [] }).mail_provider,
    'Google Workspace',
    'the older googlemail.com hosts',
  );
});

t.test('a Microsoft 365 tenant', async (t) => {
  t.strictSame(
    dnsSignals({
      mx: ['contoso-test.mail.protection.outlook.com'],
      txt: ['v=spf1 include:spf.protection.outlook.com -all', 'MS=ms12345678'],
    }),
    {
      mail_provider: 'Microsoft 365',
      technologies: ['Microsoft 365'],
      spf_includes: ['spf.protection.outlook.com'],
      evidence: ['mx', 'spf', 'txt'],
    },
  );
  t.strictSame(
    dnsSignals({ mx: ['contoso-test.r-v1.mx.microsoft.'], txt: [] }),
    { mail_provider: 'Microsoft 365', technologies: ['Microsoft 365'], spf_includes: [], evidence: ['mx'] },
    'the DNSSEC inbound host',
  );
});

t.test('a Proofpoint-fronted domain sending through SendGrid and Salesforce', async (t) => {
  t.strictSame(
    dnsSignals({
      mx: ['mx0a-00123401.pphosted.com.', 'mx0b-00123401.pphosted.com.'],
      txt: [
        'docusign=4c82afdc-4187-4e03-9e78-8dbdc5ed7d0d',
        'v=spf1 include:spf.protection.outlook.com include:sendgrid.net include:_spf.salesforce.com ' +
          'include:%{ir}.%{v}.%{d}.spf.has.pphosted.com ip4:192.0.2.0/24 -all',
        'atlassian-domain-verification=Vrn33GZgJTapfeggl1snZZ5a8HjNwfFb',
      ],
    }),
    {
      mail_provider: 'Proofpoint',
      technologies: ['Proofpoint', 'Microsoft 365', 'SendGrid', 'Salesforce', 'DocuSign', 'Atlassian'],
      spf_includes: [
        'spf.protection.outlook.com',
        'sendgrid.net',
        '_spf.salesforce.com',
        '%{ir}.%{v}.%{d}.spf.has.pphosted.com',
      ],
      evidence: ['mx', 'spf', 'txt'],
    },
  );
});

t.test('other gateways in front of a mailbox provider', async (t) => {
  t.strictSame(
    dnsSignals({
      mx: ['us-smtp-inbound-1.mimecast.com', 'us-smtp-inbound-2.mimecast.com'],
      txt: ['v=spf1 include:us._netblocks.mimecast.com include:spf.protection.outlook.com ~all'],
    }),
    {
      mail_provider: 'Mimecast',
      technologies: ['Mimecast', 'Microsoft 365'],
      spf_includes: ['us._netblocks.mimecast.com', 'spf.protection.outlook.com'],
      evidence: ['mx', 'spf'],
    },
  );
  t.equal(dnsSignals({ mx: ['za-smtp-inbound-1.mimecast.co.za'], txt: [] }).mail_provider, 'Mimecast');
  t.equal(dnsSignals({ mx: ['d123456a.ess.barracudanetworks.com'], txt: [] }).mail_provider, 'Barracuda Email Protection');
  t.equal(dnsSignals({ mx: ['mx1.hc1234-56.iphmx.com'], txt: [] }).mail_provider, 'Cisco Secure Email');
  t.equal(dnsSignals({ mx: ['acme.in.tmes.trendmicro.eu'], txt: [] }).mail_provider, 'Trend Micro Email Security');
  t.equal(dnsSignals({ mx: ['mx-01-us-west-2.prod.hydra.sophos.com'], txt: [] }).mail_provider, 'Sophos Email');
  t.equal(dnsSignals({ mx: ['cluster5.eu.messagelabs.com'], txt: [] }).mail_provider, 'Symantec Email Security.cloud');
  t.equal(dnsSignals({ mx: ['mx1-us1.ppe-hosted.com'], txt: [] }).mail_provider, 'Proofpoint');
});

t.test('mixed MX: the product with most hosts, ties to the first met; every one is a technology', async (t) => {
  t.strictSame(
    dnsSignals({
      mx: ['mx0a-1.pphosted.com', 'acme-com.mail.protection.outlook.com', 'acme-com.r-v1.mx.microsoft'],
      txt: [],
    }),
    {
      mail_provider: 'Microsoft 365',
      technologies: ['Proofpoint', 'Microsoft 365'],
      spf_includes: [],
      evidence: ['mx'],
    },
  );
  t.strictSame(
    dnsSignals({ mx: ['mx01.hornetsecurity.com', 'aspmx.l.google.com', 'mail.example.test'], txt: [] }),
    {
      mail_provider: 'Hornetsecurity',
      technologies: ['Hornetsecurity', 'Google Workspace'],
      spf_includes: [],
      evidence: ['mx'],
    },
  );
  t.strictSame(
    dnsSignals({ mx: ['mail.example.test', 'mx.zoho.eu', 'mx2.zoho.eu', 'in1-smtp.messagingengine.com'], txt: [] }),
    {
      mail_provider: 'Zoho Mail',
      technologies: ['Zoho Mail', 'Fastmail'],
      spf_includes: [],
      evidence: ['mx'],
    },
  );
});

t.test('null MX and empty input', async (t) => {
  const nothing = { technologies: [], spf_includes: [], evidence: [] };
  t.strictSame(dnsSignals({ mx: ['.'], txt: [] }), nothing);
  t.strictSame(dnsSignals({ mx: [], txt: [] }), nothing);
  t.strictSame(dnsSignals({ mx: ['', '   ', '.'], txt: ['', ' '] }), nothing);
  t.equal('mail_provider' in dnsSignals({ mx: ['.'], txt: [] }), false);
  t.strictSame(
    dnsSignals({ mx: ['mail.example.test'], txt: ['v=spf1 -all'] }),
    nothing,
    'an unknown MX and an SPF record without includes contribute nothing',
  );
});

t.test('look-alike hosts and values do not match', async (t) => {
  t.strictSame(
    dnsSignals({
      mx: [
        'aspmx.l.google.com.evil.test',
        'evilgoogle.com',
        'fakeaspmx.l.google.com.example',
        'notpphosted.com',
        'mail.protection.outlook.com.attacker.example',
        'xmimecast.com',
      ],
      txt: [
        'v=spf1 include:notsendgrid.net include:sendgrid.net.evil.test include:x_spf.google.com -all',
        'xgoogle-site-verification=abc',
        'note: google-site-verification=abc',
        'our slack-domain-verification= token moved',
        'MS=ABCDEF0123456789',
        'google-site-verification=',
        'google-site-verification=   ',
      ],
    }),
    {
      technologies: [],
      spf_includes: ['notsendgrid.net', 'sendgrid.net.evil.test', 'x_spf.google.com'],
      evidence: ['spf'],
    },
  );
});

t.test('SPF redirect=', async (t) => {
  t.strictSame(dnsSignals({ mx: [], txt: ['v=spf1 redirect=_spf.google.com'] }), {
    technologies: ['Google Workspace'],
    spf_includes: ['_spf.google.com'],
    evidence: ['spf'],
  });
  t.strictSame(
    dnsSignals({ mx: [], txt: ['v=spf1 include:mailgun.org ip4:198.51.100.7 redirect=spf.protection.outlook.com'] }),
    {
      technologies: ['Mailgun', 'Microsoft 365'],
      spf_includes: ['mailgun.org', 'spf.protection.outlook.com'],
      evidence: ['spf'],
    },
  );
});

t.test('case and trailing dots', async (t) => {
  t.strictSame(
    dnsSignals({
      mx: ['ASPMX.L.GOOGLE.COM.', 'Alt1.AspMx.L.Google.Com.', '  alt2.aspmx.l.google.com  '],
      txt: [
        'V=SPF1 Include:_SPF.Google.COM. +INCLUDE:Servers.MCSV.net ~ALL',
        'Google-Site-Verification=XyZ',
        'ms=MS999',
        '  zoom_VERIFY_ClSSgAI2bqqZQA66rT4Z1x',
      ],
    }),
    {
      mail_provider: 'Google Workspace',
      technologies: ['Google Workspace', 'Mailchimp', 'Google Search Console', 'Microsoft 365', 'Zoom'],
      spf_includes: ['_spf.google.com', 'servers.mcsv.net'],
      evidence: ['mx', 'spf', 'txt'],
    },
  );
});

t.test('multiple SPF records are all read, in order, without repeats', async (t) => {
  t.strictSame(
    dnsSignals({
      mx: [],
      txt: [
        'v=spf1 include:_spf.google.com include:servers.mcsv.net ~all',
        'slack-domain-verification=hBJ7iTCUxDdnWYUKNBHmsz7tlpoCPKDxLBrGLs0R',
        'v=spf1 include:sendgrid.net include:_spf.google.com -all',
        'spf2.0/pra include:ignored.example ~all',
      ],
    }),
    {
      technologies: ['Google Workspace', 'Mailchimp', 'SendGrid', 'Slack'],
      spf_includes: ['_spf.google.com', 'servers.mcsv.net', 'sendgrid.net'],
      evidence: ['spf', 'txt'],
    },
  );
});

t.test('qualifiers and garbage inside v=spf1', async (t) => {
  t.strictSame(
    dnsSignals({
      mx: [],
      txt: [
        'v=spf1 +include:a.example ~include:b.example -include:c.example ?include:d.example ' +
          'include: include:: redirect= include:%%% include:bücher.example include:.. ip4:1.2.3.4 ' +
          'exists:%{i}.spf.example include:e.example. all',
        'v=spf1x include:not-spf.example',
        'v=spf10 include:not-spf.example',
        'x v=spf1 include:not-spf.example',
        'v=spf1',
        'v=spf1 include:\u0000.example include:f.example',
      ],
    }),
    {
      technologies: [],
      spf_includes: ['a.example', 'b.example', 'c.example', 'd.example', 'e.example', 'f.example'],
      evidence: ['spf'],
    },
  );
});

t.test('TXT strings longer than 4,096 characters are ignored', async (t) => {
  const prefix = 'google-site-verification=';
  const long = prefix + 'a'.repeat(5000 - prefix.length);
  t.equal(long.length, 5000);
  const longSpf = 'v=spf1 include:sendgrid.net ' + 'ip4:192.0.2.1 '.repeat(400);
  t.equal(longSpf.length > DNS_SIGNAL_LIMITS.maxTxtLength, true);
  t.strictSame(dnsSignals({ mx: [], txt: [long, longSpf] }), { technologies: [], spf_includes: [], evidence: [] });

  const atLimit = prefix + 'a'.repeat(DNS_SIGNAL_LIMITS.maxTxtLength - prefix.length);
  t.equal(atLimit.length, 4096);
  t.strictSame(dnsSignals({ mx: [], txt: [long, atLimit] }), {
    technologies: ['Google Search Console'],
    spf_includes: [],
    evidence: ['txt'],
  });
});

t.test('only the first 50 MX hosts and 200 TXT strings are read', async (t) => {
  const mx = [...Array.from({ length: 50 }, (_, i) => `mx${i}.example.test`), 'aspmx.l.google.com'];
  const txt = [...Array.from({ length: 200 }, (_, i) => `filler-${i}`), 'MS=ms12345678'];
  t.strictSame(dnsSignals({ mx, txt }), { technologies: [], spf_includes: [], evidence: [] });
  t.strictSame(dnsSignals({ mx: mx.slice(1), txt: txt.slice(1) }), {
    mail_provider: 'Google Workspace',
    technologies: ['Google Workspace', 'Microsoft 365'],
    spf_includes: [],
    evidence: ['mx', 'txt'],
  });
});

t.test('odd input never throws', async (t) => {
  const nothing = { technologies: [], spf_includes: [], evidence: [] };
  const odd = (value: unknown): DnsSignalsInput => value as DnsSignalsInput;
  t.strictSame(dnsSignals(odd(null)), nothing);
  t.strictSame(dnsSignals(odd(undefined)), nothing);
  t.strictSame(dnsSignals(odd('aspmx.l.google.com')), nothing);
  t.strictSame(dnsSignals(odd({ mx: 'aspmx.l.google.com', txt: 5 })), nothing);
  t.strictSame(
    dnsSignals(odd({ mx: [null, 7, { host: 'x' }, 'mx.zoho.com'], txt: [undefined, ['MS=ms1'], 'docusign=1'] })),
    {
      mail_provider: 'Zoho Mail',
      technologies: ['Zoho Mail', 'DocuSign'],
      spf_includes: [],
      evidence: ['mx', 'txt'],
    },
  );
  t.strictSame(
    dnsSignals({
      mx: ['почта.пример.рф', 'mx.zoho.com', 'a'.repeat(300), 'two words.example', 'ＡＳＰＭＸ.Ｌ.ＧＯＯＧＬＥ.ＣＯＭ'],
      txt: ['ÄÖÜ', '\u0130google-site-verification=x', '\u200BMS=ms1', 'v=spf1 include:\u0131.example'],
    }),
    {
      mail_provider: 'Zoho Mail',
      technologies: ['Zoho Mail'],
      spf_includes: [],
      evidence: ['mx'],
    },
  );
});

t.test('each call returns its own arrays', async (t) => {
  const input = { mx: ['aspmx.l.google.com'], txt: ['v=spf1 include:_spf.google.com ~all'] };
  const first = dnsSignals(input);
  first.technologies.push('Tampered');
  first.spf_includes.length = 0;
  t.strictSame(dnsSignals(input), {
    mail_provider: 'Google Workspace',
    technologies: ['Google Workspace'],
    spf_includes: ['_spf.google.com'],
    evidence: ['mx', 'spf'],
  });
});

t.test('the rule table is well formed', async (t) => {
  const problems: string[] = [];
  const seen = new Set<string>();
  for (const rule of DNS_RULES) {
    const key = `${rule.kind} ${rule.match.toLowerCase()}`;
    if (seen.has(key)) problems.push(`duplicate: ${key}`);
    seen.add(key);
    if (rule.product.trim() === '' || rule.product !== rule.product.trim()) problems.push(`product: ${key}`);
    if (rule.kind === 'txt') {
      if (!/^[A-Za-z0-9_][A-Za-z0-9_.-]*[=:_.]$/.test(rule.match) && rule.match !== 'MS=ms') {
        problems.push(`txt prefix: ${rule.match}`);
      }
    } else if (!/^[a-z0-9_](?:[a-z0-9_-]*[a-z0-9])?(?:\.[a-z0-9_](?:[a-z0-9_-]*[a-z0-9])?)+$/.test(rule.match)) {
      problems.push(`${rule.kind} suffix: ${rule.match}`);
    }
  }
  t.strictSame(problems, []);
  t.equal(Object.isFrozen(DNS_RULES), true);
  t.equal(DNS_RULES.every((rule) => Object.isFrozen(rule)), true);
});
