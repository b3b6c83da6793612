// Small pieces the pages share: a time as the pages show it, a panel's error and note, and the
// state of a form that asks the server once per submission.

import { useState } from 'preact/hooks';
import { errorText } from './api.ts';

/** `2026-11-28T09:46:58.123Z` → `2026-11-28 09:46 UTC`; `none` when there is no time. */
export const when = (iso: string | null, none = '—'): string => (iso ? `${iso.slice(0, 16).replace('T', ' ')} UTC` : none);

/** A panel's last error (an alert) and what its last action did (a status line). */
export function Alerts({ error, note }: { error: string; note?: string }) {
  return (
    <>
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      {note && <p role="status">{note}</p>}
    </>
  );
}

/**
 * An action that changes a list, then reads the list again whether it worked or not (its error
 * shown through `setError`, cleared when the next action starts).
 */
export const reloadingAction =
  (setError: (message: string) => void, load: () => Promise<unknown>) =>
  async (f: () => Promise<unknown>): Promise<void> => {
    setError('');
    try {
      await f();
    } catch (e) {
      setError(errorText(e));
    }
    await load();
  };

/**
 * A form that asks the server once per submission: busy while it runs, then its answer or its
 * error (both cleared when it is submitted again).
 */
export function useSubmission<T>(ask: () => Promise<T>): { busy: boolean; error: string; answer: T | null; submit: (e: Event) => Promise<void> } {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  const [answer, setAnswer] = useState<T | null>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError('');
    setAnswer(null);
    try {
      setAnswer(await ask());
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, answer, submit };
}
