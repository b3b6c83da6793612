// @svc/runtime: the configuration table and the composition root. Imported only by entry points
// (cluster/*.ts, tests, benchmarks).
export { CONFIG_TABLE, ConfigError, configTableMarkdown, loadConfig, type Config } from './config.ts';
export { createServices, type Services } from './services.ts';
export { clickhouseSelect1, Readiness, type ReadinessDeps } from './readiness.ts';
export { bootstrap, startService, type BootstrapOutcome, type RunningService } from './server.ts';
