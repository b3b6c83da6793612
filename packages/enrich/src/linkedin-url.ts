// LinkedIn page URLs in one canonical form: company pages (/company/<slug>) and people's profiles
// (/in/<slug>), one parser for both. The same company or person found through a request field, a
// website's footer link, a schema.org sameAs or a vendor's record compares equal, and nothing that
// merely looks like LinkedIn (the other kind of page, linkedin.com.evil.test, a javascript: URL)
// is ever taken for one.
//
// Accepted: http or https, no credentials, no port, the host linkedin.com, www., m. or a
// two-letter country subdomain (uk.linkedin.com), then /company/<slug> (or /in/<slug>) with
// anything after it (/about, ?trk=..., #fragment). The scheme may be left out
// ("linkedin.com/company/acme"). The answer is https://www.linkedin.com/company/<slug> (or
// /in/<slug>): the slug percent-decoded, lower-cased and percent-encoded again, so every spelling
// of one slug gives one string.

/** Inputs longer than this are refused outright (the longest URL the API takes). */
const MAX_INPUT = 2048;
/**
 * The longest slug of each kind of page. LinkedIn's own company slugs are far shorter (this only
 * refuses absurd ones); a profile's custom URL is at most 100 characters.
 */
const KINDS = { company: { maxSlug: 200 }, in: { maxSlug: 100 } } as const;
type Kind = keyof typeof KINDS;

const HOST = /^(?:(?:www|m|[a-z]{2})\.)?linkedin\.com$/;
/** Letters and digits of any script, and the punctuation company slugs use. */
const SLUG = /^[\p{L}\p{N}\p{M}_.~&'-]+$/u;

/**
 * The canonical `https://www.linkedin.com/company/<slug>` of a LinkedIn company page URL, or
 * undefined when the input is not one.
 */
export function canonicalLinkedInCompanyUrl(input: string): string | undefined {
  return canonical(input, 'company');
}

/**
 * The canonical `https://www.linkedin.com/in/<slug>` of a LinkedIn profile URL, or undefined when
 * the input is not one.
 */
export function canonicalLinkedInProfileUrl(input: string): string | undefined {
  return canonical(input, 'in');
}

function canonical(input: string, kind: Kind): string | undefined {
  const url = parseLenient(input);
  if (!url || !HOST.test(url.hostname)) return undefined;
  const slug = pathSlug(url.pathname, kind);
  return slug === undefined ? undefined : `https://www.linkedin.com/${kind}/${encodeURIComponent(slug)}`;
}

/**
 * The slug of a LinkedIn company page URL (any form canonicalLinkedInCompanyUrl accepts),
 * decoded and lower-cased: `acme-robotics` for https://www.linkedin.com/company/acme-robotics.
 */
export function linkedInSlug(canonical: string): string | undefined {
  const url = canonicalLinkedInCompanyUrl(canonical);
  return url === undefined ? undefined : decodeURIComponent(url.slice('https://www.linkedin.com/company/'.length));
}

/** The input as an http(s) URL without credentials or port; a missing scheme means https. */
function parseLenient(input: string): URL | undefined {
  if (typeof input !== 'string' || input.length > MAX_INPUT) return undefined;
  const text = input.trim();
  if (text === '') return undefined;
  let withScheme: string;
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(text)) withScheme = text;
  else if (text.startsWith('//')) withScheme = `https:${text}`;
  else if (/^[a-z][a-z0-9+.-]*:(?!\d)/i.test(text)) return undefined; // mailto:, javascript:, data:...
  else withScheme = `https://${text}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return undefined;
  if (url.username !== '' || url.password !== '' || url.port !== '') return undefined;
  return url;
}

/** The decoded, lower-cased slug of a `/<kind>/<slug>[/...]` path, or undefined. */
function pathSlug(pathname: string, kind: Kind): string | undefined {
  const segments = pathname.split('/');
  // segments[0] is the empty string before the leading slash.
  if (segments[1]?.toLowerCase() !== kind) return undefined;
  const encoded = segments[2];
  if (!encoded) return undefined;
  let slug: string;
  try {
    slug = decodeURIComponent(encoded).toLowerCase();
  } catch {
    return undefined;
  }
  if (slug.length > KINDS[kind].maxSlug || slug === '.' || slug === '..' || !SLUG.test(slug)) return undefined;
  return slug;
}
