// @svc/engine: the probe engine (docs/decisions/smtp-engine.md). Domain actors and MX actors
// in-process; the cluster profile puts the same actors behind Kafka partitions.
export { Engine, probeLocalFor } from './engine.ts';
export { ENGINE_DEFAULTS, type EngineConfig, type EngineDeps } from './types.ts';
export { MemoryMxThrottle, type MxThrottle } from './throttle.ts';
export type { EngineCounters } from './types.ts';
export { ManualClock, systemClock, type Clock, type ClockTimer } from './clock.ts';
