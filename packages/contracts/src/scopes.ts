// API keys (docs/api.md): `svc_test_` or `svc_live_` (the kind states intended use only) and
// 16-128 letters and digits; generated keys have 40.
export const API_KEY_FORMAT = /^svc_(test|live)_[A-Za-z0-9]{16,128}$/;

// The scope table (docs/api.md "Conventions").
export const SCOPES = ['credits:read', 'email:validate:single', 'email:validate:bulk', 'email:outcomes:write', 'email:outcomes:read'] as const;
export type Scope = (typeof SCOPES)[number];
export const isScope = (s: string): s is Scope => (SCOPES as readonly string[]).includes(s);
