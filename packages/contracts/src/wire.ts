// Shapes of HTTP bodies (a job's stored and rendered results use the same validation result; the
// bus messages are in messages.ts, the MCP tools' outputs mirror these in @svc/mcp). Plain data.

import type { ChargeReason, Confidence, Layer, Quality, ReasonCode, ValidationResult } from './verdicts.ts';

/** One validation result (docs/api.md; the extra fields: docs/decisions/verification.md). */
export interface ValidationResultBody {
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
  credits_charged: 0 | 1;
  charge_reason: ChargeReason;
  validation_layer: Layer;
  smtp_response?: string;
  did_you_mean?: string;
  flags: string[];
}

/** The counts of a bulk response (docs/api.md). */
export interface BulkSummary {
  total: number;
  valid: number;
  valid_role_based: number;
  risky: number;
  invalid: number;
  unknown: number;
  credits_charged: number;
}

/** GET /v1/credits (docs/api.md), with the account it belongs to. */
export interface CreditBalance {
  account_id: string;
  balance: number;
  reserved: number;
  available: number;
  subscription_status: string;
  current_period_end: string | null;
  cancel_at_period_end: boolean;
}

export type CheckState = 'ok' | 'failed';

/** What the readiness checks found (docs/api.md). */
export interface ReadinessState {
  ready: boolean;
  checks: Record<string, CheckState>;
  errors: string[];
}

/** A subscription plan (the store's plans table; the admin CLI's and the operator console's lists). */
export interface SubscriptionPlan {
  id: string;
  name: string;
  price_cents: number;
  currency: string;
  credits_per_period: number;
  period_days: number;
}
