// @svc/egress: outbound HTTP safety: the webhook URL check and the guard against server-side
// request forgery, used by job webhooks (the URL at intake, the target at each delivery).
export { validateWebhookUrl, guardTarget, classifyAddress, pinnedLookup, systemResolver, MAX_WEBHOOK_URL_LENGTH, type WebhookUrlCheck, type WebhookUrlProblem, type GuardResult, type GuardOptions, type GuardRefusal, type AddressClass, type Resolver, type ResolvedAddress } from './net-guard.ts';
