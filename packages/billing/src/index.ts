// @svc/billing: pricing and the reserve/charge/settle use cases, the money of jobs and recoveries
// included; the suppression list applied before probing; the validation decisions for analytics;
// subscriptions and their payment processors (local, Stripe).
export { refusal, subscriptionEnded, validateAndCharge, type ChargeOptions, type Completion } from './charge.ts';
export { chargeData, chargeKnownData, type DataCompletion, type DataWork } from './data.ts';
export { chargeReasonFor, creditsOf, priced, summarize, type ChargedResult } from './pricing.ts';
export { isConnectionFailure, upstream } from './failures.ts';
export { addressIdentity, recordDecisions, syncDecisions, type AddressIdentity, type DecisionLog, type DecisionSink, type SyncDecisionContext } from './decisions.ts';
export { applySuppressions, suppressedVerdict } from './suppression.ts';
export { advanceLocalPeriod, LocalProcessor, SubscriptionService, subscribeLocally, subscriptionState, type CancellationResponse, type OperatorSubscriptionResult, type PaymentProcessor, type ProcessorEvent, type SubscriptionRefusal } from './subscriptions.ts';
export { StripeProcessor, type StripeOptions } from './stripe.ts';
export { jobCredits, RecoveryCharges } from './jobs.ts';
export { ledgerCsv, LEDGER_CSV_HEADER } from './ledger.ts';
export { grantCredits, releaseOrphanedHolds, releaseStaleSyncHolds, SYNC_HOLD_ORPHANED_MS } from './holds.ts';
