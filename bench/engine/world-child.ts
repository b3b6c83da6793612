// The world of bench/engine/throughput.ts (bench/engine/world.ts) in its own process, so the
// sim's CPU does not compete with the measured side: a DNS server (test/sim/dns.ts) serving the
// world's 204 domains and 11 MX hosts, and the MX servers (test/sim/smtp.ts startMx), all on one
// random port. Prints {"dnsServers","smtpPort"} as one JSON line on stdout, then answers IPC:
//   restart(limits?) closes every MX server and starts fresh ones (new flow-token pools, no
//                  connections, zeroed counters), so each measured phase meets the same world;
//                  `limits` overrides some of the postfix hosts' limits until the next restart, and
//                  `limits.oneInstance: n` has the 10 postfix hosts served by ONE Postfix instance
//                  with one pool of n flow tokens (test/sim/smtp.ts PostfixInstance)
//   stats()        SMTP counters per MX host name
//   limitEvents()  how often each postfix host's limits bit, keyed `<host> <event>`
//   dnsQueries()   DNS queries received, keyed `name/TYPE`
//   cpuUsage()     this process's process.cpuUsage()
//
//   node --import tsx bench/engine/world-child.ts <replyLatencyMs> <maxAddresses> [serial|network]
//   (the raw servers' latency model: test/sim/smtp.ts SmtpContext.latencyModel)

import { startDns, type Zone } from '../../test/sim/dns.ts';
import type { MxLimits } from '../../test/sim/domains.ts';
import { PostfixInstance, Timers, startMx, type MxStats, type RunningMx, type SmtpContext } from '../../test/sim/smtp.ts';
import { serveParent } from '../lib/children.ts';
import { ERROR_SLEEP_MS, IN_FLOW_DELAY_MS, knownLocals, worldHosts } from './world.ts';

const replyLatencyMs = Number(process.argv[2] ?? 0);
const maxAddresses = Number(process.argv[3] ?? 10_000);
const latencyModel = process.argv[4] === 'network' ? 'network' : 'serial';
if (!Number.isInteger(replyLatencyMs) || replyLatencyMs < 0 || !Number.isInteger(maxAddresses) || maxAddresses < 1) {
  process.stderr.write(`world-child: usage: world-child.ts <replyLatencyMs> <maxAddresses> [serial|network], got ${process.argv.slice(2).join(' ')}\n`);
  process.exit(2);
}

const hosts = worldHosts();
const known = knownLocals(maxAddresses);

function zone(): Zone {
  const names = new Map<string, { mx?: { exchange: string; priority: number }[]; a?: string[] }>();
  for (const h of hosts) {
    names.set(h.host, { a: [h.ip] });
    for (const d of h.domains) names.set(d, { mx: [{ exchange: h.host, priority: 10 }] });
  }
  return { names, servfail: new Set(), timeout: new Set() };
}

const newContext = (): SmtpContext => ({
  greylistMs: 300,
  tarpitMs: 30_000,
  slowBannerMs: 400,
  replyLatencyMs,
  latencyModel,
  errorSleepMs: ERROR_SLEEP_MS,
  inFlowDelayMs: IN_FLOW_DELAY_MS,
  timers: new Timers(),
  limitEvents: new Map(),
});

let ctx = newContext();
let servers: RunningMx[] = [];

/** Limits that differ from the world's for this round of servers (a diagnostic run), or none. */
let override: Partial<MxLimits> = {};
/** The one Postfix instance serving every postfix host in this round, or none (each its own). */
let instance: PostfixInstance | undefined;

async function startServers(port: number): Promise<void> {
  const results = await Promise.allSettled(
    hosts.map((h) => startMx({ ip: h.ip, host: h.host, kind: h.kind, ...(h.kind === 'postfix-limits' ? { extraMailboxes: known } : {}), ...(h.limits ? { limits: { ...h.limits, ...override } } : {}), ...(instance && h.kind === 'postfix-limits' ? { instance } : {}) }, port, ctx)),
  );
  servers = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) {
    await Promise.all(servers.map((s) => s.close()));
    servers = [];
    throw failed.reason;
  }
}

async function stopServers(): Promise<void> {
  ctx.timers.clear();
  await Promise.all(servers.map((s) => s.close()));
  servers = [];
}

const dns = await startDns(zone(), 0);
let smtpPort = 0;
for (let attempt = 0; ; attempt++) {
  const port = 20_000 + Math.floor(Math.random() * 40_000);
  try {
    await startServers(port);
    smtpPort = port;
    break;
  } catch (err) {
    if ((err as { code?: string }).code !== 'EADDRINUSE' || attempt >= 50) throw err;
    ctx = newContext();
  }
}

serveParent(
  {
    restart: async (arg) => {
      await stopServers();
      const { oneInstance, ...limits } = (arg ?? {}) as Partial<MxLimits> & { oneInstance?: number };
      override = limits;
      instance = oneInstance !== undefined ? new PostfixInstance({ flowTokens: oneInstance }) : undefined;
      ctx = newContext();
      await startServers(smtpPort);
      dns.queries.clear();
      return true;
    },
    stats: () => Object.fromEntries(servers.map((s, i) => [hosts[i]!.host, { ...s.stats }])) as Record<string, MxStats>,
    limitEvents: () => Object.fromEntries(ctx.limitEvents),
    dnsQueries: () => Object.fromEntries(dns.queries),
    cpuUsage: () => process.cpuUsage(),
  },
  async () => {
    await stopServers();
    await dns.close();
  },
);
process.stdout.write(`${JSON.stringify({ dnsServers: `127.0.0.1:${dns.port}`, smtpPort })}\n`);
