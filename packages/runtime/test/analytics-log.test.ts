// The analytics adapter's outages in the log (services.ts openAnalytics): the first failed write
// is one warning, further retries within the minute add none, and one line says when writes land
// again. Without CLICKHOUSE_URL the adapter is the store's SQL one.

import t from 'tap';
import { BufferedAnalytics, type Decision, type ResultCounts, type Store } from '@svc/store';
import { openAnalytics } from '../src/services.ts';

class Flaky extends BufferedAnalytics {
  down = true;
  writes = 0;
  protected async write(): Promise<void> {
    this.writes++;
    if (this.down) throw new Error('connect ECONNREFUSED');
  }
  protected async writeOutcomes(): Promise<void> {
    await this.write();
  }
  protected async closeBackend(): Promise<void> {}
  protected async matrixRows() {
    return [];
  }
  countByResult = async (): Promise<ResultCounts> => ({ valid: 0, valid_role_based: 0, risky: 0, invalid: 0, unknown: 0 });
  daily = async () => [];
  decisionsFor = async () => [];
  domainSummary = async () => [];
}

const decision: Decision = {
  id: 'req_1:0',
  account_id: 'acc_1',
  email_hash: 'a'.repeat(64),
  domain: 'accept.test',
  result: 'valid',
  reason_code: 'accepted',
  layer: 'smtp',
  mx_host: 'mx1.accept.test',
  latency_ms: 3,
  job_id: null,
  source: 'single',
  credits_charged: 1,
  decided_at: new Date(),
};

t.test('write failures: one warning, not one per retry; one line when writes land again', async (t) => {
  const flaky = new Flaky({ flushIntervalMs: 0, retryMinMs: 1, retryMaxMs: 2 });
  const store = { sqlAnalytics: () => flaky, jobs: { decisionsInTable: false } } as unknown as Store;
  const lines: Array<[string, Record<string, unknown>, string]> = [];
  const log = {
    info: (o: object, m: string) => void lines.push(['info', o as Record<string, unknown>, m]),
    warn: (o: object, m: string) => void lines.push(['warn', o as Record<string, unknown>, m]),
    error: (o: object, m: string) => void lines.push(['error', o as Record<string, unknown>, m]),
  };
  const analytics = openAnalytics({ clickhouseUrl: undefined, clickhouseDatabase: 'svc' }, store, log);
  t.equal(analytics, flaky, 'without CLICKHOUSE_URL: the store\'s SQL adapter');
  t.equal(store.jobs.decisionsInTable, true, 'and a job\'s decisions go to its table in the results\' transaction');
  await analytics.record([decision]);
  while (flaky.writes < 20) await new Promise((r) => setTimeout(r, 5));
  t.equal(lines.length, 1, `${flaky.writes} failed writes, one line`);
  t.match(lines[0], ['warn', { component: 'analytics', backend: 'sql', failed_writes: 1, pending: 1 }, /analytics write failed/]);
  flaky.down = false;
  await analytics.flush();
  t.equal(lines.length, 2);
  t.match(lines[1], ['info', { component: 'analytics', backend: 'sql', pending: 0 }, 'analytics writes succeed again']);
  await analytics.close();
});
