// The bus's topic names (unprefixed: the Kafka adapter prepends its deployment's prefix). What
// travels on them is in @svc/contracts (messages.ts); who publishes it, in @svc/jobs.
// - `jobs.work` (key: a bucket of the recipient domain, so one partition owner sees every address
//   of a domain and looks its MX up once): unique emails of one job to route. The worker resolves
//   each domain's MX and republishes the emails on
// - `jobs.mx` (key: the first MX host of the emails' domains, so one worker at a time owns a
//   host's SMTP sessions, for every domain the host serves; emails decided without SMTP are keyed
//   by their domain bucket): the same shape, to probe;
// - `jobs.results` (key: the job id, so one aggregator owns a job): their priced results.

export const WORK_TOPIC = 'jobs.work';
export const MX_TOPIC = 'jobs.mx';
export const RESULTS_TOPIC = 'jobs.results';
/** The Kafka adapter parks dead letters here (prefixed as every topic): `{v: 1, topic, key, message, error, attempts, at}`, keyed as the message was. */
export const DEAD_LETTER_TOPIC = 'dead-letters';
