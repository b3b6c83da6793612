// Readiness (docs/api.md): DNS resolves the MX of SVC_READY_DOMAIN, a TCP connection to that MX
// on SVC_SMTP_PORT opens, the cache answers, the database answers; in the cluster profile also
// Kafka (a metadata request) and ClickHouse (SELECT 1) when configured. Checked in the background
// every 30 s; /ready only reads the last result, so probes never multiply with traffic.

import type { CheckState, ReadinessState } from '@svc/contracts';
import type { DnsPort } from '@svc/verifier';

export interface ReadinessDeps {
  dns: DnsPort;
  tcpReachable: (host: string, port: number, timeoutMs: number) => Promise<boolean>;
  cachePing: () => Promise<boolean>;
  databasePing?: () => Promise<boolean>;
  /** With KAFKA_BROKERS: a metadata request to the brokers (the bus's admin client). */
  kafkaPing?: () => Promise<boolean>;
  /** With CLICKHOUSE_URL: SELECT 1 over HTTP. */
  clickhousePing?: () => Promise<boolean>;
  readyDomain: string;
  smtpPort: number;
  timeoutMs: number;
  intervalMs?: number;
}

/** `p`, or a rejection after `ms` (the probe itself goes on in the background). */
function within<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  p.catch(() => {}); // a probe that fails after the deadline is not an unhandled rejection
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

/**
 * SELECT 1 over ClickHouse's HTTP interface (credentials in the URL become Basic auth); true
 * when it answers `1`.
 */
export async function clickhouseSelect1(url: string, timeoutMs: number): Promise<boolean> {
  const u = new URL(url);
  const headers: Record<string, string> = {};
  if (u.username || u.password) headers.authorization = `Basic ${Buffer.from(`${decodeURIComponent(u.username)}:${decodeURIComponent(u.password)}`).toString('base64')}`;
  u.username = u.password = '';
  u.search = '?query=SELECT%201';
  const res = await fetch(u, { headers, signal: AbortSignal.timeout(timeoutMs) });
  const body = (await res.text()).trim();
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${body.slice(0, 200)}`);
  return body === '1';
}

export class Readiness {
  #state: ReadinessState = { ready: false, checks: { redis: 'failed', dns: 'failed', smtp: 'failed' }, errors: ['readiness not checked yet'] };
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;

  constructor(readonly deps: ReadinessDeps) {}

  get state(): ReadinessState {
    return this.#state;
  }

  start(): Promise<void> {
    const first = this.refresh();
    this.#timer = setInterval(() => void this.refresh(), this.deps.intervalMs ?? 30_000);
    this.#timer.unref();
    return first;
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
  }

  refresh(): Promise<void> {
    this.#running ??= this.#check().finally(() => (this.#running = undefined));
    return this.#running;
  }

  async #check(): Promise<void> {
    const d = this.deps;
    const checks: Record<string, CheckState> = {};
    const errors: string[] = [];
    // `gating` false: the check is reported but does not make the service not ready.
    const guard = async (name: string, fn: () => Promise<string | undefined>, gating = true) => {
      let problem: string | undefined;
      try {
        problem = await fn();
      } catch (err) {
        problem = `${name}: ${(err as Error).message}`;
      }
      checks[name] = problem ? 'failed' : 'ok';
      if (problem && gating) errors.push(problem);
    };
    let mxHost: string | undefined;
    await guard('redis', async () => ((await d.cachePing()) ? undefined : 'redis: cache did not answer'));
    if (d.databasePing) await guard('database', async () => ((await d.databasePing!()) ? undefined : 'database: did not answer'));
    // A client that retries on its own (kafkajs) would hold the check past the interval: bounded here.
    if (d.kafkaPing) await guard('kafka', async () => ((await within(d.kafkaPing!(), d.timeoutMs)) ? undefined : 'kafka: the brokers did not answer'));
    // Analytics only: while ClickHouse is down, validation and jobs go on and decisions wait in
    // the buffer, so a load balancer keyed on /ready must not take the front out (reported only).
    if (d.clickhousePing) await guard('clickhouse', async () => ((await within(d.clickhousePing!(), d.timeoutMs)) ? undefined : 'clickhouse: SELECT 1 did not answer 1'), false);
    await guard('dns', async () => {
      const mx = await d.dns.resolveMail(d.readyDomain);
      if (mx.kind !== 'mx' && mx.kind !== 'implicit') return `dns: MX lookup of ${d.readyDomain} failed (${mx.kind})`;
      mxHost = mx.hosts[0]!.exchange;
      return undefined;
    });
    await guard('smtp', async () => {
      if (!mxHost) return `smtp: no MX host of ${d.readyDomain} to connect to`;
      const ips = await d.dns.resolveAddresses(mxHost);
      if (ips.length === 0) return `smtp: MX host ${mxHost} has no address`;
      return (await d.tcpReachable(ips[0]!, d.smtpPort, d.timeoutMs)) ? undefined : `smtp: cannot connect to ${mxHost} port ${d.smtpPort}`;
    });
    this.#state = { ready: errors.length === 0, checks, errors };
  }
}
