#!/usr/bin/env node
// The `svc` command (npx svc …): registers tsx so Node 20 runs the TypeScript sources as they
// are, then hands the command line, the environment and the streams to run() (src/cli.ts). The
// only place that reads process.env and sets the exit code.
import { register } from 'tsx/esm/api';

register();
const { run } = await import('../src/index.ts');
process.exitCode = await run(process.argv.slice(2), { env: process.env, stdout: process.stdout, stderr: process.stderr, cwd: process.cwd() });
