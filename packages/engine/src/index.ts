// @svc/engine: the probe engine (docs/decisions/smtp-engine.md). Domain actors and MX actors
// in-process, one engine per process; in the cluster profile the jobs.mx topic (keyed by MX host)
// gives each host's job recipients to one worker.
export { Engine, probeLocalFor } from './engine.ts';
export { ENGINE_DEFAULTS, type EngineConfig, type EngineDeps } from './types.ts';
export { MemoryMxThrottle, type MxThrottle } from './throttle.ts';
export type { EngineCounters } from './types.ts';
export { ManualClock, systemClock, type Clock, type ClockTimer } from './clock.ts';
