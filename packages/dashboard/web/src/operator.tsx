// The operator console (operators only): every account with its credits, subscription and data
// product; one account's ledger, a credit grant, the data product on or off, and the subscription
// changes an operator makes (subscribe to a plan, move the period, cancel or undo), under the same
// rules as the admin CLI (the server's).

import type { SubscriptionPlan as Plan } from '@svc/contracts';
import { useEffect, useState } from 'preact/hooks';
import { api, errorText } from './api.ts';
import { Table } from './table.tsx';
import { Alerts, when } from './ui.tsx';

interface AccountRow {
  id: string;
  name: string;
  balance: number;
  reserved: number;
  available: number;
  keys: number;
  created_at: string;
  data_product: boolean;
  subscription_status: string;
  subscription_id: string | null;
  current_period_end: string | null;
  cancel_at_period_end: boolean;
}


interface Detail {
  account: AccountRow;
  subscription: { id: string; processor: string; plan_id: string; status: string; cancel_at_period_end: boolean; current_period_end: string; ended_at: string | null } | null;
  ledger: Array<{ id: number; created_at: string; kind: string; amount: number; note: string; reservation_id: string | null }>;
  message?: string;
}


function AccountDetail({ id, plans, local, onChanged }: { id: string; plans: Plan[]; local: boolean; onChanged: () => void }) {
  const [d, setD] = useState<Detail | null>(null);
  const [error, setError] = useState('');
  const [note, setNote] = useState('');
  const [credits, setCredits] = useState('');
  const [why, setWhy] = useState('');
  const [plan, setPlan] = useState(plans[0]?.id ?? '');
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    setD(null);
    setError('');
    setNote('');
    api<Detail>('GET', `/operator/accounts/${id}`).then(setD, (e) => setError(errorText(e)));
  }, [id]);
  const act = async (f: () => Promise<Detail>, done: (r: Detail) => string) => {
    setError('');
    setNote('');
    setBusy(true);
    try {
      const r = await f();
      setD(r);
      setNote(done(r));
      onChanged();
    } catch (e) {
      setError(errorText(e));
    }
    setBusy(false);
  };
  const grant = (e: Event) => {
    e.preventDefault();
    const n = Number(credits);
    void act(
      () => api<Detail>('POST', `/operator/accounts/${id}/credits`, { credits: n, ...(why && { note: why }) }),
      (r) => {
        setCredits('');
        setWhy('');
        return `${n} credits granted; the balance is now ${r.account.balance}.`;
      },
    );
  };
  if (!d) return error ? <p role="alert" class="error">{error}</p> : <p class="loading">Loading…</p>;
  const a = d.account;
  const sub = d.subscription;
  const live = sub !== null && sub.status !== 'canceled';
  return (
    <section aria-labelledby="acct-h" class="card wide">
      <h2 id="acct-h">
        Account <code>{a.id}</code> {a.name && `(${a.name})`}
      </h2>
      <Alerts error={error} note={note} />
      <dl class="facts">
        <dt>Balance</dt>
        <dd>{a.balance}</dd>
        <dt>Reserved</dt>
        <dd>{a.reserved}</dd>
        <dt>Available</dt>
        <dd>{a.available}</dd>
        <dt>Data product</dt>
        <dd>{a.data_product ? 'on' : 'off'}</dd>
        <dt>Subscription</dt>
        <dd>{sub ? `${sub.id}: ${sub.plan_id}, ${sub.status}${sub.cancel_at_period_end ? ', cancels at the period end' : ''}, period ends ${when(sub.current_period_end)}` : 'none'}</dd>
      </dl>

      <form onSubmit={grant}>
        <h3>Grant credits</h3>
        <label for="grant-credits">Credits to grant</label>
        <input id="grant-credits" type="number" min={1} step={1} required value={credits} onInput={(e) => setCredits(e.currentTarget.value)} />
        <label for="grant-note">Note for the ledger (optional)</label>
        <input id="grant-note" maxLength={200} value={why} onInput={(e) => setWhy(e.currentTarget.value)} />
        <button type="submit" disabled={busy}>
          Grant credits
        </button>
      </form>

      <h3>Data product</h3>
      <p>Company and people data and the email finder. Off: those endpoints answer 403 product_not_enabled.</p>
      <button
        type="button"
        disabled={busy}
        onClick={() =>
          act(
            () => api<Detail>('POST', `/operator/accounts/${id}/data-product`, { enabled: !a.data_product }),
            (r) => `The data product is ${r.account.data_product ? 'on' : 'off'}.`,
          )
        }
      >
        {a.data_product ? 'Turn the data product off' : 'Turn the data product on'}
      </button>

      <h3>Subscription</h3>
      {!live && local && plans.length > 0 && (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            void act(() => api<Detail>('POST', `/operator/accounts/${id}/subscription`, { plan }), (r) => `Subscribed: ${r.subscription?.id}.`);
          }}
        >
          <label for="sub-plan">Plan</label>
          <select id="sub-plan" value={plan} onChange={(e) => setPlan(e.currentTarget.value)}>
            {plans.map((p) => (
              <option value={p.id} key={p.id}>
                {p.name || p.id}: {(p.price_cents / 100).toFixed(2)} {p.currency}, {p.credits_per_period} credits every {p.period_days} days
              </option>
            ))}
          </select>
          <button type="submit" disabled={busy}>
            Subscribe with the local processor
          </button>
        </form>
      )}
      {live && (
        <div class="actions">
          {local && sub.processor === 'local' && (
            <button
              type="button"
              disabled={busy}
              onClick={() => confirm('End the current period now? A subscription set to cancel ends (its credits expire); any other renews.') && act(() => api<Detail>('POST', `/operator/accounts/${id}/subscription/advance-period`), (r) => `Period moved: ${r.subscription?.status}.`)}
            >
              End the current period now
            </button>
          )}
          {sub.cancel_at_period_end ? (
            <button type="button" disabled={busy} onClick={() => act(() => api<Detail>('POST', `/operator/accounts/${id}/subscription/reactivate`), (r) => r.message ?? '')}>
              Undo the cancellation
            </button>
          ) : (
            <button type="button" class="danger" disabled={busy} onClick={() => confirm('Cancel this subscription at the end of its period?') && act(() => api<Detail>('POST', `/operator/accounts/${id}/subscription/cancel`), (r) => r.message ?? '')}>
              Cancel at the period end
            </button>
          )}
        </div>
      )}
      {!live && !local && <p>Subscriptions come from Stripe's events on this service.</p>}

      <Table caption="Newest ledger rows" headers={['Time', 'Kind', 'Amount', 'Note']}>
        {d.ledger.map((e) => (
          <tr key={e.id}>
            <td>{when(e.created_at)}</td>
            <td>{e.kind}</td>
            <td>{e.amount}</td>
            <td>{e.note || '—'}</td>
          </tr>
        ))}
      </Table>
    </section>
  );
}

export function Operator() {
  const [accounts, setAccounts] = useState<AccountRow[]>([]);
  const [plans, setPlans] = useState<Plan[]>([]);
  const [local, setLocal] = useState(false);
  const [error, setError] = useState('');
  const [open, setOpen] = useState<string | null>(null);
  const load = () =>
    api<{ accounts: AccountRow[]; plans: Plan[]; local_processor: boolean }>('GET', '/operator/accounts').then(
      (r) => {
        setAccounts(r.accounts);
        setPlans(r.plans);
        setLocal(r.local_processor);
      },
      (e) => setError(errorText(e)),
    );
  useEffect(() => void load(), []);
  return (
    <section>
      <h1>Operator console</h1>
      <p>Every account of this service. Changes here are the admin CLI's, under the same rules.</p>
      <Alerts error={error} />
      <Table caption="Accounts, oldest first" headers={['Account', 'Name', 'Available', 'Balance', 'Subscription', 'Data product', 'Actions']}>
        {accounts.map((a) => (
          <tr key={a.id}>
            <td>
              <code>{a.id}</code>
            </td>
            <td>{a.name || '—'}</td>
            <td>{a.available}</td>
            <td>{a.balance}</td>
            <td>
              {a.subscription_status}
              {a.cancel_at_period_end && ', cancels at the period end'}
            </td>
            <td>{a.data_product ? 'on' : 'off'}</td>
            <td class="actions">
              <button type="button" aria-label={`${open === a.id ? 'Close' : 'Manage'} account ${a.id}`} aria-expanded={open === a.id} onClick={() => setOpen(open === a.id ? null : a.id)}>
                {open === a.id ? 'Close' : 'Manage'}
              </button>
            </td>
          </tr>
        ))}
      </Table>
      {open && <AccountDetail id={open} plans={plans} local={local} onChanged={() => void load()} />}
    </section>
  );
}
