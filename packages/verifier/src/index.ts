export * from './types.ts';
export type * from './ports.ts';
export { Verifier, type VerifierConfig, type Plan } from './verifier.ts';
export { Prober, type ProberConfig, type ProbeOutcome } from './prober.ts';
export { parseAddress } from './syntax.ts';
export { buildVerdict } from './verdict.ts';
export { classifyRcpt } from './smtp/classify.ts';
export { parseReply, ReplyReader, formatReply } from './smtp/reply.ts';
