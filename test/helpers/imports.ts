// Reading import specifiers out of TypeScript source, for the tests that guard the layering
// (test/structure.test.ts, packages/verifier/test/purity.test.ts).

/** Every module specifier in a source text: static imports/exports (type-only too), side-effect imports, import(), require(). */
export function specifiers(source: string): string[] {
  // Comments out first, so a commented-out import neither counts nor hides a real one.
  const code = source.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"`])\/\/.*$/gm, '$1');
  const out: string[] = [];
  const patterns = [
    /\b(?:import|export)\s+(?:type\s+)?[^'"`;]*?\bfrom\s*(['"])([^'"]+)\1/g, // import x from 'm'; export { y } from 'm'
    /\bimport\s*(['"])([^'"]+)\1/g, // import 'm'
    /\bimport\s*\(\s*(['"`])([^'"`]+)\1\s*\)/g, // import('m')
    /\brequire\s*\(\s*(['"`])([^'"`]+)\1\s*\)/g, // require('m')
  ];
  for (const re of patterns) for (const m of code.matchAll(re)) out.push(m[2]!);
  return out;
}

/** The package a specifier names: `node:dns/promises` → `dns`, `@scope/pkg/sub` → `@scope/pkg`. */
export function packageOf(spec: string): string {
  const s = spec.replace(/^node:/, '');
  const parts = s.split('/');
  return s.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!;
}
