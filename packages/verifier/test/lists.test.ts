import t from 'tap';
import { readFileSync } from 'node:fs';
import { commonDomains, isDisposable, isFreeProvider, parseDomainList, roleType } from '../src/lists.ts';

const data = (name: string): string => readFileSync(new URL(`../data/${name}`, import.meta.url), 'utf8');

t.test('roleType', async (t) => {
  const cases: Array<[string, string | undefined]> = [
    ['info', 'information'],
    ['INFO', 'information'],
    ['Info+newsletter', 'information'],
    ['contact', 'information'],
    ['hello', 'information'],
    ['enquiries', 'information'],
    ['support', 'support'],
    ['support+ticket-123', 'support'],
    ['help', 'support'],
    ['helpdesk', 'support'],
    ['help-desk', 'support'],
    ['help_desk', 'support'],
    ['help.desk', 'support'],
    ['customer.service', 'support'],
    ['sales', 'sales'],
    ['admin', 'administration'],
    ['administrator', 'administration'],
    ['webmaster', 'administration'],
    ['postmaster', 'administration'],
    ['hostmaster', 'administration'],
    ['billing', 'billing'],
    ['accounts', 'billing'],
    ['accounting', 'billing'],
    ['finance', 'billing'],
    ['invoices', 'billing'],
    ['marketing', 'marketing'],
    ['hr', 'hr'],
    ['HR', 'hr'],
    ['jobs', 'hr'],
    ['careers', 'hr'],
    ['recruiting', 'hr'],
    ['legal', 'legal'],
    ['privacy', 'legal'],
    ['security', 'security'],
    ['abuse', 'abuse'],
    ['noreply', 'noreply'],
    ['no-reply', 'noreply'],
    ['no_reply', 'noreply'],
    ['no.reply', 'noreply'],
    ['No-Reply+bounce', 'noreply'],
    ['do-not-reply', 'noreply'],
    ['donotreply', 'noreply'],
    ['do_not_reply', 'noreply'],
    ['office', 'office'],
    ['press', 'press'],
    ['media', 'press'],
    ['team', 'team'],
    ['dev', 'technical'],
    ['it', 'technical'],
    ['ops', 'technical'],
    // personal mailboxes
    ['john', undefined],
    ['john.smith', undefined],
    ['j.doe+sales', undefined],
    ['information.officer', undefined],
    ['salesforce', undefined],
    ['h.r', undefined], // initials, not a role
    ['i.t', undefined],
    ['', undefined],
    ['+info', undefined],
    ['"info"', undefined],
    ['"support team"', undefined],
  ];
  for (const [local, expected] of cases) t.equal(roleType(local), expected, JSON.stringify(local));
});

t.test('roles.json is well formed and large enough', async (t) => {
  const roles = JSON.parse(data('roles.json')) as Record<string, unknown>;
  const keys = Object.keys(roles);
  t.ok(keys.length >= 80, `${keys.length} roles`);
  for (const [k, v] of Object.entries(roles)) {
    t.ok(typeof v === 'string' && /^[a-z]+$/.test(v), `category of ${k} is a lower-case word`);
    t.equal(k, k.toLowerCase(), `${k} is lower case`);
  }
  for (const k of ['info', 'contact', 'hello', 'enquiries', 'support', 'help', 'helpdesk', 'sales', 'admin', 'administrator', 'webmaster', 'postmaster', 'hostmaster', 'billing', 'accounts', 'accounting', 'finance', 'invoices', 'marketing', 'hr', 'jobs', 'careers', 'recruiting', 'legal', 'privacy', 'security', 'abuse', 'noreply', 'no-reply', 'office', 'press', 'media', 'team', 'dev', 'it', 'ops']) {
    t.ok(k in roles, `roles.json has ${k}`);
  }
});

t.test('isFreeProvider', async (t) => {
  const cases: Array<[string, boolean]> = [
    ['gmail.com', true],
    ['GMAIL.COM', true],
    ['googlemail.com', true],
    ['yahoo.com', true],
    ['yahoo.co.uk', true],
    ['outlook.com', true],
    ['hotmail.com', true],
    ['hotmail.fr', true],
    ['live.com', true],
    ['msn.com', true],
    ['aol.com', true],
    ['icloud.com', true],
    ['me.com', true],
    ['mac.com', true],
    ['proton.me', true],
    ['protonmail.com', true],
    ['gmx.de', true],
    ['web.de', true],
    ['mail.ru', true],
    ['yandex.ru', true],
    ['zoho.com', true],
    ['qq.com', true],
    ['163.com', true],
    ['126.com', true],
    ['naver.com', true],
    ['mail.com', true],
    ['example.com', false],
    ['acme.com', false],
    ['mail.gmail.com', false], // exact match only
    ['gmail.com.evil.com', false],
    ['mailinator.com', false],
    ['', false],
  ];
  for (const [d, expected] of cases) t.equal(isFreeProvider(d), expected, d);
});

t.test('isDisposable', async (t) => {
  const cases: Array<[string, boolean]> = [
    ['mailinator.com', true],
    ['x.mailinator.com', true],
    ['a.b.mailinator.com', true],
    ['MAILINATOR.COM', true],
    ['guerrillamail.com', true],
    ['10minutemail.com', true],
    ['temp-mail.org', true],
    ['yopmail.com', true],
    ['trashmail.com', true],
    ['sharklasers.com', true],
    ['getnada.com', true],
    ['dispostable.com', true],
    ['maildrop.cc', true],
    ['throwawaymail.com', true],
    ['gmail.com', false],
    ['example.com', false],
    ['notmailinator.company', false],
    ['mailinator.com.example.org', false],
    ['xmailinator.com', false],
    ['com', false],
    ['', false],
  ];
  for (const [d, expected] of cases) t.equal(isDisposable(d), expected, d);
});

t.test('data files', async (t) => {
  const free = parseDomainList(data('free-providers.txt'));
  const disposable = parseDomainList(data('disposable-domains.txt'));
  const common = commonDomains();
  t.ok(free.length >= 60, `${free.length} free providers`);
  t.ok(disposable.length >= 100, `${disposable.length} disposable domains`);
  t.ok(common.length >= 30 && common.length <= 60, `${common.length} common domains`);
  t.equal(common[0], 'gmail.com', 'most common first');
  t.ok(Object.isFrozen(common), 'commonDomains() is immutable');
  const domain = /^(?=.{4,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/;
  for (const [name, list] of [['free', free], ['disposable', disposable], ['common', common]] as const) {
    const bad = list.filter((d) => !domain.test(d));
    t.same(bad, [], `${name} list holds only valid lower-case domains`);
  }
  const freeSet = new Set(free);
  t.same(disposable.filter((d) => freeSet.has(d)), [], 'no domain is both free and disposable');
  t.same(common.filter((d) => !freeSet.has(d)), [], 'every common domain is a known provider');
});

t.test('parseDomainList', async (t) => {
  t.same(parseDomainList('# header\n\nExample.COM\r\nfoo.org # trailing comment\n  bar.net  \nexample.com\n'), ['example.com', 'foo.org', 'bar.net']);
});
