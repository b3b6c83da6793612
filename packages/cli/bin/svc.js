#!/usr/bin/env node
// The `svc` command (npx svc …): plain Node running the built CLI (dist/, compiled from src/ by
// `npm run build`, which `npm install` and `npm ci` of the repository run; in the published
// package it is there already). Hands the command line, the environment and the streams to run()
// (src/cli.ts). The only place that reads process.env and sets the exit code.
import { exitQuietlyOnClosedPipe, run } from '../dist/index.js';

exitQuietlyOnClosedPipe(process.stdout, process.stderr, (code) => process.exit(code));
process.exitCode = await run(process.argv.slice(2), { env: process.env, stdout: process.stdout, stderr: process.stderr, cwd: process.cwd() });
