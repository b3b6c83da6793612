// The sliced JSON parser of the batch route gives what JSON.parse gives, refuses what it
// refuses, and lets the event loop run while it parses a large array.

import t, { type Test } from 'tap';
import { errorCodes } from 'fastify';
import { COPY_TURN_BYTES, parseJsonInSlices, readBodyInTurns, SLICE_ELEMENTS } from '../src/json-slices.ts';
import { seededRandom } from '../../../test/helpers/random.ts';

const same = async (t: Test, text: string) => {
  let want: unknown;
  let wantErr = false;
  try {
    want = JSON.parse(text);
  } catch {
    wantErr = true;
  }
  let got: unknown;
  let gotErr: unknown;
  try {
    got = await parseJsonInSlices(Buffer.from(text, 'utf8'));
  } catch (err) {
    gotErr = err;
  }
  if (wantErr) t.ok(gotErr instanceof SyntaxError, `refused like JSON.parse: ${JSON.stringify(text).slice(0, 80)}`);
  else t.strictSame(got, want, `same as JSON.parse: ${JSON.stringify(text).slice(0, 80)}`);
};

t.test('the values JSON.parse gives, for the shapes a batch body takes', async (t) => {
  for (const text of [
    '{"emails":["a@x.test","b@y.test"]}',
    ' \n{ "emails" : [ "a@x.test" , "b@y.test" ] , "webhook_url" : "https://h.test/x?a=1" } \r\n',
    '{"webhook_url":null,"emails":[]}',
    '{"emails":["esc\\"aped@x.test","back\\\\slash@x.test","\\u00e9@x.test","tab\\t@x"]}',
    '{"emails":["josé@bücher.test","日本@例え.jp"]}',
    '{"emails":[1,null,true,false,-2.5e3,{"a":[1,{"b":"]"}]},["x"],"z@z.test"]}',
    '{"emails":["a@x.test"],"emails":["b@y.test"]}',
    '{"nested":{"emails":["q"]},"n":12,"s":"}]","emails":["a"]}',
    '{}',
    '[]',
    '"just a string"',
    '42',
    '{"emails":["a"]',
    '{"emails":["a",]}',
    '{"emails":["a" "b"]}',
    '{"emails":["unterminated]}',
    '{"emails":["ctl\u0001"]}',
    '{"emails":["a"]} x',
    '{"emails" ["a"]}',
    '{emails:["a"]}',
    '{"emails":[01]}',
    '',
    '{"a":1,}',
  ]) {
    await same(t, text);
  }
});

t.test('a byte order mark is skipped; prototype keys are refused', async (t) => {
  t.strictSame(await parseJsonInSlices(Buffer.from('\uFEFF{"emails":["a"]}', 'utf8')), { emails: ['a'] });
  await t.rejects(parseJsonInSlices(Buffer.from('{"__proto__":{"x":1},"emails":["a"]}')), SyntaxError);
  await t.rejects(parseJsonInSlices(Buffer.from('{"constructor":{"prototype":{}},"emails":["a"]}')), SyntaxError);
});

t.test('random bodies: equal to JSON.parse or refused with it (seeded)', async (t) => {
  const rand = seededRandom(20261123);
  const pieces = ['{', '}', '[', ']', ',', ':', '"', '\\', 'a', '@', ' ', '"emails"', '"x@y.test"', '1', 'null', '\\"', '\\u0041', 'é'];
  for (let n = 0; n < 400; n++) {
    let text = '';
    const len = 1 + Math.floor(rand() * 14);
    for (let k = 0; k < len; k++) text += pieces[Math.floor(rand() * pieces.length)];
    await same(t, text);
  }
  // Valid random bodies too.
  for (let n = 0; n < 100; n++) {
    const emails = Array.from({ length: Math.floor(rand() * 20) }, (_, i) => (rand() < 0.1 ? i : `u${i}"\\${String.fromCharCode(32 + Math.floor(rand() * 200))}@d.test`));
    await same(t, JSON.stringify({ emails, webhook_url: rand() < 0.5 ? null : 'https://h.test' }));
  }
});

t.test('a large array gives the event loop turns while it is parsed', async (t) => {
  const emails = Array.from({ length: SLICE_ELEMENTS * 5 + 7 }, (_, i) => `user${i}@domain${i % 97}.test`);
  let ticks = 0;
  const timer = setInterval(() => ticks++, 0);
  const got = (await parseJsonInSlices(Buffer.from(JSON.stringify({ emails })))) as { emails: string[] };
  clearInterval(timer);
  t.equal(got.emails.length, emails.length);
  t.strictSame(got.emails.slice(-3), emails.slice(-3));
  t.ok(ticks >= 3, `the loop ran between slices (${ticks} timer callbacks)`);
});

t.test('readBodyInTurns: the bytes as sent, the limit and the declared length as fastify checks them, turns while it copies', async (t) => {
  async function* stream(chunks: Array<Buffer | string>, fail?: Error) {
    for (const c of chunks) yield c;
    if (fail) throw fail;
  }
  const chunks = Array.from({ length: 40 }, (_, i) => Buffer.alloc(128 * 1024, i));
  const whole = Buffer.concat(chunks);
  let turns = 0;
  const counting = setInterval(() => turns++, 0);
  const got = await readBodyInTurns(stream(chunks), String(whole.length), whole.length, errorCodes);
  clearInterval(counting);
  t.ok(got.equals(whole), '40 chunks of 128 KiB: the same bytes');
  t.ok(turns >= 1, `the event loop ran while it copied (${turns} timer turns; a turn every ${COPY_TURN_BYTES} bytes)`);
  t.strictSame(await readBodyInTurns(stream(['{"a":', '1}']), '7', 100, errorCodes), Buffer.from('{"a":1}'), 'string chunks');
  t.strictSame(await readBodyInTurns(stream([Buffer.from('[]')]), undefined, 100, errorCodes), Buffer.from('[]'), 'no declared length');
  await t.rejects(readBodyInTurns(stream([Buffer.from('[]')]), '101', 100, errorCodes), { code: 'FST_ERR_CTP_BODY_TOO_LARGE' }, 'declared over the limit');
  await t.rejects(readBodyInTurns(stream([Buffer.alloc(60), Buffer.alloc(60)]), undefined, 100, errorCodes), { code: 'FST_ERR_CTP_BODY_TOO_LARGE' }, 'more arrives than the limit');
  await t.rejects(readBodyInTurns(stream([Buffer.from('[]')]), '3', 100, errorCodes), { code: 'FST_ERR_CTP_INVALID_CONTENT_LENGTH' }, 'declared length does not match');
  await t.rejects(readBodyInTurns(stream([Buffer.from('[')], new Error('aborted')), undefined, 100, errorCodes), { message: 'aborted', statusCode: 400 }, 'a stream error is a 400');
});
