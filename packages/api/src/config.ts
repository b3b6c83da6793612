// Configuration is read once, here, from an environment object, validated, and injected
// (STYLE 8). The names of DESIGN 7 are a contract: tests outside the repo use them.

import os from 'node:os';
import { verifierConfig } from '@svc/verifier/verifier.ts';
import path from 'node:path';

export interface Config {
  port: number;
  host: string;
  publicUrl: string;
  dataDir: string;
  databaseUrl?: string;
  redisUrl?: string;
  kafkaBrokers?: string[];
  clickhouseUrl?: string;
  dnsServers: string[];
  dnsTimeoutMs: number;
  smtpPort: number;
  heloName: string;
  mailFrom: string;
  smtpTimeoutMs: number;
  smtpRetries: number;
  smtpRetryDelayMs: number;
  maxConnectionsPerMx: number;
  readyDomain: string;
  bootstrapApiKey?: string;
  bootstrapCredits: number;
  secret?: string;
  logLevel: string;
  rateLimitPerKey: number;
  rateLimitPerIp: number;
  bodyLimitBytes: number;
  resultCacheTtlMs: number;
  validationTimeoutMs: number;
  trustProxy: boolean;
}

export class ConfigError extends Error {}

type Env = Record<string, string | undefined>;

function int(env: Env, name: string, dflt: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return dflt;
  if (!/^\d+$/.test(raw.trim())) throw new ConfigError(`${name} must be an integer, got ${JSON.stringify(raw)}`);
  const n = Number(raw);
  if (n < min || n > max) throw new ConfigError(`${name} must be between ${min} and ${max}, got ${n}`);
  return n;
}

function str(env: Env, name: string): string | undefined {
  const v = env[name]?.trim();
  return v ? v : undefined;
}

/** 'host:port', '[v6]:port' or 'host' (port 53), as Node's resolver takes them. */
function dnsServers(raw: string | undefined): string[] {
  if (!raw) return [];
  return raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((s) => {
      const m = /^(\[[0-9a-fA-F:.]+\]|[^:\s]+)(?::(\d{1,5}))?$/.exec(s) ?? /^([0-9a-fA-F:]+)$/.exec(s);
      if (!m || (m[2] !== undefined && (Number(m[2]) < 1 || Number(m[2]) > 65535))) throw new ConfigError(`SVC_DNS_SERVERS: bad entry ${JSON.stringify(s)} (want host:port)`);
      return s;
    });
}

/** The verifier's own defaults are the defaults of its variables. */
const V = verifierConfig({ smtpPort: 25, heloName: '', mailFrom: '' });

export function loadConfig(env: Env): Config {
  const heloName = str(env, 'SVC_HELO_NAME') ?? os.hostname();
  const mailFrom = str(env, 'SVC_MAIL_FROM') ?? `verify@${heloName.includes('.') ? heloName : `${heloName}.localdomain`}`;
  if (/[\s<>\r\n]/.test(mailFrom) || !mailFrom.includes('@')) throw new ConfigError(`SVC_MAIL_FROM must be a plain address, got ${JSON.stringify(mailFrom)}`);
  if (/[\s\r\n]/.test(heloName)) throw new ConfigError('SVC_HELO_NAME must be a host name');
  const port = int(env, 'PORT', 8080, 0, 65535);
  const cfg: Config = {
    port,
    host: str(env, 'HOST') ?? '0.0.0.0',
    publicUrl: (str(env, 'SVC_PUBLIC_URL') ?? `http://localhost:${port}`).replace(/\/$/, ''),
    dataDir: path.resolve(str(env, 'SVC_DATA_DIR') ?? './data'),
    dnsServers: dnsServers(str(env, 'SVC_DNS_SERVERS')),
    dnsTimeoutMs: int(env, 'SVC_DNS_TIMEOUT_MS', 5000, 50, 60_000),
    smtpPort: int(env, 'SVC_SMTP_PORT', 25, 1, 65535),
    heloName,
    mailFrom,
    smtpTimeoutMs: int(env, 'SVC_SMTP_TIMEOUT_MS', V.smtpTimeoutMs, 50, 300_000),
    smtpRetries: int(env, 'SVC_SMTP_RETRIES', V.smtpRetries, 0, 5),
    smtpRetryDelayMs: int(env, 'SVC_SMTP_RETRY_DELAY_MS', V.smtpRetryDelayMs, 0, 600_000),
    maxConnectionsPerMx: int(env, 'SVC_SMTP_MAX_CONNECTIONS_PER_MX', V.maxConnectionsPerMx, 1, 100),
    readyDomain: str(env, 'SVC_READY_DOMAIN') ?? 'gmail.com',
    bootstrapCredits: int(env, 'SVC_BOOTSTRAP_CREDITS', 100, 0, 1_000_000_000),
    logLevel: str(env, 'SVC_LOG_LEVEL') ?? 'info',
    rateLimitPerKey: int(env, 'SVC_RATE_LIMIT_PER_KEY', 10_000, 1, 10_000_000),
    rateLimitPerIp: int(env, 'SVC_RATE_LIMIT_PER_IP', 1_000, 1, 10_000_000),
    bodyLimitBytes: int(env, 'SVC_BODY_LIMIT_BYTES', 1_048_576, 1024, 100 * 1_048_576),
    resultCacheTtlMs: int(env, 'SVC_RESULT_CACHE_TTL_MS', V.resultCacheTtlMs, 0, 30 * 86_400_000),
    // Capped well below the 10-minute stale-reservation sweep and idempotency takeover.
    validationTimeoutMs: int(env, 'SVC_VALIDATION_TIMEOUT_MS', V.deadlineMs ?? 30_000, 100, 120_000),
    trustProxy: env.SVC_TRUST_PROXY === 'true' || env.SVC_TRUST_PROXY === '1',
  };
  const optional = {
    databaseUrl: str(env, 'DATABASE_URL'),
    redisUrl: str(env, 'REDIS_URL'),
    clickhouseUrl: str(env, 'CLICKHOUSE_URL'),
    bootstrapApiKey: str(env, 'SVC_BOOTSTRAP_API_KEY'),
    secret: str(env, 'SVC_SECRET'),
  };
  for (const [k, v] of Object.entries(optional)) if (v !== undefined) (cfg as unknown as Record<string, unknown>)[k] = v;
  const kafka = str(env, 'KAFKA_BROKERS');
  if (kafka) cfg.kafkaBrokers = kafka.split(',').map((s) => s.trim()).filter(Boolean);
  if (cfg.bootstrapApiKey && (cfg.bootstrapApiKey.length < 8 || cfg.bootstrapApiKey.length > 256 || /[^\x21-\x7e]/.test(cfg.bootstrapApiKey))) {
    throw new ConfigError('SVC_BOOTSTRAP_API_KEY must be 8-256 printable characters without spaces');
  }
  return cfg;
}
