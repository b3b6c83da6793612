// The scope table of spec core 5.
export const SCOPES = ['credits:read', 'email:validate:single', 'email:validate:bulk', 'email:outcomes:write', 'email:outcomes:read'] as const;
export type Scope = (typeof SCOPES)[number];
export const isScope = (s: string): s is Scope => (SCOPES as readonly string[]).includes(s);
