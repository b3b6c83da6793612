// What one RCPT reply says about a mailbox: real-world wording from the big providers
// and common MTAs, parsed from the wire form so enhanced codes are extracted the real way.

import t from 'tap';
import { classifyRcpt, type RcptClass } from '../src/smtp/classify.ts';
import { parseReply } from '../src/smtp/reply.ts';

/** A reply as it comes off the wire: one string per line, without CRLF. */
const reply = (...lines: string[]) => parseReply(lines);

const TABLE: Array<[string[], RcptClass]> = [
  // accepted
  [['250 2.1.5 OK x1si123456qkb.12 - gsmtp'], 'accepted'],
  [['250 2.1.5 Recipient OK'], 'accepted'],
  [['250 Accepted'], 'accepted'],
  [['250 <john@example.com>... Recipient ok'], 'accepted'],
  [['251 2.1.5 User not local; will forward to <john@elsewhere.example>'], 'accepted'],
  // rejected: the mailbox does not exist
  [
    [
      "550-5.1.1 The email account that you tried to reach does not exist. Please try",
      "550-5.1.1 double-checking the recipient's email address for typos or",
      '550 5.1.1 unnecessary spaces. https://support.google.com/mail/?p=NoSuchUser a1si - gsmtp',
    ],
    'rejected',
  ],
  [['550 5.1.1 <nobody@outlook.com>: Recipient address rejected: Access denied. AS(201806281) [DM6NAM12FT045.eop-nam12.prod.protection.outlook.com]'], 'rejected'],
  [['550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup'], 'rejected'],
  // malformed: the server says the address itself is bad (RFC 3463 X.1.3)
  [['553 5.1.3 The recipient address <john..doe@example.com> is not a valid RFC 5321 address'], 'malformed'],
  [['501 5.1.3 Bad recipient address syntax'], 'malformed'],
  [['501 5.1.3 Invalid address'], 'malformed'],
  [['550 5.1.1 <nobody@example.com>: Recipient address rejected: User unknown in virtual mailbox table'], 'rejected'],
  [['554 5.1.1 Unknown user; Rejecting'], 'rejected'],
  [['551 5.1.6 User has moved; please try <new@example.org>'], 'rejected'],
  [['550 5.1.0 Address rejected.'], 'rejected'],
  [['550 <nobody@example.com>: Recipient address rejected: User unknown in local recipient table'], 'rejected'],
  [['550 Requested action not taken: mailbox unavailable (user unknown)'], 'rejected'],
  // Exim's and other MTAs' wording without enhanced codes.
  [['550 Unrouteable address'], 'rejected'],
  [['550 <nobody@example.com>... Recipient unknown'], 'rejected'],
  [['553 sorry, no such address here'], 'rejected'],
  [['550 No such user - psmtp'], 'rejected'],
  [['550 sorry, no mailbox here by that name. (#5.1.1)'], 'rejected'],
  [['553 sorry, that domain isn\'t in my list of allowed rcpthosts; no such recipient'], 'rejected'],
  [['550 Mailbox does not exist'], 'rejected'],
  [['550 Invalid recipient <nobody@example.com>'], 'rejected'],
  // policy: the server refused to tell us
  [['550 5.7.1 Service unavailable, Client host [192.0.2.10] blocked using Spamhaus. To request removal from this list see https://www.spamhaus.org/query/ip/192.0.2.10 AS(1450)'], 'policy'],
  [
    [
      '550-5.7.26 Unauthenticated email from example.com is not accepted due to',
      "550-5.7.26 domain's DMARC policy. Please contact the administrator of",
      '550 5.7.26 example.com domain if this was a legitimate mail.',
    ],
    'policy',
  ],
  [['550 5.7.1 <nobody@example.com>: Recipient address rejected: user unknown'], 'policy'],
  [['554 5.7.1 <unknown[192.0.2.10]>: Client host rejected: Access denied'], 'policy'],
  [['553 5.7.1 Sender rejected: relay not permitted'], 'policy'],
  [['554 Service unavailable; Client host [192.0.2.10] blocked using zen.spamhaus.org'], 'policy'],
  [['550 Message rejected due to poor reputation of the sending IP'], 'policy'],
  [['550 5.4.1 Recipient address rejected: Access denied. AS(201806281)'], 'policy'],
  [['554 Your IP is listed on a blacklist (dnsbl), connection blocked'], 'policy'],
  [['550 Blocked'], 'policy'],
  [['550 5.1.3 Recipient address rejected: blocked by policy'], 'policy'],
  // full: the mailbox exists but is over quota
  [['552 5.2.2 The email account that you tried to reach is over quota and inactive.'], 'full'],
  [['552 5.2.2 Mailbox full'], 'full'],
  [['552 Requested mail action aborted: exceeded storage allocation - mailbox over quota'], 'full'],
  [['550 5.2.2 <nobody@example.com>: user is over quota'], 'full'],
  [['554 Recipient mailbox is full'], 'full'],
  [['550 Quota exceeded for this user'], 'full'],
  // disabled
  [['550 5.2.1 The email account that you tried to reach is disabled. x1si - gsmtp'], 'disabled'],
  [['550 5.2.1 <nobody@yahoo.com>: This mailbox is disabled (554.30)'], 'disabled'],
  // tempfail: try again later
  [['450 4.2.0 <nobody@example.com>: Recipient address rejected: Greylisted, see http://postgrey.schweikert.ch/help/example.com.html'], 'tempfail'],
  [['451 4.7.1 Please try again later'], 'tempfail'],
  [['452 4.2.2 The email account that you tried to reach is over quota.'], 'tempfail'],
  [['452 4.5.3 Too many recipients'], 'tempfail'],
  [['421 4.7.0 Try again later, closing connection. (EHLO) x1si - gsmtp'], 'tempfail'],
  [['450 4.1.1 <nobody@example.com>: Recipient address rejected: unverified address: Address verification in progress'], 'tempfail'],
  [['451 Temporary local problem - please try later'], 'tempfail'],
  // unclassified: a permanent reply that says nothing certain
  [['252 2.1.5 Cannot VRFY user, but will accept message and attempt delivery'], 'unclassified'],
  [['550 Requested action not taken: mailbox unavailable'], 'unclassified'],
  [['550 Requested action not taken'], 'unclassified'],
  [['554 Transaction failed'], 'unclassified'],
  [['500 5.5.1 Command unrecognized'], 'unclassified'],
  [['503 5.5.1 Error: need MAIL command'], 'unclassified'],
  [['354 go ahead'], 'unclassified'],
  // A bad *sender* domain or mailbox (5.1.8, 5.1.7) is not a verdict on the recipient.
  [['554 5.1.8 <probe@verifier.example>: Sender address rejected: Domain not found'], 'unclassified'],
  [['550 5.1.8 <probe@verifier.example>: Sender address rejected: Domain not found'], 'unclassified'],
  [['553 5.1.8 Sender domain does not exist'], 'unclassified'],
  [['550 5.1.7 <probe@verifier.example>: Sender address rejected: undeliverable address: host mx.verifier.example said: 550 5.1.1 User unknown'], 'unclassified'],
  [['553 5.1.7 The sender address <probe@verifier.example> is not a valid RFC 5321 address'], 'unclassified'],
];

t.test('RCPT reply table', async (t) => {
  t.ok(TABLE.length >= 30, `${TABLE.length} fixtures`);
  for (const [lines, expected] of TABLE) {
    t.equal(classifyRcpt(reply(...lines)), expected, `${expected}: ${lines.join(' | ').slice(0, 90)}`);
  }
});

t.test('every class is covered by the table', async (t) => {
  const seen = new Set(TABLE.map(([, c]) => c));
  t.strictSame([...seen].sort(), ['accepted', 'disabled', 'full', 'malformed', 'policy', 'rejected', 'tempfail', 'unclassified']);
});

t.test('a 5.1.8 (bad sender domain) is never rejected, whatever the text says', async (t) => {
  for (const code of [550, 551, 553, 554]) {
    for (const text of ['Sender address rejected: Domain not found', 'user unknown', 'no such user', 'Sender domain does not exist', '']) {
      const r = reply(`${code} 5.1.8 ${text}`.trimEnd());
      t.not(classifyRcpt(r), 'rejected', `${code} 5.1.8 ${text}`);
    }
  }
});

t.test('without an enhanced code, only 550/551/553 with clear wording reject', async (t) => {
  t.equal(classifyRcpt(reply('550 User unknown')), 'rejected');
  t.equal(classifyRcpt(reply('551 User unknown')), 'rejected');
  t.equal(classifyRcpt(reply('553 User unknown')), 'rejected');
  t.equal(classifyRcpt(reply('554 User unknown')), 'unclassified');
  t.equal(classifyRcpt(reply('552 User unknown')), 'unclassified');
  t.equal(classifyRcpt(reply('450 User unknown')), 'tempfail');
  t.equal(classifyRcpt(reply('550 Mailbox unavailable')), 'unclassified');
});

t.test('an enhanced code that disagrees with the reply class is ignored', async (t) => {
  // "550 4.1.1" is not an enhanced code for a 5xx reply: the wording decides.
  t.equal(classifyRcpt(reply('550 4.1.1 mailbox unavailable')), 'unclassified');
  t.equal(classifyRcpt(reply('550 4.1.1 user unknown')), 'rejected');
  t.equal(classifyRcpt(reply('550 2.7.1 go away')), 'unclassified');
});
