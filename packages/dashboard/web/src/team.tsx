// The account's people: invite (a single-use link, shown once), list, change a role (an account
// keeps at least one owner: the server refuses the change that would leave none), remove.

import { useEffect, useState } from 'preact/hooks';
import { api, errorText } from './api.ts';
import { Table } from './table.tsx';

interface User {
  id: string;
  email: string;
  role: string;
  created_at: string;
}

export function Team({ self }: { self: string }) {
  const [users, setUsers] = useState<User[]>([]);
  const [role, setRole] = useState('member');
  const [link, setLink] = useState<{ url: string; expires_at: string } | null>(null);
  const [error, setError] = useState('');
  const load = () => api<{ users: User[] }>('GET', '/users').then((r) => setUsers(r.users), (e) => setError(errorText(e)));
  useEffect(() => void load(), []);
  const invite = async (e: Event) => {
    e.preventDefault();
    setError('');
    try {
      setLink(await api('POST', '/invitations', { role }));
    } catch (err) {
      setError(errorText(err));
    }
  };
  const changeRole = async (u: User, to: string) => {
    if (u.id === self && to === 'member' && !confirm('Make yourself a member? You will no longer manage keys, the team or billing.')) return void load(); // the select shows the role again
    setError('');
    try {
      await api('POST', `/users/${u.id}/role`, { role: to });
      // Demoted, this page is no longer yours: start again as a member.
      if (u.id === self && to === 'member') return location.assign('/dashboard/');
    } catch (err) {
      setError(errorText(err));
    }
    await load();
  };
  const remove = async (u: User) => {
    if (!confirm(`Remove ${u.email}? Their sessions end at once.`)) return;
    setError('');
    await api('DELETE', `/users/${u.id}`).catch((err) => setError(errorText(err)));
    await load();
  };
  return (
    <section>
      <h1>Team</h1>
      {error && <p role="alert" class="error">{error}</p>}
      <form onSubmit={invite} class="card">
        <h2>Invite someone</h2>
        <label for="invite-role">Role</label>
        <select id="invite-role" value={role} onChange={(e) => setRole(e.currentTarget.value)}>
          <option value="member">member</option>
          <option value="owner">owner</option>
        </select>
        <button type="submit">Create invitation link</button>
      </form>
      {link && (
        <div class="shown" role="status">
          <label for="invite-link">Invitation link (single use, until {link.expires_at.slice(0, 16).replace('T', ' ')} UTC)</label>
          <input id="invite-link" readOnly value={link.url} onFocus={(e) => e.currentTarget.select()} />
          <p>Send it to the person yourself; it is shown once.</p>
        </div>
      )}
      <Table caption="People who can sign in to this account" headers={['Email', 'Role', 'Since', 'Actions']}>
            {users.map((u) => (
              <tr key={u.id}>
                <td>{u.email}</td>
                <td>
                  <select aria-label={`Role of ${u.email}`} value={u.role} onChange={(e) => changeRole(u, e.currentTarget.value)}>
                    <option value="owner">owner</option>
                    <option value="member">member</option>
                  </select>
                </td>
                <td>{u.created_at.slice(0, 10)}</td>
                <td>
                  {u.id !== self && (
                    <button type="button" class="danger" aria-label={`Remove ${u.email}`} onClick={() => remove(u)}>
                      Remove
                    </button>
                  )}
                </td>
              </tr>
            ))}
      </Table>
    </section>
  );
}
