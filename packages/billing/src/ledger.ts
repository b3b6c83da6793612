// The account's credit ledger as a CSV download (the dashboard's export): every row, newest
// first, read a page at a time so a long ledger never sits in memory whole.

import { formatCell } from '@svc/contracts';
import type { LedgerEntry, Store } from '@svc/store';

export const LEDGER_CSV_HEADER = ['id', 'created_at', 'kind', 'amount', 'note', 'reservation_id'] as const;
const PAGE = 1000;

const line = (e: LedgerEntry): string =>
  [String(e.id), e.created_at.toISOString(), e.kind, String(e.amount), e.note, e.reservation_id ?? ''].map(formatCell).join(',') + '\r\n';

/** The ledger CSV's lines (CRLF), the header first; rows newest first. */
export async function* ledgerCsv(store: Store, accountId: string): AsyncGenerator<string> {
  yield `${LEDGER_CSV_HEADER.join(',')}\r\n`;
  let before: number | undefined;
  for (;;) {
    const page = await store.ledger.page(accountId, { limit: PAGE, ...(before !== undefined && { before }) });
    if (page.entries.length > 0) yield page.entries.map(line).join('');
    if (page.next === null) return;
    before = page.next;
  }
}
