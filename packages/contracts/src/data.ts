// The data endpoints' shared vocabulary (docs/api.md, "Data endpoints"): the provider families and
// what each answers when none is configured, the value lists the responses use, and the prices.

import type { Scope } from './scopes.ts';

/**
 * The provider families. Each has one configuration variable listing its providers in order
 * (SVC_COMPANY_PROVIDERS, ...); a family with none answers 503 feature_not_configured with its
 * message here.
 */
export const DATA_FAMILIES = ['company', 'linkedin', 'people', 'profile', 'mobile', 'finder'] as const;
export type DataFamily = (typeof DATA_FAMILIES)[number];

export const NOT_CONFIGURED: Record<DataFamily, string> = {
  company: 'company enrichment not configured',
  linkedin: 'LinkedIn company data not configured',
  people: 'employee search not configured',
  profile: 'profile enrichment not configured',
  mobile: 'mobile finder not configured',
  finder: 'email finder not configured',
};

/** Person lookup and role lookup are people-family endpoints with their own 503 messages. */
export const NOT_CONFIGURED_PERSON_LOOKUP = 'person lookup not configured';
export const NOT_CONFIGURED_ROLE_LOOKUP = 'role lookup not configured';

export const SENIORITIES = ['C-Level', 'VP', 'Director', 'Manager', 'Senior', 'Individual'] as const;
/** Profiles may also say Intern. */
export const PROFILE_SENIORITIES = [...SENIORITIES, 'Intern'] as const;
export const DEPARTMENTS = ['Sales', 'Engineering', 'Marketing', 'Finance', 'HR', 'Operations', 'Product', 'Legal', 'Executive'] as const;
export const EMPLOYEE_RANGES = ['1-10', '11-50', '51-200', '201-500', '501-1000', '1001-5000', '5001+'] as const;
export const COMPANY_TYPES = ['private', 'public', 'nonprofit', 'government'] as const;
export const LINE_TYPES = ['mobile', 'landline', 'voip'] as const;
export type Seniority = (typeof PROFILE_SENIORITIES)[number];
export type Department = (typeof DEPARTMENTS)[number];
export type EmployeeRange = (typeof EMPLOYEE_RANGES)[number];
export type CompanyType = (typeof COMPANY_TYPES)[number];
export type LineType = (typeof LINE_TYPES)[number];

/** The data endpoints, each with its family, scope and the limits of its input. */
export const DATA_ENDPOINTS = {
  'company/enrich': { family: 'company', scope: 'data:company:read' },
  'company/enrich/bulk': { family: 'company', scope: 'data:company:read' },
  'company/enrich-linkedin': { family: 'company', scope: 'data:company:read' },
  'company/domain-to-linkedin': { family: 'company', scope: 'data:company:read' },
  'linkedin/company': { family: 'linkedin', scope: 'data:company:read' },
  'linkedin/hires': { family: 'linkedin', scope: 'data:company:read' },
  'people/search': { family: 'people', scope: 'data:people:read' },
  'people/lookup': { family: 'people', scope: 'data:people:read' },
  'people/role': { family: 'people', scope: 'data:people:read' },
  'profile/enrich': { family: 'profile', scope: 'data:people:read' },
  'mobile/find': { family: 'mobile', scope: 'data:people:read' },
  'prospect/email-to-person': { family: 'profile', scope: 'data:people:read' },
  'find/bulk': { family: 'finder', scope: 'email:find' },
} as const satisfies Record<string, { family: DataFamily; scope: Scope }>;
export type DataEndpoint = keyof typeof DATA_ENDPOINTS;

/** The limits of part 8 of the data endpoints' contract. */
export const DATA_LIMITS = {
  companiesPerBulk: 25,
  contactsPerFind: 100,
  maxConcurrentMin: 1,
  maxConcurrentMax: 10,
  maxConcurrentDefault: 5,
  peopleSearchLimitMax: 50,
  peopleSearchLimitDefault: 10,
  hiresDaysBackMax: 180,
  hiresDaysBackDefault: 90,
  hiresLimitMax: 100,
  hiresLimitDefault: 20,
  /** Requests per minute per key. */
  companyBulkPerMinute: 100,
  findBulkPerMinute: 10_000,
} as const;

/** Finder: an address is charged (1 credit) only at this confidence or above. */
export const FINDER_CHARGE_CONFIDENCE = 70;
