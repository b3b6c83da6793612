// What a command runs with: the client, the outside world, and its parsed command line.

import type { ClientOptions, SvcClient } from '@svc/client';
import type { Env } from './config.ts';
import type { ExitCode } from './exit.ts';
import type { ProgressOut } from './progress.ts';

export const VERSION = '0.1.0';

export interface CliIO {
  env: Env;
  stdout: ProgressOut;
  stderr: ProgressOut;
  /** Relative file names are taken from here. */
  cwd: string;
  /** For tests: options of the client (its back-off, attempts, transport). */
  clientOptions?: Partial<Omit<ClientOptions, 'apiKey' | 'baseUrl' | 'onRetry'>>;
  /** For tests: the clock of the progress display. */
  now?: () => number;
}

export interface Context {
  client: SvcClient;
  io: CliIO;
  /** --json: one JSON document on stdout, nothing else. */
  json: boolean;
  values: Record<string, string | boolean | undefined>;
  args: string[];
}

export interface Command {
  /** Arguments after the command words; a name ending in `?` is optional. */
  args: string[];
  /** What follows `svc NAME`; a command with two forms (arguments, or --file) has a line for each. */
  synopsis: string;
  summary: string;
  details?: string;
  options?: Record<string, { type: 'string' | 'boolean'; short?: string }>;
  optionHelp?: Record<string, string>;
  run(ctx: Context): Promise<ExitCode>;
}
