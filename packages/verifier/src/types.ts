// Plain data shared by the verifier core, its adapters and the API. No classes cross a port:
// everything here survives structuredClone (worker threads, Kafka messages).

export type ValidationResult = 'valid' | 'valid_role_based' | 'risky' | 'invalid' | 'unknown';
export type Quality = 'high' | 'low' | 'none' | 'unknown';
export type Layer = 'syntax' | 'dns' | 'smtp' | 'catchall';
export type Confidence = 'high' | 'medium' | 'low';

/** Stable machine reason for a verdict (extra field `reason_code`); `reason` is the human text. */
export type ReasonCode =
  | 'accepted'
  | 'role_account'
  | 'catch_all'
  | 'catchall_unverified'
  | 'disposable_domain'
  | 'invalid_syntax'
  | 'nxdomain'
  | 'no_mail_records'
  | 'null_mx'
  | 'dns_servfail'
  | 'dns_timeout'
  | 'dns_error'
  | 'mailbox_not_found'
  | 'mailbox_disabled'
  | 'smtputf8_unsupported'
  | 'mailbox_full'
  | 'smtp_policy_block'
  | 'smtp_tempfail'
  | 'smtp_timeout'
  | 'smtp_connection_failed'
  | 'smtp_protocol_error'
  | 'smtp_unclassified';

/** Result of the syntax layer (RFC 5321/5322 addr-spec as mailbox providers accept it). */
export type ParsedAddress =
  | {
      ok: true;
      /** Local part as written (a quoted local part keeps its quotes). */
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

/** The verdict on one address: what the API renders as a validation result (core 2.1). */
export interface Verdict {
  email: string;
  result: ValidationResult;
  reason: string;
  reason_code: ReasonCode;
  syntax_valid: boolean;
  dns_valid: boolean;
  smtp_valid: boolean;
  is_role_based: boolean;
  role_type?: string;
  is_free_provider: boolean;
  is_disposable: boolean;
  is_catchall: boolean;
  catchall_confidence?: Confidence;
  b2b_outbound_quality: Quality;
  b2b_quality: Quality;
  validation_layer: Layer;
  smtp_response?: string;
  did_you_mean?: string;
  flags: string[];
  /** Whether this verdict is a High-Value Validation (the only chargeable case). */
  chargeable: boolean;
}
