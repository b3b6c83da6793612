// The provider ports of the data families that only a data vendor can answer (people, profiles,
// mobiles, LinkedIn company data and hires), in the data endpoints' own terms (docs/api.md, "Data
// endpoints"): a vendor adapter maps its answers onto these shapes (seniority, departments and
// employee ranges normalised to the contract's value lists; null where the vendor says nothing).
// The company family's port (CompanyProvider) and the finder's (FinderProvider) live beside their
// native providers.

import type { Department, EmployeeRange, LineType, Seniority } from '@svc/contracts';
import type { ProviderAnswer } from './chain.ts';
import type { HiresQuery, LinkedInCompanyQuery, MobileQuery, PeopleSearchQuery, PersonLookupQuery, ProfileQuery, RoleLookupQuery } from './requests.ts';

export interface Experience {
  company: string | null;
  title: string | null;
  department: Department | null;
  location: string | null;
  /** YYYY-MM or YYYY-MM-DD as the vendor knows it. */
  start_date: string | null;
  end_date: string | null;
  is_current: boolean;
  description: string | null;
}

export interface Education {
  school: string | null;
  degree: string | null;
  field: string | null;
  start_year: number | null;
  end_year: number | null;
}

/** A person, as profile/enrich and the people endpoints answer it. */
export interface PersonProfile {
  first_name: string | null;
  last_name: string | null;
  full_name: string | null;
  email: string | null;
  personal_email: string | null;
  /** E.164. */
  mobile: string | null;
  linkedin_url: string | null;
  twitter_url: string | null;
  profile_picture: string | null;
  title: string | null;
  headline: string | null;
  department: Department | null;
  seniority: Seniority | null;
  company: string | null;
  company_domain: string | null;
  company_size: EmployeeRange | null;
  industry: string | null;
  location: string | null;
  city: string | null;
  region: string | null;
  country: string | null;
  /** ISO 3166-1 alpha-2. */
  country_code: string | null;
  skills: string[];
  experience: Experience[];
  education: Education[];
  connections: number | null;
  followers: number | null;
  recent_job_change: boolean;
  job_change_date: string | null;
  previous_company: string | null;
  previous_title: string | null;
}

export interface PeopleProvider {
  readonly name: string;
  /** People at a company: one page (`limit`, `offset`) and the total the vendor counts. */
  search(q: PeopleSearchQuery, signal: AbortSignal): Promise<ProviderAnswer<{ people: PersonProfile[]; total: number }>>;
  /** A person by name at a company. `confidence` 0-100; `similarity_scores` each 0-1. */
  lookup(
    q: PersonLookupQuery,
    signal: AbortSignal,
  ): Promise<ProviderAnswer<{ linkedin_url: string; profile: PersonProfile; confidence: number; similarity_scores: { name: number; company: number; title: number; location: number } }>>;
  /** Who holds a role (e.g. "CFO") at a company. */
  role(q: RoleLookupQuery, signal: AbortSignal): Promise<ProviderAnswer<{ linkedin_url: string; profile: PersonProfile; confidence: number }>>;
}

export interface ProfileProvider {
  readonly name: string;
  /** A person by email or LinkedIn URL. `confidence` 0-100. */
  profile(q: ProfileQuery, signal: AbortSignal): Promise<ProviderAnswer<{ profile: PersonProfile; confidence: number }>>;
}

export interface MobileProvider {
  readonly name: string;
  /** A mobile number as the vendor gives it (any format: normalised to E.164 by the service), with its carrier when known. */
  mobile(q: MobileQuery, signal: AbortSignal): Promise<ProviderAnswer<{ number: string; carrier: string | null; confidence: number }>>;
}

export interface LinkedInCompany {
  name: string | null;
  linkedin_url: string | null;
  website: string | null;
  industry: string | null;
  company_type: string | null;
  founded_year: number | null;
  description: string | null;
  tagline: string | null;
  specialties: string[];
  employee_count: number | null;
  employee_count_range: EmployeeRange | null;
  follower_count: number | null;
  /** Percent (8 = 8%). */
  employee_growth_6m: number | null;
  employee_growth_1y: number | null;
  employee_growth_2y: number | null;
  headquarters: string | null;
  locations: Array<{ city: string | null; region: string | null; country: string | null; is_hq: boolean; address: string | null }>;
  funding: { total_funding: number | null; last_round: string | null; last_round_date: string | null; last_round_amount: number | null; investors: string[] };
}

export interface Hire {
  first_name: string | null;
  last_name: string | null;
  full_name: string | null;
  title: string | null;
  seniority: Seniority | null;
  department: Department | null;
  linkedin_url: string | null;
  location: string | null;
  /** YYYY-MM-DD or YYYY-MM. */
  start_date: string | null;
}

export interface LinkedInProvider {
  readonly name: string;
  company(q: LinkedInCompanyQuery, signal: AbortSignal): Promise<ProviderAnswer<LinkedInCompany>>;
  /** People who started at the company within `days_back` days, newest first, at most `limit`; `total` counts them all. */
  hires(q: HiresQuery, signal: AbortSignal): Promise<ProviderAnswer<{ domain: string | null; company_name: string | null; hires: Hire[]; total: number }>>;
}

/** What a mobile number is, from libphonenumber's data (phone.ts). */
export interface NumberInfo {
  e164: string;
  country_code: string | null;
  line_type: LineType | null;
  valid: boolean;
}
