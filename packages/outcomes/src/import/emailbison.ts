// The EmailBison connector's inbound events (docs/decisions/outcomes.md), turned into outcome
// rows for the same parser and store as imports. Shapes accepted: the platform's envelope `{event: {type, ...}, data: {scheduled_email: {id,
// ...}, lead: {id, email, ...}, campaign_event: {created_at}, reply: {...}, ...}}`, or a flat
// `{event | type | event_type, lead_email | email, scheduled_email_id, ...}`; one event or an array.
//
// Only the six events below are taken; any other type is answered 2xx and counted as ignored.
// Nothing but the address, the ids and the known DSN fields is read: campaign bodies, subjects,
// names and arbitrary platform metadata are never copied into a row, let alone stored.

import { OUTCOME_EVIDENCE_FIELDS } from '@svc/contracts';

/** The six inbound events and the outcome each becomes. */
export const EMAILBISON_EVENTS = {
  email_sent: 'sent',
  email_opened: 'opened',
  email_bounced: 'bounced',
  lead_replied: 'replied',
  lead_interested: 'replied',
  lead_unsubscribed: 'unsubscribed',
} as const;
export type EmailBisonEvent = keyof typeof EMAILBISON_EVENTS;

/** The platform's UI names the lead events "Contact …"; its payloads may too. */
const ALIASES: Record<string, EmailBisonEvent> = {
  contact_replied: 'lead_replied',
  contact_interested: 'lead_interested',
  contact_unsubscribed: 'lead_unsubscribed',
};

/** What one inbound event became. */
export type InboundEvent = { kind: 'row'; event: EmailBisonEvent; row: Record<string, unknown> } | { kind: 'ignored'; type: string } | { kind: 'malformed'; reason: string };

const obj = (v: unknown): Record<string, unknown> | undefined => (v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined);
const str = (v: unknown): string | undefined => (typeof v === 'string' && v.trim() !== '' ? v.trim() : typeof v === 'number' && Number.isFinite(v) ? String(v) : undefined);

function eventType(e: Record<string, unknown>): string | undefined {
  const ev = e.event;
  const raw = str(obj(ev)?.type) ?? str(ev) ?? str(e.type) ?? str(e.event_type);
  return raw?.toLowerCase().replace(/[\s.-]+/g, '_');
}

/** The inbound events of one webhook body (an event or an array of events). */
export function emailBisonEvents(body: unknown, now = Date.now()): InboundEvent[] {
  const list = Array.isArray(body) ? body : [body];
  return list.map((item) => {
    const e = obj(item);
    if (!e) return { kind: 'malformed', reason: 'an event must be a JSON object' };
    const type = eventType(e);
    if (!type) return { kind: 'malformed', reason: 'the event names no type' };
    const event = (Object.hasOwn(EMAILBISON_EVENTS, type) ? type : ALIASES[type]) as EmailBisonEvent | undefined;
    if (!event) return { kind: 'ignored', type: type.slice(0, 64) };
    const data = obj(e.data) ?? e;
    const scheduled = obj(data.scheduled_email);
    const lead = obj(data.lead);
    const scheduledId = str(scheduled?.id) ?? str(data.scheduled_email_id) ?? str(e.scheduled_email_id);
    const email = str(lead?.email) ?? str(data.lead_email) ?? str(data.email) ?? str(e.lead_email) ?? str(e.email);
    if (!scheduledId) return { kind: 'malformed', reason: 'the event has no scheduled email id' };
    if (!email) return { kind: 'malformed', reason: 'the event has no lead email' };
    // The event's time: when the platform recorded it, else when the email went out.
    const reply = obj(data.reply);
    const when =
      str(obj(data.campaign_event)?.created_at) ??
      (event === 'email_sent' ? str(scheduled?.sent_at) : undefined) ??
      str(reply?.date_received) ??
      str(data.occurred_at) ??
      str(e.occurred_at) ??
      str(e.timestamp) ??
      str(data.created_at) ??
      str(e.created_at);
    const row: Record<string, unknown> = {
      email,
      outcome: EMAILBISON_EVENTS[event],
      source: 'emailbison',
      // One event of each kind per scheduled email: the platform's retries carry the same id.
      external_id: `${event}:${scheduledId}`.slice(0, 255),
    };
    // The platform's own time, as RFC 3339; a `YYYY-MM-DD HH:MM:SS` database time is taken as UTC,
    // and an event without a time is timed when it arrives (the source needs an event time).
    row.occurred_at = when === undefined ? new Date(now).toISOString() : /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{1,6})?$/.test(when) ? `${when.replace(' ', 'T')}Z` : when;
    const leadId = str(lead?.id) ?? str(data.lead_id);
    if (leadId !== undefined) row.emailbison_lead_id = leadId;
    if (event === 'email_bounced') {
      // Bounce details, wherever the payload puts them: the data object, a `bounce` object, or the scheduled email.
      for (const src of [scheduled, obj(data.bounce), data]) {
        if (!src) continue;
        for (const k of OUTCOME_EVIDENCE_FIELDS) if (row[k] === undefined && typeof src[k] === 'string') row[k] = src[k];
      }
    }
    return { kind: 'row', event, row };
  });
}
