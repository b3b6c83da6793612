// The MCP tools' output schemas (zod, @svc/mcp) describe exactly the REST response bodies (the
// API's JSON schemas): the same fields, the same required ones, the same enumerations, at every
// level. A field added to one and not the other fails here, not in an agent.

import t from 'tap';
import { outputJsonSchema, type ToolName } from '@svc/mcp';
import { sharedSchemas } from '../src/schemas.ts';

type Schema = { $ref?: string; type?: string | string[]; properties?: Record<string, Schema>; required?: readonly string[]; items?: Schema; enum?: readonly unknown[]; anyOf?: Schema[]; const?: unknown };

const byId = new Map<string, Schema>(sharedSchemas.map((s) => [s.$id, s as unknown as Schema]));
const resolve = (s: Schema): Schema => (s.$ref ? byId.get(s.$ref.replace(/#$/, ''))! : s);

/** The shape of a schema, for comparison: object fields (required or not), array items, enumerations. */
function shape(raw: Schema): unknown {
  const s = resolve(raw);
  // zod writes a union of literals as anyOf [{const}, …]; the REST schemas as an enum.
  if (s.anyOf?.every((x) => 'const' in x)) return { enum: s.anyOf.map((x) => x.const).sort() };
  if (s.anyOf) {
    // zod writes `nullable()` as anyOf [T, null]; the REST schemas as type [T, 'null'].
    const [inner] = s.anyOf.filter((x) => x.type !== 'null');
    return { nullable: true, of: shape(inner!) };
  }
  // A nullable enumeration lists null among its values in the REST schemas; zod keeps it apart.
  if (Array.isArray(s.type) && s.type.includes('null')) return { nullable: true, of: shape({ ...s, type: s.type.find((x) => x !== 'null')!, ...(s.enum ? { enum: s.enum.filter((x) => x !== null) } : {}) }) };
  if (s.properties) {
    const req = new Set(s.required ?? []);
    return Object.fromEntries(Object.keys(s.properties).sort().map((k) => [`${k}${req.has(k) ? '' : '?'}`, shape(s.properties![k]!)]));
  }
  if (s.items) return [shape(s.items)];
  if (s.enum) return { enum: [...s.enum].sort() };
  if ('const' in s) return { enum: [s.const] };
  return s.type === 'integer' ? 'number' : s.type;
}

const REST: Partial<Record<ToolName, string>> = {
  svc_get_credits: 'CreditBalance',
  svc_validate_email: 'ValidationResult',
  svc_validate_bulk: 'BulkValidationResponse',
  svc_create_validation_job: 'JobCreated',
  svc_get_job: 'JobStatus',
  svc_enrich_company: 'CompanyEnrichment',
  svc_find_email: 'FindResult',
};

for (const [tool, id] of Object.entries(REST) as Array<[ToolName, string]>) {
  t.test(`${tool} answers the ${id} body`, async (t) => {
    const rest = shape({ $ref: `${id}#` });
    const mcp = shape(outputJsonSchema(tool) as Schema);
    t.strictSame(mcp, rest);
    t.ok(JSON.stringify(rest).length > 90, 'a real object was compared');
  });
}

t.test('credits_charged: 0 or 1 in both', async (t) => {
  const vr = outputJsonSchema('svc_validate_email') as { properties: Record<string, { anyOf?: Array<{ const?: number }> }> };
  t.strictSame(vr.properties.credits_charged!.anyOf!.map((x) => x.const), [0, 1]);
});
