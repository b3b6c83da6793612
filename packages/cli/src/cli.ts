// `svc`: the command line of the email validation API, on the official client. `run` takes
// everything from the outside world as arguments (argv, environment, streams), so tests run it
// in process; bin/svc.js is the entry point that passes the real ones.

import { parseArgs, type ParseArgsConfig } from 'node:util';
import { SvcApiError, SvcClient, SvcNetworkError } from '@svc/client';
import { COMMANDS, type Command } from './commands.ts';
import { resolveConfig } from './config.ts';
import { VERSION, type CliIO, type Context } from './context.ts';
import { CliError, EXIT, exitCodeOf, type ExitCode } from './exit.ts';
import { printable, printableLines } from './text.ts';

type Options = NonNullable<ParseArgsConfig['options']>;

const GLOBAL_OPTIONS = {
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean' },
  'base-url': { type: 'string' },
} as const satisfies Options;

export const USAGE = `Usage: svc [--json] [--base-url URL] COMMAND [ARGS] [OPTIONS]

Commands:
${Object.entries(COMMANDS)
  .map(([name, c]) => `  ${`${name} ${c.synopsis.split('\n')[0]!.replace(/\s*\[.*$/, '')}`.trim().padEnd(26)}  ${c.summary}`)
  .join('\n')}

Options:
  --json            print one JSON document on stdout and nothing else (errors too)
  --base-url URL    the service (default: SVC_BASE_URL, the config file, http://127.0.0.1:8080)
  -h, --help        this text; \`svc COMMAND --help\` for one command
  --version         the version

The API key: SVC_API_KEY, else "api_key" in the config file (SVC_CONFIG, default
~/.config/svc/config.json), which must have mode 0600.

Exit codes: 0 ok; 1 usage or configuration; 2 bad input (the service refused it, or a local
file); 3 authentication or access (401, 403); 4 credits or subscription (402); 5 not found or
conflict (404, 409); 6 retry later (network, timeout, 429, 5xx, after the client's own retries);
7 the job ended failed or canceled; 8 a bug in svc.
`;

/** The command named by the first words of argv (global options may come before them). */
function findCommand(argv: readonly string[]): { name: string; command: Command } | undefined {
  const words: string[] = [];
  for (let i = 0; i < argv.length && words.length < 2; i++) {
    const tok = argv[i]!;
    if (tok === '--base-url') i++;
    else if (!tok.startsWith('-')) words.push(tok);
  }
  for (const name of [words.slice(0, 2).join(' '), words[0] ?? '']) {
    const command = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
    if (command) return { name, command };
  }
  return undefined;
}

function commandHelp(name: string, c: Command): string {
  const width = Math.max(24, ...Object.keys(c.optionHelp ?? {}).map((flag) => flag.length + 1));
  const opts = Object.entries(c.optionHelp ?? {}).map(([flag, text]) => `  ${flag.padEnd(width)} ${text}`);
  // A command with two forms has a synopsis line for each.
  const usage = c.synopsis.split('\n').map((form, i) => `${i === 0 ? 'Usage:' : '      '} svc ${name} ${form}`.trimEnd());
  return `${usage.join('\n')}\n\n${c.summary}.${c.details ? `\n\n${c.details}` : ''}${opts.length ? `\n\nOptions:\n${opts.join('\n')}` : ''}\n`;
}

/** Runs one command line; answers the exit code. Never throws. */
export async function run(argv: readonly string[], io: CliIO): Promise<ExitCode> {
  const json = argv.includes('--json');
  try {
    const found = findCommand(argv);
    const options: Options = { ...GLOBAL_OPTIONS, ...(found?.command.options ?? {}) };
    let parsed: ReturnType<typeof parseArgs>;
    try {
      parsed = parseArgs({ args: [...argv], options, allowPositionals: true, strict: true });
    } catch (err) {
      throw new CliError(EXIT.usage, `${(err as Error).message}${found ? `; see: svc ${found.name} --help` : '; see: svc --help'}`);
    }
    const values = parsed.values as Record<string, string | boolean | undefined>;
    if (values.version) {
      io.stdout.write(json ? `${JSON.stringify({ version: VERSION })}\n` : `svc ${VERSION}\n`);
      return EXIT.ok;
    }
    if (!found) {
      if (values.help || parsed.positionals.length === 0) {
        io.stdout.write(USAGE);
        return values.help ? EXIT.ok : EXIT.usage;
      }
      throw new CliError(EXIT.usage, `unknown command: ${parsed.positionals.slice(0, 2).join(' ')}; see: svc --help`);
    }
    const { name, command } = found;
    if (values.help) {
      io.stdout.write(commandHelp(name, command));
      return EXIT.ok;
    }
    const args = parsed.positionals.slice(name.split(' ').length);
    const [min, max] = [command.args.filter((a) => !a.endsWith('?')).length, command.args.length];
    if (args.length < min || args.length > max) {
      throw new CliError(EXIT.usage, `${name} takes ${min === max ? min : `${min} to ${max}`} argument${max === 1 ? '' : 's'} (${command.args.join(' ') || 'none'}), got ${args.length}; see: svc ${name} --help`);
    }
    const config = resolveConfig(io.env, typeof values['base-url'] === 'string' ? { baseUrl: values['base-url'] } : {});
    const client = new SvcClient({
      apiKey: config.apiKey,
      baseUrl: config.baseUrl,
      userAgent: `svc-cli/${VERSION}`,
      ...io.clientOptions,
      onRetry: (e) => {
        // On a terminal the line may hold the progress bar: erase it first (the next update redraws it).
        if (!json) io.stderr.write(`${io.stderr.isTTY ? '\r\x1b[K' : ''}svc: ${printable(e.error instanceof SvcApiError ? `${e.error.status} ${e.error.code ?? ''}`.trim() : e.error.message)}; retrying in ${(e.delayMs / 1000).toFixed(1)} s\n`);
      },
    });
    const ctx: Context = { client, io, json, values, args };
    return await command.run(ctx);
  } catch (err) {
    const code = exitCodeOf(err);
    if (json) io.stdout.write(`${JSON.stringify({ error: describe(err), exit_code: code })}\n`);
    // The service's message, code and request id are shown, never obeyed (./text.ts); a bug's stack keeps its lines.
    else io.stderr.write(`svc: ${(code === EXIT.internal ? printableLines : printable)(humanError(err))}\n`);
    return code;
  }
}

/** The error as a JSON document for --json. */
function describe(err: unknown): Record<string, unknown> {
  if (err instanceof SvcApiError) {
    const body = typeof err.body === 'object' ? err.body : {};
    return { ...body, status: err.status, code: err.code ?? null, message: err.message, request_id: err.requestId ?? null, attempts: err.attempts, retryable: err.isRetryable };
  }
  if (err instanceof SvcNetworkError) return { code: err.kind === 'timeout' ? 'timeout' : 'network_error', message: err.message, request_id: null, attempts: err.attempts, retryable: true };
  if (err instanceof CliError) return { code: err.exitCode === EXIT.usage ? 'usage' : 'bad_input', message: err.message };
  return { code: 'internal', message: String((err as Error)?.stack ?? err) };
}

function humanError(err: unknown): string {
  if (err instanceof SvcApiError) {
    const extra = [
      err.requiredScope !== undefined ? `required scope ${err.requiredScope}` : '',
      err.required !== undefined ? `required ${err.required}` : '',
      err.available !== undefined ? `available ${err.available}` : '',
      err.retryAfter !== undefined ? `retry after ${err.retryAfter} s` : '',
      err.attempts > 1 ? `${err.attempts} attempts` : '',
      err.requestId ? `request ${err.requestId}` : '',
    ].filter(Boolean);
    return `${err.status}${err.code ? ` ${err.code}` : ''}: ${err.message}${extra.length ? ` (${extra.join(', ')})` : ''}`;
  }
  if (err instanceof SvcNetworkError) return `${err.message}${err.attempts > 1 ? ` (${err.attempts} attempts)` : ''}`;
  if (err instanceof CliError) return err.message;
  return `unexpected error (a bug in svc): ${String((err as Error)?.stack ?? err)}`;
}
