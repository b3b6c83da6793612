// Find & enrich: one contact's email address (the finder), a company from its domain, and the
// finder for a CSV of contacts (100 a request, as POST /v1/find/bulk takes them). The server runs
// the REST use cases and their charge; a refusal (no data product, no provider configured, too
// few credits) is shown with the API's own message. Names, companies and everything a website
// said are rendered as text.

import Papa from 'papaparse';
import { useState } from 'preact/hooks';
import { api, errorText } from './api.ts';
import { Table } from './table.tsx';
import { Alerts, useSubmission } from './ui.tsx';

interface FindRow {
  id: string;
  email: string | null;
  confidence: number;
  pattern: string | null;
  source_provider: string | null;
  not_found: boolean;
  credits_charged: number;
  error?: string;
  validation?: { result: string; reason_code: string; credits_charged: number };
}
interface FindAnswer {
  id: string;
  results: FindRow[];
  summary: { total: number; found: number; not_found: number; errors: number; credits_charged: number; total_latency_ms: number };
}
interface CompanyAnswer {
  domain: string;
  found: boolean;
  company_name: string | null;
  display_name: string | null;
  description: string | null;
  website: string | null;
  employee_count: number | null;
  employee_range: string | null;
  industry: string | null;
  founded_year: number | null;
  location: { city: string | null; region: string | null; country: string | null };
  linkedin_url: string | null;
  twitter_url: string | null;
  phone: string | null;
  technologies: string[];
  cache_hit: boolean;
  credits_charged: number;
  source_provider: string | null;
  error?: string;
}
interface Contact {
  id?: string;
  first_name?: string;
  last_name?: string;
  domain?: string;
  company?: string;
}

/** Contacts per request (POST /v1/find/bulk's limit). */
const PER_REQUEST = 100;

const orDash = (v: string | number | null | undefined) => (v === null || v === undefined || v === '' ? '—' : String(v));

function FindResults({ answer, contacts }: { answer: FindAnswer; contacts: Contact[] }) {
  return (
    <>
      <p role="status" aria-label="Find summary">
        {answer.summary.found} found, {answer.summary.not_found} not found, {answer.summary.errors} not looked up, of {answer.summary.total}. Credits charged: {answer.summary.credits_charged}.
      </p>
      <Table caption="Addresses found" headers={['Row', 'Name', 'Domain or company', 'Email', 'Confidence', 'Pattern', 'Credits', 'Note']}>
        {answer.results.map((r, i) => {
          const c = contacts[i] ?? {};
          return (
            <tr key={i}>
              <th scope="row">{i + 1}</th>
              <td>{[c.first_name, c.last_name].filter(Boolean).join(' ') || '—'}</td>
              <td>{orDash(c.domain || c.company)}</td>
              <td>{r.email ? <strong>{r.email}</strong> : '—'}</td>
              <td>{r.email ? r.confidence : '—'}</td>
              <td>{orDash(r.pattern)}</td>
              <td>{r.credits_charged}</td>
              <td>{r.error ?? (r.validation ? `validated: ${r.validation.result} (${r.validation.reason_code})` : r.not_found ? 'no address found' : '')}</td>
            </tr>
          );
        })}
      </Table>
    </>
  );
}

function OneContact() {
  const [first, setFirst] = useState('');
  const [last, setLast] = useState('');
  const [domain, setDomain] = useState('');
  const [company, setCompany] = useState('');
  const [validate, setValidate] = useState(false);
  const { busy, error, answer: found, submit } = useSubmission(async () => {
    const contact: Contact = { first_name: first.trim(), last_name: last.trim(), ...(domain.trim() ? { domain: domain.trim() } : { company: company.trim() }) };
    return { answer: await api<FindAnswer>('POST', '/data/find', { contacts: [contact], validate }), contacts: [contact] };
  });
  return (
    <form onSubmit={submit} class="card">
      <h2>Find one person's email address</h2>
      <label for="find-first">First name</label>
      <input id="find-first" required value={first} onInput={(e) => setFirst(e.currentTarget.value)} />
      <label for="find-last">Last name</label>
      <input id="find-last" required value={last} onInput={(e) => setLast(e.currentTarget.value)} />
      <label for="find-domain">Company domain</label>
      <input id="find-domain" placeholder="example.test" value={domain} onInput={(e) => setDomain(e.currentTarget.value)} />
      <label for="find-company">Or company name (when the domain is not known)</label>
      <input id="find-company" value={company} disabled={!!domain.trim()} onInput={(e) => setCompany(e.currentTarget.value)} />
      <label class="check">
        <input type="checkbox" checked={validate} onChange={(e) => setValidate(e.currentTarget.checked)} /> Also validate the address found (one more credit when it is a usable personal address)
      </label>
      <p class="muted">One credit when an address is found with confidence 70 or more; nothing otherwise.</p>
      <button type="submit" disabled={busy || (!domain.trim() && !company.trim())}>
        {busy ? 'Finding…' : 'Find the address'}
      </button>
      <Alerts error={error} />
      {found && <FindResults answer={found.answer} contacts={found.contacts} />}
    </form>
  );
}

function CompanyCard({ c }: { c: CompanyAnswer }) {
  if (!c.found)
    return (
      <p role="status" aria-label="Company result">
        No company found for <strong>{c.domain}</strong>
        {c.error ? `: ${c.error}` : ''}. Credits charged: {c.credits_charged}.
      </p>
    );
  const place = [c.location.city, c.location.region, c.location.country].filter(Boolean).join(', ');
  const facts: Array<[string, string]> = [
    ['Name', orDash(c.display_name ?? c.company_name)],
    ['Domain', c.domain],
    ['Description', orDash(c.description)],
    ['Website', orDash(c.website)],
    ['Industry', orDash(c.industry)],
    ['Employees', c.employee_count !== null ? `${c.employee_count}${c.employee_range ? ` (${c.employee_range})` : ''}` : orDash(c.employee_range)],
    ['Founded', orDash(c.founded_year)],
    ['Location', orDash(place)],
    ['LinkedIn', orDash(c.linkedin_url)],
    ['Twitter', orDash(c.twitter_url)],
    ['Phone', orDash(c.phone)],
    ['Technologies', c.technologies.length ? c.technologies.join(', ') : '—'],
    ['Source', `${orDash(c.source_provider)}${c.cache_hit ? ' (from the cache)' : ''}`],
    ['Credits charged', String(c.credits_charged)],
  ];
  return (
    <dl class="facts" role="status" aria-label="Company result">
      {facts.map(([k, v]) => [<dt key={`${k}-t`}>{k}</dt>, <dd key={`${k}-d`}>{v}</dd>])}
    </dl>
  );
}

function OneCompany() {
  const [domain, setDomain] = useState('');
  const [name, setName] = useState('');
  const { busy, error, answer: company, submit } = useSubmission(() => api<CompanyAnswer>('POST', '/data/company', { domain: domain.trim(), ...(name.trim() && { company_name: name.trim() }) }));
  return (
    <form onSubmit={submit} class="card">
      <h2>Enrich a company</h2>
      <label for="company-domain">Company domain</label>
      <input id="company-domain" required placeholder="example.test" value={domain} onInput={(e) => setDomain(e.currentTarget.value)} />
      <label for="company-name">Company name (optional, to check the site is theirs)</label>
      <input id="company-name" value={name} onInput={(e) => setName(e.currentTarget.value)} />
      <p class="muted">One credit when the company is found (from the cache too); nothing otherwise.</p>
      <button type="submit" disabled={busy}>
        {busy ? 'Looking…' : 'Enrich the company'}
      </button>
      <Alerts error={error} />
      {company && <CompanyCard c={company} />}
    </form>
  );
}

/** The column of the file most likely to hold `what`. */
function guess(columns: string[], what: RegExp): string {
  return columns.find((c) => what.test(c.trim())) ?? '';
}

function ManyContacts() {
  const [file, setFile] = useState<{ name: string; columns: string[]; rows: Array<Record<string, string>> } | null>(null);
  const [cols, setCols] = useState({ first: '', last: '', domain: '', company: '' });
  const [validate, setValidate] = useState(false);
  const [busy, setBusy] = useState('');
  const [error, setError] = useState('');
  const [found, setFound] = useState<{ answer: FindAnswer; contacts: Contact[] } | null>(null);
  const take = async (f: File) => {
    setError('');
    setFound(null);
    const p = Papa.parse<Record<string, string>>(await f.text(), { header: true, skipEmptyLines: 'greedy' });
    const columns = p.meta.fields ?? [];
    if (columns.length === 0) return setError('The file has no header row naming its columns.');
    setFile({ name: f.name, columns, rows: p.data });
    setCols({ first: guess(columns, /^first[ _-]?name$|^first$|^given/i), last: guess(columns, /^last[ _-]?name$|^last$|^surname|^family/i), domain: guess(columns, /domain|website/i), company: guess(columns, /^company|organi[sz]ation/i) });
  };
  const contacts: Contact[] = file
    ? file.rows.map((r) => {
        const v = (c: string) => (c ? (r[c] ?? '').trim() : '');
        const domain = v(cols.domain);
        return { first_name: v(cols.first), last_name: v(cols.last), ...(domain ? { domain } : v(cols.company) ? { company: v(cols.company) } : {}) };
      })
    : [];
  const run = async () => {
    setError('');
    setFound(null);
    const all: FindAnswer = { id: '', results: [], summary: { total: 0, found: 0, not_found: 0, errors: 0, credits_charged: 0, total_latency_ms: 0 } };
    try {
      for (let at = 0; at < contacts.length; at += PER_REQUEST) {
        setBusy(`Finding… ${at} of ${contacts.length}`);
        const part = await api<FindAnswer>('POST', '/data/find', { contacts: contacts.slice(at, at + PER_REQUEST), validate });
        all.results.push(...part.results);
        for (const k of ['total', 'found', 'not_found', 'errors', 'credits_charged', 'total_latency_ms'] as const) all.summary[k] += part.summary[k];
        all.id = part.id;
        setFound({ answer: { ...all, results: [...all.results] }, contacts });
      }
    } catch (e) {
      setError(`${errorText(e)}${all.results.length ? ` (stopped after ${all.results.length} contacts; those are shown)` : ''}`);
    } finally {
      setBusy('');
    }
  };
  const download = () => {
    if (!found) return;
    // A cell a spreadsheet would run as a formula (`=`, `+`, `-`, `@`, tab, CR first) is written as text.
    const csv = Papa.unparse({
      fields: ['first_name', 'last_name', 'domain', 'company', 'email', 'confidence', 'pattern', 'credits_charged', 'note'],
      data: found.answer.results.map((r, i) => {
        const c = contacts[i] ?? {};
        return [c.first_name ?? '', c.last_name ?? '', c.domain ?? '', c.company ?? '', r.email ?? '', String(r.email ? r.confidence : ''), r.pattern ?? '', String(r.credits_charged), r.error ?? ''];
      }),
    }, { escapeFormulae: true });
    const a = document.createElement('a');
    a.href = URL.createObjectURL(new Blob([csv], { type: 'text/csv' }));
    a.download = `found-${(file?.name ?? 'contacts.csv').replace(/\.csv$/i, '')}.csv`;
    a.click();
    setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
  };
  const select = (id: string, label: string, key: keyof typeof cols) => (
    <>
      <label for={id}>{label}</label>
      <select id={id} value={cols[key]} onChange={(e) => setCols({ ...cols, [key]: e.currentTarget.value })}>
        <option value="">(none)</option>
        {file!.columns.map((c) => (
          <option value={c} key={c}>
            {c}
          </option>
        ))}
      </select>
    </>
  );
  return (
    <div class="card wide stack">
      <h2>Find the addresses of a list of contacts</h2>
      <label for="contacts-file">Contacts CSV file (first name, last name, and a domain or a company)</label>
      <input id="contacts-file" type="file" accept=".csv,text/csv" onChange={(e) => e.currentTarget.files?.[0] && void take(e.currentTarget.files[0])} />
      {file && (
        <>
          <p>
            <strong>{file.name}</strong>: {file.rows.length} contact{file.rows.length === 1 ? '' : 's'}, sent {PER_REQUEST} at a time.
          </p>
          {select('contacts-first', 'Column of first names', 'first')}
          {select('contacts-last', 'Column of last names', 'last')}
          {select('contacts-domain', 'Column of domains', 'domain')}
          {select('contacts-company', 'Column of company names (used when a row has no domain)', 'company')}
          <label class="check">
            <input type="checkbox" checked={validate} onChange={(e) => setValidate(e.currentTarget.checked)} /> Also validate each address found
          </label>
          <p role="status" aria-label="Cost ceiling">
            At most {contacts.length * (validate ? 2 : 1)} credit{contacts.length * (validate ? 2 : 1) === 1 ? '' : 's'}: one per address found with confidence 70 or more{validate ? ', and one per usable personal address validated' : ''}; nothing for the rest.
          </p>
          <Table caption="The first contacts as they will be sent" headers={['Row', 'First name', 'Last name', 'Domain or company']}>
            {contacts.slice(0, 5).map((c, i) => (
              <tr key={i}>
                <th scope="row">{i + 1}</th>
                <td>{orDash(c.first_name)}</td>
                <td>{orDash(c.last_name)}</td>
                <td>{orDash(c.domain ?? c.company)}</td>
              </tr>
            ))}
          </Table>
          <button type="button" disabled={!!busy || contacts.length === 0} onClick={() => void run()}>
            {busy || 'Find the addresses'}
          </button>
        </>
      )}
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      {found && (
        <>
          <FindResults answer={found.answer} contacts={found.contacts} />
          <button type="button" onClick={download}>
            Download the results (CSV)
          </button>
        </>
      )}
    </div>
  );
}

export function Data() {
  return (
    <section>
      <h1>Find &amp; enrich</h1>
      <p>
        The data endpoints of the API (<code>POST /v1/find/bulk</code>, <code>POST /v1/company/enrich</code>), charged the same. They need the account's data product.
      </p>
      <div class="panels">
        <OneContact />
        <OneCompany />
      </div>
      <ManyContacts />
    </section>
  );
}
