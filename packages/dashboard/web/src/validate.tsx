// One address, validated as the API does it (and charged the same): the answer in words, what it
// cost and why, and the API's own result object for developers.

import { useState } from 'preact/hooks';
import type { ChargeReason, ValidationResult, ValidationResultBody } from '@svc/contracts';
import { api } from './api.ts';
import { Alerts, useSubmission } from './ui.tsx';

/** The API's result object (`POST /v1/validate`), typed by the service's own contract. */
type Result = ValidationResultBody;

const VERDICTS: Record<ValidationResult, string> = {
  valid: 'Valid: a personal mailbox that accepts mail. Safe to email.',
  valid_role_based: 'Valid, but a role address (a shared inbox such as info@ or sales@).',
  risky: 'Risky: the domain accepts every address (catch-all) or the address is disposable; delivery is not proven.',
  invalid: 'Invalid: this address cannot receive mail. Do not send to it.',
  unknown: 'Unknown: the mail server did not give a definite answer (a time-out, a temporary refusal or a policy block). Try again later.',
};

const CHARGES: Partial<Record<ChargeReason, string>> = {
  high_value_validation: 'charged: a usable personal address is the only result that costs a credit',
  role_based_not_charged: 'not charged: role addresses are free',
  catchall_not_charged: 'not charged: a catch-all domain proves nothing about the mailbox',
  disposable_not_charged: 'not charged: disposable addresses are free',
  invalid_not_charged: 'not charged: invalid addresses are free',
  unknown_not_charged: 'not charged: no definite answer, no charge',
  duplicate_in_request: 'not charged: a repeat in the same request',
  duplicate_in_job: 'not charged: a repeat in the same job',
  suppressed_not_charged: "not charged: the address is on your account's suppression list (it bounced before)",
};

export function Validate() {
  const [email, setEmail] = useState('');
  const { busy, error, answer, submit } = useSubmission(() => api<Result>('POST', '/validate', { email }));
  return (
    <section>
      <h1>Validate an address</h1>
      <form onSubmit={submit} class="card">
        <label for="validate-email">Email address to validate</label>
        <input id="validate-email" type="text" inputMode="email" autocomplete="off" required value={email} onInput={(e) => setEmail(e.currentTarget.value)} />
        <button type="submit" disabled={busy}>
          {busy ? 'Validating…' : 'Validate'}
        </button>
      </form>
      <Alerts error={error} />
      {answer && (
        <div class="shown" role="status" aria-label="Validation result">
          <p>
            <strong>{answer.email}</strong>: <strong>{answer.result}</strong> ({answer.reason_code})
          </p>
          <p>{VERDICTS[answer.result] ?? answer.result}</p>
          <p>Why: {answer.reason}</p>
          {answer.did_you_mean && <p>Did you mean {answer.did_you_mean}?</p>}
          <p>
            Cost: {answer.credits_charged} credit{answer.credits_charged === 1 ? '' : 's'}, {CHARGES[answer.charge_reason] ?? answer.charge_reason}.
          </p>
          <details>
            <summary>The API's answer</summary>
            <pre>{JSON.stringify(answer, null, 2)}</pre>
          </details>
        </div>
      )}
    </section>
  );
}
