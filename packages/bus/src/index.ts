// @svc/bus: the Bus and Scheduler ports, their in-process adapters, and the Kafka adapter.
export { InProcessBus, TimerScheduler, fnv1a, retryDelay, wakeableSleep, buryUntilDone, errorText, DEFAULT_MAX_ATTEMPTS, MAX_RETRY_DELAY_MS, type Bus, type BusMessage, type BusHandler, type PublishOptions, type DeadLetter, type DeadLetterSink, type DeadLetterHandler, type SubscribeOptions, type Scheduler, type DelayedWork, type InProcessBusOptions, type TimerSchedulerOptions } from './ports.ts';
export { KafkaBus, isKafkaWarmup, DEAD_LETTER_TOPIC, type KafkaBusOptions } from './kafka-bus.ts';
