// The client's checked-in types (src/openapi.ts) are what openapi-typescript makes of the live
// /openapi.json today, byte for byte: a route whose schema changed without
// `node --import tsx scripts/gen-client-types.ts` fails here (CI catches the drift).

import { readFileSync } from 'node:fs';
import t from 'tap';
import { CLIENT_TYPES_FILE, clientTypesFrom } from '../../../test/helpers/client-types.ts';
import { startStack } from '../../../test/helpers/stack.ts';

const stack = await startStack();
t.teardown(() => stack.close());

/** The first line where two texts differ, for a readable failure instead of a 290 kB diff. */
function firstDifference(a: string, b: string): string | undefined {
  const la = a.split('\n');
  const lb = b.split('\n');
  for (let i = 0; i < Math.max(la.length, lb.length); i++) if (la[i] !== lb[i]) return `line ${i + 1}: checked in ${JSON.stringify(la[i])}, live ${JSON.stringify(lb[i])}`;
  return undefined;
}

t.test('src/openapi.ts is the live document generated again, byte for byte', async (t) => {
  const res = await fetch(`${stack.url}/openapi.json`);
  t.equal(res.status, 200, 'GET /openapi.json');
  const doc = (await res.json()) as Record<string, unknown>;
  const live = await clientTypesFrom(doc);
  const again = await clientTypesFrom(structuredClone(doc));
  t.equal(again, live, 'generation is deterministic');
  const checkedIn = readFileSync(CLIENT_TYPES_FILE, 'utf8');
  t.equal(firstDifference(checkedIn, live), undefined, 'no line differs (regenerate with: node --import tsx scripts/gen-client-types.ts)');
  t.equal(checkedIn.length, live.length, 'same length');
  t.ok(checkedIn === live, 'byte-identical');
});

t.test('the document a service on another port and origin gives makes the same types', async (t) => {
  const res = await fetch(`${stack.url}/openapi.json`);
  const doc = (await res.json()) as Record<string, unknown>;
  const moved = { ...doc, servers: [{ url: 'https://validation.example.test:8443' }] };
  t.equal(await clientTypesFrom(moved), await clientTypesFrom(doc), '`servers` does not reach the types');
  t.match(JSON.stringify(doc.servers), /localhost:0|127\.0\.0\.1/, 'the live document does name its own server');
});
