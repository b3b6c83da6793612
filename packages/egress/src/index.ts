// @svc/egress: outbound HTTP safety, the guard against server-side request forgery.
export { validateWebhookUrl, guardTarget, classifyAddress, pinnedLookup, systemResolver, MAX_WEBHOOK_URL_LENGTH, type WebhookUrlCheck, type WebhookUrlProblem, type GuardResult, type GuardOptions, type GuardRefusal, type AddressClass, type Resolver, type ResolvedAddress } from './net-guard.ts';
