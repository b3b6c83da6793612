// Entry point of `npm run admin -- …`: output on stdout when the command succeeds, on stderr with
// exit code 1 (refused, not found) or 2 (usage, configuration) when it does not.

import { runAdminCli } from '@svc/admin';
import { loadConfig } from '@svc/runtime';
import { fail } from './fail.ts';

async function main(): Promise<number> {
  const res = await runAdminCli(loadConfig(process.env), process.argv.slice(2));
  (res.code === 0 ? process.stdout : process.stderr).write(`${res.out}\n`);
  return res.code;
}

// A setting or the data directory to fix: one line, exit 2 (as npm start); anything else: exit 1.
main().then((code) => process.exit(code), fail);
