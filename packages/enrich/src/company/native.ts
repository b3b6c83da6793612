// The native company provider: what a company says about itself in public, with no data vendor.
// Its home page (schema.org Organization JSON-LD, OpenGraph and meta tags, the social profiles it
// links to, its telephone) and its DNS (the MX hosts name the mail provider; SPF includes and TXT
// verification records name the SaaS it uses). A company is found when its site names it;
// DNS alone says what it uses, not who it is, so it never makes a find on its own.
//
// Confidence (0-1) grows with the number of independent signals that agree: structured data on
// the page, OpenGraph, the page title, social profiles, the MX and TXT records, and the caller's
// `company_name` hint when it matches the name found. employee_range and company_type come only
// from the page's own structured data, never from a guess.

import { Resolver as DnsResolver } from 'node:dns/promises';
import type { Resolver } from '@svc/egress';
import type { CompanyType, EmployeeRange } from '@svc/contracts';
import type { ProviderAnswer } from '../chain.ts';
import { normalisePhone } from '../phone.ts';
import { dnsSignals } from './dns-signals.ts';
import { fetchHomePage, type FetchPageOptions } from './fetch-page.ts';
import { parseHomePage, type WebsiteSignals } from './website.ts';

/** The company fields every company provider answers with (null: not known). */
export interface Company {
  company_name: string | null;
  display_name: string | null;
  description: string | null;
  website: string | null;
  employee_count: number | null;
  employee_range: EmployeeRange | null;
  revenue_range: string | null;
  industry: string | null;
  sub_industry: string | null;
  founded_year: number | null;
  company_type: CompanyType | null;
  location: { city: string | null; region: string | null; country: string | null; country_code: string | null };
  linkedin_url: string | null;
  twitter_url: string | null;
  facebook_url: string | null;
  phone: string | null;
  technologies: string[];
  technology_count: number;
  funding: { total_raised: number | null; last_round: string | null; last_round_date: string | null };
  /** 0 to 1. */
  confidence: number;
  /** Which source answered (`website` for the native provider, the vendor's name otherwise). */
  source_provider: string;
}

export interface CompanyProvider {
  readonly name: string;
  company(q: { domain: string; company_name?: string }, signal: AbortSignal): Promise<ProviderAnswer<Company>>;
}

/** The DNS the native providers read, through the service's own resolvers. */
export interface WebDns {
  mx(domain: string): Promise<string[]>;
  txt(domain: string): Promise<string[]>;
  /** For the website fetch's guard: every address of a host. */
  resolve: Resolver;
}

/** WebDns on Node's resolver with the given servers ('host:port'; none: the system's). */
export function webDns(servers: readonly string[], timeoutMs: number): WebDns {
  const r = new DnsResolver({ timeout: timeoutMs, tries: 2 });
  if (servers.length > 0) r.setServers([...servers]);
  const none = (err: unknown): string[] => {
    const code = (err as { code?: string }).code;
    if (code === 'ENOTFOUND' || code === 'ENODATA') return [];
    throw err;
  };
  return {
    mx: (d) => r.resolveMx(d).then((rs) => rs.sort((a, b) => a.priority - b.priority).map((x) => x.exchange), none),
    txt: (d) => r.resolveTxt(d).then((rs) => rs.map((chunks) => chunks.join('')), none),
    resolve: async (host) => {
      const [v4, v6] = await Promise.allSettled([r.resolve4(host), r.resolve6(host)]);
      const out = [...(v4.status === 'fulfilled' ? v4.value.map((address) => ({ address, family: 4 })) : []), ...(v6.status === 'fulfilled' ? v6.value.map((address) => ({ address, family: 6 })) : [])];
      if (out.length === 0) throw v4.status === 'rejected' ? v4.reason : Object.assign(new Error(`${host} has no address`), { code: 'ENODATA' });
      return out;
    },
  };
}

export interface NativeCompanyOptions {
  dns: WebDns;
  fetch: Omit<FetchPageOptions, 'resolve' | 'signal'>;
}

const SIGNAL_WEIGHTS: Record<string, number> = { jsonld: 0.35, opengraph: 0.15, meta: 0.05, title: 0.1, links: 0.1, mx: 0.1, spf: 0.05, txt: 0.05, hint: 0.1 };

/** Whether the caller's name hint and the name found agree (case, punctuation and legal suffixes aside). */
export function namesAgree(a: string, b: string): boolean {
  const norm = (s: string) =>
    s
      .toLowerCase()
      .normalize('NFKD')
      .replace(/\p{M}/gu, '')
      .replace(/\b(inc|llc|ltd|limited|gmbh|ag|sa|sas|bv|plc|corp|corporation|co|company)\b\.?/g, '')
      .replace(/[^\p{L}\p{N}]+/gu, '');
  const x = norm(a);
  const y = norm(b);
  return x.length > 0 && y.length > 0 && (x === y || x.includes(y) || y.includes(x));
}

export class NativeCompanyProvider implements CompanyProvider {
  readonly name = 'native';
  constructor(private readonly o: NativeCompanyOptions) {}

  async company(q: { domain: string; company_name?: string }, signal: AbortSignal): Promise<ProviderAnswer<Company>> {
    const { dns } = this.o;
    const [page, mx, txt] = await Promise.all([
      fetchHomePage(q.domain, { ...this.o.fetch, resolve: dns.resolve, signal }),
      dns.mx(q.domain).catch(() => []),
      dns.txt(q.domain).catch(() => []),
    ]);
    const site: WebsiteSignals | undefined = page.ok ? parseHomePage(page.html, page.url, page.headers) : undefined;
    const fromDns = dnsSignals({ mx, txt });
    const name = site?.name ?? site?.display_name;
    if (!site || !name) return { found: false, error: page.ok ? 'the website does not name the company' : `no website: ${page.detail}` };

    const evidence = new Set([...site.evidence, ...fromDns.evidence]);
    if (q.company_name && namesAgree(q.company_name, name)) evidence.add('hint');
    let confidence = 0;
    for (const e of evidence) confidence += SIGNAL_WEIGHTS[e] ?? 0;
    confidence = Math.round(Math.min(0.99, confidence) * 100) / 100;

    // What the DNS says (mail, SaaS verifications), then what the page and its headers show.
    const technologies = [...new Set([...fromDns.technologies, ...(site.technologies ?? [])])];
    const country = site.location?.country_code;
    const phone = site.phone_raw ? normalisePhone(site.phone_raw, country) : undefined;
    return {
      found: true,
      value: {
        company_name: site.legal_name ?? name,
        display_name: site.display_name ?? name,
        description: site.description ?? null,
        website: site.website ?? `https://${q.domain}`,
        employee_count: site.employee_count ?? null,
        employee_range: (site.employee_range as EmployeeRange | undefined) ?? null,
        revenue_range: null,
        industry: null,
        sub_industry: null,
        founded_year: site.founded_year ?? null,
        company_type: (site.company_type as CompanyType | undefined) ?? null,
        location: { city: site.location?.city ?? null, region: site.location?.region ?? null, country: site.location?.country ?? null, country_code: site.location?.country_code ?? null },
        linkedin_url: site.linkedin_url ?? null,
        twitter_url: site.twitter_url ?? null,
        facebook_url: site.facebook_url ?? null,
        phone: phone?.valid ? phone.e164 : null,
        technologies,
        technology_count: technologies.length,
        funding: { total_raised: null, last_round: null, last_round_date: null },
        confidence,
        source_provider: 'website',
      },
    };
  }
}
