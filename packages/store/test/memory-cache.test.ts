// The in-process cache's own bounds (the conformance suite in cache-ports.test.ts covers what it
// shares with Redis): at most maxEntries entries and maxChars characters of keys and JSON, the
// oldest going first; replacing or expiring an entry gives its characters back.

import t from 'tap';
import { MemoryCache } from '../src/index.ts';

t.test('entry bound: the oldest entry goes first', async (t) => {
  const c = new MemoryCache(3);
  for (const k of ['a', 'b', 'c', 'd']) c.set(k, k, 60_000);
  t.equal(c.size, 3);
  t.strictSame(['a', 'b', 'c', 'd'].map((k) => c.get<string>(k)), [undefined, 'b', 'c', 'd']);
});

t.test('character bound: keys and JSON texts are counted, the oldest go until it fits', async (t) => {
  // Each entry: key 2 chars + JSON `"xxxxxxxx"` 10 chars = 12.
  const c = new MemoryCache(1000, Date.now, 40);
  for (const k of ['k1', 'k2', 'k3']) c.set(k, 'xxxxxxxx', 60_000);
  t.equal(c.chars, 36);
  c.set('k4', 'xxxxxxxx', 60_000);
  t.equal(c.chars, 36, 'k1 went to make room');
  t.strictSame(['k1', 'k2', 'k3', 'k4'].map((k) => c.get<string>(k) !== undefined), [false, true, true, true]);
  // A bigger value pushes out as many old ones as it needs.
  c.set('k5', 'y'.repeat(20), 60_000);
  t.equal(c.chars, 2 + 22 + 12, 'k2 and k3 went');
  t.strictSame(['k2', 'k3', 'k4', 'k5'].map((k) => c.get<string>(k) !== undefined), [false, false, true, true]);
  // One entry larger than the bound stays alone rather than not at all.
  c.set('big', 'z'.repeat(100), 60_000);
  t.equal(c.size, 1);
  t.equal(c.get<string>('big'), 'z'.repeat(100));
});

t.test('replacing and expiring an entry give its characters back', async (t) => {
  let now = 1_000;
  const c = new MemoryCache(1000, () => now, 1_000);
  c.set('a', 'xxxx', 100);
  t.equal(c.chars, 1 + 6);
  c.set('a', 'xx', 100);
  t.equal(c.chars, 1 + 4, 'replaced: the new text only');
  now += 100;
  t.equal(c.get('a'), undefined, 'expired');
  t.equal(c.chars, 0);
  t.equal(c.size, 0);
  c.set('b', 'x', 0);
  t.strictSame([c.size, c.chars], [0, 0], 'no time: nothing held');
});

t.test('entries read lately are copied from their parsed value: always a new object, never a stale one', async (t) => {
  const c = new MemoryCache();
  c.set('v', { result: 'valid', flags: ['a'], smtp: { code: 250, lines: ['ok'] } }, 60_000);
  const first = c.get<{ result: string; flags: string[]; smtp: { code: number; lines: string[] } }>('v')!;
  const second = c.get<typeof first>('v')!;
  t.not(first, second, 'two reads, two objects');
  t.not(first.flags, second.flags, 'and two arrays');
  t.not(first.smtp, second.smtp, 'and two nested objects');
  t.not(first.smtp.lines, second.smtp.lines, 'at every depth');
  second.flags.push('changed');
  second.smtp.lines.push('changed');
  second.result = 'invalid';
  t.strictSame(c.get('v'), { result: 'valid', flags: ['a'], smtp: { code: 250, lines: ['ok'] } }, 'a read after a reader changed its copy');
  c.set('v', { result: 'risky', flags: [] }, 60_000);
  t.strictSame(c.get('v'), { result: 'risky', flags: [] }, 'a replaced entry is read from its new value');
  // More keys read than are kept parsed: each still reads back as stored.
  for (let i = 0; i < 1100; i++) c.set(`k${i}`, { i, list: [i] }, 60_000);
  for (let round = 0; round < 2; round++) {
    let wrong = 0;
    for (let i = 0; i < 1100; i++) {
      const v = c.get<{ i: number; list: number[] }>(`k${i}`);
      if (v?.i !== i || v.list[0] !== i) wrong++;
    }
    t.equal(wrong, 0, `round ${round + 1}: every one of 1,100 keys reads back as stored`);
  }
});
