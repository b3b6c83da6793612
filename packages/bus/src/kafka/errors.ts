// Telling kafkajs' errors apart: a cluster still settling, a refusal no retry cures, a lost
// producer state, a rebalance. kafkajs wraps a broker's answer in its own errors, so each test
// looks down the chain of causes.

/** Broker answers no retry cures (kafkajs error `type`s): the publish fails. */
const PERMANENT_PUBLISH_ERRORS = new Set(['MESSAGE_TOO_LARGE', 'RECORD_LIST_TOO_LARGE', 'INVALID_TOPIC_EXCEPTION', 'INVALID_RECORD', 'CORRUPT_MESSAGE', 'TOPIC_AUTHORIZATION_FAILED', 'CLUSTER_AUTHORIZATION_FAILED', 'UNSUPPORTED_FOR_MESSAGE_FORMAT', 'INVALID_REQUIRED_ACKS']);
/** Answers that mean the producer's idempotence state is lost or refused: a new producer sends the retry. */
export const PRODUCER_STATE_ERRORS = new Set(['UNKNOWN_PRODUCER_ID', 'OUT_OF_ORDER_SEQUENCE_NUMBER', 'INVALID_PRODUCER_EPOCH', 'INVALID_PRODUCER_ID_MAPPING', 'PRODUCER_FENCED']);

/** The error and its causes (kafkajs wraps: NonRetriable → NumberOfRetriesExceeded → the broker's answer). */
function errorChain(err: unknown): Array<{ name?: string; type?: string; message?: string }> {
  const out: Array<{ name?: string; type?: string; message?: string }> = [];
  for (let e = err as { cause?: unknown; originalError?: unknown } | null | undefined, i = 0; e && typeof e === 'object' && i < 8; i++) {
    out.push(e as { name?: string; type?: string });
    e = (e.cause ?? e.originalError) as typeof e;
  }
  return out;
}
export const chainHas = (err: unknown, types: ReadonlySet<string>): boolean => errorChain(err).some((e) => types.has(String(e.type)));

/** Answers of a cluster that is still settling: a topic being created, a leader or group coordinator being elected, a group rebalancing. */
const WARMUP_ERRORS = new Set(['UNKNOWN_TOPIC_OR_PARTITION', 'LEADER_NOT_AVAILABLE', 'NOT_LEADER_FOR_PARTITION', 'GROUP_COORDINATOR_NOT_AVAILABLE', 'COORDINATOR_NOT_AVAILABLE', 'COORDINATOR_LOAD_IN_PROGRESS', 'NOT_COORDINATOR_FOR_GROUP', 'REBALANCE_IN_PROGRESS']);

/**
 * Whether a consumer's failure is the cluster settling (processes starting together create the
 * topics and join the groups: "This server does not host this topic-partition" until a topic's
 * leader is known), which the consumer rides out by retrying: not an error.
 */
export const isKafkaWarmup = (err: unknown): boolean => chainHas(err, WARMUP_ERRORS) || errorChain(err).some((e) => /does not host this topic-partition|rebalanc/i.test(String(e.message)));
/** A programming error or a refusal no retry cures (see PERMANENT_PUBLISH_ERRORS). */
export const isPermanentPublishError = (err: unknown): boolean => chainHas(err, PERMANENT_PUBLISH_ERRORS) || errorChain(err).some((e) => ['TypeError', 'RangeError', 'ReferenceError', 'SyntaxError'].includes(String(e.name)) || /Invalid topic/.test(String(e.message)));
/**
 * Heartbeat answers after which this member must stop starting messages and rejoin: a rebalance,
 * or (UNKNOWN_MEMBER_ID) the group expelled it (a session that timed out), so its partitions are
 * someone else's already. kafkajs rejoins on each when the batch throws it.
 */
const REBALANCE_ERRORS = new Set(['REBALANCE_IN_PROGRESS', 'NOT_COORDINATOR_FOR_GROUP', 'ILLEGAL_GENERATION', 'UNKNOWN_MEMBER_ID']);
export const isRebalance = (err: unknown): boolean => REBALANCE_ERRORS.has(String((err as { type?: unknown } | null)?.type));
