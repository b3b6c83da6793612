// CSV cells as this service writes them (a job's results, the dashboard's exports).

/**
 * One cell: formula-injection escaping first (OWASP "CSV Injection": a cell starting with `=`,
 * `+`, `-`, `@`, tab or CR gets a leading `'`, so a spreadsheet shows it as text instead of
 * evaluating it), then RFC 4180 quoting when the cell holds a comma, a quote, CR or LF (quotes
 * doubled).
 */
export function formatCell(value: string): string {
  let s = value;
  const c = s.charCodeAt(0);
  if (c === 0x3d || c === 0x2b || c === 0x2d || c === 0x40 || c === 0x09 || c === 0x0d) s = `'${s}`;
  for (let i = 0; i < s.length; i++) {
    const ch = s.charCodeAt(i);
    if (ch === 0x2c || ch === 0x22 || ch === 0x0a || ch === 0x0d) return `"${s.replaceAll('"', '""')}"`;
  }
  return s;
}
