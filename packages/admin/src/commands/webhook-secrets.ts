// Webhook signing secrets: rotate, list.

import { DEFAULT_SECRET_GRACE_S, MAX_SECRET_GRACE_S, rotateWebhookSecret, listWebhookSecrets } from '@svc/jobs';
import { type Command, columns, count, needAccount, usageError } from '../command.ts';

export const webhookSecretsCommands: Command[] = [
  {
    noun: 'webhook-secret',
    verb: 'rotate',
    synopsis: '--account ACCOUNT_ID [--grace-seconds N]',
    about: `Makes a new webhook signing secret for the account and prints it (shown this once). The secrets that were current keep signing deliveries for N seconds more (default ${DEFAULT_SECRET_GRACE_S}, at most ${MAX_SECRET_GRACE_S}; 0 stops them now), so receivers can switch without missing one.`,
    options: [
      ['--account ACCOUNT_ID', 'the account (required)'],
      ['--grace-seconds N', `how long the replaced secrets still sign (0-${MAX_SECRET_GRACE_S}, default ${DEFAULT_SECRET_GRACE_S})`],
    ],
    async run(store, v) {
      const account = await needAccount(store, this, v);
      if (typeof account !== 'string') return account;
      const grace = count(v['grace-seconds'], DEFAULT_SECRET_GRACE_S);
      if (grace === undefined || grace > MAX_SECRET_GRACE_S) return usageError(`--grace-seconds must be a whole number from 0 to ${MAX_SECRET_GRACE_S}`, this);
      const r = await rotateWebhookSecret(store, account, grace);
      return {
        code: 0,
        out: [`webhook secret ${r.id} created for account ${account} (shown once):`, r.secret, ...r.previous.map((p) => `secret ${p.id} signs until ${p.expires_at}`)].join('\n'),
      };
    },
  },
  {
    noun: 'webhook-secret',
    verb: 'list',
    synopsis: '--account ACCOUNT_ID',
    about: "Lists the account's current webhook signing secrets, newest first, by their first characters, with when each stops signing.",
    options: [['--account ACCOUNT_ID', 'the account (required)']],
    async run(store, v) {
      const account = await needAccount(store, this, v);
      if (typeof account !== 'string') return account;
      const { secrets } = await listWebhookSecrets(store, account);
      if (secrets.length === 0) return { code: 0, out: `account ${account} has no webhook secret yet (one is made at its first delivery; rotate to get one shown)` };
      return { code: 0, out: columns(['ID', 'SECRET', 'CREATED', 'SIGNS UNTIL'], secrets.map((s) => [s.id, s.secret_prefix, s.created_at, s.expires_at ?? 'next rotation'])) };
    },
  },
];
