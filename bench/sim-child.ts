// The simulated internet (test/sim) in its own process, so its CPU is not counted by the
// benchmark that measures the verifier. Prints {"dnsServers","smtpPort","webHttpPort","webHttpsPort"} as one JSON line on
// stdout, then answers IPC requests: statsFor(domain), dnsQueries(), resetStats().
//
//   node --import tsx bench/sim-child.ts [replyLatencyMs]

import { startSim } from '../test/sim/index.ts';
import { serveParent } from './lib/children.ts';

const replyLatencyMs = Number(process.argv[2] ?? 0);
if (!Number.isInteger(replyLatencyMs) || replyLatencyMs < 0 || replyLatencyMs > 10_000) {
  process.stderr.write(`sim-child: replyLatencyMs must be an integer 0-10000, got ${process.argv[2]}\n`);
  process.exit(2);
}

const sim = await startSim({ replyLatencyMs, tarpitMs: 5_000 });
serveParent(
  {
    statsFor: (domain) => sim.statsFor(String(domain)),
    dnsQueries: () => sim.dnsQueries(),
    resetStats: () => {
      sim.resetStats();
      return true;
    },
  },
  () => sim.close(),
);
process.stdout.write(`${JSON.stringify({ dnsServers: sim.dnsServers, smtpPort: sim.smtpPort, webHttpPort: sim.webHttpPort, webHttpsPort: sim.webHttpsPort })}\n`);
