// CPU time of this process's main thread alone (Linux: /proc/self/task/<pid>/stat, utime + stime,
// in clock ticks of 10 ms), in milliseconds; NaN where /proc is not there. A service's requests
// are handled on its main thread while its store runs on another: under load the main thread is
// the one that saturates, so its CPU per request is what a change to the request path moves.

import { readFileSync } from 'node:fs';

const TICK_MS = 10;

export function mainThreadCpuMs(): number {
  try {
    const stat = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces) in parentheses: state is field 3,
    // utime and stime fields 14 and 15.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(rest[11]) + Number(rest[12])) * TICK_MS;
  } catch {
    return Number.NaN;
  }
}
