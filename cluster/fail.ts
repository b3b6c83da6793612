// How an entry point ends on an error it could not handle: a problem the operator must fix (a
// setting, the data directory: OperatorError) is one line on stderr and exit 2; anything else is
// a bug, printed with its stack, exit 1.

import { OperatorError } from '@svc/contracts';

export function fail(err: unknown): never {
  if (err instanceof OperatorError) {
    process.stderr.write(`configuration error: ${err.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`${(err as Error).stack}\n`);
  process.exit(1);
}
