import t from 'tap';
import { didYouMean, osaDistance, suggestDomain } from '../src/typo.ts';

t.test('suggestDomain', async (t) => {
  const cases: Array<[string, string | undefined]> = [
    // one-edit typos of common providers
    ['gmial.com', 'gmail.com'],
    ['gmai.com', 'gmail.com'],
    ['gamil.com', 'gmail.com'],
    ['gmaill.com', 'gmail.com'],
    ['gnail.com', 'gmail.com'],
    ['GMIAL.COM', 'gmail.com'],
    ['hotmial.com', 'hotmail.com'],
    ['hotmal.com', 'hotmail.com'],
    ['yaho.com', 'yahoo.com'],
    ['yahooo.com', 'yahoo.com'],
    ['outlok.com', 'outlook.com'],
    ['outllook.com', 'outlook.com'],
    ['iclod.com', 'icloud.com'],
    ['gmail.cmo', 'gmail.com'],
    ['yahoo.co.ukk', 'yahoo.co.uk'],
    // two edits allowed for long names
    ['googlmail.com', 'googlemail.com'],
    ['gogglemail.com', 'googlemail.com'],
    ['protonmial.cm', 'protonmail.com'],
    // TLD fixes
    ['gmail.con', 'gmail.com'],
    ['gmail.comm', 'gmail.com'],
    ['gmail.om', 'gmail.com'],
    ['gmail.cm', 'gmail.com'],
    ['gmail.co', 'gmail.com'],
    ['icloud.co', 'icloud.com'],
    ['aol.con', 'aol.com'],
    ['aol.co', 'aol.com'],
    ['comcast.nett', 'comcast.net'],
    ['gmial.con', 'gmail.com'],
    ['acme.con', 'acme.com'],
    ['example.nett', 'example.net'],
    ['example.ogr', 'example.org'],
    // .co/.cm/.om are real ccTLDs: only corrected towards a known provider
    ['acme.co', undefined],
    ['acme.cm', undefined],
    ['acme.om', undefined],
    // never for listed domains or unrelated ones
    ['gmail.com', undefined],
    ['googlemail.com', undefined],
    ['mail.com', undefined],
    ['email.com', undefined],
    ['ymail.com', undefined],
    ['gmx.net', undefined],
    ['yahoo.fr', undefined],
    ['hotmail.de', undefined],
    ['acme.com', undefined],
    ['aon.com', undefined],
    ['gmc.com', undefined],
    ['love.com', undefined],
    ['example.com', undefined],
    ['example.test', undefined],
    ['accept.test', undefined],
    ['mycompany.io', undefined],
    ['gmail.de', undefined],
    ['', undefined],
  ];
  for (const [d, expected] of cases) t.equal(suggestDomain(d), expected, d);
});

t.test('didYouMean', async (t) => {
  t.equal(didYouMean('john', 'gmial.com'), 'john@gmail.com');
  t.equal(didYouMean('"john doe"', 'hotmial.com'), '"john doe"@hotmail.com');
  t.equal(didYouMean('john', 'gmail.com'), undefined);
  t.equal(didYouMean('john', 'acme.com'), undefined);
});

t.test('osaDistance', async (t) => {
  t.equal(osaDistance('gmail', 'gmail'), 0);
  t.equal(osaDistance('gmial', 'gmail'), 1);
  t.equal(osaDistance('gmai', 'gmail'), 1);
  t.equal(osaDistance('ca', 'abc'), 3); // OSA, not unrestricted Damerau-Levenshtein
  t.equal(osaDistance('kitten', 'sitting'), 3);
  t.equal(osaDistance('', 'abc'), 3);
  t.equal(osaDistance('abcdef', 'uvwxyz', 1), 2, 'capped at max + 1');
});

t.test('deterministic', async (t) => {
  for (let i = 0; i < 3; i++) t.equal(suggestDomain('gmial.com'), 'gmail.com');
});
