// Dead letters of the in-process bus (migration 017): messages that failed every delivery, kept
// for an operator to read. Their work was answered by the bus subscriber's dead-letter handler.

import type { Db } from '../db/db.ts';
import { dbText } from '../db/text.ts';

export interface DeadLetterRow {
  id: number;
  topic: string;
  key: string;
  message: string;
  error: string;
  attempts: number;
  created_at: Date;
}

export class DeadLettersRepo {
  constructor(private readonly db: Db) {}

  async park(letter: { topic: string; key: string; message: string; error: string; attempts: number }): Promise<void> {
    await this.db.query('INSERT INTO dead_letters (topic, key, message, error, attempts) VALUES ($1, $2, $3, $4, $5)', [
      dbText(letter.topic),
      dbText(letter.key),
      dbText(letter.message),
      dbText(letter.error),
      letter.attempts,
    ]);
  }

  /** The newest `limit` dead letters, newest first. */
  async list(limit = 20): Promise<DeadLetterRow[]> {
    const rows = await this.db.query<Omit<DeadLetterRow, 'id' | 'created_at'> & { id: number | string; created_at: Date | string }>(
      'SELECT id, topic, key, message, error, attempts, created_at FROM dead_letters ORDER BY id DESC LIMIT $1',
      [limit],
    );
    return rows.map((r) => ({ ...r, id: Number(r.id), created_at: new Date(r.created_at) }));
  }
}
