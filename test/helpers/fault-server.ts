// A local HTTP server (127.0.0.1, a free port) that answers from a script, to test the client's
// retry rule: each request takes the next step (the last one repeats). A step drops the
// connection without an answer, never answers (a hang), or answers a status, body and headers.
// Every answer carries `X-Request-ID: req_<n>` (n = the request's number, from 1), so a test can
// tell which answer an error kept. Every request is recorded with its headers and body.

import http from 'node:http';
import type { AddressInfo } from 'node:net';

export type Step = 'drop' | 'hang' | { status: number; body?: unknown; headers?: Record<string, string>; raw?: string };

export interface Received {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  at: number;
}

export interface FaultServer {
  url: string;
  received: Received[];
  /** Replaces the script and forgets what was received. */
  script(steps: Step[]): void;
  close(): Promise<void>;
}

/** The request id the server gives its n-th answer (from 1). */
export const requestIdOf = (n: number): string => `req_${String(n).padStart(32, '0')}`;

export async function startFaultServer(initial: Step[] = [{ status: 200, body: {} }]): Promise<FaultServer> {
  let steps = initial;
  let received: Received[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() });
      const n = received.length;
      const step = steps[Math.min(n - 1, steps.length - 1)]!;
      if (step === 'drop') return void req.socket.destroy();
      if (step === 'hang') return;
      const headers: Record<string, string> = { 'X-Request-ID': requestIdOf(n), ...step.headers };
      let payload = '';
      if (step.raw !== undefined) payload = step.raw;
      else if (step.body !== undefined) {
        payload = JSON.stringify(step.body);
        headers['Content-Type'] ??= 'application/json; charset=utf-8';
      }
      res.writeHead(step.status, headers).end(payload);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get received() {
      return received;
    },
    script(s) {
      steps = s;
      received = [];
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** An error answer with the error body of docs/errors.md. */
export const fail = (status: number, code: string, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}): Step => ({
  status,
  body: { error: 'Error', message: `the ${code} message`, code, ...extra },
  headers,
});
