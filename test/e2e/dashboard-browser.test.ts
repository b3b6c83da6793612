// The dashboard in a real browser (Debian's Chromium driven by playwright-core), as a new user
// meets it: the first-run link creates the owner's sign-in; a key is created and shown once (then
// only its prefix), works on /v1/validate, and stops when revoked; a hostile key name is shown as
// text; usage charts and the ledger's CSV; sign-out, a wrong password's message, sign-in again,
// and sign-in throttled; a member sees no owner's page and the server refuses them. Controls are
// found by their labels and accessible names (how a screen reader finds them too). Every page is
// checked with axe-core (no serious or critical violation, WCAG 2 A and AA rules) and
// screenshotted at desktop and phone width: into DASHBOARD_SCREENSHOTS (docs/screenshots to
// refresh the README's), else a temporary directory.
//
// No browser: skipped, or a failure under CI_REQUIRE_SERVICES=1 (.ci/run installs Debian's
// `chromium`). CHROMIUM_PATH names another binary.

import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { createRequire } from 'node:module';
import { chromium, type Browser, type Page } from 'playwright-core';
import { createUser } from '@svc/accounts';
import { ERRORS } from '@svc/contracts';
import { startStack } from '../helpers/stack.ts';

// tap's default of 120 s a file is too tight on a loaded 2-core machine: 58 s in a full CI run on a
// slow day.
t.setTimeout(240_000);

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

const EXECUTABLE = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const PASSWORD = 'correct horse battery staple';

if (!existsSync(EXECUTABLE)) {
  if (process.env.CI_REQUIRE_SERVICES === '1') t.fail(`no browser at ${EXECUTABLE} (CI_REQUIRE_SERVICES=1: apt-get install -y chromium)`);
  else t.plan(0, `no browser at ${EXECUTABLE}: skipping (apt-get install -y chromium, or CHROMIUM_PATH)`);
} else {
  await run();
}

async function run(): Promise<void> {
  const stack = await startStack();
  t.teardown(() => stack.close());
  const browser: Browser = await chromium.launch({ executablePath: EXECUTABLE, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
  t.teardown(() => browser.close());
  const shotsDir = process.env.DASHBOARD_SCREENSHOTS ? path.resolve(process.env.DASHBOARD_SCREENSHOTS) : mkdtempSync(path.join(os.tmpdir(), 'svc-shots-'));
  mkdirSync(shotsDir, { recursive: true });
  if (!process.env.DASHBOARD_SCREENSHOTS) t.teardown(() => rmSync(shotsDir, { recursive: true, force: true }));

  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, acceptDownloads: true });
  const page = await context.newPage();
  const dialogs: string[] = [];
  page.on('dialog', (d) => {
    dialogs.push(d.message());
    void d.accept();
  });
  const pageErrors: string[] = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  // Failed requests are logged as console errors too (a 401 is an answer the page handles);
  // a refused script, style or connection is a Content Security Policy error.
  page.on('console', (m) => {
    if (m.type() === 'error' && /Content Security Policy/i.test(m.text())) pageErrors.push(m.text());
  });

  /**
   * axe-core's findings on the page as it is (injected through the DevTools protocol, which the
   * page's CSP does not govern): the serious and critical ones, as "page: rule (n nodes)".
   */
  const accessibility: string[] = [];
  const audit = async (p: Page, name: string) => {
    if (!(await p.evaluate(() => 'axe' in window))) await p.evaluate(AXE_SOURCE);
    const violations = await p.evaluate(async () => {
      const r = await (window as unknown as { axe: { run: (ctx: Document, o: object) => Promise<{ violations: Array<{ id: string; impact: string | null; nodes: unknown[] }> }> } }).axe.run(document, {
        runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] },
      });
      return r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id} (${v.nodes.length} nodes)`);
    });
    for (const v of violations) accessibility.push(`${name}: ${v}`);
  };

  /** The page at desktop width, then at a phone's (390 × 844), saved as <name>-desktop.png and <name>-phone.png; audited at both. */
  const shoot = async (p: Page, name: string) => {
    await audit(p, `${name} (desktop)`);
    await p.screenshot({ path: path.join(shotsDir, `${name}-desktop.png`), fullPage: true });
    await p.setViewportSize({ width: 390, height: 844 });
    await p.screenshot({ path: path.join(shotsDir, `${name}-phone.png`), fullPage: true });
    await audit(p, `${name} (phone)`);
    await p.setViewportSize({ width: 1280, height: 800 });
  };
  const validate = (key: string) => stack.call('POST', '/v1/validate', { key, body: { email: 'info@accept.test' } });

  t.test('first run: the printed link creates the owner, who lands signed in', async (t) => {
    const link = stack.svc.setupUrl!.replace(/^http:\/\/localhost:\d+/, stack.url);
    const res = await page.goto(link);
    t.equal(res?.status(), 200);
    t.match(res?.headers()['content-security-policy'] ?? '', /script-src 'self';.*frame-ancestors 'none'/);
    await page.getByRole('heading', { name: 'Create your sign-in' }).waitFor();
    t.equal(new URL(page.url()).hash, '', 'the token left the address bar');
    await shoot(page, 'setup');
    await page.getByLabel('Email address').fill('owner@example.test');
    await page.getByLabel('Password (at least 12 characters)').fill(PASSWORD);
    await page.getByRole('button', { name: 'Create sign-in' }).click();
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    t.match(await page.getByRole('main').innerText(), /Signed in as owner@example\.test, owner of account acc_/);
    await shoot(page, 'overview');
    const cookies = await context.cookies();
    t.same(cookies.map((c) => [c.name, c.httpOnly, c.sameSite, c.path]), [['svc_session', true, 'Lax', '/dashboard']], 'one httpOnly session cookie');
    const storage = await page.evaluate(() => JSON.stringify([Object.keys(localStorage), Object.keys(sessionStorage)]));
    t.equal(storage, '[[],[]]', 'nothing in browser storage');
  });

  let key = '';
  t.test('keys: created and shown once, working, then only a prefix; revoked, refused', async (t) => {
    await page.getByRole('link', { name: 'API keys' }).click();
    await page.getByRole('heading', { name: 'API keys' }).waitFor();
    await page.getByLabel('Name').fill('<script>alert(1)</script>');
    await page.getByRole('button', { name: 'Create key' }).click();
    const shown = page.getByLabel('New API key');
    await shown.waitFor();
    key = await shown.inputValue();
    t.match(key, /^svc_live_[A-Za-z0-9]{40}$/, 'the full key, once');
    await shoot(page, 'keys-created');
    t.equal((await validate(key)).status, 200, 'it works on /v1/validate');
    const row = page.getByRole('row', { name: /<script>alert\(1\)<\/script>/ });
    await row.waitFor();
    t.match(await row.innerText(), new RegExp(`${key.slice(0, 12)}`), 'the table shows its prefix');
    await page.reload();
    await page.getByRole('heading', { name: 'API keys' }).waitFor();
    await page.getByRole('row', { name: /<script>alert\(1\)<\/script>/ }).waitFor();
    t.notOk((await page.content()).includes(key), 'after a reload the key is nowhere on the page');
    await shoot(page, 'keys');
    const prefix = (await page.getByRole('row', { name: /<script>alert\(1\)<\/script>/ }).locator('code').innerText()).replace(/…$/, '');
    await page.getByRole('button', { name: `Revoke key ${prefix}` }).click();
    await page.getByRole('row', { name: /<script>alert\(1\)<\/script>/ }).getByText('revoked').waitFor();
    const refused = await validate(key);
    t.same([refused.status, refused.body.code], [401, 'api_key_revoked'], 'revoked in the dashboard, refused by the API');
    t.same(dialogs, [`Revoke ${prefix}…? This cannot be undone.`], 'the only dialog was the confirmation: the hostile name ran nothing');
  });

  t.test('validate: one address, the verdict and its cost in words', async (t) => {
    await page.getByRole('link', { name: 'Validate', exact: true }).click();
    await page.getByLabel('Email address to validate').fill('jane.doe@accept.test');
    await page.getByRole('button', { name: 'Validate' }).click();
    const result = page.getByRole('status', { name: 'Validation result' });
    await result.waitFor();
    const text = await result.innerText();
    t.match(text, /jane\.doe@accept\.test: valid \(accepted\)/);
    t.match(text, /Cost: 1 credit, charged: a usable personal address is the only result that costs a credit\./);
    await page.getByLabel('Email address to validate').fill('info@accept.test');
    await page.getByRole('button', { name: 'Validate' }).click();
    await page.getByText('info@accept.test: valid_role_based (role_account)').waitFor();
    t.match(await result.innerText(), /Cost: 0 credits, not charged: role addresses are free\./);
    await shoot(page, 'validate');
  });

  t.test('a list: a CSV dropped in, its email column picked, the job watched to completion, its rows downloaded as the API gives them', async (t) => {
    await page.getByRole('link', { name: 'Validate a list' }).click();
    const csvText = 'Name,Work Email,Notes\nJane,jane.doe@accept.test,<script>alert(2)</script>\nInfo,info@accept.test,"=HYPERLINK(""http://x"")"\nNobody,nobody@reject.test,ok\nJane again,jane.doe@ACCEPT.test,dup\n';
    const dt = await page.evaluateHandle((text) => {
      const d = new DataTransfer();
      d.items.add(new File([text], 'leads <b>q4</b>.csv', { type: 'text/csv' }));
      return d;
    }, csvText);
    await page.locator('.drop').dispatchEvent('drop', { dataTransfer: dt });
    const column = page.getByLabel('Column holding the emails');
    await column.waitFor();
    t.equal(await column.inputValue(), 'Work Email', 'the email column is found by its name');
    // The whole file is counted in chunks for the chosen column (again when another is chosen).
    const ceiling = (text: RegExp) => page.getByRole('status', { name: 'Cost ceiling' }).filter({ hasText: text });
    await column.selectOption('Notes');
    await ceiling(/^At most 0 credits/).waitFor();
    t.pass('a column without addresses would cost nothing');
    await column.selectOption('Work Email');
    await ceiling(/^At most 3 credits: one is held per unique address/).waitFor();
    t.pass('four rows, three unique addresses (a domain is case-blind, a mailbox name is not)');
    await page.getByText(': 4 rows, 3 columns.').waitFor();
    t.ok(await page.getByText('leads <b>q4</b>.csv', { exact: false }).isVisible(), 'a hostile file name is shown as text');
    await shoot(page, 'upload');
    await page.getByRole('button', { name: 'Start validation' }).click();
    const progress = page.getByRole('status', { name: 'Job progress' });
    await progress.getByText('completed').waitFor({ timeout: 60_000 }).catch(async (e: Error) => {
      throw new Error(`${e.message}\nthe page says: ${await page.getByRole('main').innerText()}`);
    });
    const text = await progress.innerText();
    t.match(text, /100% \(3 of 3\)/);
    t.match(text, /Valid 1 · role 1 · risky 0 · invalid 1 · unknown 0\. Credits held 3, charged 1, refunded 2\./);
    await shoot(page, 'upload-done');
    const id = /Job (job_[0-9a-z_]+)/i.exec(text)![1]!;
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download all rows' }).click()]);
    const fromPage = readFileSync((await download.path())!, 'utf8');
    const link = await stack.call('GET', `/v1/csv/jobs/${id}/download?mode=url`);
    const u = new URL(link.body.url);
    const fromApi = await (await fetch(`${stack.url}${u.pathname}${u.search}`)).text();
    t.equal(fromPage, fromApi, "the page's download is the API's results CSV");
    t.match(fromApi, /^Name,Work Email,Notes,result,/);
    t.match(fromApi, /Info,info@accept\.test,"'=HYPERLINK\(""http:\/\/x""\)",valid_role_based,/, 'the formula cell is defused');
    t.equal(fromApi.trim().split('\n').length, 5, 'every input row, repeats included');
  });

  t.test('a large list is counted a chunk at a time, exactly', async (t) => {
    await page.getByRole('link', { name: 'Validate a list' }).click();
    // 120,000 rows (~5 MB, several 1 MB chunks): 100,000 addresses, 20,000 of them again with the
    // domain in capitals (the same address to the server), so at most 100,000 credits.
    const dt = await page.evaluateHandle(() => {
      const lines = ['id,email'];
      for (let i = 0; i < 100_000; i++) lines.push(`${i},person.${i}@big-list.example`);
      for (let i = 0; i < 20_000; i++) lines.push(`${100_000 + i},person.${i}@BIG-LIST.example`);
      const d = new DataTransfer();
      d.items.add(new File([lines.join('\n') + '\n'], 'big.csv', { type: 'text/csv' }));
      return d;
    });
    await page.locator('.drop').dispatchEvent('drop', { dataTransfer: dt });
    await page.getByRole('status', { name: 'Cost ceiling' }).filter({ hasText: /^At most 100000 credits/ }).waitFor({ timeout: 60_000 });
    await page.getByText('big.csv: 120000 rows, 2 columns.').waitFor();
    t.pass('120,000 rows, 100,000 unique addresses');
  });

  t.test('jobs: a finished job listed with its counters; its valid rows downloaded', async (t) => {
    const created = await stack.call('POST', '/v1/validate/batch', { body: { emails: ['jane.doe@accept.test', 'nobody@reject.test', 'info@accept.test'] } });
    const id = created.body.id as string;
    for (let i = 0; i < 200 && (await stack.call('GET', `/v1/csv/jobs/${id}`)).body.status !== 'completed'; i++) await new Promise((r) => setTimeout(r, 100));
    await page.getByRole('link', { name: 'Jobs' }).click();
    const row = page.getByRole('row', { name: new RegExp(id) });
    await row.getByText('completed').waitFor();
    t.match(await row.innerText(), /100% \(3 of 3\)/);
    await shoot(page, 'jobs');
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: `Download valid rows of job ${id}` }).click()]);
    const csv = readFileSync((await download.path())!, 'utf8').trim().split('\n');
    t.same(csv.slice(1).map((l) => l.split(',')[0]), ['jane.doe@accept.test'], 'the valid rows only');
  });

  t.test('team: an invitation link, shown once', async (t) => {
    await page.getByRole('link', { name: 'Team' }).click();
    await page.getByRole('button', { name: 'Create invitation link' }).click();
    t.match(await page.getByLabel(/^Invitation link/).inputValue(), /\/dashboard\/setup#token=[A-Za-z0-9_-]{43}$/);
    await shoot(page, 'team');
  });

  t.test('usage: the balance, the charts with their figures, the ledger and its CSV', async (t) => {
    await page.getByRole('link', { name: 'Usage' }).click();
    await page.getByRole('heading', { name: 'Usage and credits' }).waitFor();
    const credits = (await stack.call('GET', '/v1/credits')).body;
    const figures = page.getByRole('definition');
    t.equal(await figures.first().innerText(), credits.available.toLocaleString('en-US'), 'Available: as GET /v1/credits says');
    await page.locator('canvas[aria-label^="Validations per day by verdict"]').waitFor();
    await page.locator('canvas[aria-label^="Credits spent per day"]').waitFor();
    await page.getByText('Validations per day by verdict: the figures as a table').click();
    const today = new Date().toISOString().slice(5, 10);
    const row = page.getByRole('table', { name: 'Validations per day by verdict' }).getByRole('row', { name: new RegExp(`^${today}`) });
    await stack.svc.services.analytics.flush();
    await page.getByLabel('Period').selectOption('7');
    t.match(await row.innerText(), new RegExp(`^${today}\\t\\d+\\t\\d+\\t\\d+\\t\\d+\\t\\d+$`), "today's row: a count per verdict");
    await page.getByRole('table', { name: 'Ledger entries, newest first' }).getByRole('row').nth(1).waitFor();
    await shoot(page, 'usage');
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('link', { name: 'Export the whole ledger (CSV)' }).click()]);
    const lines = readFileSync((await download.path())!, 'utf8').split('\r\n');
    t.equal(lines[0], 'id,created_at,kind,amount,note,reservation_id');
    t.equal(lines.length - 2, (await stack.store.ledger.entries((await stack.call('GET', '/v1/credits')).body.account_id, 10_000)).length, 'every ledger row');
  });

  t.test('sign-out, a wrong password, sign-in', async (t) => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    t.same(await context.cookies(), [], 'the cookie is gone');
    await page.getByLabel('Email address').fill('owner@example.test');
    await page.getByLabel('Password').fill('not the password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    t.equal(await page.getByRole('alert').innerText(), 'Wrong email address or password');
    await shoot(page, 'sign-in');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Usage and credits' }).waitFor();
    t.pass('signed in again, on the page the address names (/dashboard/usage)');
  });

  t.test('account: the subscription, connected apps and webhook signing, for the owner', async (t) => {
    await page.getByRole('link', { name: 'Account' }).click();
    await page.getByRole('heading', { name: 'Account', level: 1 }).waitFor();
    await page.getByRole('heading', { name: /webhook/i }).first().waitFor();
    await shoot(page, 'account');
    t.pass('the account page is drawn');
  });

  t.test('the operator console: only for an operator; a credit grant lands in the balance', async (t) => {
    const accountId = (await stack.call('GET', '/v1/credits')).body.account_id as string;
    t.equal(await page.getByRole('link', { name: 'Operator' }).count(), 0, 'no Operator link for an owner without the flag');
    const made = await createUser(stack.store, { accountId, email: 'operator@example.test', role: 'member', password: PASSWORD, operator: true });
    t.equal(made.ok, true);
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    t.teardown(() => ctx.close());
    const op = await ctx.newPage();
    op.on('dialog', (d) => void d.accept());
    await op.goto(`${stack.url}/dashboard/operator`);
    await op.getByLabel('Email address').fill('operator@example.test');
    await op.getByLabel('Password').fill(PASSWORD);
    await op.getByRole('button', { name: 'Sign in' }).click();
    await op.getByRole('heading', { name: 'Operator console' }).waitFor();
    const before = (await stack.call('GET', '/v1/credits')).body.balance as number;
    await op.getByRole('button', { name: `Manage account ${accountId}` }).click();
    await op.getByLabel('Credits to grant').fill('25');
    await op.getByLabel('Note for the ledger (optional)').fill('<b>goodwill</b>');
    await op.getByRole('button', { name: 'Grant credits' }).click();
    await op.getByRole('status').waitFor();
    t.equal((await stack.call('GET', '/v1/credits')).body.balance, before + 25, 'the balance grew by exactly the grant');
    const [latest] = await stack.store.ledger.entries(accountId, 1);
    t.match(latest, { kind: 'grant', amount: 25 });
    t.match(latest!.note, /<b>goodwill<\/b>$/, 'the note kept as text');
    await shoot(op, 'operator');
  });

  t.test('accuracy and find & enrich: drawn, and the product gate answered in words', async (t) => {
    await page.getByRole('link', { name: 'Accuracy' }).click();
    await page.getByRole('heading', { name: 'Accuracy', level: 1 }).waitFor();
    await page.waitForLoadState('networkidle');
    await shoot(page, 'accuracy');
    await page.getByRole('link', { name: 'Find & enrich' }).click();
    await page.getByRole('heading', { name: 'Find & enrich', level: 1 }).waitFor();
    await page.getByLabel('First name', { exact: true }).fill('Maria');
    await page.getByLabel('Last name', { exact: true }).fill('<img src=x onerror=alert(1)>');
    await page.getByLabel('Company domain', { exact: true }).first().fill('people.test');
    await page.getByRole('button', { name: 'Find the address' }).click();
    t.equal(await page.getByRole('alert').first().innerText(), ERRORS.product_not_enabled.message, "the account's data product is off: the API's own message");
    await shoot(page, 'data');
  });

  t.test('sign-in throttled: the eleventh attempt for an address is told to wait', async (t) => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    for (let i = 1; i <= 11; i++) {
      await page.getByLabel('Email address').fill('someone.else@example.test');
      await page.getByLabel('Password').fill(`guess number ${i}`);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('alert').waitFor();
      if (i < 11) t.equal(await page.getByRole('alert').innerText(), 'Wrong email address or password', `attempt ${i}`);
    }
    t.equal(await page.getByRole('alert').innerText(), 'Too many sign-in attempts; try again in 15 minute(s)');
  });

  t.test("a member: no owner's page in the menu, and the server refuses them", async (t) => {
    const accountId = (await stack.call('GET', '/v1/credits')).body.account_id as string;
    const made = await createUser(stack.store, { accountId, email: 'member@example.test', role: 'member', password: PASSWORD });
    t.equal(made.ok, true);
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    t.teardown(() => ctx.close());
    const member = await ctx.newPage();
    await member.goto(`${stack.url}/dashboard/`);
    await member.getByLabel('Email address').fill('member@example.test');
    await member.getByLabel('Password').fill(PASSWORD);
    await member.getByRole('button', { name: 'Sign in' }).click();
    await member.getByRole('heading', { name: 'Overview' }).waitFor();
    const menu = await member.getByRole('navigation', { name: 'Dashboard' }).getByRole('link').allInnerTexts();
    t.same(menu, ['Overview', 'Validate', 'Validate a list', 'Jobs', 'Usage', 'Accuracy', 'Find & enrich'], 'no API keys, Team, Account or Operator');
    await member.goto(`${stack.url}/dashboard/keys`);
    await member.getByRole('heading', { name: 'Overview' }).waitFor();
    t.equal(await member.getByRole('heading', { name: 'API keys' }).count(), 0, 'the keys page is not drawn for a member');
    await shoot(member, 'member-overview');
    const refused = await member.evaluate(async () => {
      const out: Array<[string, number, string]> = [];
      for (const route of ['/keys', '/users', '/account', '/account/apps', '/operator/accounts']) {
        const r = await fetch(`/dashboard/api${route}`);
        out.push([route, r.status, (await r.json()).code]);
      }
      return out;
    });
    t.same(refused, [
      ['/keys', 403, 'owner_role_required'],
      ['/users', 403, 'owner_role_required'],
      ['/account', 403, 'owner_role_required'],
      ['/account/apps', 403, 'owner_role_required'],
      ['/operator/accounts', 403, 'operator_required'],
    ], 'the server refuses keys, team, billing and the operator console, not only the menu');
  });

  t.test('cross-site requests: a hostile page on another origin cannot change anything', async (t) => {
    // The owner's browser, signed in, visits a page served from another port of the same host: the
    // same site, so SameSite=Lax lets the cookie ride along; the Origin check is what refuses.
    await page.goto(`${stack.url}/dashboard/usage`);
    await page.getByLabel('Email address').fill('owner@example.test');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Usage and credits' }).waitFor();
    const accountId = (await stack.call('GET', '/v1/credits')).body.account_id as string;
    const keysBefore = (await stack.store.keys.list(accountId)).length;
    const target = `${stack.url}/dashboard/api`;
    const evil = createServer((_req, res) => {
      res.setHeader('content-type', 'text/html');
      res.end(`<!doctype html><title>prize</title>
<form id="f" method="POST" action="${target}/keys" enctype="text/plain"><input name='{"name":"evil","kind":"live","x":"' value='"}'></form>
<script>
const keys = ${JSON.stringify(`${target}/keys`)};
fetch(keys, { method: 'POST', credentials: 'include', headers: { 'content-type': 'application/json' }, body: '{"name":"evil1"}' })
  .catch(() => fetch(keys, { method: 'POST', credentials: 'include', mode: 'no-cors', headers: { 'content-type': 'text/plain' }, body: '{"name":"evil2"}' }))
  .finally(() => document.getElementById('f').submit());
</script>`);
    });
    await new Promise<void>((resolve) => evil.listen(0, '127.0.0.1', resolve));
    t.teardown(() => new Promise<void>((resolve) => evil.close(() => resolve())));
    const evilUrl = `http://127.0.0.1:${(evil.address() as AddressInfo).port}/`;
    t.not(new URL(evilUrl).origin, new URL(stack.url).origin, 'another origin');
    const answers: Array<[string, number]> = [];
    const onResponse = (r: import('playwright-core').Response) => {
      if (r.url().startsWith(target)) answers.push([r.request().method(), r.status()]);
    };
    page.on('response', onResponse);
    const done = page.waitForURL(`${target}/keys`);
    await page.goto(evilUrl);
    await done;
    page.off('response', onResponse);
    // A JSON POST needs a CORS preflight, which this server never grants: the browser sends no
    // POST at all. A text/plain fetch and a text/plain form post (what a page may send another
    // origin unasked) arrive with the cookie and are refused: the API takes JSON bodies only.
    t.same(answers.filter(([m]) => m === 'POST'), [['POST', 415], ['POST', 415]], 'the two simple requests refused (415), the JSON one never sent');
    t.equal((await stack.store.keys.list(accountId)).length, keysBefore, 'no key was created');
    await page.goto(`${stack.url}/dashboard/usage`);
    await page.getByRole('heading', { name: 'Usage and credits' }).waitFor();
    t.pass('the session is still good for its own pages');
  });

  t.test('session fixation: a cookie planted before sign-in is replaced at sign-in', async (t) => {
    const ctx = await browser.newContext();
    t.teardown(() => ctx.close());
    const planted = 'A'.repeat(43);
    await ctx.addCookies([{ name: 'svc_session', value: planted, domain: new URL(stack.url).hostname, path: '/dashboard', httpOnly: true, sameSite: 'Lax' }]);
    const p = await ctx.newPage();
    await p.goto(`${stack.url}/dashboard/`);
    await p.getByLabel('Email address').fill('member@example.test');
    await p.getByLabel('Password').fill(PASSWORD);
    await p.getByRole('button', { name: 'Sign in' }).click();
    await p.getByRole('heading', { name: 'Overview' }).waitFor();
    const cookies = await ctx.cookies();
    t.equal(cookies.length, 1);
    t.not(cookies[0]!.value, planted, 'a new session id');
    t.match(cookies[0]!.value, /^[A-Za-z0-9_-]{43}$/);
  });

  t.test('no script error, no CSP refusal, no serious accessibility violation on any page', async (t) => {
    t.same(pageErrors, [], 'no script error on any page (a CSP refusal would be one)');
    t.same(accessibility, [], 'axe-core: no serious or critical violation');
  });
}
