// Baseline for the HTTP benchmark: a bare Fastify app (no logger, no hooks, no schemas) with one
// POST /v1/validate route that parses the same JSON body and answers a JSON object of the same
// shape and size as the service's cached answer (argv[2], the JSON of that answer, with the
// request's email put in). Prints {"url"} as one JSON line; IPC: cpuUsage().

import Fastify from 'fastify';
import { serveParent } from '../lib/children.ts';
import { mainThreadCpuMs } from '../lib/proc.ts';

const template = JSON.parse(process.argv[2] ?? '{}') as Record<string, unknown>;
const app = Fastify({ logger: false });
app.post<{ Body: { email?: unknown } }>('/v1/validate', async (req) => ({ ...template, email: req.body.email }));
await app.listen({ port: 0, host: '127.0.0.1' });
const addr = app.server.address();
const port = typeof addr === 'object' && addr ? addr.port : 0;
serveParent({ cpuUsage: () => process.cpuUsage(), mainCpuMs: () => mainThreadCpuMs() }, () => app.close());
process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${port}` })}\n`);
