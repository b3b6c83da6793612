// Regenerates packages/client/src/openapi.ts from the live /openapi.json of a started service:
//   node --import tsx scripts/gen-client-types.ts            # starts the service in-process (simulated internet)
//   node --import tsx scripts/gen-client-types.ts URL        # or reads URL/openapi.json of a running one
// packages/client/test/openapi-types.test.ts checks the checked-in file against the live document.

import { readFileSync, writeFileSync } from 'node:fs';
import { startStack } from '../test/helpers/stack.ts';
import { CLIENT_TYPES_FILE, clientTypesFrom } from '../test/helpers/client-types.ts';

async function liveDocument(base: string | undefined): Promise<Record<string, unknown>> {
  if (base) return fetchDocument(base);
  const stack = await startStack();
  try {
    return await fetchDocument(stack.url);
  } finally {
    await stack.close();
  }
}

async function fetchDocument(base: string): Promise<Record<string, unknown>> {
  const res = await fetch(new URL('/openapi.json', base));
  if (res.status !== 200) throw new Error(`GET ${base}/openapi.json answered ${res.status}`);
  return (await res.json()) as Record<string, unknown>;
}

const text = await clientTypesFrom(await liveDocument(process.argv[2]));
let before = '';
try {
  before = readFileSync(CLIENT_TYPES_FILE, 'utf8');
} catch {
  /* first generation */
}
writeFileSync(CLIENT_TYPES_FILE, text);
console.log(`${CLIENT_TYPES_FILE}: ${before === text ? 'unchanged' : 'written'} (${text.length} characters)`);
