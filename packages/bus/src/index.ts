// @svc/bus: the Bus and Scheduler ports, their in-process adapters, the Kafka adapter, and the
// topic names of the job pipeline.
export { fnv1a, retryDelay, wakeableSleep, buryUntilDone, errorText, DEFAULT_MAX_ATTEMPTS, MAX_RETRY_DELAY_MS, type Bus, type BusMessage, type BusHandler, type PublishOptions, type DeadLetter, type DeadLetterSink, type DeadLetterHandler, type SubscribeOptions } from './port.ts';
export { InProcessBus, type InProcessBusOptions } from './in-process.ts';
export { TimerScheduler, type Scheduler, type DelayedWork, type SchedulerTimers, type TimerSchedulerOptions } from './scheduler.ts';
export { WORK_TOPIC, MX_TOPIC, RESULTS_TOPIC, DEAD_LETTER_TOPIC } from './topics.ts';
export { KafkaBus } from './kafka/bus.ts';
export { isKafkaWarmup } from './kafka/errors.ts';
export { kafkaAdmin } from './kafka/admin.ts';
export { kafkaLogLevel, type KafkaBusOptions } from './kafka/options.ts';
