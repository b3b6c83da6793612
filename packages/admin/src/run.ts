// Every operator command, and how argv becomes one: parsing, help and usage errors, then the
// command run against a store.

import { parseArgs } from 'node:util';
import { SCOPES } from '@svc/contracts';
import type { Store } from '@svc/store';
import { type AdminContext, type AdminResult, type Command, OPTIONS, type Values, usageError, usageLine } from './command.ts';
import { accountsCommands } from './commands/accounts.ts';
import { keysCommands } from './commands/keys.ts';
import { creditsCommands } from './commands/credits.ts';
import { jobsCommands } from './commands/jobs.ts';
import { subscriptionsCommands } from './commands/subscriptions.ts';
import { webhookSecretsCommands } from './commands/webhook-secrets.ts';
import { usersCommands } from './commands/users.ts';

const COMMANDS: Command[] = [...accountsCommands, ...keysCommands, ...creditsCommands, ...jobsCommands, ...subscriptionsCommands, ...webhookSecretsCommands, ...usersCommands];

const NOUNS = [...new Set(COMMANDS.map((c) => c.noun))];

/** `admin --help`: every command. */
const USAGE = [
  'usage: admin COMMAND [OPTIONS]    (admin COMMAND --help explains one)',
  ...COMMANDS.map((c) => `  ${usageLine(c)}`),
  `scopes: ${SCOPES.join(', ')}`,
].join('\n');

/** `admin key --help`: the commands of one noun. */
const nounUsage = (noun: string): string =>
  [`usage: admin ${noun} COMMAND [OPTIONS]    (admin ${noun} COMMAND --help explains one)`, ...COMMANDS.filter((c) => c.noun === noun).flatMap((c) => [`  ${usageLine(c)}`, `      ${c.about}`])].join('\n');

/** `admin key create --help`: one command. */
function commandHelp(c: Command): string {
  const lines = [`usage: ${usageLine(c)}`, '', c.about];
  if (c.options.length > 0) {
    const w = Math.max(...c.options.map(([flag]) => flag.length));
    lines.push('', 'options:', ...c.options.map(([flag, help]) => `  ${flag.padEnd(w)}  ${help}`));
  }
  return lines.join('\n');
}

/** A usage error with the usage of every command. */
const usageErrorAll = (msg: string): AdminResult => ({ code: 2, out: `${msg}\n${USAGE}` });

export type Plan = { done: AdminResult } | { command: Command; values: Values; arg: string | undefined };

/** Everything that needs no store: parsing, help, unknown commands and options. */
export function plan(argv: string[]): Plan {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, allowPositionals: true, options: OPTIONS });
  } catch (err) {
    return { done: usageErrorAll((err as Error).message) };
  }
  const v = parsed.values as Values;
  const [noun, verb, ...rest] = parsed.positionals;
  if (noun === 'help') return { done: { code: 0, out: USAGE } };
  if (!noun) return v.help ? { done: { code: 0, out: USAGE } } : { done: usageErrorAll('no command') };
  if (!NOUNS.includes(noun)) return { done: usageErrorAll(`unknown command: ${noun}`) };
  if (!verb) return { done: v.help ? { code: 0, out: nounUsage(noun) } : { code: 2, out: `which ${noun} command?\n${nounUsage(noun)}` } };
  const command = COMMANDS.find((c) => c.noun === noun && c.verb === verb);
  if (!command) return { done: { code: 2, out: `unknown command: ${noun} ${verb}\n${nounUsage(noun)}` } };
  if (v.help) return { done: { code: 0, out: commandHelp(command) } };
  const allowed = new Set(command.options.map(([flag]) => flag.split(' ')[0]!.slice(2)));
  if (allowed.has('credits')) allowed.add('amount');
  const unknown = Object.keys(v).filter((k) => !allowed.has(k));
  if (unknown.length > 0) return { done: usageError(`admin ${noun} ${verb} takes no ${unknown.map((k) => `--${k}`).join(', ')}`, command) };
  if (rest.length > (command.arg ? 1 : 0)) return { done: usageError(`unexpected argument: ${rest.slice(command.arg ? 1 : 0).join(' ')}`, command) };
  return { command, values: v, arg: rest[0] };
}

/** Runs one admin command against a store (directly, or for the admin socket). */
export async function runAdmin(store: Store, argv: string[], onKeyChange: () => void = () => {}, ctx: AdminContext = {}): Promise<AdminResult> {
  const p = plan(argv);
  if ('done' in p) return p.done;
  return p.command.run(store, p.values, p.arg, onKeyChange, ctx);
}
