import t from 'tap';
import net from 'node:net';
import { makeKey, startStack } from '../helpers/stack.ts';
import { PDL_STANDIN_KEY, startPdlStandin } from '../helpers/pdl-standin.ts';

const pdl = await startPdlStandin();
t.teardown(() => pdl.close());
const closedPort = await new Promise<number>((resolve) => {
  const s = net.createServer().listen(0, '127.0.0.1', () => {
    const { port } = s.address() as net.AddressInfo;
    s.close(() => resolve(port));
  });
});
const env = (providers: string, extra: Record<string, string> = {}) => ({ SVC_OUTBOUND_ALLOW_NETWORKS: '127.0.0.0/8', SVC_WEB_FETCH_TIMEOUT_MS: '1500', SVC_PDL_API_KEY: PDL_STANDIN_KEY, SVC_PDL_BASE_URL: pdl.url, SVC_COMPANY_PROVIDERS: providers, ...extra });
const t0 = performance.now();
const [a, c] = await Promise.all([startStack({ env: env('native,pdl') }), startStack({ env: env('native,pdl', { SVC_WEB_HTTP_PORT: String(closedPort), SVC_WEB_HTTPS_PORT: String(closedPort) }) })]);
console.error('stacks', performance.now() - t0);
t.teardown(() => a.close());
t.teardown(() => c.close());

const k = await makeKey(c, { credits: 10 });
await c.store.accounts.setDataProduct(k.accountId, true);
const r = await c.call('POST', '/v1/company/enrich', { key: k.key, body: { domain: 'acme-robotics.test' } });
console.error(JSON.stringify(r.body), c.sim.webRequests(), c.sim.dnsQueries(), pdl.requests);
const k2 = await makeKey(a, { credits: 10 });
await a.store.accounts.setDataProduct(k2.accountId, true);
const r2 = await a.call('POST', '/v1/company/enrich', { key: k2.key, body: { domain: 'error-site.test' } });
console.error(JSON.stringify(r2.body));
pdl.failAll = 500;
const r3 = await a.call('POST', '/v1/company/enrich', { key: k2.key, body: { domain: 'no-site.test' } });
console.error(JSON.stringify(r3.body), pdl.requests.length);
t.pass();
