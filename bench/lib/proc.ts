// What Linux's /proc says of a process or one of its threads (NaN where /proc is not there), and
// whether a process is alive.
//
// CPU: utime + stime of `/proc/<pid>/stat` (the process, all its threads) or of
// `/proc/<pid>/task/<tid>/stat` (one thread: `tid` = `pid` is the main thread), in clock ticks of
// 10 ms, as milliseconds. A service's requests are handled on its main thread while its store
// runs on another: under load the main thread is the one that saturates, so its CPU per request is
// what a change to the request path moves. Memory: a `/proc/<pid>/status` field in MiB.

import { readFileSync } from 'node:fs';

const TICK_MS = 10;

/** CPU time of process `pid` (or of its thread `tid`), ms. */
export function procCpuMs(pid: number, tid?: number): number {
  try {
    const stat = readFileSync(tid === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${tid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces) in parentheses: state is field 3,
    // utime and stime fields 14 and 15.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(rest[11]) + Number(rest[12])) * TICK_MS;
  } catch {
    return Number.NaN;
  }
}

/** CPU time of this process's main thread alone, ms. */
export const mainThreadCpuMs = (): number => procCpuMs(process.pid, process.pid);

/** Whether process `pid` is alive (signal 0: nothing is sent, only checked). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The process id a pid file names, if the file is there and that process is alive. */
export function livePidIn(file: string): number | undefined {
  try {
    const pid = Number(readFileSync(file, 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 && alive(pid) ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** A memory field of `/proc/<pid>/status` (VmRSS: resident now; VmHWM: its peak), MiB. */
export function procStatus(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : Number.NaN;
  } catch {
    return Number.NaN;
  }
}
