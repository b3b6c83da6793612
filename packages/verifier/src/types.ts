// Plain data shared by the verifier core, its adapters and the API. No classes cross a port:
// everything here survives structuredClone (worker threads, Kafka messages).

import type { Confidence, Layer, Quality, ReasonCode, ValidationResult, ValidationResultBody } from '@svc/contracts';

export type { Confidence, Layer, Quality, ReasonCode, ValidationResult };

/** Result of the syntax layer (RFC 5321/5322 addr-spec as mailbox providers accept it). */
export type ParsedAddress =
  | {
      ok: true;
      /** Local part in canonical form: as written for a dot-atom; a quoted string that can be a dot-atom without its quotes (`"jane.doe"` is `jane.doe`), else quoted with only `"` and `\` escaped. */
      local: string;
      /** Domain as written, lower-cased (Unicode form for an IDN). */
      domain: string;
      /** Domain in ASCII (punycode A-labels), lower-cased, no trailing dot: what DNS and RCPT use. */
      asciiDomain: string;
      /** The local part is a quoted-string ("john doe"). */
      quoted: boolean;
      /** The local part has non-ASCII characters: deliverable only through an MX that advertises SMTPUTF8 (RFC 6531). */
      utf8Local: boolean;
      /** The domain had non-ASCII labels (IDN). */
      idn: boolean;
    }
  | { ok: false; reason: string };

export interface MxHost {
  exchange: string;
  priority: number;
}

/** What the DNS layer found for a domain. Failures are data, never exceptions. */
export type MxAnswer =
  | { kind: 'mx'; hosts: MxHost[] } // sorted by priority; implicit MX (RFC 5321 5.1) has implicit: true
  | { kind: 'implicit'; hosts: MxHost[] }
  | { kind: 'null_mx' } // RFC 7505
  | { kind: 'nxdomain' }
  | { kind: 'no_records' }
  | { kind: 'servfail' }
  | { kind: 'timeout' }
  | { kind: 'error'; detail: string };

/** A parsed SMTP reply (RFC 5321 4.2, enhanced code per RFC 3463 when present). */
export interface SmtpReply {
  code: number;
  enhanced?: string;
  /** Text of all lines joined with '\n', without codes. */
  text: string;
  /** The raw reply lines, as received (without CRLF). */
  lines: string[];
}

/**
 * The verdict on one address: the validation result (docs/api.md) before pricing (billing adds
 * `credits_charged` and `charge_reason`), plus whether it is a High-Value Validation.
 */
export type Verdict = Omit<ValidationResultBody, 'credits_charged' | 'charge_reason'> & {
  /** Whether this verdict is a High-Value Validation (the only chargeable case). */
  chargeable: boolean;
};
