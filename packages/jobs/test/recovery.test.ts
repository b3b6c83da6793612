// The address-pattern learning of catch-all recovery (recovery.ts): local-part shapes, and
// when a domain's confirmed addresses make a pattern worth upgrading on.

import t from 'tap';
import { learnPattern, localShape } from '../src/index.ts';

t.test('local-part shapes', async (t) => {
  const cases: Array<[string, string | undefined]> = [
    ['jane.doe', 'first.last'],
    ['Jane.Doe', 'first.last'],
    ['j.doe', 'f.last'],
    ['jane.d', 'first.l'],
    ['jane_doe', 'first_last'],
    ['jane-doe', 'first-last'],
    ['jdoe', 'single_token'],
    ['jane.doe2', undefined],
    ['jane..doe', undefined],
    ['"jane doe"', undefined],
    ['j.d', undefined],
  ];
  for (const [local, shape] of cases) t.equal(localShape(local), shape, local);
});

t.test('a pattern needs three confirmed addresses and an 80% share, and is never a single token', async (t) => {
  t.equal(learnPattern(['anna.berg', 'lars.ulrich']), undefined, 'two are not enough');
  t.strictSame(learnPattern(['anna.berg', 'lars.ulrich', 'tom.hardy']), { pattern: 'first.last', confirmed: 3, matching: 3 });
  t.strictSame(learnPattern(['anna.berg', 'lars.ulrich', 'tom.hardy', 'ola.nordmann', 'kari_nordmann']), { pattern: 'first.last', confirmed: 5, matching: 4 }, '4 of 5 is 80%');
  t.equal(learnPattern(['anna.berg', 'lars.ulrich', 'tom.hardy', 'kari_nordmann', 'ola_nordmann']), undefined, '3 of 5 is not enough');
  t.equal(learnPattern(['anna', 'lars', 'tom', 'kari']), undefined, 'single tokens are never a pattern');
  t.strictSame(learnPattern(['a.berg', 'l.ulrich', 't.hardy']), { pattern: 'f.last', confirmed: 3, matching: 3 });
});
