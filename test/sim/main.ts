// `npm run sim`: the simulated internet on fixed ports, for running the service against by hand.
// Prints the environment that points the service at it, then a table of addresses to try, and
// stays up until SIGINT/SIGTERM.
//
// Environment (all optional): SIM_DNS_PORT (5354), SIM_SMTP_PORT (2525), SIM_GREYLIST_MS (300),
// SIM_TARPIT_MS (30000), SIM_SLOW_BANNER_MS (400), SIM_REPLY_LATENCY_MS (0), SIM_ERROR_SLEEP_MS (1000),
// SIM_IN_FLOW_DELAY_MS (1000).

import { SIM_DOMAINS, SIM_EXAMPLES, SIM_READY_DOMAIN, SIM_UNKNOWN_LOCAL, startSim, type Sim, type SimExpectation, type SimOptions } from './index.ts';

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
};

// Signal handlers first, so a Ctrl-C during start-up also ends cleanly.
let sim: Sim | undefined;
let stopping = false;
const stop = (): void => {
  if (stopping) return;
  stopping = true;
  if (!sim) process.exit(0); // still starting: nothing to close yet, the sockets go with the process
  sim.close().then(
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
const examples = SIM_EXAMPLES.map(e => `#   ${e.email}: ${e.result} (${e.reason_code})${e.note ? `, ${e.note}` : ''}`);

// The first three lines are the contract: `npm run sim` users paste them into the service's env.
// Everything after starts with '#', so the whole output also works as an env file.
process.stdout.write(
  [
    `SVC_DNS_SERVERS=${sim.dnsServers}`,
    `SVC_SMTP_PORT=${sim.smtpPort}`,
    `SVC_READY_DOMAIN=${SIM_READY_DOMAIN}`,
    '',
    '# Expected verdicts (every name not listed, e.g. gmial.com, is NXDOMAIN):',
    ...table,
    '# Also try:',
    ...examples,
    '# Ctrl-C to stop.',
    '',
  ].join('\n'),
);

