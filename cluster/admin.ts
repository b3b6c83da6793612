// Entry point of `npm run admin -- …`: output on stdout when the command succeeds, on stderr with
// exit code 1 (refused, not found) or 2 (usage, configuration) when it does not.

import { ConfigError, loadConfig, runAdminCli } from '@svc/runtime';
import { DataDirLockedError, DataDirPermissionError } from '@svc/store';

async function main(): Promise<number> {
  const res = await runAdminCli(loadConfig(process.env), process.argv.slice(2));
  (res.code === 0 ? process.stdout : process.stderr).write(`${res.out}\n`);
  return res.code;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    // The operator's to fix, as in cluster/embedded.ts: one line, no stack, exit 2.
    if (err instanceof ConfigError || err instanceof DataDirLockedError || err instanceof DataDirPermissionError) {
      process.stderr.write(`configuration error: ${err.message}\n`);
      process.exit(2);
    }
    process.stderr.write(`${(err as Error).stack}\n`);
    process.exit(1);
  },
);
