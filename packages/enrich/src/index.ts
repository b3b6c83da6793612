// @svc/enrich: the data endpoints. Provider chains (timeouts, retries, circuit breakers), the
// native providers (company from its website and DNS), the request checks, and the use cases
// that put cache, providers and money together.
export { CircuitBreaker, ProviderChain, ProviderError, DEFAULT_CHAIN_OPTIONS, type ChainOptions, type ChainResult, type ProviderAnswer } from './chain.ts';
export { NativeCompanyProvider, webDns, namesAgree, type Company, type CompanyProvider, type NativeCompanyOptions, type WebDns } from './company/native.ts';
export { fetchHomePage, type FetchPageOptions, type PageResult } from './company/fetch-page.ts';
export { parseHomePage, type WebsiteSignals } from './company/website.ts';
export { dnsSignals } from './company/dns-signals.ts';
export { normalisePhone } from './phone.ts';
export { canonicalLinkedInCompanyUrl, canonicalLinkedInProfileUrl } from './linkedin-url.ts';
export * from './requests.ts';
export { CACHE_TTL_MS, ENRICH_CACHE_MAX_TTL_MS, DataService, type CompanyBulkResponse, type CompanyByLinkedInResponse, type CompanyResponse, type DataFamilies, type DomainToLinkedInResponse, type FindBulkResponse, type FindRow, type HiresResponse, type LinkedInCompanyResponse, type MobileResponse, type PeopleSearchResponse, type PersonLookupResponse, type ProfileResponse, type RoleLookupResponse, type EmailToPersonResponse } from './service.ts';
export type * from './ports.ts';
export { PdlProvider } from './vendors/pdl.ts';
export { NativeFinder, PROVEN_CONFIDENCE, DELIVERED_CONFIDENCE, type FinderProvider, type FindQuery, type FoundEmail, type PatternEvidence, type Prober } from './finder/native.ts';
export { candidates, normaliseName, patternConfidence, patternOf, PATTERNS, rankPatterns, type Candidate } from './finder/patterns.ts';
export { findEvidence, shapeEvidence, shapeOf, shapesOf, ShapeLearner, SHAPES, SHAPE_WEIGHT, type ShapeLearnerOptions, type ShapeSink } from './finder/shapes.ts';
