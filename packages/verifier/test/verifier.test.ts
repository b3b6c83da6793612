// Verifier.plan prices from one cache read per mailbox, so a repeated address is priced and
// answered from the same entry even if the cache changes between reads.

import t from 'tap';
import type { CachePort, DnsPort, ProbePort } from '../src/ports.ts';
import { settledVerdicts, Verifier, verdictTrace, verifierConfig } from '../src/verifier.ts';

const noDns: DnsPort = { resolveMail: async () => ({ kind: 'nxdomain' }), resolveAddresses: async () => [] };
const noProbe: ProbePort = { check: async () => ({ kind: 'failure', failure: { phase: 'connect', kind: 'connection', detail: 'unused' } }), close: async () => {} };

t.test('a repeated address is read from the cache once', async (t) => {
  const risky = { result: 'risky', chargeable: false, reason_code: 'catch_all' };
  const valid = { result: 'valid', chargeable: true, reason_code: 'accepted' };
  let reads = 0;
  // A cache whose entry flips between reads (another instance rewrote it).
  const cache: CachePort = {
    get: <T>(key: string) => (key === 'v:a@x.test' ? ((reads++ === 0 ? risky : valid) as T) : undefined),
    set: () => {},
  };
  const v = new Verifier({ dns: noDns, probe: noProbe, cache, config: verifierConfig() });
  const plan = await v.plan(['a@x.test', 'a@x.test']);
  t.equal(reads, 1);
  t.equal(plan.maxCost, 0);
  t.equal(plan.settled, true);
  t.same((await v.run(plan)).map((x) => x.result), ['risky', 'risky']);
});

t.test('settledVerdicts: a plan answered from the cache is answered at once, traced as run() traces it; a plan with work is not', async (t) => {
  const stored = { result: 'valid', chargeable: true, reason_code: 'accepted' };
  const cache: CachePort = { get: <T>(key: string) => (key === 'v:a@x.test' ? (stored as T) : undefined), set: () => {} };
  const v = new Verifier({ dns: noDns, probe: noProbe, cache, config: verifierConfig() });
  const plan = await v.plan(['a@X.TEST', 'no-at-sign']);
  t.equal(plan.settled, true);
  t.equal(plan.maxCost, 1);
  const verdicts = settledVerdicts(plan)!;
  t.strictSame(verdicts.map((x) => [x.email, x.result]), [['a@X.TEST', 'valid'], ['no-at-sign', 'invalid']]);
  const cached = verdictTrace(verdicts[0]!)!;
  t.strictSame([cached.key, cached.domain, cached.mx_host], ['a@x.test', 'x.test', null]);
  t.ok(cached.latency_ms >= 0 && cached.latency_ms < 1000, 'latency from plan() to the answer');
  t.strictSame(Object.keys(verdictTrace(verdicts[1]!)!).sort(), ['latency_ms', 'mx_host'], 'a syntax failure has no mailbox key');
  // run() answers the same plan the same way.
  t.strictSame((await v.run(plan)).map((x) => [x.email, x.result]), [['a@X.TEST', 'valid'], ['no-at-sign', 'invalid']]);

  const open = await v.plan(['b@x.test']);
  t.equal(open.settled, false);
  t.equal(settledVerdicts(open), undefined);
});

t.test('plan: a cache that answers with a promise (Redis) is waited for, one that answers at once is read as it is', async (t) => {
  const stored = { result: 'risky', chargeable: false, reason_code: 'catch_all' };
  for (const remote of [false, true]) {
    const cache: CachePort = { get: <T>(key: string) => (key === 'v:a@x.test' ? ((remote ? Promise.resolve(stored) : stored) as T) : undefined), set: () => {} };
    const v = new Verifier({ dns: noDns, probe: noProbe, cache, config: verifierConfig() });
    const plan = await v.plan(['a@x.test']);
    t.equal(plan.settled, true, remote ? 'remote cache' : 'in-process cache');
    t.equal(plan.maxCost, 0);
    t.equal(plan.items[0]!.verdict?.result, 'risky');
  }
});

t.test('the deadline given to the probe: the configured one for sync calls, none for deadlineMs 0 (jobs)', async (t) => {
  const seen: Array<number | undefined> = [];
  const probe: ProbePort = {
    check: async (req) => {
      seen.push(req.deadlineMs);
      return { kind: 'answer', cls: 'rejected', reply: { code: 550, enhanced: '5.1.1', text: 'no', lines: ['550 5.1.1 no'] }, mxIndex: 0, attempts: 1 };
    },
    close: async () => {},
  };
  const dns: DnsPort = { resolveMail: async () => ({ kind: 'mx', hosts: [{ exchange: 'mx.x.test', priority: 10 }] }), resolveAddresses: async () => [] };
  const cache: CachePort = { get: () => undefined, set: () => {} };
  const v = new Verifier({ dns, probe, cache, config: verifierConfig({ deadlineMs: 1234 }) });
  await v.verify(['a@x.test']);
  await v.verify(['b@x.test'], { smtpRetries: 0, deadlineMs: 0 });
  await v.verify(['c@x.test'], { deadlineMs: 99 });
  t.strictSame(seen, [1234, undefined, 99]);
});

t.test('routes: the first MX host of each address that needs SMTP, null for the others; one lookup per domain', async (t) => {
  const lookups: string[] = [];
  const dns: DnsPort = {
    resolveMail: async (domain) => {
      lookups.push(domain);
      if (domain === 'x.test') return { kind: 'mx', hosts: [{ exchange: 'MX1.Shared.test', priority: 10 }, { exchange: 'mx2.shared.test', priority: 20 }] };
      if (domain === 'bare.test') return { kind: 'implicit', hosts: [{ exchange: 'bare.test', priority: 0 }] };
      if (domain === 'null.test') return { kind: 'null_mx' };
      if (domain === 'slow.test') return { kind: 'timeout' };
      if (domain === 'broken.test') throw new Error('resolver crashed');
      return { kind: 'nxdomain' };
    },
    resolveAddresses: async () => [],
  };
  const cache: CachePort = { get: () => undefined, set: () => {} };
  const v = new Verifier({ dns, probe: noProbe, cache, config: verifierConfig() });
  const routes = (await v.routes(['a@x.test', 'b@X.TEST', 'c@bare.test', 'd@null.test', 'e@gone.test', 'f@slow.test', 'g@broken.test', 'not an address'])).map((r) => r?.host ?? null);
  t.strictSame(routes, ['mx1.shared.test', 'mx1.shared.test', 'bare.test', null, null, null, null, null]);
  t.strictSame(lookups.sort(), ['bare.test', 'broken.test', 'gone.test', 'null.test', 'slow.test', 'x.test'], 'one lookup per domain, none for bad syntax');
});

t.test('routes then verifyRouted: the MX answer travels with the route, no second lookup, same verdicts', async (t) => {
  const lookups: string[] = [];
  const answers: Record<string, Awaited<ReturnType<DnsPort['resolveMail']>>> = {
    'x.test': { kind: 'mx', hosts: [{ exchange: 'MX1.x.test', priority: 10 }, { exchange: 'mx2.x.test', priority: 20 }] },
    'bare.test': { kind: 'implicit', hosts: [{ exchange: 'bare.test', priority: 0 }] },
    'slow.test': { kind: 'timeout' },
  };
  const dns: DnsPort = {
    resolveMail: async (domain) => {
      lookups.push(domain);
      return answers[domain] ?? { kind: 'nxdomain' };
    },
    resolveAddresses: async () => [],
  };
  const checks: Array<{ domain: string; hosts: string[] }> = [];
  const probe: ProbePort = {
    check: async (req) => {
      checks.push({ domain: req.domain, hosts: req.hosts.map((h) => h.exchange) });
      return { kind: 'answer', cls: 'accepted', reply: { code: 250, enhanced: '2.1.5', text: 'Ok', lines: ['250 2.1.5 Ok'] }, mxIndex: 0, attempts: 1 };
    },
    close: async () => {},
  };
  const cache: CachePort = { get: () => undefined, set: () => {} };
  const routing = new Verifier({ dns, probe: noProbe, cache, config: verifierConfig() });
  const emails = ['a@X.test', 'b@bare.test', 'c@slow.test', 'not an address'];
  const routes = await routing.routes(emails);
  t.strictSame(routes, [
    { domain: 'x.test', host: 'mx1.x.test', mx: answers['x.test'] },
    { domain: 'bare.test', host: 'bare.test', mx: answers['bare.test'] },
    { domain: 'slow.test', host: null, mx: { kind: 'timeout' } },
    null,
  ]);
  // Another process probes with the answers it was handed.
  lookups.length = 0;
  const known = Object.fromEntries(routes.flatMap((r) => (r ? [[r.domain, r.mx]] : [])));
  const probing = new Verifier({ dns, probe, cache, config: verifierConfig() });
  const routed = await probing.verifyRouted(emails, known, { smtpRetries: 0, deadlineMs: 0 });
  t.strictSame(lookups, ['slow.test'], 'only the failed lookup is asked again');
  t.strictSame(checks, [
    { domain: 'x.test', hosts: ['MX1.x.test', 'mx2.x.test'] },
    { domain: 'bare.test', hosts: ['bare.test'] },
  ]);
  const fresh = await new Verifier({ dns, probe, cache, config: verifierConfig() }).verify(emails, { smtpRetries: 0, deadlineMs: 0 });
  t.strictSame(
    routed.map((v) => [v.email, v.result, v.reason_code]),
    fresh.map((v) => [v.email, v.result, v.reason_code]),
    'the same verdicts as verify()',
  );
  t.strictSame(routed.map((v) => verdictTrace(v)?.mx_host ?? null), ['mx1.x.test', 'bare.test', null, null]);
});
