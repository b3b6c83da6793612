// `npm run sim`: the simulated internet on fixed ports, for running the service against by hand.
// Prints the environment that points the service at it, then a table of addresses to try, and
// stays up until SIGINT/SIGTERM.
//
// Environment (all optional): SIM_DNS_PORT (5354), SIM_SMTP_PORT (2525), SIM_GREYLIST_MS (300),
// SIM_TARPIT_MS (30000), SIM_SLOW_BANNER_MS (400), SIM_REPLY_LATENCY_MS (0), SIM_ERROR_SLEEP_MS (1000),
// SIM_IN_FLOW_DELAY_MS (1000), SIM_WEB_HTTP_PORT (8780), SIM_WEB_HTTPS_PORT (8743), SIM_PDL_PORT (8790:
// a stand-in for People Data Labs' API, test/helpers/pdl-standin.ts, so the vendor-backed data
// endpoints work offline too).
//
// The websites' CA certificate (made anew at every start) is written to a temporary file, whose
// path is printed; the file is removed when the sim stops.

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PDL_STANDIN_KEY, startPdlStandin, type PdlStandin } from '../helpers/pdl-standin.ts';
import { SIM_DOMAINS, SIM_EXAMPLES, SIM_READY_DOMAIN, SIM_UNKNOWN_LOCAL, SIM_WEBSITES, startSim, type Sim, type SimExpectation, type SimOptions } from './index.ts';

function intFromEnv(key: string, fallback: number, min: number, max: number): number {
  const raw = process.env[key];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    process.stderr.write(`sim: ${key} must be an integer from ${min} to ${max}, got ${JSON.stringify(raw)}\n`);
    process.exit(2);
  }
  return value;
}

const options: SimOptions = {
  dnsPort: intFromEnv('SIM_DNS_PORT', 5354, 1, 65_535),
  smtpPort: intFromEnv('SIM_SMTP_PORT', 2525, 1, 65_535),
  greylistMs: intFromEnv('SIM_GREYLIST_MS', 300, 0, 86_400_000),
  tarpitMs: intFromEnv('SIM_TARPIT_MS', 30_000, 0, 86_400_000),
  slowBannerMs: intFromEnv('SIM_SLOW_BANNER_MS', 400, 0, 86_400_000),
  replyLatencyMs: intFromEnv('SIM_REPLY_LATENCY_MS', 0, 0, 86_400_000),
  errorSleepMs: intFromEnv('SIM_ERROR_SLEEP_MS', 1000, 0, 86_400_000),
  inFlowDelayMs: intFromEnv('SIM_IN_FLOW_DELAY_MS', 1000, 0, 86_400_000),
  webHttpPort: intFromEnv('SIM_WEB_HTTP_PORT', 8780, 1, 65_535),
  webHttpsPort: intFromEnv('SIM_WEB_HTTPS_PORT', 8743, 1, 65_535),
};
const pdlPort = intFromEnv('SIM_PDL_PORT', 8790, 1, 65_535);

// Signal handlers first, so a Ctrl-C during start-up also ends cleanly.
let sim: Sim | undefined;
let pdl: PdlStandin | undefined;
let caDir: string | undefined;
let stopping = false;
process.on('exit', () => {
  if (caDir) rmSync(caDir, { recursive: true, force: true });
});
const stop = (): void => {
  if (stopping) return;
  stopping = true;
  if (!sim) process.exit(0); // still starting: nothing to close yet, the sockets go with the process
  Promise.all([sim.close(), pdl?.close()]).then(
    () => process.exit(0),
    err => {
      process.stderr.write(`sim: close failed: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(1);
    },
  );
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);

try {
  sim = await startSim(options);
  pdl = await startPdlStandin({ port: pdlPort });
} catch (err) {
  process.stderr.write(`sim: cannot start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
}

const show = (e: SimExpectation): string => `${e.result} (${e.reason_code})`;
const rows: string[][] = [['domain', `jane.doe@`, `${SIM_UNKNOWN_LOCAL}@`, 'behaviour']];
for (const d of SIM_DOMAINS) {
  rows.push([d.unicode ? `${d.unicode} (${d.domain})` : d.domain, show(d.known), show(d.unknown), d.description]);
}
const widths = [0, 1, 2].map(i => Math.max(...rows.map(r => [...(r[i] ?? '')].length)));
const pad = (s: string, n: number): string => s + ' '.repeat(Math.max(0, n - [...s].length));
const table = rows.map(r => `# ${r.slice(0, 3).map((c, i) => pad(c, widths[i] ?? 0)).join('  ')}  ${r[3] ?? ''}`);
caDir = mkdtempSync(path.join(os.tmpdir(), 'sim-web-'));
const caFile = path.join(caDir, 'ca.pem');
writeFileSync(caFile, sim.webCaPem);
const siteWidth = Math.max(...SIM_WEBSITES.map(w => w.domain.length));
const websites = SIM_WEBSITES.map(w => `#   ${pad(w.domain, siteWidth)}  ${pad(w.ip ?? 'no A record', 11)}  ${w.description}`);
const examples = SIM_EXAMPLES.map(e => `#   ${e.email}: ${e.result} (${e.reason_code})${e.note ? `, ${e.note}` : ''}`);

// The first lines (SVC_…) are the contract: `npm run sim` users paste them into the service's env.
// The websites are on loopback, so outbound HTTP (company data) must be allowed to reach it.
// Everything after starts with '#', so the whole output also works as an env file.
process.stdout.write(
  [
    `SVC_DNS_SERVERS=${sim.dnsServers}`,
    `SVC_SMTP_PORT=${sim.smtpPort}`,
    `SVC_READY_DOMAIN=${SIM_READY_DOMAIN}`,
    `SVC_WEB_HTTP_PORT=${sim.webHttpPort}`,
    `SVC_WEB_HTTPS_PORT=${sim.webHttpsPort}`,
    'SVC_OUTBOUND_ALLOW_NETWORKS=127.0.0.0/8',
    `SVC_PDL_BASE_URL=${pdl.url}`,
    `SVC_PDL_API_KEY=${PDL_STANDIN_KEY}`,
    '',
    '# Expected verdicts (every name not listed, e.g. gmial.com, is NXDOMAIN):',
    ...table,
    '# Also try:',
    ...examples,
    `# Websites (company enrichment): HTTP on port ${sim.webHttpPort}, HTTPS on port ${sim.webHttpsPort}, each site also as www.<domain>.`,
    `# HTTPS certificates are signed by the sim's CA, made at this start: ${caFile}`,
    ...websites,
    `# People Data Labs stand-in (people, profiles, mobiles, LinkedIn data; fictional people at acme-robotics.test and globex-meta.test): ${pdl.url}`,
    '# Ctrl-C to stop.',
    '',
  ].join('\n'),
);

