// @svc/cli: the `svc` command line (bin/svc.js runs its build, dist/). Exported for tests and for embedding.

export { run, USAGE } from './cli.ts';
export { VERSION, type CliIO } from './context.ts';
export { EXIT, CliError, exitCodeOf, type ExitCode } from './exit.ts';
export { configPath, readConfigFile, resolveConfig } from './config.ts';
export { addressesOf, columnIndex, csvCell, formatCsv, guessColumn, guessDelimiter, parseCsv, readTable, type Cell, type Table } from './csv.ts';
export { inBatches, type BatchOutcome } from './batches.ts';
export { clock, estimate, renderBar, renderLine, ProgressReporter, RATE_WINDOW_MS, STALL_MS, trimSamples, type Estimate, type Sample } from './progress.ts';
export { ENRICH_COLUMNS, FIND_COLUMNS, FIND_VALIDATION_COLUMNS, jobSummary } from './commands.ts';
export { exitQuietlyOnClosedPipe } from './pipes.ts';
export { printable, printableLines } from './text.ts';
