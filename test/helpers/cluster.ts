// The real servers of the cluster-profile tests (scripts/infra-up.sh): where they are, whether they
// answer, and the cleanup of a test's Kafka topics and consumer groups, Redis keys and ClickHouse
// database.

import t from 'tap';
import { Redis } from 'ioredis';
import { kafkaAdmin } from '@svc/bus';
import { pgUnreachable, PG_SHOWN } from './postgres.ts';
import { BOOTSTRAP_KEY } from './stack.ts';

export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
export const BROKERS = (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092')
  .split(',')
  .map((b) => b.trim())
  .filter(Boolean);
export const CLICKHOUSE_URL = process.env.CLICKHOUSE_URL ?? 'http://127.0.0.1:8123';

/** Why PostgreSQL, Redis or Kafka cannot be used (a real request to each), or undefined when all answer. */
export async function clusterServersUnreachable(): Promise<string | undefined> {
  const pgWhy = await pgUnreachable();
  if (pgWhy) return `PostgreSQL at ${PG_SHOWN}: ${pgWhy}`;
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1, lazyConnect: true });
  redis.on('error', () => {});
  const redisUp = await redis.connect().then(
    () => true,
    () => false,
  );
  redis.disconnect();
  if (!redisUp) return `Redis at ${REDIS_URL} did not answer`;
  const admin = kafkaAdmin({ clientId: 'cluster-test-probe', brokers: BROKERS, retry: { retries: 1 } });
  try {
    await admin.connect();
    await admin.listTopics();
  } catch (err) {
    return `Kafka at ${BROKERS.join(',')}: ${(err as Error).message}`;
  } finally {
    await admin.disconnect().catch(() => {});
  }
  return undefined;
}

/** Why ClickHouse cannot be used (`SELECT 1` over HTTP), or undefined when it answers. */
export async function clickhouseUnreachable(): Promise<string | undefined> {
  try {
    const res = await fetch(`${CLICKHOUSE_URL}/?query=SELECT%201`, { signal: AbortSignal.timeout(3000) });
    return res.ok && (await res.text()).trim() === '1' ? undefined : `ClickHouse at ${CLICKHOUSE_URL}: HTTP ${res.status}`;
  } catch (err) {
    return `ClickHouse at ${CLICKHOUSE_URL}: ${(err as Error).message}`;
  }
}

/** Drops a ClickHouse database (if it exists). */
export async function dropClickHouseDatabase(database: string): Promise<void> {
  const res = await fetch(`${CLICKHOUSE_URL}/`, { method: 'POST', body: `DROP DATABASE IF EXISTS ${database}`, signal: AbortSignal.timeout(10_000) });
  if (!res.ok) throw new Error(`ClickHouse: DROP DATABASE ${database}: ${await res.text()}`);
}

/** Deletes every Redis key that starts with `prefix`. */
export async function dropRedisPrefix(prefix: string): Promise<void> {
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1, lazyConnect: true });
  redis.on('error', () => {});
  await redis.connect();
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix.replace(/[*?[\]\\]/g, '\\$&')}*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length) await redis.unlink(...keys);
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}

/** Deletes the topics that start with `prefix` and the consumer groups that name it (once more if the broker was still rebalancing them). */
export async function dropKafkaPrefix(prefix: string): Promise<void> {
  const admin = kafkaAdmin({ clientId: 'cluster-test-cleanup', brokers: BROKERS });
  await admin.connect();
  try {
    const topics = (await admin.listTopics()).filter((n) => n.startsWith(prefix));
    if (topics.length) await admin.deleteTopics({ topics }).catch(() => {});
    const groups = (await admin.listGroups()).groups.map((g) => g.groupId).filter((g) => g.includes(prefix.replace(/\.$/, '')));
    if (groups.length) {
      await admin.deleteGroups(groups).catch(async () => {
        await new Promise((r) => setTimeout(r, 1000));
        await admin.deleteGroups(groups).catch(() => {});
      });
    }
  } finally {
    await admin.disconnect();
  }
}

/**
 * Where a cluster's Kafka work stands, for a stalled test's failure message: each consumer group
 * whose name contains `prefix`, its state and members, and each partition of its topic whose
 * committed offset is behind the end (the lag).
 */
export async function describeKafkaGroups(prefix: string): Promise<string> {
  const admin = kafkaAdmin({ clientId: 'cluster-test-describe', brokers: BROKERS, retry: { retries: 1 } });
  await admin.connect();
  try {
    const groups = (await admin.listGroups()).groups.map((g) => g.groupId).filter((g) => g.includes(prefix)).sort();
    const described = groups.length ? (await admin.describeGroups(groups)).groups : [];
    const lines: string[] = [];
    for (const g of described) {
      // The bus names a topic's group as the topic itself (`<prefix>.<port topic>`).
      const fullTopic = g.groupId;
      let detail = '';
      try {
        const ends = await admin.fetchTopicOffsets(fullTopic);
        const committed = (await admin.fetchOffsets({ groupId: g.groupId, topics: [fullTopic] }))[0]?.partitions ?? [];
        detail = ends
          .map((e) => {
            const c = committed.find((x) => x.partition === e.partition)?.offset ?? '-1';
            const lag = Number(e.offset) - Math.max(0, Number(c));
            return lag > 0 ? `p${e.partition} lag ${lag} (committed ${c}, end ${e.offset})` : '';
          })
          .filter(Boolean)
          .join('; ');
      } catch (err) {
        detail = `offsets of ${fullTopic}: ${String(err)}`;
      }
      lines.push(`${g.groupId}: ${g.state}, members ${g.members.map((m) => m.clientId).join(' ') || 'none'}; ${detail || 'no lag'}`);
    }
    return lines.join('\n') || `no group contains ${prefix}`;
  } finally {
    await admin.disconnect();
  }
}

/** A service's answer: the status, the body parsed as JSON (or the text itself when it is not JSON: a CSV), and the text. */
export interface ApiAnswer {
  status: number;
  body: any;
  text: string;
}

/** One request to the service at `base` with the bootstrap key, a JSON body when given. */
export async function callApi(base: string, method: string, route: string, body?: unknown): Promise<ApiAnswer> {
  const res = await fetch(base + route, { method, headers: { 'x-api-key': BOOTSTRAP_KEY, ...(body ? { 'content-type': 'application/json' } : {}) }, ...(body ? { body: JSON.stringify(body) } : {}) });
  const text = await res.text();
  let json: unknown = text;
  try {
    json = JSON.parse(text);
  } catch {
    /* CSV */
  }
  return { status: res.status, body: json, text };
}

/**
 * Runs the file's `run` when `why` (what is missing, e.g. clusterServersUnreachable()'s answer) is
 * undefined; otherwise the file is skipped with the reason, or fails under CI_REQUIRE_SERVICES=1.
 */
export async function runUnlessMissing(why: string | undefined, run: () => Promise<void>): Promise<void> {
  if (!why) {
    // A throw becomes a failed assertion with its message, so CI's recap of "not ok" lines says
    // what went wrong (an uncaught rejection would end the file with exit code 1 and no reason).
    try {
      await run();
    } catch (e) {
      t.fail(e instanceof Error ? (e.stack ?? e.message) : String(e));
    }
    return;
  }
  if (process.env.CI_REQUIRE_SERVICES === '1') t.fail(`${why} (CI_REQUIRE_SERVICES=1: start them with scripts/infra-up.sh)`);
  else t.plan(0, `${why}: skipping; scripts/infra-up.sh starts them`);
}
