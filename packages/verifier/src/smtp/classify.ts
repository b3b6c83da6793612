// What one SMTP reply to RCPT TO says about a mailbox. Deciding is kept apart from
// parsing (reply.ts) and from the socket (adapters/smtp-net.ts).
//
// Two layers: the replies of the big mail systems that need a rule of their own (PROVIDER_RULES,
// documented one by one in docs/smtp-replies.md), then the generic reading of RFC 3463 enhanced
// codes and of common wording, in English and in the languages servers answer in.

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

/** A reply of one mail system that has a rule of its own (docs/smtp-replies.md lists every id). */
export interface ProviderRule {
  /** Stable name, e.g. `microsoft-dbeb`: docs/smtp-replies.md has a row for each. */
  id: string;
  /** Who sends it. */
  provider: string;
  cls: RcptClass;
  /** What the reply means, in a sentence: the verdict's `reason` when this rule decided. */
  reason: string;
  match(reply: SmtpReply): boolean;
}

/** The class of a reply, and the provider rule that decided it, if one did. */
export interface RcptExplanation {
  cls: RcptClass;
  rule?: ProviderRule;
}

const isCode = (reply: SmtpReply, ...codes: number[]): boolean => codes.includes(reply.code);
const enhancedIn = (reply: SmtpReply, ...codes: string[]): boolean => reply.enhanced !== undefined && codes.includes(reply.enhanced);
/** 5.7.606 to 5.7.649: Microsoft's "banned sending IP" range. */
const microsoftBannedIp = (enhanced: string | undefined): boolean => {
  const m = /^5\.7\.(\d+)$/.exec(enhanced ?? '');
  const n = m ? Number(m[1]) : 0;
  return n >= 606 && n <= 649;
};

/**
 * Provider replies, checked before the generic reading: the first match decides. Every regular
 * expression is anchored on wording the provider documents or publishes in its bounces, so a
 * look-alike from another server falls through to the generic reading.
 */
export const PROVIDER_RULES: readonly ProviderRule[] = [
  {
    // "550 5.4.1 Recipient address rejected: Access denied. AS(201806281)": Exchange Online's
    // Directory-Based Edge Blocking turns away a recipient that is not in the tenant's directory.
    // "Access denied" reads like policy; the AS(201806281) tag (or the EOP host that sends it,
    // in the form from before the tag) says which check it is.
    id: 'microsoft-dbeb',
    provider: 'Microsoft 365',
    cls: 'rejected',
    reason: "Microsoft 365 directory-based edge blocking: the recipient is not in the tenant's directory",
    match: (r) =>
      isCode(r, 550) &&
      enhancedIn(r, '5.4.1', '5.1.1') &&
      /Recipient address rejected: Access denied\b/i.test(r.text) &&
      /AS\(201806281\)|\.prod\.protection\.outlook\.com\]/i.test(r.text),
  },
  {
    // "550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup", and
    // Exchange Server's "550 5.1.1 RESOLVER.ADR.RecipNotFound; not found".
    id: 'microsoft-recipient-not-found',
    provider: 'Microsoft Exchange',
    cls: 'rejected',
    reason: 'Microsoft Exchange: the recipient was not found by SMTP address lookup',
    match: (r) => r.code >= 550 && r.code <= 554 && /\bRESOLVER\.ADR\.Recip(?:ient)?NotFound\b/.test(r.text),
  },
  {
    // "550 5.7.606 Access denied, banned sending IP [192.0.2.1]" (5.7.606-649), and 5.7.511
    // "Access denied, banned sender": our sending IP is on Microsoft's block list.
    id: 'microsoft-banned-sender',
    provider: 'Microsoft 365',
    cls: 'policy',
    reason: 'Microsoft 365 refused to verify the address: the sending IP or sender is on its block list',
    match: (r) => r.code >= 500 && (microsoftBannedIp(r.enhanced) || (r.enhanced === '5.7.511' && /banned sender/i.test(r.text))),
  },
  {
    // "550 #5.1.0 Address rejected.": the recipient failed the LDAP accept query (or SMTP call-ahead).
    id: 'cisco-address-rejected',
    provider: 'Cisco Secure Email (IronPort)',
    cls: 'rejected',
    reason: "Cisco Secure Email (IronPort): the recipient address was rejected, it is not in the organisation's directory",
    match: (r) => isCode(r, 550) && r.enhanced === '5.1.0' && /^\d{3}[ -]#5\.1\.0 /.test(r.lines[0] ?? '') && /^Address rejected\.?$/i.test(r.text.trim()),
  },
  {
    // "552 1 Requested mail action aborted, mailbox not found" (Yahoo, AOL): 552 reads "storage";
    // this one names a mailbox that does not exist.
    id: 'yahoo-mailbox-not-found',
    provider: 'Yahoo / AOL',
    cls: 'rejected',
    reason: 'Yahoo / AOL: mailbox not found',
    match: (r) => isCode(r, 552, 554) && /\bRequested mail action aborted, mailbox not found\b/i.test(r.text),
  },
  {
    // "554 delivery error: dd This user doesn't have a yahoo.com account (x@yahoo.com) [-5]"
    id: 'yahoo-no-account',
    provider: 'Yahoo',
    cls: 'rejected',
    reason: 'Yahoo: there is no account with this address',
    match: (r) => r.code >= 550 && r.code <= 554 && /\bdd This user doesn't have an? \S+ account\b/i.test(r.text),
  },
  {
    // "554 delivery error: dd Sorry your message to x cannot be delivered. This mailbox is disabled (554.30)"
    id: 'yahoo-mailbox-disabled',
    provider: 'Yahoo',
    cls: 'disabled',
    reason: 'Yahoo: the mailbox is disabled',
    match: (r) => r.code >= 550 && r.code <= 554 && /\bThis mailbox is disabled \(554\.30\)/i.test(r.text),
  },
  {
    // "421 4.7.0 [TSS04] Messages from 192.0.2.1 temporarily deferred due to unexpected volume or
    // user complaints"; [TS01]-[TS03] and [TSS0x] are the same family.
    id: 'yahoo-deferred',
    provider: 'Yahoo',
    cls: 'tempfail',
    reason: 'Yahoo deferred the check (a [TS] code: volume, complaints or reputation of the sending IP)',
    match: (r) => r.code >= 400 && r.code < 500 && /\[TSS?\d{2}\]/.test(r.text),
  },
  {
    // "553 5.7.1 [BL21] Connections will not be accepted from 192.0.2.1, because the ip is in
    // Spamhaus's list", "554 5.7.9 Message not accepted for policy reasons".
    id: 'yahoo-policy',
    provider: 'Yahoo',
    cls: 'policy',
    reason: 'Yahoo refused to verify the address on policy (block list or reputation of the sending IP)',
    match: (r) => r.code >= 500 && (/\[BL\d{2}\]/.test(r.text) || (r.enhanced === '5.7.9' && /Message not accepted for policy reasons/i.test(r.text))),
  },
  {
    // "550-5.1.1 The email account that you tried to reach does not exist. ... - gsmtp"
    id: 'google-no-such-user',
    provider: 'Google',
    cls: 'rejected',
    reason: 'Google: the email account does not exist',
    match: (r) => r.code >= 550 && r.code <= 554 && enhancedIn(r, '5.1.1') && /The email account that you tried to reach does not exist/i.test(r.text.replace(/\n/g, ' ')),
  },
  {
    // "550 5.2.1 The email account that you tried to reach is disabled."
    id: 'google-disabled',
    provider: 'Google',
    cls: 'disabled',
    reason: 'Google: the email account is disabled',
    match: (r) => r.code >= 550 && r.code <= 554 && /The email account that you tried to reach is disabled/i.test(r.text.replace(/\n/g, ' ')),
  },
  {
    // "550 Invalid Recipient - https://community.mimecast.com/docs/DOC-1369#550"
    id: 'mimecast-invalid-recipient',
    provider: 'Mimecast',
    cls: 'rejected',
    reason: 'Mimecast: invalid recipient, not an address of the organisation',
    match: (r) => isCode(r, 550) && /^Invalid Recipient\b/i.test(r.text) && /mimecast/i.test(r.text),
  },
  {
    // "550 Administrative prohibition - envelope blocked - https://community.mimecast.com/...",
    // "550 Envelope blocked - User Entry - https://...": a block policy, not the mailbox.
    id: 'mimecast-policy',
    provider: 'Mimecast',
    cls: 'policy',
    reason: 'Mimecast refused to verify the address: a block policy (administrative prohibition, envelope blocked)',
    match: (r) => r.code >= 500 && /\b(Administrative prohibition|Envelope blocked)\b/i.test(r.text),
  },
  {
    // "550 No such user (x@example.com)", "550 cuda_nsu 5.1.1 <x@example.com> Recipient address rejected: User unknown"
    id: 'barracuda-no-such-user',
    provider: 'Barracuda',
    cls: 'rejected',
    reason: 'Barracuda: no such user',
    match: (r) => isCode(r, 550) && (/^No such user \([^()\s]+@[^()\s]+\)$/i.test(r.text) || /^cuda_nsu\b/i.test(r.text)),
  },
  {
    // "554 Service unavailable; Client host [192.0.2.1] blocked using Barracuda Reputation; https://www.barracudanetworks.com/..."
    id: 'barracuda-reputation',
    provider: 'Barracuda',
    cls: 'policy',
    reason: "Barracuda refused to verify the address: the sending IP is on Barracuda Reputation's block list",
    match: (r) => r.code >= 500 && /\bBarracuda Reputation\b/i.test(r.text),
  },
  {
    // "554 5.7.1 ... pphosted ..." / "https://ipcheck.proofpoint.com/?ip=...": Proofpoint's
    // reputation or policy refusal.
    id: 'proofpoint-policy',
    provider: 'Proofpoint',
    cls: 'policy',
    reason: 'Proofpoint refused to verify the address on policy or reputation',
    match: (r) => r.code >= 500 && (r.enhanced?.startsWith('5.7.') ?? false) && /\bpphosted\b|ipcheck\.proofpoint\.com/i.test(r.text),
  },
];

// Policy wording that appears without a 5.7.x code (RFC 3463 class 7 is "security or policy").
const POLICY_TEXT =
  /\b(block(ed|list)?|black ?list(ed)?|spamhaus|barracuda|\brbl\b|dnsbl|listed|reputation|policy|spam|not permitted|access denied|relay(ing)? (denied|not permitted)|authenticat|tls required|rejected due to|client host)\b/i;
// The same in the languages servers answer in: blocked, block/black list, policy, spam, refused relay.
const POLICY_TEXT_INTL = new RegExp(
  [
    'blockiert|gesperrt|sperrliste|richtlinie|relaying (nicht erlaubt|verweigert)', // de
    'bloqu[ée]|liste noire|politique|relais (refus[ée]|interdit)', // fr
    'bloqueado|lista negra|pol[íi]tica|rechazado por', // es, pt
    'bloccat[oa]|lista nera|politica', // it
    'geblokkeerd|zwarte lijst|beleid', // nl
    'zablokowan[ya]|czarn(a|ej) li[sś]', // pl
    'заблокирован|блокир|черн\\S* спис|спам|политик', // ru
    'zablokov[áa]n|blokov[áa]n|[čc]ern[ée]m? listin', // cs
    'blockerad|svartlist', // sv
    'engellen|kara liste', // tr
    'ブロック|ブラックリスト|スパム|迷惑メール|ポリシー', // ja
    '拦截|攔截|黑名单|黑名單|垃圾邮件|垃圾郵件|反垃圾|策略', // zh
    '차단|스팸|블랙리스트|정책', // ko
  ].join('|'),
  'u',
);
/** POLICY_TEXT_INTL and UNKNOWN_USER_INTL are lower case, matched on the lower-cased text (faster than the `i` flag over Unicode). */
const isPolicyText = (text: string, lower = text.toLowerCase()): boolean => POLICY_TEXT.test(text) || POLICY_TEXT_INTL.test(lower);

// "User unknown" wording of servers that send no enhanced code.
const UNKNOWN_USER_TEXT =
  /(user unknown|unknown user|no such (user|mailbox|recipient|account|address)|(mailbox|account|user|address|recipient)( \S+)? (does not|doesn't) exist|does not exist|invalid (recipient|mailbox)|unknown (recipient|mailbox|address)|(recipient|address) unknown|unrouteable address|recipient (address )?rejected: user|not a valid mailbox|(mailbox|recipient|address) not found|user not found|no mailbox here)/i;

// The same in other languages. Each names the mailbox, user, recipient or address, so "the
// sender's domain does not exist" never reads as a missing mailbox (and SENDER_WORDS vetoes the
// rest). Matched on the reply as decoded (reply.ts: UTF-8, else Windows-1252), also without accents.
const UNKNOWN_USER_INTL = new RegExp(
  [
    // German
    'benutzer(name)? unbekannt|unbekannter? (benutzer|empf(ä|ae|a)nger)|empf(ä|ae|a)nger (ist )?unbekannt|kein(en)? solche[rn]? (benutzer|empf(ä|ae|a)nger|postfach)',
    '(benutzer|empf(ä|ae|a)nger|postfach|mailbox|e-?mail-?adresse|adresse|konto)\\b[^.;:]{0,40}?\\b(existiert nicht|nicht vorhanden|gibt es nicht|nicht gefunden)',
    '(mailbox|postfach) nicht vorhanden',
    // French
    'utilisateur inconnu|destinataire inconnu|adresse (e-?mail )?(inexistante|inconnue)|utilisateur inexistant|bo(î|i)te (aux lettres |mail |email )?(inexistante|introuvable)',
    "(utilisateur|destinataire|adresse|bo(î|i)te aux lettres|bo(î|i)te mail|compte)\\b[^.;:]{0,40}?\\bn['’]existe pas",
    // Spanish
    'usuario desconocido|destinatario desconocido|usuario inexistente|buz(ó|o)n inexistente|usuario no encontrado|buz(ó|o)n no encontrado',
    '(usuario|destinatario|buz(ó|o)n|cuenta|direcci(ó|o)n)\\b[^.;:]{0,40}?\\bno existe',
    // Italian
    'utente sconosciuto|utente inesistente|destinatario sconosciuto|destinatario inesistente|casella (di posta )?(inesistente|sconosciuta)|indirizzo inesistente',
    '(utente|destinatario|casella|indirizzo)\\b[^.;:]{0,40}?\\bnon esiste',
    // Portuguese
    'usu(á|a)rio desconhecido|utilizador desconhecido|destinat(á|a)rio desconhecido|usu(á|a)rio inexistente|utilizador inexistente|usu(á|a)rio n(ã|a)o encontrado',
    '(usu(á|a)rio|utilizador|destinat(á|a)rio|caixa postal|caixa de correio|conta|endere(ç|c)o)\\b[^.;:]{0,40}?\\bn(ã|a)o existe',
    // Dutch
    'onbekende (gebruiker|ontvanger)|gebruiker onbekend|ontvanger onbekend',
    '(gebruiker|ontvanger|mailbox|postvak|e-?mailadres|adres)\\b[^.;:]{0,40}?\\bbestaat niet',
    // Polish
    'nieznany (u(ż|z)ytkownik|odbiorca|adres)|u(ż|z)ytkownik nieznany',
    '(u(ż|z)ytkownik|odbiorca|skrzynka|adres|konto)[^.;:]{0,40}?\\bnie istnieje',
    // Russian
    'пользователь не найден|получатель не найден|почтовый ящик не найден|нет такого (пользователя|ящика|адреса|получателя)|неизвестный (пользователь|получатель|адрес)',
    '(пользовател|получател|почтов\\S* ящик|ящик|адрес|учетн\\S* запис|учётн\\S* запис|аккаунт)\\S*[^.;:]{0,40}?не существует',
    // Czech
    'nezn(á|a)m(ý|y) (u(ž|z)ivatel|p(ř|r)(í|i)jemce|adres(á|a)t)|u(ž|z)ivatel nenalezen|schr(á|a)nka nenalezena',
    '(u(ž|z)ivatel|p(ř|r)(í|i)jemce|schr(á|a)nka|adresa|(úč|uc)et)\\S*[^.;:]{0,40}?\\bneexistuje',
    // Swedish
    'ok(ä|a)nd (anv(ä|a)ndare|mottagare)|anv(ä|a)ndaren finns inte',
    '(anv(ä|a)ndare|mottagare|brevl(å|a)da|e-?postadress|adress(en)?|kontot?)\\S*[^.;:]{0,40}?\\bfinns (inte|ej)',
    // Turkish
    'bilinmeyen (kullan(ı|i)c(ı|i)|al(ı|i)c(ı|i))|kullan(ı|i)c(ı|i) bulunamad(ı|i)|al(ı|i)c(ı|i) bulunamad(ı|i)|b(ö|o)yle bir kullan(ı|i)c(ı|i) yok',
    '(kullan(ı|i)c(ı|i)|al(ı|i)c(ı|i)|posta kutusu|adres|hesap)\\S*[^.;:]{0,40}?\\b(mevcut de(ğ|g)il|bulunamad(ı|i))',
    // Japanese
    '宛先不明|(ユーザー?|アカウント|メールボックス|宛先|受信者|メールアドレス|アドレス)[^。]{0,20}?(存在しません|見つかりません|不明です)',
    // Chinese (simplified and traditional)
    '(用户|用戶|收件人|帐户|账户|帳戶|帐号|账号|帳號|邮箱|郵箱|信箱|邮件地址|地址)[^。]{0,10}?不存在|查无此人|查無此人|无此用户|無此用戶|没有这个用户',
    // Korean
    '존재하지 않는 (사용자|계정|주소|메일 ?주소|메일 ?박스|수신자|받는 ?사람)|(사용자|계정|수신자|메일 ?주소|받는 ?사람)[^.]{0,20}?(존재하지 않습니다|찾을 수 없습니다)|알 수 없는 (사용자|수신자)',
  ].join('|'),
  'u',
);
// Replies about our sender (MAIL FROM) in those languages: never a verdict on the recipient.
const SENDER_WORDS = /\b(sender|mail from)\b|absender|exp(é|e)diteur|remitente|mittente|remetente|afzender|nadawc|отправител|odes(í|i)latel|avs(ä|a)ndar|g(ö|o)nderen|差出人|送信者|发件人|發件人|발신자|보낸 ?사람/u;

const FULL_TEXT = /(mailbox (is )?full|over ?quota|quota exceeded|insufficient (system )?storage|out of storage)/i;

/** The class of a reply to RCPT TO, with the provider rule that decided it (if one did). */
export function explainRcpt(reply: SmtpReply): RcptExplanation {
  const { code } = reply;
  if (code === 250 || code === 251) return { cls: 'accepted' };
  const rule = code >= 400 ? PROVIDER_RULES.find((r) => r.match(reply)) : undefined;
  if (rule) return { cls: rule.cls, rule };
  return { cls: genericClass(reply) };
}

export function classifyRcpt(reply: SmtpReply): RcptClass {
  return explainRcpt(reply).cls;
}

function genericClass(reply: SmtpReply): RcptClass {
  const { code, enhanced, text } = reply;
  if (code >= 400 && code < 500) return 'tempfail';
  if (code < 500) return 'unclassified'; // 252 "cannot verify" and other oddities
  const lower = text.toLowerCase();
  const [, subject, detail] = (enhanced ?? '').split('.');
  if (subject === '7') return 'policy';
  // RFC 3463 X.1.7 / X.1.8: our *sender* address or domain was refused (Postfix refuses the sender
  // only at RCPT time with smtpd_delay_reject): nothing about the recipient, whatever the text says.
  const senderRefused = subject === '1' && (detail === '7' || detail === '8');
  // RFC 3463 X.1.3 "bad destination mailbox address syntax": Postfix answers `501 5.1.3 Bad
  // recipient address syntax`, others 553. The address cannot be delivered as written.
  if (subject === '1' && detail === '3' && (code === 501 || code === 553) && !isPolicyText(text, lower)) return 'malformed';
  if (subject === '1' && !senderRefused && (detail === '1' || detail === '10' || code === 550 || code === 551 || code === 553)) {
    // 5.1.1 bad mailbox, 5.1.10 null MX (RFC 7505), 5.1.3 bad syntax, 5.1.6 moved.
    return isPolicyText(text, lower) && detail !== '1' ? 'policy' : 'rejected';
  }
  if (subject === '2' && detail === '2') return 'full';
  if (subject === '2' && detail === '1') return 'disabled';
  if (code === 552 && FULL_TEXT.test(text)) return 'full';
  if (isPolicyText(text, lower)) return 'policy';
  if (!senderRefused && (code === 550 || code === 551 || code === 553)) {
    if (UNKNOWN_USER_TEXT.test(text)) return 'rejected';
    if (UNKNOWN_USER_INTL.test(lower) && !SENDER_WORDS.test(lower)) return 'rejected';
  }
  if (FULL_TEXT.test(text)) return 'full';
  return 'unclassified';
}
