// The environment every benchmark's service child starts from: the embedded profile (PGlite, the
// in-process bus and caches, no ClickHouse) on loopback, pointed at a simulated internet, silent,
// with a bootstrap key and rate limits too high to be what is measured. Each benchmark adds what
// it varies (data directory, role, cluster servers, credits, timeouts).

/** Where the simulated internet answers (a sim child's or a world child's info). */
export interface SimAddress {
  dnsServers: string;
  smtpPort: number;
}

export function benchServiceEnv(sim: SimAddress, key: string, more: Record<string, string> = {}): Record<string, string> {
  return {
    PORT: '0',
    HOST: '127.0.0.1',
    SVC_DATA_DIR: '', // the child makes (and removes) a temporary one unless given
    DATABASE_URL: '',
    REDIS_URL: '',
    KAFKA_BROKERS: '',
    CLICKHOUSE_URL: '',
    SVC_DNS_SERVERS: sim.dnsServers,
    SVC_SMTP_PORT: String(sim.smtpPort),
    SVC_READY_DOMAIN: 'gmail.com',
    SVC_HELO_NAME: 'verifier.bench.test',
    SVC_MAIL_FROM: 'probe@verifier.bench.test',
    SVC_LOG_LEVEL: 'silent',
    SVC_BOOTSTRAP_API_KEY: key,
    // The configured maximum (10,000,000 a minute): the limiter is passed, not the thing measured.
    SVC_RATE_LIMIT_PER_KEY: '10000000',
    SVC_RATE_LIMIT_PER_IP: '10000000',
    ...more,
  };
}
