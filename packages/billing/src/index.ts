// @svc/billing: pricing and the reserve/charge/settle use cases.
export { validateAndCharge, type ChargeOptions, type Completion } from './charge.ts';
export { chargeReasonFor, creditsOf, priced, summarize, type ChargedResult } from './pricing.ts';
export { isConnectionFailure, upstream } from './failures.ts';
