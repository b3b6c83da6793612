// Starts a world's MX servers on one port (the service uses one SMTP port for every MX), on a
// random port in 20000-60000 that every MX address has free: tried again on EADDRINUSE.

import type { RunningMx } from '../sim/smtp.ts';

/** `start(port)` starts every server on `port`; returns them and the port, or throws what was not EADDRINUSE (or after 50 tries). */
export async function startOnOnePort(start: (port: number) => Promise<Array<PromiseSettledResult<RunningMx>>>): Promise<{ servers: RunningMx[]; port: number }> {
  for (let attempt = 0; ; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 40_000);
    const results = await start(port);
    const servers = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (!failed) return { servers, port };
    await Promise.all(servers.map((s) => s.close()));
    if ((failed.reason as { code?: string }).code !== 'EADDRINUSE' || attempt >= 50) throw failed.reason;
  }
}
