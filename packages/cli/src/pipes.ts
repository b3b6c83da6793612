// What `svc` does when a stream it writes to is closed by its reader: `svc job list | head -1`
// closes stdout after one line, and the next write fails with EPIPE. Node ignores SIGPIPE, so
// without a listener that failure is an unhandled 'error' event: a stack trace and exit 1. Like
// the classic Unix tools, `svc` then simply stops: exit 0, nothing on stderr (the reader has what
// it wanted). A closed stderr is ignored (there is nowhere to report it), so stdout can still
// finish. Any other write error (a full disk) is thrown as before.

import type { EventEmitter } from 'node:events';

/** Installs the listeners on the process's stdout and stderr; `exit` ends the process (process.exit). */
export function exitQuietlyOnClosedPipe(stdout: EventEmitter, stderr: EventEmitter, exit: (code: number) => void): void {
  stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err;
    exit(0);
  });
  stderr.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err;
  });
}
