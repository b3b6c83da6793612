// The finder's pattern module with exact answers: name folding (accents, letters decomposition
// misses, apostrophes, hyphens, particles, scripts with nothing to keep), the candidate list for a
// person and a domain (default order, learnt order, missing names, one-letter names, IDN and
// invalid domains, the limit, the 64-character local part), recognising the pattern of a known
// mailbox, ranking a domain's tallies and the catch-all confidence score. All people are made up.

import t from 'tap';
import {
  candidates,
  isPattern,
  normaliseName,
  PATTERNS,
  patternConfidence,
  patternOf,
  rankPatterns,
  type Candidate,
} from '../src/finder/patterns.ts';

const locals = (cs: Candidate[]): string[] => cs.map((c) => c.local);
const pairs = (cs: Candidate[]): Array<[string, string]> => cs.map((c) => [c.local, c.pattern]);

t.test('PATTERNS', async (t) => {
  t.same(PATTERNS.slice(0, 8), [
    '{first}.{last}',
    '{f}{last}',
    '{first}',
    '{first}{last}',
    '{first}_{last}',
    '{last}.{first}',
    '{f}.{last}',
    '{first}{l}',
  ]);
  t.ok(PATTERNS.length <= 16);
  t.equal(new Set(PATTERNS).size, PATTERNS.length, 'no repeats');
  t.ok(PATTERNS.every(isPattern), 'all in the vocabulary');
  t.ok(Object.isFrozen(PATTERNS));
  for (const bad of ['', '.', '{first}.', '.{last}', '{first}..{last}', '{middle}', 'jane', '{first}+{last}', '{First}']) {
    t.notOk(isPattern(bad), `not a pattern: ${JSON.stringify(bad)}`);
  }
  t.ok(isPattern('{last}.{f}'), 'outside PATTERNS but in the vocabulary');
});

t.test('normaliseName', async (t) => {
  const table: Array<[string, string[]]> = [
    ['Jane', ['jane']],
    ['  DOE ', ['doe']],
    ['José Ángel', ['joseangel', 'jose', 'angel']],
    ['Müller-Lüdenscheidt', ['mullerludenscheidt', 'muller-ludenscheidt', 'muellerluedenscheidt', 'muller', 'ludenscheidt']],
    ['Müller', ['muller', 'mueller']],
    ['Zoë', ['zoe']],
    ["O'Neil", ['oneil']],
    ['O’Neil', ['oneil']],
    ['Łukasz', ['lukasz']],
    ['Żółć', ['zolc']],
    ['Søren', ['soren', 'soeren']],
    ['Ærø', ['aero', 'aeroe']],
    ['Straße', ['strasse']],
    ['Œdipa', ['oedipa']],
    ['Þóra', ['thora']],
    ['Đura', ['dura']],
    ['Iıris', ['iiris']],
    ['Ñandu', ['nandu']],
    ['Ｊａｎｅ', ['jane']],
    ['Jean-Luc', ['jeanluc', 'jean-luc', 'jean', 'luc']],
    ['Jean – Luc', ['jeanluc', 'jean-luc', 'jean', 'luc']],
    ['van der Berg', ['vanderberg', 'berg']],
    ['de la Fuente', ['delafuente', 'fuente']],
    ['X', ['x']],
    ['Jane2', ['jane2']],
    ['', []],
    ['   ', []],
    ["-'-", []],
    ['山田太郎', []],
    ['李 Lee', ['lee']],
  ];
  for (const [raw, want] of table) t.same(normaliseName(raw), want, JSON.stringify(raw));
  for (const [raw] of table) {
    for (const form of normaliseName(raw)) t.match(form, /^[a-z0-9]+(?:-[a-z0-9]+)*$/, `${JSON.stringify(raw)} → ${form}`);
  }
});

t.test('candidates: Jane Doe, default order', async (t) => {
  const cs = candidates('Jane', 'Doe', 'acme.test');
  t.same(cs, [
    { email: 'jane.doe@acme.test', local: 'jane.doe', pattern: '{first}.{last}' },
    { email: 'jdoe@acme.test', local: 'jdoe', pattern: '{f}{last}' },
    { email: 'jane@acme.test', local: 'jane', pattern: '{first}' },
    { email: 'janedoe@acme.test', local: 'janedoe', pattern: '{first}{last}' },
    { email: 'jane_doe@acme.test', local: 'jane_doe', pattern: '{first}_{last}' },
    { email: 'doe.jane@acme.test', local: 'doe.jane', pattern: '{last}.{first}' },
    { email: 'j.doe@acme.test', local: 'j.doe', pattern: '{f}.{last}' },
    { email: 'janed@acme.test', local: 'janed', pattern: '{first}{l}' },
  ]);
  t.same(candidates('JANE', 'DOE', 'ACME.Test'), cs, 'case does not matter');
  t.same(candidates('Jane', 'Doe', 'acme.test.'), cs, 'a trailing dot is dropped');
});

t.test('candidates: accented and transliterated names', async (t) => {
  t.same(pairs(candidates('José Ángel', 'Müller-Lüdenscheidt', 'acme.test')), [
    ['joseangel.mullerludenscheidt', '{first}.{last}'],
    ['jmullerludenscheidt', '{f}{last}'],
    ['joseangel', '{first}'],
    ['joseangelmullerludenscheidt', '{first}{last}'],
    ['joseangel_mullerludenscheidt', '{first}_{last}'],
    ['mullerludenscheidt.joseangel', '{last}.{first}'],
    ['j.mullerludenscheidt', '{f}.{last}'],
    ['joseangelm', '{first}{l}'],
  ]);
  t.same(locals(candidates('Zoë', "O'Neil", 'acme.test')), [
    'zoe.oneil', 'zoneil', 'zoe', 'zoeoneil', 'zoe_oneil', 'oneil.zoe', 'z.oneil', 'zoeo',
  ]);
  t.same(locals(candidates('Łukasz', 'Żółć', 'acme.test')), [
    'lukasz.zolc', 'lzolc', 'lukasz', 'lukaszzolc', 'lukasz_zolc', 'zolc.lukasz', 'l.zolc', 'lukaszz',
  ]);
  t.same(locals(candidates('Søren', 'Ærø', 'acme.test')), [
    'soren.aero', 'saero', 'soren', 'sorenaero', 'soren_aero', 'aero.soren', 's.aero', 'sorena',
  ]);
  t.same(locals(candidates('Søren', 'Ærø', 'acme.test', { allForms: true, max: 20 })).slice(15), [
    'soren.aeroe', 'saeroe', 'sorenaeroe', 'soren_aeroe', 'aeroe.soren',
  ], 'the digraph forms come after every pattern of the best forms');
});

t.test('candidates: hyphens and particles', async (t) => {
  t.same(locals(candidates('Jean-Luc', 'Picard', 'acme.test')), [
    'jeanluc.picard', 'jpicard', 'jeanluc', 'jeanlucpicard', 'jeanluc_picard', 'picard.jeanluc', 'j.picard', 'jeanlucp',
  ], 'only the joined form by default');
  const all = locals(candidates('Jean-Luc', 'Picard', 'acme.test', { allForms: true, max: 100 }));
  t.same(all.slice(0, 16), [
    'jeanluc.picard', 'jpicard', 'jeanluc', 'jeanlucpicard', 'jeanluc_picard', 'picard.jeanluc', 'j.picard', 'jeanlucp',
    'picard', 'jeanluc-picard', 'picardj', 'jeanluc.p', 'picardjeanluc', 'jp', 'picard_jeanluc',
    'jean-luc.picard',
  ]);
  t.ok(all.includes('jean.picard') && all.includes('luc.picard'));
  t.equal(new Set(all).size, all.length, 'no repeats across forms');

  t.same(locals(candidates('Anke', 'van der Berg', 'acme.test')), [
    'anke.vanderberg', 'avanderberg', 'anke', 'ankevanderberg', 'anke_vanderberg', 'vanderberg.anke', 'a.vanderberg', 'ankev',
  ]);
  const withCore = locals(candidates('Anke', 'van der Berg', 'acme.test', { allForms: true, max: 100 }));
  t.same(withCore.slice(15, 20), ['anke.berg', 'aberg', 'ankeberg', 'anke_berg', 'berg.anke']);
});

t.test('candidates: short and missing names', async (t) => {
  t.same(pairs(candidates('Ana', 'X', 'acme.test')), [
    ['ana.x', '{first}.{last}'],
    ['ax', '{f}{last}'],
    ['ana', '{first}'],
    ['anax', '{first}{last}'],
    ['ana_x', '{first}_{last}'],
    ['x.ana', '{last}.{first}'],
    ['a.x', '{f}.{last}'],
    ['x', '{last}'],
  ], '{first}{l} repeats {first}{last} and is dropped');
  t.same(candidates('Jane', '', 'acme.test'), [{ email: 'jane@acme.test', local: 'jane', pattern: '{first}' }]);
  t.same(candidates('Jane', '山田', 'acme.test'), [{ email: 'jane@acme.test', local: 'jane', pattern: '{first}' }]);
  t.same(candidates('', 'Doe', 'acme.test'), [{ email: 'doe@acme.test', local: 'doe', pattern: '{last}' }]);
  t.same(candidates('', '', 'acme.test'), []);
  t.same(candidates('太郎', '山田', 'acme.test'), [], 'nothing to build a pattern from');
});

t.test('candidates: domains', async (t) => {
  const idn = candidates('Jane', 'Doe', 'bücher.test');
  t.equal(idn.length, 8);
  t.equal(idn[0]?.email, 'jane.doe@xn--bcher-kva.test');
  t.equal(candidates('Jane', 'Doe', 'BÜCHER.test')[1]?.email, 'jdoe@xn--bcher-kva.test');
  t.equal(candidates('Jane', 'Doe', 'xn--bcher-kva.test')[0]?.email, 'jane.doe@xn--bcher-kva.test');
  for (const bad of ['', ' ', 'localhost', '1.2.3.4', '0x7f.1', '@acme.test', 'jane@acme.test', 'a_b.test', '-acme.test', 'acme..test', 'xn--zz.test', `${'a'.repeat(64)}.test`]) {
    t.same(candidates('Jane', 'Doe', bad), [], `invalid domain ${JSON.stringify(bad)}`);
  }
});

t.test('candidates: learnt order', async (t) => {
  t.same(pairs(candidates('Jane', 'Doe', 'acme.test', { order: ['{f}{last}'] })), [
    ['jdoe', '{f}{last}'],
    ['jane.doe', '{first}.{last}'],
    ['jane', '{first}'],
    ['janedoe', '{first}{last}'],
    ['jane_doe', '{first}_{last}'],
    ['doe.jane', '{last}.{first}'],
    ['j.doe', '{f}.{last}'],
    ['janed', '{first}{l}'],
  ]);
  t.same(
    pairs(candidates('Jane', 'Doe', 'acme.test', { order: ['{middle}', '{last}.{f}', '{f}{last}', '{f}{last}'], max: 4 })),
    [['doe.j', '{last}.{f}'], ['jdoe', '{f}{last}'], ['jane.doe', '{first}.{last}'], ['jane', '{first}']],
    'unknown strings skipped, vocabulary patterns outside PATTERNS kept, repeats once',
  );
  t.same(
    locals(candidates('Jane', 'Doe', 'acme.test', { order: rankPatterns({ '{last}{f}': 3, '{f}.{last}': 1 }), max: 3 })),
    ['doej', 'j.doe', 'jane.doe'],
  );
});

t.test('candidates: limits', async (t) => {
  t.same(locals(candidates('Jane', 'Doe', 'acme.test', { max: 3 })), ['jane.doe', 'jdoe', 'jane']);
  t.same(candidates('Jane', 'Doe', 'acme.test', { max: 0 }), []);
  t.same(candidates('Jane', 'Doe', 'acme.test', { max: -1 }), []);
  t.same(candidates('Jane', 'Doe', 'acme.test', { max: Number.NaN }), []);
  t.same(locals(candidates('Jane', 'Doe', 'acme.test', { max: 2.9 })), ['jane.doe', 'jdoe']);
  t.same(locals(candidates('Jane', 'Doe', 'acme.test', { max: 100 })), [
    'jane.doe', 'jdoe', 'jane', 'janedoe', 'jane_doe', 'doe.jane', 'j.doe', 'janed',
    'doe', 'jane-doe', 'doej', 'jane.d', 'doejane', 'jd', 'doe_jane',
  ]);

  const long = 'Abcdefghij'.repeat(7); // 70 letters
  t.same(pairs(candidates(long, 'Doe', 'acme.test')), [
    ['adoe', '{f}{last}'],
    ['a.doe', '{f}.{last}'],
    ['doe', '{last}'],
    ['doea', '{last}{f}'],
    ['ad', '{f}{l}'],
  ], 'local parts over 64 characters are dropped');
  const edge = candidates('q'.repeat(64), 'Doe', 'acme.test');
  t.same(pairs(edge), [
    ['qdoe', '{f}{last}'],
    ['q'.repeat(64), '{first}'],
    ['q.doe', '{f}.{last}'],
    ['doe', '{last}'],
    ['doeq', '{last}{f}'],
    ['qd', '{f}{l}'],
  ], 'exactly 64 is allowed, 65 is not');
  for (const c of candidates(long, long, 'acme.test', { max: 100 })) t.ok(c.local.length <= 64, c.local);
});

t.test('patternOf', async (t) => {
  const table: Array<[string, string, string, string | undefined]> = [
    ['jane.doe', 'Jane', 'Doe', '{first}.{last}'],
    ['JDoe', 'Jane', 'Doe', '{f}{last}'],
    ['jane', 'Jane', 'Doe', '{first}'],
    ['doe', 'Jane', 'Doe', '{last}'],
    ['janed', 'Jane', 'Doe', '{first}{l}'],
    ['doej', 'Jane', 'Doe', '{last}{f}'],
    ['doe_jane', 'Jane', 'Doe', '{last}_{first}'],
    ['jane.doe@acme.test', 'Jane', 'Doe', '{first}.{last}'],
    ['jean-luc.picard', 'Jean-Luc', 'Picard', '{first}.{last}'],
    ['jean.picard', 'Jean-Luc', 'Picard', '{first}.{last}'],
    ['jeanlucp', 'Jean-Luc', 'Picard', '{first}{l}'],
    ['anke.berg', 'Anke', 'van der Berg', '{first}.{last}'],
    ['avanderberg', 'Anke', 'van der Berg', '{f}{last}'],
    ['mia.mueller', 'Mia', 'Müller', '{first}.{last}'],
    ['mmuller', 'Mia', 'Müller', '{f}{last}'],
    ['zoe.oneil', 'Zoë', "O'Neil", '{first}.{last}'],
    ['jane', 'Jane', '', '{first}'],
    // misses
    ['j.d', 'Jane', 'Doe', undefined],
    ['info', 'Jane', 'Doe', undefined],
    ['jane.doe2', 'Jane', 'Doe', undefined],
    ['jlpicard', 'Jean-Luc', 'Picard', undefined],
    ['', 'Jane', 'Doe', undefined],
    ['jane.doe', '太郎', '山田', undefined],
  ];
  for (const [local, first, last, want] of table) {
    t.equal(patternOf(local, first, last), want, `${local} for ${first} ${last}`);
  }
});

t.test('rankPatterns', async (t) => {
  t.same(rankPatterns({}), [...PATTERNS]);
  t.same(rankPatterns(new Map()), [...PATTERNS]);
  const counts = {
    '{first}{l}': 2,
    '{f}{last}': 2,
    '{last}.{f}': 2,
    '{last}.{first}': 5,
    '{first}': 0,
    '{first}.{last}': -1,
    '{last}': Number.NaN,
    junk: 9,
  };
  const want = [
    '{last}.{first}',
    '{f}{last}',
    '{first}{l}',
    '{last}.{f}',
    '{first}.{last}',
    '{first}',
    '{first}{last}',
    '{first}_{last}',
    '{f}.{last}',
    '{last}',
    '{first}-{last}',
    '{last}{f}',
    '{first}.{l}',
    '{last}{first}',
    '{f}{l}',
    '{last}_{first}',
  ];
  t.same(rankPatterns(counts), want, 'count, then default order, then outside PATTERNS; zero and junk ignored');
  t.same(rankPatterns(new Map(Object.entries(counts))), want, 'a Map ranks the same');
  t.same(rankPatterns({ '{f}{l}': 1, '{first}_{last}': 1 }).slice(0, 3), ['{first}_{last}', '{f}{l}', '{first}.{last}']);
});

t.test('patternConfidence', async (t) => {
  const FL = '{first}.{last}';
  const fL = '{f}{last}';
  const two = (n: number, o: number, p: string, q: string) => patternConfidence({ [p]: n, [q]: o }, p);

  // No evidence: the prior, below the 70 a charge needs.
  t.equal(patternConfidence({}, FL), 50);
  t.equal(patternConfidence({}, fL), 30);
  t.equal(patternConfidence(new Map(), '{last}_{first}'), 30);
  t.equal(patternConfidence({}, '{last}.{f}'), 10);
  t.equal(patternConfidence({ junk: 4 }, FL), 50, 'junk tallies are ignored');
  t.equal(patternConfidence({ [FL]: 5 }, 'junk'), 0);
  for (const p of PATTERNS) t.ok(patternConfidence({}, p) <= 60, p);

  // Exact points.
  t.equal(two(1, 0, FL, fL), 73, '1 confirmation, whole share');
  t.equal(two(1, 0, fL, FL), 73, 'the same for any pattern once confirmed');
  t.equal(two(2, 0, FL, fL), 83);
  t.equal(two(3, 0, FL, fL), 86, '3 confirmations, whole share');
  t.equal(two(4, 1, fL, FL), 88, '4 of 5 (80 %)');
  t.equal(two(3, 1, FL, fL), 81, '3 of 4 (75 %)');
  t.equal(two(1, 1, FL, fL), 46, 'an even split');
  t.equal(two(0, 1, FL, fL), 25, 'the prior weakened by another pattern');
  t.equal(two(0, 1, fL, FL), 15);
  t.equal(two(0, 3, FL, fL), 13);
  t.equal(two(10, 0, FL, fL), 92);
  t.equal(two(1000, 0, FL, fL), 95, 'the ceiling');
  t.equal(patternConfidence(new Map([[FL, 3], [fL, 0]]), FL), 86, 'a Map scores the same');

  // Monotonic in the count (others fixed) and in the share (count fixed, others varying).
  for (const p of [FL, fL]) {
    const q = p === FL ? fL : FL;
    for (const o of [0, 1, 2, 5, 20]) {
      const series = Array.from({ length: 41 }, (_, n) => two(n, o, p, q));
      t.ok(series.every((c, n) => c >= 0 && c <= 100 && (n === 0 || c >= (series[n - 1] ?? 0))), `${p}, ${o} others: rises with the count`);
    }
    for (const n of [0, 1, 3, 10]) {
      const series = Array.from({ length: 41 }, (_, o) => two(n, o, p, q));
      t.ok(series.every((c, o) => o === 0 || c <= (series[o - 1] ?? 100)), `${p}, count ${n}: falls as the share falls`);
    }
  }
});
