// The configuration table (packages/runtime/src/config.ts): every bad value is refused with one
// line naming the variable, every default is the one the table (and so docs/operations.md) shows,
// and the table of docs/operations.md is the table.

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { CONFIG_TABLE, ConfigError, configTableMarkdown, loadConfig, startService } from '@svc/runtime';

const ROOT = path.resolve(import.meta.dirname, '../../..');

/** loadConfig's error for one variable (the test fails if it is accepted or throws anything else). */
function refusal(env: Record<string, string>): { variable: string; message: string } | string {
  try {
    loadConfig(env);
    return 'accepted';
  } catch (err) {
    return err instanceof ConfigError ? { variable: err.variable, message: err.message } : `not a ConfigError: ${String(err)}`;
  }
}

t.test('a bad value is refused with one line naming the variable and what is wrong', async (t) => {
  const cases: Array<[string, string, string]> = [
    ['SVC_TRUST_PROXY', 'maybe', 'SVC_TRUST_PROXY must be true or false, got "maybe"'],
    ['SVC_LOG_LEVEL', 'loud', 'SVC_LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent, got "loud"'],
    ['SVC_DNS_SERVERS', 'garbage', 'SVC_DNS_SERVERS must be a comma-separated list of ip or ip:port (IPv6: [addr]:port), got "garbage" in "garbage"'],
    ['SVC_DNS_SERVERS', '1.2.3.4:99999', 'SVC_DNS_SERVERS must be a comma-separated list of ip or ip:port (IPv6: [addr]:port), got "1.2.3.4:99999" in "1.2.3.4:99999"'],
    ['SVC_DNS_SERVERS', '127.0.0.1:5354, dns.google', 'SVC_DNS_SERVERS must be a comma-separated list of ip or ip:port (IPv6: [addr]:port), got "dns.google" in "127.0.0.1:5354, dns.google"'],
    ['PORT', '-1', 'PORT must be between 0 and 65535, got -1'],
    ['PORT', 'abc', 'PORT must be an integer, got "abc"'],
    ['PORT', '65536', 'PORT must be between 0 and 65535, got 65536'],
    ['SVC_SMTP_PORT', '0', 'SVC_SMTP_PORT must be between 1 and 65535, got 0'],
    ['SVC_SMTP_TIMEOUT_MS', '10s', 'SVC_SMTP_TIMEOUT_MS must be an integer, got "10s"'],
    ['SVC_BOOTSTRAP_CREDITS', '1.5', 'SVC_BOOTSTRAP_CREDITS must be an integer, got "1.5"'],
    ['SVC_VALIDATION_TIMEOUT_MS', '600000', 'SVC_VALIDATION_TIMEOUT_MS must be between 100 and 120000, got 600000'],
    ['DATABASE_URL', 'mysql://x', 'DATABASE_URL must start with postgres:// or postgresql://, got "mysql://x"'],
    ['DATABASE_URL', 'postgres://user:hunter2@', 'DATABASE_URL must be a URL (postgres://… or postgresql://…), got "postgres://user:***@"'],
    ['REDIS_URL', 'nope', 'REDIS_URL must be a URL (redis://… or rediss://…), got "nope"'],
    ['KAFKA_BROKERS', 'host-without-port', 'KAFKA_BROKERS must be a comma-separated list of host:port, got "host-without-port" in "host-without-port"'],
    ['CLICKHOUSE_URL', 'tcp://ch:9000', 'CLICKHOUSE_URL must start with http:// or https://, got "tcp://ch:9000"'],
    ['SVC_PUBLIC_URL', 'ftp://x', 'SVC_PUBLIC_URL must start with http:// or https://, got "ftp://x"'],
    ['HOST', 'not a host', 'HOST must be an IP address or a host name, got "not a host"'],
    ['SVC_HELO_NAME', 'bad name', 'SVC_HELO_NAME must be a host name, got "bad name"'],
    ['SVC_HELO_NAME', 'a\nb', 'SVC_HELO_NAME must be a host name, got "a\\nb"'],
    ['SVC_MAIL_FROM', '<x>', 'SVC_MAIL_FROM must be a plain address like verify@example.com, got "<x>"'],
    ['SVC_READY_DOMAIN', 'localhost', 'SVC_READY_DOMAIN must be a domain name, got "localhost"'],
    // The key itself is never echoed: a configuration error may be printed to a shared terminal.
    ['SVC_BOOTSTRAP_API_KEY', 'bootstrap-secret-0123456789', 'SVC_BOOTSTRAP_API_KEY must be svc_test_ or svc_live_ followed by 16-128 letters and digits'],
    ['SVC_BOOTSTRAP_API_KEY', 'svc_test_short', 'SVC_BOOTSTRAP_API_KEY must be svc_test_ or svc_live_ followed by 16-128 letters and digits'],
    ['SVC_SECRET', 'short', 'SVC_SECRET must be at least 16 characters'],
  ];
  for (const [variable, value, message] of cases) {
    t.strictSame(refusal({ [variable]: value }), { variable, message }, `${variable}=${JSON.stringify(value)}`);
    t.notOk(message.includes('\n'), 'one line');
  }
  t.strictSame(refusal({ PORT: 'abc', SVC_LOG_LEVEL: 'loud' }), { variable: 'PORT', message: 'PORT must be an integer, got "abc"' }, 'the first bad variable in table order is reported');
});

t.test('good values are accepted, trimmed and typed; empty is unset', async (t) => {
  const key = 'svc_test_0123456789abcdef';
  const cfg = loadConfig({
    PORT: ' 8081 ',
    HOST: '::1',
    SVC_PUBLIC_URL: 'https://verify.example.com/',
    SVC_DATA_DIR: '/var/lib/svc',
    DATABASE_URL: 'postgresql://svc:pw@db.internal:5432/svc',
    REDIS_URL: 'rediss://cache.internal:6380',
    KAFKA_BROKERS: 'k1.internal:9092, 10.0.0.7:9092,[::1]:9093',
    CLICKHOUSE_URL: 'http://ch.internal:8123',
    SVC_DNS_SERVERS: '127.0.0.1:5354,[::1]:53,8.8.8.8,2001:4860:4860::8888',
    SVC_SMTP_PORT: '2525',
    SVC_HELO_NAME: 'mx-probe.example.com',
    SVC_BOOTSTRAP_API_KEY: key,
    SVC_BOOTSTRAP_CREDITS: '0',
    SVC_SECRET: '0123456789abcdef',
    SVC_LOG_LEVEL: 'silent',
    SVC_TRUST_PROXY: 'TRUE',
    SVC_SMTP_RETRIES: '',
  });
  t.strictSame(
    [cfg.port, cfg.host, cfg.publicUrl, cfg.dataDir, cfg.databaseUrl, cfg.redisUrl, cfg.kafkaBrokers, cfg.clickhouseUrl, cfg.dnsServers, cfg.smtpPort, cfg.heloName, cfg.mailFrom],
    [
      8081,
      '::1',
      'https://verify.example.com',
      '/var/lib/svc',
      'postgresql://svc:pw@db.internal:5432/svc',
      'rediss://cache.internal:6380',
      ['k1.internal:9092', '10.0.0.7:9092', '[::1]:9093'],
      'http://ch.internal:8123',
      ['127.0.0.1:5354', '[::1]:53', '8.8.8.8', '2001:4860:4860::8888'],
      2525,
      'mx-probe.example.com',
      'verify@mx-probe.example.com',
    ],
  );
  t.strictSame([cfg.bootstrapApiKey, cfg.bootstrapCredits, cfg.secret, cfg.logLevel, cfg.trustProxy, cfg.smtpRetries], [key, 0, '0123456789abcdef', 'silent', true, 1]);
  t.equal(loadConfig({ SVC_TRUST_PROXY: '0' }).trustProxy, false, 'booleans: 1/0 too');
  t.equal(loadConfig({ PORT: '0' }).port, 0, 'PORT 0: any free port');
  t.equal(loadConfig({ PORT: '9000' }).publicUrl, 'http://localhost:9000', 'SVC_PUBLIC_URL defaults to the configured port');
  t.equal(loadConfig({ SVC_DATA_DIR: 'rel/dir' }).dataDir, path.resolve('rel/dir'), 'a relative data directory is resolved once, at start');
});

t.test('every default is the one the table shows', async (t) => {
  const cfg = loadConfig({}) as unknown as Record<string, unknown>;
  const fields = CONFIG_TABLE as unknown as Record<string, { env: string; default: string }>;
  // Defaults that are computed (from the host or another variable) and shown in words.
  const computed: Record<string, (v: unknown) => boolean> = {
    SVC_PUBLIC_URL: (v) => v === 'http://localhost:8080',
    SVC_DNS_SERVERS: (v) => Array.isArray(v) && v.length === 0,
    SVC_OUTBOUND_ALLOW_NETWORKS: (v) => Array.isArray(v) && v.length === 0,
    SVC_HELO_NAME: (v) => v === os.hostname(),
    SVC_EGRESS_ID: (v) => v === os.hostname(),
    SVC_MAIL_FROM: (v) => v === `verify@${os.hostname().includes('.') ? os.hostname() : `${os.hostname()}.localdomain`}`,
    SVC_BOOTSTRAP_API_KEY: (v) => v === undefined,
    // Vendor data families: pdl with SVC_PDL_API_KEY, else off (503).
    SVC_LINKEDIN_PROVIDERS: (v) => Array.isArray(v) && v.length === 0,
    SVC_PEOPLE_PROVIDERS: (v) => Array.isArray(v) && v.length === 0,
    SVC_PROFILE_PROVIDERS: (v) => Array.isArray(v) && v.length === 0,
    SVC_MOBILE_PROVIDERS: (v) => Array.isArray(v) && v.length === 0,
  };
  const literals: string[] = [];
  for (const [prop, f] of Object.entries(fields)) {
    const literal = /^`([^`]+)`$/.exec(f.default)?.[1];
    const value = cfg[prop];
    if (f.env in computed) {
      t.ok(computed[f.env]!(value), `${f.env}: ${JSON.stringify(value)} is "${f.default}"`);
    } else if (f.default === '—') {
      // Unset is undefined, never an empty list: `if (config.kafkaBrokers)` must mean "configured".
      t.equal(value, undefined, `${f.env}: unset by default`);
    } else {
      t.ok(literal, `${f.env}: a literal default in backticks, or listed above as computed (${f.default})`);
      literals.push(f.env);
      const expected = f.env === 'SVC_DATA_DIR' ? path.resolve(literal!) : literal;
      t.equal(String(value), expected, `${f.env} defaults to ${f.default}`);
    }
  }
  t.equal(literals.length + Object.keys(computed).length + 11, Object.keys(fields).length, 'every variable checked (11 unset by default: DATABASE_URL, REDIS_URL, SVC_REDIS_KEY_PREFIX, KAFKA_BROKERS, CLICKHOUSE_URL, SVC_SECRET, the three SVC_STRIPE_* settings and the two SVC_PDL_* ones)');
  t.strictSame(
    [cfg.port, cfg.host, cfg.smtpPort, cfg.smtpTimeoutMs, cfg.bootstrapCredits, cfg.logLevel, cfg.trustProxy, cfg.validationTimeoutMs],
    [8080, '0.0.0.0', 25, 10000, 100, 'info', false, 30000],
    'the documented defaults, typed',
  );
});

// The variables the design names, in its order: this build reads every one of them.
const PLANNED_READ = [
  'PORT', 'HOST', 'SVC_PUBLIC_URL', 'SVC_DATA_DIR', 'DATABASE_URL', 'REDIS_URL', 'KAFKA_BROKERS', 'CLICKHOUSE_URL', 'SVC_DNS_SERVERS', 'SVC_SMTP_PORT',
  'SVC_HELO_NAME', 'SVC_MAIL_FROM', 'SVC_SMTP_TIMEOUT_MS', 'SVC_READY_DOMAIN', 'SVC_BOOTSTRAP_API_KEY', 'SVC_BOOTSTRAP_CREDITS', 'SVC_SECRET',
  'SVC_SMTP_MAX_CONNECTIONS_PER_MX', 'SVC_SMTP_IDLE_MS', 'SVC_JOB_GREYLIST_DELAY_MS', 'SVC_JOB_GREYLIST_ATTEMPTS', 'SVC_CSV_MAX_BYTES',
  'SVC_WEBHOOK_ALLOW_PRIVATE', 'SVC_OUTBOUND_ALLOW_NETWORKS', 'SVC_REDIS_KEY_PREFIX', 'SVC_ROLE',
  'SVC_COMPANY_PROVIDERS', 'SVC_LINKEDIN_PROVIDERS', 'SVC_PEOPLE_PROVIDERS', 'SVC_PROFILE_PROVIDERS', 'SVC_MOBILE_PROVIDERS', 'SVC_FINDER_PROVIDERS',
  'SVC_WEB_FETCH_TIMEOUT_MS', 'SVC_WEB_FETCH_MAX_BYTES', 'SVC_FINDER_MAX_CANDIDATES', 'SVC_PDL_API_KEY', 'SVC_PDL_BASE_URL',
  'SVC_DASHBOARD', 'SVC_SESSION_IDLE_S', 'SVC_SESSION_MAX_S',
];
// Every planned variable is read now.
const PLANNED_LATER: string[] = [];

t.test('the configuration table of docs/operations.md is the table, and names every planned variable this build reads', async (t) => {
  const readme = readFileSync(path.join(ROOT, 'docs/operations.md'), 'utf8');
  const table = configTableMarkdown();
  t.ok(readme.includes(`${table}\n`), 'docs/operations.md contains configTableMarkdown() verbatim (regenerate it from packages/runtime/src/config.ts)');
  const section = /\n## Configuration\n([\s\S]*?)\n## /.exec(readme)?.[1] ?? '';
  t.ok(section.includes(table), 'in its Configuration section');
  const rows = table.split('\n').slice(2);
  const names = rows.map((r) => /^\| `([A-Z_]+)` \|/.exec(r)?.[1]);
  const envs = Object.values(CONFIG_TABLE as unknown as Record<string, { env: string }>).map((f) => f.env);
  t.strictSame(names, envs, 'one row per variable, in table order');
  for (const v of PLANNED_READ) t.ok(envs.includes(v), `${v} (planned) is in the table`);
  for (const v of PLANNED_LATER) t.notOk(envs.includes(v), `${v} (planned, not read yet) is not`);
  for (const r of rows) t.equal(r.split(' | ').length, 5, `five cells, no stray pipe: ${r.slice(0, 40)}`);
});

t.test('a store the configuration cannot open stops start-up naming the variable (ConfigError: one line, exit 2)', async (t) => {
  const env = { HOST: '127.0.0.1', PORT: '0', SVC_LOG_LEVEL: 'silent' };
  // A file where a directory should be (a typo'd path, a stale mount point).
  const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-cfg-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(path.join(dir, 'file'), '');
  const data = await startService(loadConfig({ ...env, SVC_DATA_DIR: path.join(dir, 'file', 'data') })).catch((e: unknown) => e);
  t.ok(data instanceof ConfigError, 'a data directory that cannot be created');
  t.match((data as ConfigError).message, new RegExp(`^SVC_DATA_DIR ${path.join(dir, 'file', 'data')} cannot be used: EEXIST: file already exists, mkdir '${path.join(dir, 'file')}'$`));
  const pg = await startService(loadConfig({ ...env, DATABASE_URL: 'postgres://user:s3cret@127.0.0.1:1/db' })).catch((e: unknown) => e);
  t.ok(pg instanceof ConfigError, 'a database that cannot be reached');
  t.equal((pg as ConfigError).message, 'DATABASE_URL "postgres://user:***@127.0.0.1:1/db": cannot connect (ECONNREFUSED connect ECONNREFUSED 127.0.0.1:1)');
});

t.test('passwords in URLs never reach a configuration error', async (t) => {
  const cases: Array<[string, string]> = [
    ['mysql://u:p/w@h/db', 'DATABASE_URL must be a URL (postgres://… or postgresql://…), got "mysql://u:***@h/db"'],
    ['postgres//u:pw@h', 'DATABASE_URL must be a URL (postgres://… or postgresql://…), got "postgres//u:***@h"'],
    ['redis://:hunter2@h:6379', 'REDIS_URL must start with redis:// or rediss://, got "redis://:***@h:6379"'],
  ];
  for (const [raw, want] of cases) {
    const v = raw.startsWith('redis') ? 'REDIS_URL' : 'DATABASE_URL';
    const err = (() => {
      try {
        loadConfig({ [v]: v === 'REDIS_URL' ? raw.replace('redis:', 'http:') : raw });
      } catch (e) {
        return e as Error;
      }
      return undefined;
    })();
    t.ok(err instanceof ConfigError, raw);
    if (v === 'REDIS_URL') t.equal(err?.message, 'REDIS_URL must start with redis:// or rediss://, got "http://:***@h:6379"');
    else t.equal(err?.message, want);
    t.notOk(/p\/w|pw|hunter2/.test(err?.message ?? ''), `no password in ${err?.message}`);
  }
});
