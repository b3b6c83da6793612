// The job counters, defined once: how a done email is counted, and the order every view of a job
// (the status resource, the API and MCP schemas) shows them in.

import t from 'tap';
import { JOB_COUNTERS, JOB_RESULT_FIELDS, VALIDATION_RESULTS, countResult, emptyJobCounters, jobCounters } from '../src/index.ts';

t.test('a counter per validation result, then role-based, High-Value and catch-all', async (t) => {
  t.strictSame(JOB_COUNTERS.filter((c) => (VALIDATION_RESULTS as readonly string[]).includes(c)).sort(), [...VALIDATION_RESULTS].sort());
  t.strictSame(JOB_COUNTERS.slice(-3), ['role_based', 'high_value', 'catch_all']);
  t.strictSame(JOB_RESULT_FIELDS.slice(0, 2), ['total_rows', 'unique_emails']);
  t.strictSame(JOB_RESULT_FIELDS.slice(2, 2 + JOB_COUNTERS.length), [...JOB_COUNTERS], 'the status resource shows the counters in their order');
});

t.test('countResult: the result, and the flags that apply', async (t) => {
  const c = emptyJobCounters();
  countResult(c, { result: 'valid', is_role_based: false, is_catchall: false }, true);
  countResult(c, { result: 'valid_role_based', is_role_based: true, is_catchall: false }, false);
  countResult(c, { result: 'risky', is_role_based: false, is_catchall: true }, false);
  countResult(c, { result: 'invalid', is_role_based: true, is_catchall: false }, false);
  countResult(c, { result: 'unknown', is_role_based: false, is_catchall: false }, false);
  t.strictSame(c, { valid: 1, valid_role_based: 1, invalid: 1, risky: 1, unknown: 1, role_based: 2, high_value: 1, catch_all: 1 });
  t.strictSame(Object.keys(jobCounters({ ...c, extra: 9 } as typeof c)), [...JOB_COUNTERS], 'a record reduced to its counters, in order');
});
