// Configuration: one table (environment name, type, default, range, description) from which the
// `Config` type, the start-up validation and the configuration table of docs/operations.md all
// come. Only entry points read `process.env`; they call loadConfig() once and inject the
// result. The environment names are a contract: tests outside the repo use them.

import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { API_KEY_FORMAT, OperatorError, hidePassword, parseNetwork, type Network } from '@svc/contracts';
import { ENGINE_DEFAULTS } from '@svc/engine';
import { verifierConfig } from '@svc/verifier';

type Env = Record<string, string | undefined>;

/** A bad value: the message names the variable and says what is wrong, on one line. */
export class ConfigError extends OperatorError {
  constructor(
    readonly variable: string,
    problem: string,
  ) {
    super(`${variable} ${problem}`);
  }
}

/** The configuration parsed so far (a field's default may depend on an earlier one). */
type SoFar = Readonly<Record<string, unknown>>;

interface Field<T> {
  /** The environment variable. */
  env: string;
  /** For people: the type, the default and the allowed range, as docs/operations.md shows them (Markdown). */
  type: string;
  /** A literal default in backticks (what loadConfig returns when the variable is unset), or words for a computed one. */
  default: string;
  range?: string;
  doc: string;
  /** raw: the trimmed value, undefined when unset or empty. `soFar`: the fields parsed before this one. */
  parse(raw: string | undefined, soFar: SoFar): T;
}

const shown = (raw: string): string => JSON.stringify(raw.length > 80 ? `${raw.slice(0, 80)}…` : raw);
const lit = (v: string | number | boolean): string => `\`${v}\``;

function int(env: string, dflt: number, min: number, max: number, doc: string, unit = ''): Field<number> {
  return {
    env,
    type: 'integer',
    default: lit(dflt),
    range: `${min}-${max}${unit}`,
    doc,
    parse(raw) {
      if (raw === undefined) return dflt;
      // A sign is read so that `-1` is reported as out of range rather than as not a number.
      if (!/^-?\d+$/.test(raw)) throw new ConfigError(env, `must be an integer, got ${shown(raw)}`);
      const n = Number(raw) || 0; // `-0` is 0
      if (n < min || n > max) throw new ConfigError(env, `must be between ${min} and ${max}, got ${raw}`);
      return n;
    },
  };
}

function bool(env: string, dflt: boolean, doc: string): Field<boolean> {
  return {
    env,
    type: 'boolean',
    default: lit(dflt),
    range: '`true`/`false` (or `1`/`0`)',
    doc,
    parse(raw) {
      if (raw === undefined) return dflt;
      const v = raw.toLowerCase();
      if (v === 'true' || v === '1') return true;
      if (v === 'false' || v === '0') return false;
      throw new ConfigError(env, `must be true or false, got ${shown(raw)}`);
    },
  };
}

function oneOf<const T extends string>(env: string, values: readonly T[], dflt: T, doc: string): Field<T> {
  return {
    env,
    type: 'enum',
    default: lit(dflt),
    range: values.map((v) => `\`${v}\``).join(', '),
    doc,
    parse(raw) {
      if (raw === undefined) return dflt;
      if (!(values as readonly string[]).includes(raw)) throw new ConfigError(env, `must be one of ${values.join(', ')}, got ${shown(raw)}`);
      return raw as T;
    },
  };
}

/** An absolute URL with one of the given schemes; optional unless a default is given. */
function url(env: string, schemes: string[], doc: string): Field<string | undefined> {
  return {
    env,
    type: 'URL',
    default: '—',
    range: schemes.map((s) => `\`${s}://\``).join(', '),
    doc,
    parse(raw) {
      if (raw === undefined) return undefined;
      let u: URL;
      try {
        u = new URL(raw);
      } catch {
        throw new ConfigError(env, `must be a URL (${schemes.map((s) => `${s}://…`).join(' or ')}), got ${redactUrl(raw)}`);
      }
      if (!schemes.includes(u.protocol.replace(/:$/, ''))) throw new ConfigError(env, `must start with ${schemes.map((s) => `${s}://`).join(' or ')}, got ${redactUrl(raw)}`);
      if (!u.hostname) throw new ConfigError(env, `has no host: ${redactUrl(raw)}`);
      return raw;
    },
  };
}

/** A URL as a configuration error quotes it: password hidden, quoted, cut at 80 characters. */
export const redactUrl = (raw: string): string => shown(hidePassword(raw));

const HOST_NAME = /^(?=.{1,253}$)([A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9])?)*\.?$/;

function port(p: string | undefined): boolean {
  return p === undefined || (/^\d{1,5}$/.test(p) && Number(p) >= 1 && Number(p) <= 65535);
}

/** `ip`, `ip:port`, `[v6]:port` or a bare IPv6 address: what Node's resolver accepts (no names). */
function dnsServer(s: string): boolean {
  if (net.isIP(s)) return true;
  const v6 = /^\[([0-9a-fA-F:.]+)\](?::(\d+))?$/.exec(s);
  if (v6) return net.isIPv6(v6[1]!) && port(v6[2]);
  const v4 = /^([0-9.]+):(\d+)$/.exec(s);
  return !!v4 && net.isIPv4(v4[1]!) && port(v4[2]);
}

/** `host:port` (Kafka brokers). */
function hostPort(s: string): boolean {
  const m = /^(\[[0-9a-fA-F:.]+\]|[^:\s[\]]+):(\d+)$/.exec(s);
  return !!m && (HOST_NAME.test(m[1]!) || net.isIP(m[1]!.replace(/^\[|\]$/g, '')) !== 0) && port(m[2]);
}

function list<U extends string[] | undefined>(env: string, item: (s: string) => boolean, want: string, doc: string, dflt: string, unset: U): Field<string[] | U> {
  return {
    env,
    type: 'list',
    default: dflt,
    range: `comma-separated ${want}`,
    doc,
    parse(raw) {
      if (raw === undefined) return unset;
      const items = raw.split(',').map((s) => s.trim());
      const bad = items.find((s) => !item(s));
      if (bad !== undefined) throw new ConfigError(env, `must be a comma-separated list of ${want.replace(/`/g, '')}, got ${shown(bad)} in ${shown(raw)}`);
      return items;
    },
  };
}

/** A comma list of CIDR networks (`127.0.0.0/8,::1/128`); unset or empty: none. */
function networks(env: string, doc: string): Field<Network[]> {
  const base = list(env, (s) => parseNetwork(s) !== undefined, '`address/prefix` networks', doc, 'none (public addresses only)', undefined);
  return {
    ...base,
    parse(raw, soFar) {
      if (raw === undefined || raw.trim() === '') return [];
      return base.parse(raw, soFar)!.map((s) => parseNetwork(s)!);
    },
  };
}

function text<T extends string | undefined>(env: string, dflt: (c: SoFar) => T, shownDefault: string, doc: string, check?: (v: string) => string | undefined, range?: string): Field<string | T> {
  return {
    env,
    type: 'string',
    default: shownDefault,
    ...(range ? { range } : {}),
    doc,
    parse(raw, soFar) {
      if (raw === undefined) return dflt(soFar);
      const problem = check?.(raw);
      if (problem) throw new ConfigError(env, problem);
      return raw;
    },
  };
}

/** The verifier's own defaults are the defaults of its variables. */
/**
 * A data family's providers (docs/api.md, "Data endpoints"): a comma list tried in order, each a
 * provider this build has for the family; `none` turns the family off (it answers 503
 * feature_not_configured), as does an empty default.
 */
function providers(env: string, available: readonly string[], dflt: readonly string[] | { vendor: true }, doc: string): Field<string[]> {
  const allowed = [...available, 'none'];
  // A vendor family's default: the vendor when its key is configured, else off.
  const defaultOf = (soFar: SoFar): string[] => (Array.isArray(dflt) ? [...dflt] : soFar.pdlApiKey ? ['pdl'] : []);
  return {
    env,
    type: 'list',
    default: Array.isArray(dflt) ? (dflt.length > 0 ? lit(dflt.join(',')) : 'none: the family is off (503)') : '`pdl` with `SVC_PDL_API_KEY`, else none: the family is off (503)',
    range: allowed.map((a) => `\`${a}\``).join(', '),
    doc,
    parse(raw, soFar) {
      if (raw === undefined) return defaultOf(soFar);
      const names = raw.split(',').map((x) => x.trim().toLowerCase()).filter(Boolean);
      if (names.length === 0) return defaultOf(soFar);
      if (names.includes('none')) {
        if (names.length > 1) throw new ConfigError(env, `takes \`none\` alone, got ${shown(raw)}`);
        return [];
      }
      for (const n of names) if (!available.includes(n)) throw new ConfigError(env, `names ${shown(n)}, which is not a provider of this family (${allowed.join(', ')})`);
      if (new Set(names).size !== names.length) throw new ConfigError(env, `names a provider twice: ${shown(raw)}`);
      if (names.includes('pdl') && !soFar.pdlApiKey) throw new ConfigError(env, 'names pdl, which needs SVC_PDL_API_KEY');
      return names;
    },
  };
}

const V = { ...ENGINE_DEFAULTS, ...verifierConfig() };

const defaultHelo = (): string => {
  const h = os.hostname();
  return HOST_NAME.test(h) ? h : 'localhost';
};

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** Every variable the service reads, in the order docs/operations.md lists them. */
export const CONFIG_TABLE = {
  port: int('PORT', 8080, 0, 65535, 'port the API listens on (`0`: any free port); one already in use stops start-up'),
  host: text('HOST', () => '0.0.0.0', lit('0.0.0.0'), 'address the API listens on', (v) => (net.isIP(v) || HOST_NAME.test(v) ? undefined : `must be an IP address or a host name, got ${shown(v)}`), 'IP address or host name'),
  publicUrl: {
    ...url('SVC_PUBLIC_URL', ['http', 'https'], 'base of signed URLs (jobs) and the server named in `/openapi.json`'),
    default: lit('http://localhost:$PORT'),
    parse(raw: string | undefined, soFar: SoFar): string {
      const u = url('SVC_PUBLIC_URL', ['http', 'https'], '').parse(raw, soFar) ?? `http://localhost:${soFar.port}`;
      return u.replace(/\/$/, '');
    },
  } satisfies Field<string>,
  dataDir: text('SVC_DATA_DIR', () => './data', lit('./data'), 'PGlite data directory (embedded profile; relative to the working directory), created owner-only; holds the admin socket', undefined, 'path'),
  databaseUrl: url('DATABASE_URL', ['postgres', 'postgresql'], 'use PostgreSQL instead of PGlite (same SQL)'),
  redisUrl: url('REDIS_URL', ['redis', 'rediss'], 'verdict, MX and catch-all caches and rate-limit counters in Redis instead of in-process'),
  redisKeyPrefix: text('SVC_REDIS_KEY_PREFIX', () => undefined, '—', 'with `REDIS_URL`: prepended to every Redis key of this deployment (e.g. `prod:`), so deployments sharing one Redis never see each other\'s caches, rate-limit counters or MX session limits', (v) => (/^[\x21-\x7e]{1,64}$/.test(v) ? undefined : `must be 1-64 printable ASCII characters without spaces, got ${shown(v)}`), '1-64 printable ASCII'),
  kafkaBrokers: list('KAFKA_BROKERS', hostPort, '`host:port`', 'job transport on Apache Kafka instead of in-process (cluster profile): work keyed by domain, then by MX host, results by job; `/ready` checks it', '—', undefined),
  kafkaTopicPrefix: text('SVC_KAFKA_TOPIC_PREFIX', () => 'svc.', lit('svc.'), 'prefix of every Kafka topic and consumer group of this deployment', (v) => (/^[A-Za-z0-9._-]{0,100}$/.test(v) ? undefined : `must be letters, digits, '.', '_' or '-' (at most 100), got ${shown(v)}`), 'topic-name characters'),
  kafkaPartitions: int('SVC_KAFKA_PARTITIONS', 16, 1, 1000, 'partitions of each topic this deployment creates (at least the number of consuming processes × their consumers)'),
  kafkaSessionTimeoutMs: int('SVC_KAFKA_SESSION_TIMEOUT_MS', 10_000, 6_000, 300_000, 'how long a silent worker keeps its partitions: a killed worker\'s work moves to the others after this (heartbeats every third of it)', ' ms'),
  clickhouseUrl: url('CLICKHOUSE_URL', ['http', 'https'], 'every validation decision goes to ClickHouse instead of the relational store\'s `decision_packs` table (cluster profile); `/ready` checks it'),
  clickhouseDatabase: text('SVC_CLICKHOUSE_DATABASE', () => 'svc', lit('svc'), 'ClickHouse database of the analytics tables (created if missing; with CLICKHOUSE_URL)', (v) => (/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(v) ? undefined : `must be letters, digits or '_' (not starting with a digit, at most 63), got ${shown(v)}`), 'identifier'),
  dnsServers: list('SVC_DNS_SERVERS', dnsServer, '`ip` or `ip:port` (IPv6: `[addr]:port`)', 'DNS resolvers to ask, by address (Node\'s resolver takes no names)', 'the system\'s resolvers', []),
  dnsTimeoutMs: int('SVC_DNS_TIMEOUT_MS', 5000, 50, 60_000, 'DNS query timeout', ' ms'),
  dnsConcurrency: int('SVC_DNS_CONCURRENCY', 64, 1, 10_000, 'DNS queries on the wire at once per process; the rest wait their turn (a list over many domains must not flood the resolver)'),
  smtpPort: int('SVC_SMTP_PORT', 25, 1, 65535, 'port of every MX'),
  heloName: text('SVC_HELO_NAME', defaultHelo, 'this host\'s name', 'name sent in EHLO/HELO', (v) => (HOST_NAME.test(v) ? undefined : `must be a host name, got ${shown(v)}`), 'host name'),
  mailFrom: text(
    'SVC_MAIL_FROM',
    (c) => {
      const helo = String(c.heloName);
      return `verify@${helo.includes('.') ? helo : `${helo}.localdomain`}`;
    },
    '`verify@` + the HELO name (+ `.localdomain` without a dot)',
    'envelope sender of the probes (`MAIL FROM`)',
    (v) => (/^[^\s<>@"]+@[A-Za-z0-9.-]+$/.test(v) ? undefined : `must be a plain address like verify@example.com, got ${shown(v)}`),
    'address',
  ),
  smtpTimeoutMs: int('SVC_SMTP_TIMEOUT_MS', V.smtpTimeoutMs, 50, 300_000, 'timeout of each SMTP phase (connect, greeting, EHLO, STARTTLS, MAIL, RCPT)', ' ms'),
  smtpRetries: int('SVC_SMTP_RETRIES', V.smtpRetries, 0, 5, 'retries of a 4xx (greylisting) in a synchronous request'),
  smtpRetryDelayMs: int('SVC_SMTP_RETRY_DELAY_MS', V.smtpRetryDelayMs, 0, 600_000, 'wait before such a retry', ' ms'),
  egressId: text('SVC_EGRESS_ID', () => os.hostname(), 'this host\'s name', 'the egress IP this process probes from, as a name: with REDIS_URL, every process with the same id shares one SMTP session limit per MX host', (v) => (v.length <= 200 ? undefined : 'must be at most 200 characters'), 'string'),
  maxConnectionsPerMx: int('SVC_SMTP_MAX_CONNECTIONS_PER_MX', V.maxConnectionsPerMx, 1, 100, 'concurrent SMTP sessions per mail server address (per egress IP), shared by every MX host name and domain that leads to it; fewer for a while after the server signals too many'),
  smtpIdleMs: int('SVC_SMTP_IDLE_MS', V.idleMs, 0, 600_000, 'how long a warm SMTP session waits for more work (from any request or job) before it QUITs', ' ms'),
  readyDomain: text('SVC_READY_DOMAIN', () => 'gmail.com', lit('gmail.com'), 'domain whose MX `/ready` resolves and connects to', (v) => (HOST_NAME.test(v) && v.includes('.') ? undefined : `must be a domain name, got ${shown(v)}`), 'domain'),
  bootstrapApiKey: text(
    'SVC_BOOTSTRAP_API_KEY',
    () => undefined,
    '— (a key is generated and printed once)',
    'first start only: an unrestricted key of a new account; ignored, with a warning, once the store has an account',
    (v) => (API_KEY_FORMAT.test(v) ? undefined : 'must be svc_test_ or svc_live_ followed by 16-128 letters and digits'),
    '`svc_test_` or `svc_live_` + 16-128 letters and digits',
  ),
  bootstrapCredits: int('SVC_BOOTSTRAP_CREDITS', 100, 0, 1_000_000_000, 'credits of that first account'),
  secret: text('SVC_SECRET', () => undefined, '—', 'HMAC secret of the signed upload and download URLs (generated once and kept in the store when unset; job webhooks are signed with each account\'s own secret, see POST /v1/webhooks/secret/rotate)', (v) => (v.length >= 16 ? undefined : 'must be at least 16 characters'), '16 characters or more'),
  paymentProcessor: oneOf('SVC_PAYMENT_PROCESSOR', ['local', 'stripe'] as const, 'local', 'the subscriptions\' payment processor: `local` (plans as data; this service renews, grants credits and ends subscriptions itself) or `stripe` (needs the two `SVC_STRIPE_*` secrets)'),
  stripeSecretKey: text('SVC_STRIPE_SECRET_KEY', () => undefined, '—', 'with `SVC_PAYMENT_PROCESSOR=stripe`: the Stripe secret API key', (v) => (/^(sk|rk)_(test|live)_[A-Za-z0-9]+$/.test(v) ? undefined : 'must be a Stripe secret or restricted key (sk_test_…, sk_live_…, rk_…)'), '`sk_live_…`, `sk_test_…` or `rk_…`'),
  stripeWebhookSecret: text('SVC_STRIPE_WEBHOOK_SECRET', () => undefined, '—', 'with `SVC_PAYMENT_PROCESSOR=stripe`: the signing secret of the webhook endpoint `POST /v1/webhooks/stripe`', (v) => (/^whsec_[A-Za-z0-9+/=_-]+$/.test(v) ? undefined : 'must be a Stripe webhook signing secret (whsec_…)'), '`whsec_…`'),
  stripeApiUrl: url('SVC_STRIPE_API_URL', ['http', 'https'], 'another origin for Stripe\'s API (a local stand-in for tests); default Stripe\'s own'),
  rateLimitPerKey: int('SVC_RATE_LIMIT_PER_KEY', 10_000, 1, 10_000_000, 'requests per minute per API key'),
  rateLimitPerIp: int('SVC_RATE_LIMIT_PER_IP', 1_000, 1, 10_000_000, 'requests per minute per client IP'),
  bodyLimitBytes: int('SVC_BODY_LIMIT_BYTES', 1_048_576, 1024, 100 * 1_048_576, 'request body limit (1 MiB)', ' bytes'),
  jobBodyLimitBytes: int('SVC_JOB_BODY_LIMIT_BYTES', 64 * 1_048_576, 1_048_576, 1024 * 1_048_576, 'request body limit of `POST /v1/validate/batch` (64 MiB: 500,000 addresses)', ' bytes'),
  csvMaxBytes: int('SVC_CSV_MAX_BYTES', 100 * 1_048_576, 1024, 10 * 1024 * 1_048_576, 'largest CSV upload (100 MiB)', ' bytes'),
  csvPoolThreads: int('SVC_CSV_POOL_THREADS', 0, 0, 64, 'worker threads (Piscina) that parse CSV uploads and render results CSVs; 0 = on the event loop in chunks (faster on 2 cores, see docs/decisions/jobs-and-csv.md)'),
  jobGreylistDelayMs: int('SVC_JOB_GREYLIST_DELAY_MS', 300_000, 0, 86_400_000, 'a job re-probes a greylisted address (4xx) after this long (5 min)', ' ms'),
  jobGreylistAttempts: int('SVC_JOB_GREYLIST_ATTEMPTS', 3, 1, 10, 'probes of a greylisted address in a job, the first included; then its `unknown` stands'),
  busMaxAttempts: int('SVC_BUS_MAX_ATTEMPTS', 8, 1, 100, 'deliveries of a job message whose handling fails, retried with a back-off doubling from 0.5 s to 30 s (8: about a minute), before it is dead-lettered and its addresses answered `unknown` (`processing_failed`)'),
  busMaxQueued: int('SVC_BUS_MAX_QUEUED', 32, 1, 100_000, 'in-process bus (no `KAFKA_BROKERS`): messages the MX topic and the results topic of the job pipeline each hold waiting before a publisher waits for one to be taken (back-pressure: a results message holds up to 500 verdicts, ~0.3 MiB); the work topic is not bounded'),
  memoryCacheMb: int('SVC_MEMORY_CACHE_MB', 16, 1, 4096, 'in-process cache (no `REDIS_URL`: verdicts, MX and address answers, catch-all results): MiB of keys and JSON texts it keeps, the oldest going first; the heap it takes is about 1.5 times that', ' MiB'),
  heapGrowingPercent: int('SVC_HEAP_GROWING_PERCENT', 25, 0, 1000, 'how far V8 lets the JavaScript heap grow past what its last full garbage collection kept before it collects again (V8\'s `--heap-growing-percent`, set at start for the whole process); 0 = V8\'s own factor, up to 300% when allocating fast (a 500,000-address job then held ~530 MiB of heap for ~200 MiB of live objects)', '%'),
  mcpAccessTokenTtlS: int('SVC_MCP_ACCESS_TOKEN_TTL_S', 3600, 1, 86_400, 'lifetime of a hosted-MCP OAuth access token (1 h); the client refreshes it with its refresh token (30 days, rotated at each use)', ' s'),
  dashboard: bool('SVC_DASHBOARD', true, 'serve the web dashboard at `/dashboard` (its API at `/dashboard/api`): sign-in, keys, team'),
  sessionIdleS: int('SVC_SESSION_IDLE_S', 43_200, 60, 31_536_000, 'a dashboard session ends after this long without a request (12 h)', ' s'),
  sessionMaxS: int('SVC_SESSION_MAX_S', 604_800, 60, 31_536_000, 'a dashboard session ends this long after its sign-in, whatever its use (7 days)', ' s'),
  webhookAllowPrivate: bool('SVC_WEBHOOK_ALLOW_PRIVATE', false, 'let job webhooks call every loopback, private, link-local (cloud metadata included) and other special-purpose address (refused otherwise; a warning at start-up says so): prefer `SVC_OUTBOUND_ALLOW_NETWORKS`'),
  outboundAllowNetworks: networks('SVC_OUTBOUND_ALLOW_NETWORKS', 'networks that the service\'s outbound HTTP requests (job webhooks) may reach besides public addresses, checked on the resolved address at connect time; e.g. `127.0.0.0/8,::1/128` for a receiver on this machine'),
  resultCacheTtlMs: int('SVC_RESULT_CACHE_TTL_MS', V.resultCacheTtlMs, 0, 30 * 86_400_000, `how long a definite verdict is reused (${V.resultCacheTtlMs / 3_600_000} h; \`unknown\` never)`, ' ms'),
  // Capped well below the 10-minute stale-reservation sweep and idempotency takeover.
  validationTimeoutMs: int('SVC_VALIDATION_TIMEOUT_MS', V.deadlineMs ?? 30_000, 100, 120_000, 'the most one address may take end to end (then `unknown`)', ' ms'),
  claimLeaseMs: int('SVC_CLAIM_LEASE_MS', 15_000, 1_000, 600_000, 'how long a claim outlives the process holding it (an `Idempotency-Key` in progress, a CSV intake, a job\'s work being published): renewed every third of it while held; after it, another process takes over (a retry, a worker)', ' ms'),
  pdlApiKey: text('SVC_PDL_API_KEY', () => undefined, '—', 'the People Data Labs API key (data endpoints; sent in the `X-Api-Key` header, never logged); with it the vendor families default to `pdl`', (v) => (/^[\x21-\x7e]{8,256}$/.test(v) ? undefined : 'must be 8-256 printable characters without spaces'), '8-256 printable characters'),
  pdlBaseUrl: url('SVC_PDL_BASE_URL', ['http', 'https'], 'another origin for People Data Labs\' API (a local stand-in for tests); default https://api.peopledatalabs.com'),
  companyProviders: providers('SVC_COMPANY_PROVIDERS', ['native', 'pdl'], ['native'], 'providers of company data (`/v1/company/*`), tried in order: `native` reads the domain\'s website and DNS, `pdl` asks People Data Labs'),
  linkedinProviders: providers('SVC_LINKEDIN_PROVIDERS', ['pdl'], { vendor: true }, 'providers of LinkedIn company data and hires (`/v1/linkedin/*`)'),
  peopleProviders: providers('SVC_PEOPLE_PROVIDERS', ['pdl'], { vendor: true }, 'providers of people search, person and role lookup (`/v1/people/*`)'),
  profileProviders: providers('SVC_PROFILE_PROVIDERS', ['pdl'], { vendor: true }, 'providers of profiles (`/v1/profile/enrich`, `/v1/prospect/email-to-person`)'),
  mobileProviders: providers('SVC_MOBILE_PROVIDERS', ['pdl'], { vendor: true }, 'providers of mobile numbers (`/v1/mobile/find`)'),
  finderProviders: providers('SVC_FINDER_PROVIDERS', ['native'], ['native'], 'providers of the email finder (`/v1/find/bulk`), tried in order: `native` makes candidates from the name and proves them on the domain\'s mail server with the probe engine'),
  finderMaxCandidates: int('SVC_FINDER_MAX_CANDIDATES', 8, 1, 16, 'email finder: candidate addresses probed per contact (the domain\'s known patterns first)'),
  webFetchTimeoutMs: int('SVC_WEB_FETCH_TIMEOUT_MS', 5_000, 100, 60_000, 'company data: the most one website fetch may take, redirects included', ' ms'),
  webFetchMaxBytes: int('SVC_WEB_FETCH_MAX_BYTES', 2 * 1_048_576, 16_384, 64 * 1_048_576, 'company data: the most of a home page read (2 MiB); the rest is not downloaded', ' bytes'),
  webHttpPort: int('SVC_WEB_HTTP_PORT', 80, 1, 65535, 'port websites are fetched on over http (tests point it at the simulated internet)'),
  webHttpsPort: int('SVC_WEB_HTTPS_PORT', 443, 1, 65535, 'port websites are fetched on over https'),
  role: oneOf('SVC_ROLE', ['all', 'front', 'worker'] as const, 'all', 'what this process runs: `all` (API and job workers), `front` (API and job intake only), `worker` (job workers; the API still answers)'),
  logLevel: oneOf('SVC_LOG_LEVEL', LOG_LEVELS, 'info', 'log level; logs are JSON lines on stdout'),
  trustProxy: bool('SVC_TRUST_PROXY', false, 'take the client IP from `X-Forwarded-For` (behind a proxy)'),
} as const;

type Table = typeof CONFIG_TABLE;

/** The validated configuration: one property per variable of CONFIG_TABLE. */
export type Config = { -readonly [K in keyof Table]: ReturnType<Table[K]['parse']> };

/** Reads and validates every variable; the first bad one throws a ConfigError naming it. */
export function loadConfig(env: Env): Config {
  const out: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(CONFIG_TABLE) as Array<[keyof Config, Field<unknown>]>) {
    const raw = env[field.env]?.trim();
    out[key] = field.parse(raw === '' ? undefined : raw, out);
  }
  const cfg = out as unknown as Config;
  cfg.dataDir = path.resolve(cfg.dataDir);
  if (cfg.paymentProcessor === 'stripe') {
    if (!cfg.stripeSecretKey) throw new ConfigError('SVC_STRIPE_SECRET_KEY', 'is required with SVC_PAYMENT_PROCESSOR=stripe');
    if (!cfg.stripeWebhookSecret) throw new ConfigError('SVC_STRIPE_WEBHOOK_SECRET', 'is required with SVC_PAYMENT_PROCESSOR=stripe');
  }
  return cfg;
}

/**
 * Why the API could not listen, as the setting to change (a port in use is a configuration
 * problem, not a crash); undefined for any other failure.
 */
export function listenConfigError(err: unknown, config: Pick<Config, 'port' | 'host'>): ConfigError | undefined {
  switch ((err as NodeJS.ErrnoException | undefined)?.code) {
    case 'EADDRINUSE':
      return new ConfigError('PORT', `${config.port} is already in use on ${config.host}`);
    case 'EACCES':
      return new ConfigError('PORT', `${config.port} needs privileges this process lacks (EACCES); use a port above 1023`);
    case 'EADDRNOTAVAIL':
      return new ConfigError('HOST', `${config.host} is not an address of this machine (EADDRNOTAVAIL)`);
    case 'ENOTFOUND':
      return new ConfigError('HOST', `${config.host} does not resolve to an address (ENOTFOUND)`);
    default:
      return undefined;
  }
}

/** The configuration table of docs/operations.md, rendered from CONFIG_TABLE (a test keeps them equal). */
export function configTableMarkdown(): string {
  const rows = Object.values(CONFIG_TABLE as Record<string, Field<unknown>>).map(
    (f) => `| \`${f.env}\` | ${f.type} | ${f.default} | ${f.range ?? ''} | ${f.doc} |`,
  );
  return ['| Variable | Type | Default | Range | Meaning |', '|---|---|---|---|---|', ...rows].join('\n');
}
