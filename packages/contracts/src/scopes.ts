// API keys (docs/api.md): `svc_test_` or `svc_live_` (the kind states intended use only) and
// 16-128 letters and digits; generated keys have 40.
export const API_KEY_FORMAT = /^svc_(test|live)_[A-Za-z0-9]{16,128}$/;

// The scope table (docs/api.md "Conventions").
// The last three are the data endpoints' (docs/api.md, "Data endpoints"): company and LinkedIn
// company data; people, profiles, mobiles and email-to-person; the email finder.
export const SCOPES = ['credits:read', 'email:validate:single', 'email:validate:bulk', 'email:outcomes:write', 'email:outcomes:read', 'data:company:read', 'data:people:read', 'email:find'] as const;
export type Scope = (typeof SCOPES)[number];
export const isScope = (s: string): s is Scope => (SCOPES as readonly string[]).includes(s);
