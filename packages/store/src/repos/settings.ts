// Values the service generates for itself once and shares between its processes (migration 005,
// service_settings): the first process to ask stores one, every later one reads it.

import type { Db } from '../db/db.ts';

export class SettingsRepo {
  constructor(private readonly db: Db) {}

  /** The value of `name`, made by `make()` and stored by whichever process asks first. */
  async generated(name: string, make: () => string): Promise<string> {
    await this.db.query('INSERT INTO service_settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING', [name, make()]);
    return (await this.db.query<{ value: string }>('SELECT value FROM service_settings WHERE name = $1', [name]))[0]!.value;
  }
}
