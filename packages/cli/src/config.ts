// Where `svc` finds its API key and the service: `SVC_API_KEY` and `SVC_BASE_URL`, else the
// config file (`SVC_CONFIG`, default ~/.config/svc/config.json: `{"api_key": "…", "base_url":
// "…"}`), else the default base URL. The file holds a secret, so like ssh with a private key,
// `svc` refuses to read one that its group or other users can read (or write): mode 0600 (or
// 0400) only. The environment comes from the entry point (bin/svc.js), never read here.

import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { DEFAULT_BASE_URL } from '@svc/client';
import { CliError, EXIT } from './exit.ts';

export interface CliConfig {
  apiKey: string;
  baseUrl: string;
  /** The file the values came from, if any. */
  file?: string;
}

export type Env = Readonly<Record<string, string | undefined>>;

/** The config file `svc` reads: SVC_CONFIG, else $XDG_CONFIG_HOME/svc/config.json, else ~/.config/svc/config.json. */
export function configPath(env: Env): string | undefined {
  if (env.SVC_CONFIG) return env.SVC_CONFIG;
  const base = env.XDG_CONFIG_HOME || (env.HOME ? path.join(env.HOME, '.config') : undefined);
  return base ? path.join(base, 'svc', 'config.json') : undefined;
}

/** Reads and checks the config file; undefined when the default one does not exist. */
export function readConfigFile(file: string, required: boolean): { api_key?: string; base_url?: string } | undefined {
  let mode: number;
  try {
    mode = statSync(file).mode;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT' && !required) return undefined;
    throw new CliError(EXIT.usage, `cannot read the config file ${file}: ${(err as Error).message}`);
  }
  // Owner-only, like ssh's private keys: any bit for the group or others is refused.
  if ((mode & 0o077) !== 0) {
    const shown = (mode & 0o777).toString(8).padStart(4, '0');
    throw new CliError(EXIT.usage, `refusing to use the config file ${file}: it holds an API key but its mode is ${shown} (readable or writable by others); run: chmod 600 ${file}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new CliError(EXIT.usage, `the config file ${file} is not valid JSON: ${(err as Error).message}`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new CliError(EXIT.usage, `the config file ${file} must be a JSON object like {"api_key": "svc_live_…"}`);
  const { api_key, base_url } = parsed as Record<string, unknown>;
  if (api_key !== undefined && typeof api_key !== 'string') throw new CliError(EXIT.usage, `${file}: api_key must be a string`);
  if (base_url !== undefined && typeof base_url !== 'string') throw new CliError(EXIT.usage, `${file}: base_url must be a string`);
  return { ...(api_key !== undefined ? { api_key } : {}), ...(base_url !== undefined ? { base_url } : {}) };
}

/** The key and base URL: the environment first, then the config file (read only when it exists, or when SVC_CONFIG names it). */
export function resolveConfig(env: Env, overrides: { baseUrl?: string } = {}): CliConfig {
  const file = configPath(env);
  const fromFile = file ? readConfigFile(file, Boolean(env.SVC_CONFIG)) : undefined;
  const apiKey = env.SVC_API_KEY || fromFile?.api_key;
  if (!apiKey) throw new CliError(EXIT.usage, `no API key: set SVC_API_KEY, or put {"api_key": "svc_live_…"} in ${file ?? '~/.config/svc/config.json'} (mode 0600)`);
  const baseUrl = overrides.baseUrl || env.SVC_BASE_URL || fromFile?.base_url || DEFAULT_BASE_URL;
  if (!/^https?:\/\/[^/]/i.test(baseUrl)) throw new CliError(EXIT.usage, `the base URL must be an http or https URL, got ${JSON.stringify(baseUrl)}`);
  return { apiKey, baseUrl, ...(fromFile ? { file: file! } : {}) };
}
