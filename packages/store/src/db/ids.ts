import { randomBytes } from 'node:crypto';

/** A new opaque id: `acc_…`, `key_…`, `res_…` and 24 hex digits. */
export const newId = (prefix: string) => `${prefix}_${randomBytes(12).toString('hex')}`;
