// The Exim world of real-postfix-job.ts (REALJ_MTA=exim): the same 200 domains, mailboxes and 10
// listeners, served by ONE Exim daemon (Debian 12's exim4-daemon-light, Exim 4.96) with Exim's
// own defaults where the Postfix world has Postfix's:
//   - smtp_accept_max = 20 (Exim's default: 20 incoming sessions at once for the whole daemon;
//     the 21st gets `421 ... Too many concurrent SMTP connections; please try again later.`),
//     smtp_accept_max_per_host = 5 (set, as the Postfix world's per-client limit: Exim counts it
//     per client address over every listener, and the latency proxy gives each MX host its own
//     client address), no limit on rejected recipients (Exim counts only syntax and protocol
//     errors, smtp_max_synprot_errors = 3), recipients_max = 50000 (4.96's default).
//     REALJ_EXIM_ACCEPT_MAX=100 at setup lifts the daemon-wide cap: each listener then behaves as
//     a server of its own (the per-host limit binds, as in the Postfix world).
//   - TLS offered (tls_advertise_hosts = *, the Postfix world's self-signed certificate).
//   - An unknown recipient fails `verify = recipient` in the RCPT ACL: `550 Unrouteable address`.
//   - No ident or reverse lookups of clients (rfc1413_query_timeout = 0s; host_lookup unset).
// Its own config file and pid file: Debian's exim4 service (port 25) is left alone.
//
// Setup (root, once): DEBIAN_FRONTEND=noninteractive apt-get install -y exim4-daemon-light, then
// `node --import tsx bench/engine/real-postfix-job.ts setup` (the Postfix world writes the
// certificate; with Postfix absent, REALJ_MTA=exim … setup writes it under /etc/exim4).

import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { livePidIn } from '../lib/proc.ts';

export const EXIM_CONF = '/etc/exim4/bench.conf';
export const EXIM_LOG = '/var/log/exim4/mainlog';
const PID = '/run/exim4/bench.pid';
const USERS = '/etc/exim4/bench-users';
const DOMAINS = '/etc/exim4/bench-domains';
const CERT = '/etc/exim4/bench-cert.pem';
const KEY = '/etc/exim4/bench-key.pem';

function conf(ports: number[], perHost: number, acceptMax: number | undefined): string {
  return `# bench/engine/real-exim.ts (by-hand benchmark): one daemon, Exim's defaults but for the lines below
primary_hostname = mx.exim-host.test
domainlist local_domains = lsearch;${DOMAINS}
local_interfaces = 127.0.0.1
daemon_smtp_ports = ${ports.join(' : ')}
smtp_accept_max_per_host = ${perHost}
${acceptMax === undefined ? '' : `smtp_accept_max = ${acceptMax}\n`}rfc1413_query_timeout = 0s
tls_advertise_hosts = *
tls_certificate = ${CERT}
tls_privatekey = ${KEY}
acl_smtp_rcpt = acl_check_rcpt
log_selector = +smtp_connection +tls_cipher

begin acl
acl_check_rcpt:
  deny    domains = !+local_domains
          message = relay not permitted
  require verify = recipient
  accept

begin routers
bench_user:
  driver = accept
  domains = +local_domains
  condition = \${lookup{\${local_part}@\${domain}}lsearch{${USERS}}{yes}{no}}
  transport = devnull

begin transports
devnull:
  driver = appendfile
  file = /dev/null
  user = Debian-exim
`;
}

/** Writes the config, the domain and user lists, and the certificate if missing. */
export function setupExim(o: { ports: number[]; perHost: number; acceptMax?: number; domains: string[]; users: string[] }): void {
  if (!existsSync(CERT)) {
    if (existsSync('/etc/postfix/bench-cert.pem')) {
      writeFileSync(CERT, readFileSync('/etc/postfix/bench-cert.pem'));
      writeFileSync(KEY, readFileSync('/etc/postfix/bench-key.pem'), { mode: 0o640 });
    } else execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', KEY, '-out', CERT, '-days', '365', '-subj', '/CN=mx.exim-host.test'], { stdio: 'inherit' });
    execFileSync('chgrp', ['Debian-exim', KEY]);
    execFileSync('chmod', ['640', KEY]);
  }
  writeFileSync(EXIM_CONF, conf(o.ports, o.perHost, o.acceptMax));
  writeFileSync(DOMAINS, o.domains.join('\n') + '\n');
  writeFileSync(USERS, o.users.join('\n') + '\n');
  execFileSync('exim4', ['-C', EXIM_CONF, '-bV'], { stdio: 'ignore' });
  console.log(`wrote ${EXIM_CONF}, ${DOMAINS} (${o.domains.length}), ${USERS} (${o.users.length}); listeners 127.0.0.1:${o.ports[0]}..${o.ports[o.ports.length - 1]}`);
}

const daemonPid = (): number | undefined => livePidIn(PID);

export async function stopExim(): Promise<void> {
  const pid = daemonPid();
  if (pid === undefined) return;
  process.kill(pid, 'SIGTERM');
  for (let i = 0; i < 200 && daemonPid() !== undefined; i++) await sleep(50);
}

/** A fresh daemon (no sessions counted, nothing cached). */
export async function restartExim(settleMs: number): Promise<void> {
  await stopExim();
  execFileSync('exim4', ['-C', EXIM_CONF, '-oP', PID, '-bd'], { stdio: 'ignore' });
  for (let i = 0; i < 100 && daemonPid() === undefined; i++) await sleep(50);
  await sleep(settleMs);
}

export const eximLogSize = (): number => (existsSync(EXIM_LOG) ? statSync(EXIM_LOG).size : 0);

/** Counts in the part of Exim's main log written since `from`, under the Postfix world's names where one fits. */
export function eximLogCounts(from: number): Record<string, number> {
  const size = eximLogSize();
  const text = size > from ? readFileSync(EXIM_LOG).subarray(from).toString('utf8') : '';
  const count = (re: RegExp) => (text.match(re) ?? []).length;
  return {
    connections: count(/SMTP connection from /g) - count(/SMTP connection from .* (closed|lost|refused)/g),
    // The per-host limit and the daemon's smtp_accept_max: both a 421 at the banner.
    anvilRefusals: count(/Connection from .* refused: too many connections from that IP address/g),
    acceptMaxRefusals: count(/Connection from .* refused: too many connections$/gm),
    tooManyErrors: count(/too many (syntax or protocol errors|unrecognized commands|nonmail commands)/g),
    lostConnection: count(/SMTP connection from .* lost/g),
    timeouts: count(/SMTP command timeout|SMTP data timeout/g),
    rejectUnknown: count(/rejected RCPT <[^>]*>: Unrouteable address/g),
    transactions: 0,
    rset: 0,
  };
}
