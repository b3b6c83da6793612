// @svc/verifier: the pure pipeline (syntax, lists, DNS answer rules, SMTP reply parsing and
// classification, verdicts) and its ports. Network adapters: '@svc/verifier/adapters'.
export * from './types.ts';
export type * from './ports.ts';
export { Verifier, verifierConfig, verdictTrace, settledVerdicts, type KnownMx, type Route, type VerdictTrace, type VerifierConfig, type VerifierDeps, type Plan, type PlanItem, type RunOptions } from './verifier.ts';
export { parseAddress } from './syntax.ts';
export { buildVerdict, processingFailedVerdict } from './verdict.ts';
export { Semaphore } from './semaphore.ts';
export { classifyRcpt, explainRcpt, PROVIDER_RULES, type ProviderRule, type RcptClass, type RcptExplanation } from './smtp/classify.ts';
// The SMTP reducers, each as one namespace: the session's counts (plan, step, capacity, abandon…),
// the opening (greeting, EHLO, STARTTLS) and the probe conversation over an open session.
export * as smtpSession from './smtp/session.ts';
export type { SentCommand, SessionBudget, SessionEffect, SessionState } from './smtp/session.ts';
export * as smtpOpening from './smtp/opening.ts';
export type { OpeningEffect, OpeningInput, OpeningState } from './smtp/opening.ts';
export * as smtpConversation from './smtp/conversation.ts';
export type { ConversationEffect, ConversationState, ConversationStep, Recipient, WireCommand } from './smtp/conversation.ts';
export { decodeReplyLine, parseReply, ReplyReader, SmtpProtocolError, formatReply } from './smtp/reply.ts';
