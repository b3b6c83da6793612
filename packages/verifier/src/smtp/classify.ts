// What one SMTP reply to RCPT TO says about a mailbox. Deciding is kept apart from
// parsing (reply.ts) and from the socket (adapters/smtp-net.ts).

import type { SmtpReply } from '../types.ts';

export type RcptClass =
  | 'accepted' // 250/251: the server will take mail for this mailbox
  | 'rejected' // the mailbox does not exist (5.1.x, or a clear "user unknown")
  | 'malformed' // 501/553 5.1.3: the server says the address itself is malformed
  | 'disabled' // 5.2.1: the mailbox exists but is disabled: a hard bounce
  | 'full' // 552 / x.2.2: the mailbox exists but is over quota
  | 'policy' // 5.7.x, block lists, reputation: the server refused to tell us
  | 'tempfail' // 4xx: try again later (greylisting, rate limits)
  | 'unclassified'; // a permanent reply that says nothing certain about the mailbox

// Policy wording that appears without a 5.7.x code (RFC 3463 class 7 is "security or policy").
const POLICY_TEXT =
  /\b(block(ed|list)?|black ?list(ed)?|spamhaus|barracuda|\brbl\b|dnsbl|listed|reputation|policy|spam|not permitted|access denied|relay(ing)? (denied|not permitted)|authenticat|tls required|rejected due to|client host)\b/i;
// "User unknown" wording of servers that send no enhanced code.
const UNKNOWN_USER_TEXT =
  /(user unknown|unknown user|no such (user|mailbox|recipient|account|address)|(mailbox|account|user|address|recipient)( \S+)? (does not|doesn't) exist|does not exist|invalid (recipient|mailbox)|unknown (recipient|mailbox|address)|(recipient|address) unknown|unrouteable address|recipient (address )?rejected: user|not a valid mailbox|mailbox not found|user not found|no mailbox here)/i;
const FULL_TEXT = /(mailbox (is )?full|over ?quota|quota exceeded|insufficient (system )?storage|out of storage)/i;

export function classifyRcpt(reply: SmtpReply): RcptClass {
  const { code, enhanced, text } = reply;
  if (code === 250 || code === 251) return 'accepted';
  if (code >= 400 && code < 500) return 'tempfail';
  if (code < 500) return 'unclassified'; // 252 "cannot verify" and other oddities
  const [, subject, detail] = (enhanced ?? '').split('.');
  if (subject === '7') return 'policy';
  // RFC 3463 X.1.7 / X.1.8: our *sender* address or domain was refused (Postfix refuses the sender
  // only at RCPT time with smtpd_delay_reject): nothing about the recipient, whatever the text says.
  const senderRefused = subject === '1' && (detail === '7' || detail === '8');
  // RFC 3463 X.1.3 "bad destination mailbox address syntax": Postfix answers `501 5.1.3 Bad
  // recipient address syntax`, others 553. The address cannot be delivered as written.
  if (subject === '1' && detail === '3' && (code === 501 || code === 553) && !POLICY_TEXT.test(text)) return 'malformed';
  if (subject === '1' && !senderRefused && (detail === '1' || detail === '10' || code === 550 || code === 551 || code === 553)) {
    // 5.1.1 bad mailbox, 5.1.10 null MX (RFC 7505), 5.1.3 bad syntax, 5.1.6 moved.
    return POLICY_TEXT.test(text) && detail !== '1' ? 'policy' : 'rejected';
  }
  if (subject === '2' && detail === '2') return 'full';
  if (subject === '2' && detail === '1') return 'disabled';
  if (code === 552 && FULL_TEXT.test(text)) return 'full';
  if (POLICY_TEXT.test(text)) return 'policy';
  if (!senderRefused && (code === 550 || code === 551 || code === 553) && UNKNOWN_USER_TEXT.test(text)) return 'rejected';
  if (FULL_TEXT.test(text)) return 'full';
  return 'unclassified';
}
