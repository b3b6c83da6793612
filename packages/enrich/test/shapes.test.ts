// The finder's shape evidence: which local parts have a shape, what a shape is worth for each
// pattern it allows (exact numbers through patternConfidence and rankPatterns), and the learner
// that buffers sightings of fresh valid verdicts. All addresses are made up.

import t from 'tap';
import { findEvidence, shapeEvidence, shapeOf, shapesOf, ShapeLearner } from '../src/finder/shapes.ts';
import { patternConfidence, rankPatterns, PATTERNS } from '../src/finder/patterns.ts';

t.test('shapeOf: two letter runs around one separator; everything else has none', async (t) => {
  const cases: Array<[string, string | undefined]> = [
    ['jane.smith', 'word.word'],
    ['Jane.Smith', 'word.word'],
    ['j.smith', 'initial.word'],
    ['jane.s', 'word.initial'],
    ['jane_smith', 'word_word'],
    ['jane-smith', 'word-word'],
    ['j_smith', undefined],
    ['j-smith', undefined],
    ['j.s', undefined],
    ['jsmith', undefined],
    ['jane', undefined],
    ['jane.smith2', undefined],
    ['jane.m.smith', undefined],
    ['jane..smith', undefined],
    ['.smith', undefined],
    ['jane+tag.smith', undefined],
    ['jürgen.müller', undefined],
    ['', undefined],
  ];
  for (const [local, shape] of cases) t.equal(shapeOf(local), shape, local);
  t.strictSame(shapesOf(['a.lima@x.test', 'k.ito', 'chen.wei@x.test', 'omar@x.test', 'r.okafor@x.test']), { 'initial.word': 3, 'word.word': 1 });
});

t.test('shape evidence: half a confirmation each, shared by how common each pattern is', async (t) => {
  t.strictSame(shapeEvidence({ 'initial.word': 3 }), { '{f}.{last}': 1.5 });
  t.strictSame(shapeEvidence({ 'word.word': 4, word_word: 2, 'word-word': 1, 'word.initial': 2 }), {
    '{first}.{last}': 1.5,
    '{last}.{first}': 0.5,
    '{first}_{last}': 0.75,
    '{last}_{first}': 0.25,
    '{first}-{last}': 0.5,
    '{first}.{l}': 1,
  });
  t.strictSame(shapeEvidence({ nonsense: 5, 'word.word': 0, 'initial.word': -1, word_word: Number.NaN }), {});
  t.strictSame(findEvidence({ '{f}{last}': 2 }, { 'initial.word': 2 }, ['k.ito@x.test', 'jsmith@x.test']), { '{f}{last}': 2, '{f}.{last}': 1.5 });
});

t.test('what shapes make of a catch-all answer: 3 unambiguous addresses charge (79), 1 does not (59); ambiguous ones need more', async (t) => {
  const score = (shapes: Record<string, number>, pattern: string) => patternConfidence(findEvidence({}, shapes), pattern);
  t.equal(score({ 'initial.word': 1 }, '{f}.{last}'), 59);
  t.equal(score({ 'initial.word': 3 }, '{f}.{last}'), 79);
  t.equal(score({ 'word.word': 3 }, '{first}.{last}'), 70);
  t.equal(score({ 'word.word': 3 }, '{last}.{first}'), 16);
  t.equal(score({ 'word.word': 5 }, '{first}.{last}'), 77);
  // Proven patterns weigh double: 3 proven {f}{last} against 3 initial.word shapes.
  t.equal(rankPatterns(findEvidence({ '{f}{last}': 3 }, { 'initial.word': 3 }))[0], '{f}{last}');
  t.equal(rankPatterns(findEvidence({ '{f}{last}': 1 }, { 'initial.word': 3 }))[0], '{f}.{last}');
  // A shape pulls its patterns ahead of the defaults: {first}.{l} (12th by default) comes first.
  const order = rankPatterns(findEvidence({}, { 'word.initial': 1 }));
  t.equal(PATTERNS.indexOf('{first}.{l}'), 11);
  t.strictSame(order.slice(0, 2), ['{first}.{l}', '{first}.{last}']);
});

t.test('ShapeLearner: counts fresh valid verdicts off catch-all domains, writes them summed, reports a failed write', async (t) => {
  const writes: Array<Array<{ domain: string; shape: string; n: number }>> = [];
  let fail = false;
  const lost: number[] = [];
  const learner = new ShapeLearner(
    {
      addShapes: async (rows) => {
        if (fail) throw new Error('store down (test)');
        writes.push(rows.map((r) => ({ ...r })));
      },
    },
    { flushMs: 20, maxPending: 3, warn: (_err, n) => lost.push(n) },
  );
  const valid = { result: 'valid' as const, is_catchall: false };
  learner.verdict('a.test', 'j.smith', valid);
  learner.verdict('a.test', 'k.ito', valid);
  learner.verdict('a.test', 'jane.doe', valid);
  learner.verdict('a.test', 'jsmith', valid); // no shape
  learner.verdict('a.test', 'x.y', valid); // no shape
  learner.verdict('a.test', 'r.roe', { result: 'invalid', is_catchall: false });
  learner.verdict('a.test', 'r.roe', { result: 'risky', is_catchall: true });
  learner.verdict('a.test', 'r.roe', { result: 'valid_role_based', is_catchall: false });
  learner.verdict('b.test', 'ann_lee', valid);
  learner.verdict('c.test', 'ann-lee', valid); // a fourth pair: past maxPending, not counted
  learner.verdict('b.test', 'bo_li', valid); // a pair already held still counts
  await new Promise((r) => setTimeout(r, 60)); // the timer writes
  t.strictSame(writes, [
    [
      { domain: 'a.test', shape: 'initial.word', n: 2 },
      { domain: 'a.test', shape: 'word.word', n: 1 },
      { domain: 'b.test', shape: 'word_word', n: 2 },
    ],
  ]);
  fail = true;
  learner.verdict('a.test', 'j.smith', valid);
  await learner.flush();
  t.strictSame(lost, [1], 'a failed write is reported with what it lost');
  fail = false;
  await learner.flush();
  t.equal(writes.length, 1, 'nothing pending: nothing written');
});
