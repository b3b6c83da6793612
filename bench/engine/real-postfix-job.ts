// A by-hand benchmark of the SERVICE (the embedded profile, `npm start`) against ONE real Postfix,
// end to end through the job API, beside a reference client written here, on the same addresses
// in the same sitting. NOT part of `npm run bench`: it needs root and Debian's Postfix package, it
// overwrites /etc/postfix/main.cf and master.cf (so it cannot share a machine with the postmulti
// setup of real-postfix.ts, whose instances listen on the same ports), and it writes
// /var/log/postfix.log. It shares real-postfix.ts's latency proxy (forked as its `proxy` mode).
//
// The world:
//   - ONE Postfix instance (Debian 12, postfix 3.7.x) with Debian's defaults: default_process_limit
//     = 100 (so 100 flow tokens for the whole instance after a start), in_flow_delay = 1s, error
//     limits 10/20 with the 1 s error sleep, junk command limit 100, recipient limit 1000. Set:
//     smtpd_client_connection_count_limit = 5, smtpd_client_event_limit_exceptions = (empty: no
//     exception for 127/8), smtpd_tls_security_level = may with a self-signed certificate
//     (openssl), smtpd_tls_loglevel = 1, the TLS session cache of Debian's stock main.cf,
//     smtpd_peername_lookup = no (no resolver to ask), no chroot.
//   - 10 listeners, 127.0.0.1:2631..2640 (master.cf entries), one per MX host: anvil counts per
//     listener and client address, the flow-token pool and the process limit are the instance's.
//   - 200 domains d000..d199.bench.test, 20 per MX host (domain i on mx(i % 10 + 1)); each has 40
//     existing mailboxes (p0.smith .. p39.smith, hash map) and 10 unknown ones (x0.gone .. x9.gone):
//     10,000 addresses, shuffled (seeded). Unknown users get `550 5.1.1 <x>: Recipient address
//     rejected: User unknown in virtual mailbox table`.
//   - The link: real-postfix.ts `proxy` (25 ms each way, the server's accept 75 ms after the
//     connect, one source IP per MX host 127.0.3.N, listens on the MX addresses 127.0.31.N).
//   - DNS: test/sim/dns.ts on a random port in this process (MX and A records of the world).
//
// Phases, each on a freshly restarted Postfix (flow tokens and anvil reset), logs counted from
// /var/log/postfix.log per phase (connections, anvil refusals, error-limit disconnects, transactions
// = `client=` lines, TLS sessions, the `disconnect from` command counts):
//   R      the reference client below, STARTTLS when offered, on the 10,000.
//   Rplain the reference client without STARTTLS.
//   J      the service: `node --import tsx cluster/embedded.ts` (what `npm start` runs) as a child,
//          PGlite in a temp SVC_DATA_DIR, SVC_DNS_SERVERS = the bench DNS, SVC_SMTP_PORT = the
//          proxy's port, SVC_BOOTSTRAP_API_KEY + SVC_BOOTSTRAP_CREDITS (its first-start account),
//          SVC_READY_DOMAIN = a name whose MX is not served (readiness never opens a connection to
//          Postfix), other settings at their defaults. Timed from POST /v1/validate/batch (the
//          10,000 as one JSON job) to GET /v1/csv/jobs/{id} answering `completed` (polled every
//          100 ms); then the results CSV (download?mode=url, the signed URL) and every row checked.
//   R800   the reference client on the first 800 addresses of the list.
//   S      a fresh service: 8 × 100 of those 800 in parallel through POST /v1/validate/bulk.
//   R2     the reference client again (drift of the sitting).
//   With REALJ_SERVER_NOTLS=1 also, after them, smtpd_tls_security_level = none: Jnone and Rnone.
// Truth: existing → result `valid`, reason_code `accepted`; unknown → `invalid`,
// `mailbox_not_found` (the API's field names); every verdict is checked.
//
// The reference client (referenceRun): MX-scheduled (one queue per MX host, MX and A looked up
// once), at most 5 sessions per host, each waits for the 221 and the server's close before its
// slot opens another; one transaction per session (MAIL pipelined with the first RCPTs, no RSET),
// RCPTs pipelined in a window of (9 − rejections so far) so a session never makes a 10th error
// (the soft limit's 1 s sleeps) and the junk limit is never near; a session ends when its 9
// rejections are spent or the queue is empty. Like the service it probes one random local part
// per domain (the catch-all check: one more rejection per domain). STARTTLS when offered, TLS
// sessions resumed per host. A 421 banner (anvil) is counted and the slot retries after 50 ms.
//
//   1. Postfix (once):
//        echo 'postfix postfix/main_mailer_type select No configuration' | debconf-set-selections
//        DEBIAN_FRONTEND=noninteractive apt-get install -y postfix
//        node --import tsx bench/engine/real-postfix-job.ts setup
//   2. node --import tsx bench/engine/real-postfix-job.ts anvil-lag   (prints; REALJ_ANVIL_OUT=file too)
//      Anvil's count-down lag: straight at listener 1 (no proxy) from 127.0.4.1, hold 5 sessions,
//      close one (REALJ_ANVIL_HOW: quit-fin = QUIT, 221, server's FIN; quit-221 = QUIT, 221, then
//      close; quit-close = QUIT and close at once; reset = TCP reset), reconnect after each of
//      REALJ_ANVIL_DELAYS ms, REALJ_ANVIL_REPS times in random order, count 421 banners.
//   3. node --import tsx bench/engine/real-postfix-job.ts [run]
//        REALJ_N=10000 REALJ_S=800 REALJ_PHASES=R,Rplain,J,R800,S,R2 REALJ_SERVER_NOTLS=0
//        REALJ_SERVICE_NODE_ARGS='--cpu-prof --cpu-prof-dir=/tmp/prof' (node options of the service)
//
// Measured by hand on 2 cores shared with 5 other helpers' builds and tests (load average 7-20:
// every figure is noisy; compare phases of one run). Postfix 3.7.11-0+deb12u1. Command: runs 1-3
// and 9 REALJ_SERVER_NOTLS=1 node --import tsx bench/engine/real-postfix-job.ts run; run 4
// REALJ_PHASES=R,J; 5-8 as noted. addresses/s (seconds); 0 wrong verdicts in EVERY phase of every
// run (service: every row of the results CSV / every bulk result; reference: every RCPT reply).
// "rev" is the commit the run was made at; the service's code was the same in runs 1-10
// (1ee3ad0, the branch point: the later commits of this branch touch bench/ only).
//   run (UTC, rev, load)       R            Rplain       J                      R800        S           R2          Jnone                 Rnone
//   1 07:17 c6c229b 6.8-13.1   866 (11.5)   975 (10.3)   448 (22.3) 285 sess.   384 (2.1)   244 (3.3)   781 (12.8)  163 (61.5) 850 sess.  854 (11.7)
//   2 07:22 3fde2af 9.3-12.7   845 (11.8)   961 (10.4)   190 (52.6) 442, anvil 1 492 (1.6)  270 (3.0)   746 (13.4)  395 (25.3) 305       871 (11.5)
//   3 07:34 30a0d79 10.7-17.5  732 (13.7)   760 (13.2)   407 (24.6) 278         325 (2.5)   403 (2.0)   807 (12.4)  552 (18.1) 281       1,011 (9.9)
//   4 07:37 7c618da 9.5-10.6   895 (11.2)   -            409 (24.5) 315         -           -           -           -                     -
//   5 07:41 8144a77 14.4-19.7  657 (15.2)   -            -                      -           -           -           290 (34.4) 281       834 (12.0)
//     (REALJ_PHASES=R REALJ_SERVER_NOTLS=1)
//   6 07:43 8144a77 18-20.6    791 (12.6)   -            195 (51.2) 387         -           -           771 (13.0)  -                     -
//     (REALJ_PHASES=R,J,R2 nice -n -10 node …: the bench, proxy and service ahead of the other
//     helpers' processes; J/R 0.25: the service's slowness is not just its share of the CPU)
//   7 07:45 120e98e 17.7-19.8  -            -            171 (58.6) 616, anvil 1 (REALJ_PHASES=J, the service under --cpu-prof)
//   8 07:47 d4f51ea 16-19.1    688 (14.5)   831 (12.0)   99 (101.2) 1,429, anvil 7  210 (3.8)  187 (4.3)  677 (14.8)  (no TLS-off phases)
//   9 07:52 b42ca0f 11.5-20.2  738 (13.5)   825 (12.1)   453 (22.1) 294         308 (2.6)   228 (3.5)   884 (11.3)  374 (26.8) 273, anvil 2  693 (14.4)
//     (J's sessions by rejections: 214 at 9, 17 at 1; the reference's 225 at 9; status polls
//     p50/p90/max 8/162/513 ms)
//  10 07:55 db36448 13.7-15.7  656 (15.2)   -            311 (32.1) 290         337 (2.4)   279 (2.9)   758 (13.2)  (REALJ_PHASES=R,J,R800,S,R2;
//     status polls 20/258/1008 ms; J's sessions: 216 at 9 rejections, 10 at 1)
// STARTTLS cost at low load (08:22-08:26, load 3.4-5.2, this branch, service code 1ee3ad0;
// REALJ_PHASES=R,Rplain,J REALJ_SERVER_NOTLS=1 node --import tsx bench/engine/real-postfix-job.ts run, twice):
//   R 896 / 866, Rplain 994 / 1,045, Rnone 1,010 / 989: the reference client is 1.11-1.21x faster
//   without TLS (Rplain/R 1.11, 1.21; Rnone/R 1.13, 1.14).
//   J 537 / 549, Jnone 615 / 603: the service is 1.10-1.14x faster with TLS off at the server
//   (Jnone/J 1.14, 1.10); its CPU 5.95 / 6.05 s with TLS vs 5.58 / 5.60 s without (~285 TLS
//   sessions: ~1.4 ms of CPU each). J/R 0.60, 0.63; sessions 285-289 with TLS, 276-281 without;
//   anvil 0 / 1; flow waits in Jnone 180 of 280, 174 of 274 transactions.
// On main at f42d503 (every change of the day merged: per-address gates, the slot freed on the
// 221, the open policy, the slow-reply check confirmed by a second late reply, MX-host in-flight
// budgets in the job worker, and the fix of a microtask loop between the pump and the gate),
// 08:57-09:03 UTC, load 1.9-3.2, REALJ_PHASES=R,J,R800,S,R2, three runs:
//   R 909 / 1,018 / 988   J 792 / 898 / 885   J/R 0.87 / 0.88 / 0.90 (J/R2 0.80 / 0.90 / 0.90)
//   S/R800 1.23 / 1.14 / 1.16; J sessions 250 / 251 / 250 (R 272 / 268 / 275), 1 transaction each;
//   0 anvil refusals, 0 error-limit disconnects, 0 RSET, 0 wrong verdicts in every phase.
// Earlier the same day, on the code the runs below name:
// With the other helpers' branches (merged on scratch branches, not on this one), 08:08-08:21 UTC,
// load 4-8 (quieter than runs 1-10), REALJ_PHASES=R,J,R800,S,R2, three rounds, each round
// engine / tail / base one after the other (base = this branch at a360f5d, service code 1ee3ad0):
//   engine = + h18-engine at 2deeb92 (merge 0ab3bb2). h18-tail (fdffbf2) conflicts with it in
//   packages/engine/src/mx-actor.ts and packages/engine/test/engine.test.ts, so
//   tail = + h18-tail at fdffbf2 alone (merge 635b2e3).
//   Round 2 at 08:40: neither branch had new commits (both skipped); instead a fourth round of the
//   same three (08:40-08:44, load 2.6-4.5; base at 0c8d1d2, the same service code), the last column.
//   code    J addresses/s (s)                   J/R                    S/R800                 J sessions       sessions at 9 / 1 rejections   Postfix waiting for J
//   base    565 (17.7) 629 (15.9) 540 | 588     0.61 0.69 0.61 | 0.63  0.80 1.01 0.96 | 1.32  285 283 283 | 283  218/11 214/3 218/6 | 212/6     312 240 262 | 246 s
//   engine  520 (19.2) 469 (21.3) 479 | 577     0.56 0.49 0.51 | 0.60  0.98 0.97 1.10 | 1.23  286 286 277 | 282  219/11 212/10 219/6 | 210/6    288 321 241 | 243 s
//   tail    515 (19.4) 601 (16.6) 544 | 707     0.55 0.61 0.59 | 0.73  1.22 1.17 1.29 | 1.09  254 261 256 | 255  228/0 208/0 219/2 | 221/0     194 167 176 | 126 s
//   R in those runs 881-978/s (10.2-11.4 s, 268-279 sessions); R800 381-578/s, S 343-630/s; 0 wrong
//   verdicts, 0 anvil refusals, 0 error-limit disconnects in every phase. At this load no run had
//   the error budget collapse of runs 2, 7, 8; tail makes fewer sessions than the reference client
//   (254-261 vs 268-279: 1 transaction each, so 154-159 flow waits instead of ~170) and leaves
//   Postfix waiting less, yet J/R stays 0.55-0.61: the service's sessions still wait for it.
//   (an interrupted run at 07:30, load 13-16: R 485, Rplain 984, J 273 with 366 sessions and 1 anvil
//   refusal, R800 266, S 492, R2 800: another run restarted Postfix during its Jnone, hence the lock.)
// Ratios: J/R = 0.52, 0.23, 0.56, 0.46, (6) 0.25, (8) 0.14, (9) 0.61, (10) 0.47; S/R800 = 0.64,
// 0.55, 1.24, (8) 0.89, (9) 0.74, (10) 0.83
// (800 addresses take 1.6-4.3 s: within the noise); TLS for the reference client: Rplain/R = 1.13,
// 1.14, 1.04, (8) 1.21, (9) 1.12 (STARTTLS + handshake + second EHLO ~190 ms per session, 92% of
// them resumed); server TLS off vs may: Rnone/R 0.99, 1.03, 1.38, (9) 0.94; Jnone/J 0.36, 2.07,
// 1.36, (9) 0.82 (the service's variance swamps TLS at this load; at load 3-5 below: 1.10-1.14).
// Sessions (Postfix `connect from`) and transactions (`client=` lines): the reference client
// 267-276 sessions, 262-271 transactions, 0 anvil refusals, 0 error-limit disconnects, 0 RSET,
// every session TLS in R/R2 (starttls=1); the service 278-1,429 sessions (850 in run 1's Jnone),
// 0-7 anvil refusals per job (`Connection concurrency limit exceeded: 6`), 0 error-limit
// disconnects, 0 RSET, 0 `lost connection`, every session TLS when offered. S vs R800: 57-61 vs
// 58-63 sessions, 51 transactions each.
// What the figures say:
//   - Flow tokens: ONE instance with default_process_limit = 100 gives 100 delay-free transactions
//     after a start and none after (qmgr puts no more while nothing is delivered): every
//     transaction past the 100th waits in_flow_delay (reference Rplain: 168-171 of 268-271
//     delayed; the service's plain sessions in Jnone: 176 of 276, 201 of 301, 731 of 789). So a
//     client's cost is ~1 s per transaction past 100, spread over its 50 sessions: transactions
//     (= sessions, one transaction each) are what to save. Nobody gets below 10,000 / 45 ≈ 245
//     sessions here (9 rejections per session, 2,200 rejections with the catch-all probes).
//   - The service makes about as many sessions as the reference client in its good runs but is
//     2x slower per host (hosts end at 16-24 s vs 10-11 s): its sessions last 2.8-4.1 s on
//     average vs 1.6-2.2 s, and the proxy sees Postfix waiting for the SERVICE for 327-417 s
//     summed over a job's sessions (reference: 0-34 s); run 4: 100 waits over 1 s, 383 of
//     0.2-1 s, 785 of 50-200 ms (reference: 0 / 4 / 110). The sessions are open and idle: the
//     engine is not fed as fast as Postfix answers (job pipeline, per-domain order, idle timer?
//     not established here). In plain sessions (run 5's Jnone) the waits come before RCPT (1,376
//     waits, 468 s, ~0.34 s each), before QUIT (152, 176 s: ~1.2 s, the idle wait), before EHLO
//     (143, 38 s: ~0.27 s after the banner, where the engine has nothing to decide) and before MAIL
//     (122, 43 s); the reference's: 6 before EHLO (0.4 s), 61 before RCPT (3.6 s). Waits right
//     after the banner point at the service's event loop being busy (the job pipeline, PGlite and
//     the HTTP polling share it with the SMTP sessions) more than at the engine's scheduling; the
//     service spent 5.6-8.1 s of CPU per 10,000-address job (0.6-0.8 ms per address) where the
//     reference client spent 1.1-1.4 s. Sync bulk (S), which has no job pipeline, kept up with the
//     reference client (S/R800 0.55-1.24, within the noise of 2-s phases).
//   - The service's error budget collapses in the bad runs: Postfix's `disconnect` lines
//     (rcpt=accepted/sent) show 1,130 of run 8's 1,382 sessions (328 of run 7's 596) ending after
//     exactly ONE rejection, where the reference client ends ~220 of ~265 at 9. The proxy saw no
//     error sleep in any run (errorSleeps 0), so the verifier's slow-reply rule (a reply later than
//     rtt + 800 ms after a rejection lowers the host's error budget) fired on something else:
//     likely the service's own event-loop stalls (status polls: p50 4-7 ms, p90 42-113 ms, max
//     0.75-2.5 s in runs 7-8, load 17-20). Each extra session is a transaction and every one past
//     the 100th waits 1 s: 1,183 transactions in run 8.
//   - The one-host tail: run 2's J had host 6 end at 52 s (the others 24-27 s, host 9 37 s), with
//     442 sessions; run 1's Jnone made 850 sessions (789 transactions, each a flow wait past the
//     100th) on the same code: the engine's session count is unstable under this load.
//   - Anvil: 0 refusals for the reference client (it waits for the 221 and the close), 0-7 per job
//     for the service (7 in run 8 with its 1,429 sessions). Count-down lag (anvil-lag mode): after a READ 221 a reconnect
//     was never refused, even at 0 ms (0/420); after a close without the 221 (QUIT + close, or a
//     reset) refusals up to 100 ms after it (load 11-15; ~20 ms at load 5-10; only at 0 ms, 2-3
//     of 20, at load 2.5-3). Command: REALJ_ANVIL_HOW=quit-221,quit-close,reset
//     REALJ_ANVIL_DELAYS=0,5,10,20,50,100 node --import tsx bench/engine/real-postfix-job.ts anvil-lag

import { spawn, execFileSync, fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { Resolver } from 'node:dns/promises';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { fileURLToPath } from 'node:url';
import { parse as parseCsv } from 'csv-parse/sync';
import { startDns, type Zone } from '../../test/sim/dns.ts';
import { seededRandom } from '../../test/helpers/random.ts';
import { statsSince, type FlowStats } from './real-postfix.ts';
import { eximLogCounts, eximLogSize, EXIM_LOG, restartExim, setupExim, stopExim } from './real-exim.ts';
import { POSTFIX_HOSTS, worldHosts } from './world.ts';
import { alive, livePidIn, procCpuMs } from '../lib/proc.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const LOG = '/var/log/postfix.log';
const HELO = 'verifier.bench.test';
const MAIL_FROM = 'probe@verifier.bench.test';
const CONNS = 5;
/** Rejections a session may take: one fewer than smtpd_soft_error_limit (10). */
const REJECT_BUDGET = 9;
const listenerPort = (i: number) => 2631 + i;
const EXISTING = 40;
const UNKNOWN = 10;
const N = Number(process.env.REALJ_N ?? 10_000);
const S_N = Number(process.env.REALJ_S ?? 800);
const PHASES = (process.env.REALJ_PHASES ?? 'R,Rplain,J,R800,S,R2').split(',');
const SERVER_NOTLS = process.env.REALJ_SERVER_NOTLS === '1';
/** The mail server of the world: Postfix (the default) or Exim (real-exim.ts). */
const MTA = process.env.REALJ_MTA === 'exim' ? 'exim' : 'postfix';
const SETTLE_MS = 500;
const FLOW_WAIT_MS = 900;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pad = (n: number) => String(n).padStart(3, '0');

interface Addr {
  email: string;
  domain: string;
  exists: boolean;
}

/** 200 domains × (40 existing + 10 unknown), shuffled with a seeded generator. */
function addresses(seed = 7): Addr[] {
  const out: Addr[] = [];
  for (let d = 0; d < POSTFIX_HOSTS * 20; d++) {
    const domain = `d${pad(d)}.bench.test`;
    for (let k = 0; k < EXISTING; k++) out.push({ email: `p${k}.smith@${domain}`, domain, exists: true });
    for (let k = 0; k < UNKNOWN; k++) out.push({ email: `x${k}.gone@${domain}`, domain, exists: false });
  }
  const rnd = seededRandom(seed);
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Postfix

const MAIN_CF = `# bench/engine/real-postfix-job.ts setup (by-hand benchmark): one instance, Debian's defaults
compatibility_level = 3.6
myhostname = mx.postfix-host.test
mydomain = postfix-host.test
myorigin = $myhostname
mydestination = localhost
mynetworks = 127.0.0.1/32
inet_interfaces = loopback-only
inet_protocols = ipv4
smtpd_banner = $myhostname ESMTP Postfix
biff = no
maillog_file = ${LOG}
smtpd_peername_lookup = no
smtpd_client_connection_count_limit = ${CONNS}
smtpd_client_event_limit_exceptions =
smtpd_relay_restrictions =
smtpd_recipient_restrictions = reject_unauth_destination
virtual_mailbox_domains = /etc/postfix/vdomains
virtual_mailbox_maps = hash:/etc/postfix/vmailbox
alias_maps =
alias_database =
virtual_mailbox_base = /var/mail/vhosts
virtual_uid_maps = static:5000
virtual_gid_maps = static:5000
smtpd_tls_cert_file = /etc/postfix/bench-cert.pem
smtpd_tls_key_file = /etc/postfix/bench-key.pem
smtpd_tls_security_level = may
smtpd_tls_loglevel = 1
smtpd_tls_session_cache_database = btree:\${data_directory}/smtpd_scache
`;

function setup(): void {
  if (existsSync('/etc/postfix-mx1')) console.warn('warning: /etc/postfix-mx1 exists (real-postfix.ts setup): its instances use the same ports; do not start them');
  const run = (...args: string[]) => execFileSync(args[0]!, args.slice(1), { stdio: 'inherit' });
  if (!existsSync('/etc/postfix/bench-cert.pem'))
    run('openssl', 'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', '/etc/postfix/bench-key.pem', '-out', '/etc/postfix/bench-cert.pem', '-days', '365', '-subj', '/CN=mx.postfix-host.test');
  writeFileSync('/etc/postfix/main.cf', MAIN_CF);
  const all = addresses();
  const domains = [...new Set(all.map((a) => a.domain))].sort();
  writeFileSync('/etc/postfix/vdomains', domains.join('\n') + '\n');
  writeFileSync('/etc/postfix/vmailbox', all.filter((a) => a.exists).map((a) => `${a.email} ${a.domain}/${a.email.split('@')[0]}/`).join('\n') + '\n');
  run('postmap', '/etc/postfix/vmailbox');
  try {
    execFileSync('postconf', ['-M#', 'smtp/inet'], { stdio: 'ignore' });
  } catch {
    /* already off */
  }
  for (let i = 0; i < POSTFIX_HOSTS; i++) run('postconf', '-M', `127.0.0.1:${listenerPort(i)}/inet=127.0.0.1:${listenerPort(i)} inet n - n - - smtpd`);
  run('postconf', '-F', '*/*/chroot=n');
  run('postfix', 'check');
  console.log(`wrote /etc/postfix/main.cf, vdomains (${domains.length}), vmailbox (${all.filter((a) => a.exists).length}), ${POSTFIX_HOSTS} listeners 127.0.0.1:${listenerPort(0)}..${listenerPort(POSTFIX_HOSTS - 1)}`);
}

const masterPid = (): number | undefined => livePidIn('/var/spool/postfix/pid/master.pid');

async function stopPostfix(): Promise<void> {
  if (masterPid() === undefined) return;
  try {
    execFileSync('postfix', ['stop'], { stdio: 'ignore' });
  } catch {
    /* not running */
  }
  for (let i = 0; i < 200 && masterPid() !== undefined; i++) await sleep(50);
}

async function restartPostfix(): Promise<void> {
  await stopPostfix();
  execFileSync('postfix', ['start'], { stdio: 'ignore' });
  for (let i = 0; i < 100 && masterPid() === undefined; i++) await sleep(50);
  await sleep(SETTLE_MS);
}

const logSize = () => (existsSync(LOG) ? statSync(LOG).size : 0);

/** Set by logCounts: per MX host, seconds from the first connect to the host's last disconnect. */
const hostEnds = { value: '' };
/** Set by logCounts: sessions by their number of rejected RCPTs, `rejections:sessions`. */
const rejectionsPerSession = { value: '' };

/** Counts in the part of the Postfix log written since `from`. */
function logCounts(from: number): Record<string, number> {
  const size = logSize();
  const text = size > from ? readFileSync(LOG).subarray(from).toString('utf8') : '';
  const count = (re: RegExp) => (text.match(re) ?? []).length;
  const cmd: Record<string, number> = {};
  for (const m of text.matchAll(/smtpd\[\d+\]: disconnect from \S+ (.*)$/gm)) {
    for (const [, k, a, b] of m[1]!.matchAll(/(\w+)=(\d+)(?:\/(\d+))?/g)) {
      cmd[k!] = (cmd[k!] ?? 0) + Number(a);
      if (b !== undefined) cmd[`${k}Sent`] = (cmd[`${k}Sent`] ?? 0) + Number(b);
    }
  }
  // Per MX host (client 127.0.3.N): seconds from the phase's first connect to the host's last disconnect.
  const sec = (line: string) => {
    const m = /^\w+ +\d+ (\d\d):(\d\d):(\d\d)/.exec(line);
    return m ? Number(m[1]) * 3600 + Number(m[2]) * 60 + Number(m[3]) : NaN;
  };
  let first = NaN;
  const lastEnd = new Map<number, number>();
  for (const m of text.matchAll(/^.*smtpd\[\d+\]: (connect|disconnect) from \S+\[127\.0\.3\.(\d+)\].*$/gm)) {
    const t = sec(m[0]);
    if (m[1] === 'connect' && Number.isNaN(first)) first = t;
    if (m[1] === 'disconnect') lastEnd.set(Number(m[2]), t);
  }
  // Rejections per session (rcpt=accepted/sent of the disconnect line): a client that keeps its
  // error budget ends most sessions at 9.
  const perSession = new Map<number, number>();
  for (const m of text.matchAll(/smtpd\[\d+\]: disconnect from \S+ .*\brcpt=(\d+)\/(\d+)/g)) {
    const r = Number(m[2]) - Number(m[1]);
    perSession.set(r, (perSession.get(r) ?? 0) + 1);
  }
  rejectionsPerSession.value = [...perSession].sort((a, b) => a[0] - b[0]).map(([r, k]) => `${r}:${k}`).join(' ');
  hostEnds.value = [...lastEnd].sort((a, b) => a[0] - b[0]).map(([, t]) => t - first).join('/');
  return {
    connections: count(/smtpd\[\d+\]: connect from /g),
    anvilRefusals: count(/Connection concurrency limit exceeded/g),
    tooManyErrors: count(/too many errors after/g),
    lostConnection: count(/lost connection after/g),
    timeouts: count(/timeout after/g),
    transactions: count(/smtpd\[\d+\]: [0-9A-F]+: client=/g),
    rejectUnknown: count(/User unknown in virtual mailbox table/g),
    tlsEstablished: count(/TLS connection established from/g),
    warnings: count(/warning:/g),
    rcptAccepted: cmd.rcpt ?? 0,
    rcptSent: cmd.rcptSent ?? 0,
    mail: cmd.mail ?? 0,
    rset: cmd.rset ?? 0,
    starttls: cmd.starttls ?? 0,
  };
}

// ---------------------------------------------------------------------------------------------
// Anvil's count-down lag

/** One plain connection's first reply code (the banner), the socket kept open if it was 220. */
function connectBanner(port: number, localAddress: string): Promise<{ code: number; socket: net.Socket }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port, localAddress });
    socket.setNoDelay(true);
    let buf = '';
    const onData = (c: Buffer) => {
      buf += c.toString('latin1');
      const nl = buf.indexOf('\n');
      if (nl < 0) return;
      socket.off('data', onData);
      resolve({ code: Number(buf.slice(0, 3)), socket });
    };
    socket.on('data', onData);
    socket.once('error', reject);
    socket.once('close', () => reject(new Error('closed before the banner')));
  });
}

/** QUIT, then the 221 and (with `waitClose`) the server's FIN; or an abrupt close. */
function closeOne(socket: net.Socket, how: 'quit-221' | 'quit-fin' | 'quit-close' | 'reset'): Promise<void> {
  socket.removeAllListeners('close');
  socket.removeAllListeners('error');
  socket.on('error', () => {});
  if (how === 'reset') {
    socket.resetAndDestroy();
    return Promise.resolve();
  }
  if (how === 'quit-close') {
    socket.end('QUIT\r\n');
    socket.destroySoon();
    return Promise.resolve();
  }
  return new Promise((resolve) => {
    let buf = '';
    socket.on('data', (c: Buffer) => {
      buf += c.toString('latin1');
      if (how === 'quit-221' && /^221 /m.test(buf)) {
        socket.destroy();
        resolve();
      }
    });
    socket.once('close', () => resolve());
    socket.write('QUIT\r\n');
  });
}

async function anvilLag(): Promise<void> {
  await restartPostfix();
  const port = listenerPort(0);
  const src = '127.0.4.1';
  const held: net.Socket[] = [];
  const fill = async () => {
    for (let tries = 0; held.length < CONNS && tries < 200; tries++) {
      const r = await connectBanner(port, src).catch(() => undefined);
      if (r?.code === 220) {
        r.socket.on('error', () => {});
        held.push(r.socket);
      } else {
        r?.socket.destroy();
        await sleep(50);
      }
    }
    if (held.length < CONNS) throw new Error('could not hold 5 sessions');
  };
  const delays = (process.env.REALJ_ANVIL_DELAYS ?? '0,2,5,10,20,50,100').split(',').map(Number);
  const hows = (process.env.REALJ_ANVIL_HOW ?? 'quit-fin,quit-221,quit-close,reset').split(',') as ('quit-221' | 'quit-fin' | 'quit-close' | 'reset')[];
  const REPS = Number(process.env.REALJ_ANVIL_REPS ?? 20);
  const lines: string[] = [];
  try {
    for (const how of hows) {
      const refused = new Map<number, number>(delays.map((d) => [d, 0]));
      const order = delays.flatMap((d) => Array.from({ length: REPS }, () => d));
      const rnd = seededRandom(3);
      for (let i = order.length - 1; i > 0; i--) {
        const j = Math.floor(rnd() * (i + 1));
        [order[i], order[j]] = [order[j]!, order[i]!];
      }
      for (const d of order) {
        await fill();
        await sleep(150);
        await closeOne(held.shift()!, how);
        if (d > 0) await sleep(d);
        const r = await connectBanner(port, src).catch(() => undefined);
        if (r?.code === 220) {
          r.socket.on('error', () => {});
          held.push(r.socket);
        } else {
          refused.set(d, refused.get(d)! + 1);
          r?.socket.destroy();
        }
      }
      const line = `${how}: refused (421) / tries by delay after the close: ${delays.map((d) => `${d} ms ${refused.get(d)}/${REPS}`).join(', ')}`;
      console.log(line);
      lines.push(line);
    }
  } finally {
    for (const s of held) s.destroy();
  }
  console.log(`load ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);
  if (process.env.REALJ_ANVIL_OUT) writeFileSync(process.env.REALJ_ANVIL_OUT, lines.join('\n') + '\n');
}

// ---------------------------------------------------------------------------------------------
// The reference client

/** SMTP replies off a socket (multi-line replies joined), in order. */
class Replies {
  #buf = '';
  #lines: string[] = [];
  #queue: { code: number; text: string; at: number }[] = [];
  #waiter: ((r: { code: number; text: string; at: number }) => void) | undefined;
  #fail: ((e: Error) => void) | undefined;
  #error: Error | undefined;
  readonly onData = (chunk: Buffer): void => {
    const at = performance.now();
    this.#buf += chunk.toString('latin1');
    for (let nl = this.#buf.indexOf('\n'); nl >= 0; nl = this.#buf.indexOf('\n')) {
      const line = this.#buf.slice(0, nl).replace(/\r$/, '');
      this.#buf = this.#buf.slice(nl + 1);
      this.#lines.push(line);
      if (line[3] === '-') continue;
      const r = { code: Number(line.slice(0, 3)), text: this.#lines.join('\n'), at };
      this.#lines = [];
      const w = this.#waiter;
      if (w) {
        this.#waiter = this.#fail = undefined;
        w(r);
      } else this.#queue.push(r);
    }
  };
  readonly onEnd = (): void => this.onError(new Error('connection closed'));
  readonly onError = (err: Error): void => {
    this.#error ??= err;
    const f = this.#fail;
    this.#waiter = this.#fail = undefined;
    f?.(err);
  };
  next(ms = 30_000): Promise<{ code: number; text: string; at: number }> {
    const r = this.#queue.shift();
    if (r) return Promise.resolve(r);
    if (this.#error) return Promise.reject(this.#error);
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => this.onError(new Error('reply timed out')), ms);
      this.#waiter = (x) => {
        clearTimeout(t);
        resolve(x);
      };
      this.#fail = (e) => {
        clearTimeout(t);
        reject(e);
      };
    });
  }
  /** A reply already received, without waiting. */
  ready(): { code: number; text: string; at: number } | undefined {
    return this.#queue.shift();
  }
  reset(): void {
    this.#buf = '';
    this.#lines = [];
    this.#queue = [];
  }
}

interface RefStats {
  sessions: number;
  refused421: number;
  transactions: number;
  flowWaits: number;
  rcpts: number;
  rejections: number;
  tls: number;
  tlsResumed: number;
  failures: number;
  requeued: number;
  /** Sums over the sessions (ms): connect() to banner, STARTTLS + handshake + EHLO, connect() to close. */
  bannerMs: number;
  tlsMs: number;
  sessionMs: number;
  maxSessionMs: number;
}

interface Item {
  email: string;
  probe: boolean;
  tries: number;
}

async function referenceRun(addrs: Addr[], o: { dnsServer: string; port: number; starttls: boolean }): Promise<{ verdicts: Map<string, number>; stats: RefStats; catchAllDomains: number }> {
  const stats: RefStats = { sessions: 0, refused421: 0, transactions: 0, flowWaits: 0, rcpts: 0, rejections: 0, tls: 0, tlsResumed: 0, failures: 0, requeued: 0, bannerMs: 0, tlsMs: 0, sessionMs: 0, maxSessionMs: 0 };
  const verdicts = new Map<string, number>();
  const probeAccepted = new Set<string>();
  const resolver = new Resolver({ timeout: 2_000, tries: 2 });
  resolver.setServers([o.dnsServer]);
  // MX once per domain, A once per host.
  const domains = [...new Set(addrs.map((a) => a.domain))];
  const hostOf = new Map<string, string>();
  const ipOf = new Map<string, Promise<string>>();
  await Promise.all(
    domains.map(async (d) => {
      const mx = (await resolver.resolveMx(d)).sort((a, b) => a.priority - b.priority);
      const host = mx[0]!.exchange.toLowerCase();
      hostOf.set(d, host);
      if (!ipOf.has(host)) ipOf.set(host, resolver.resolve4(host).then((ips) => ips[0]!));
    }),
  );
  const queues = new Map<string, Item[]>();
  const probed = new Set<string>();
  for (const a of addrs) {
    const host = hostOf.get(a.domain)!;
    let q = queues.get(host);
    if (!q) queues.set(host, (q = []));
    if (!probed.has(a.domain)) {
      probed.add(a.domain);
      q.push({ email: `ref${randomBytes(6).toString('hex')}@${a.domain}`, probe: true, tries: 0 });
    }
    q.push({ email: a.email, probe: false, tries: 0 });
  }
  const tickets = new Map<string, Buffer>();

  /** One session; items it took and did not answer go back to the queue. */
  const session = async (host: string, ip: string, queue: Item[]): Promise<void> => {
    stats.sessions++;
    const born = performance.now();
    const raw = net.connect({ host: ip, port: o.port });
    let socket: net.Socket = raw;
    socket.setNoDelay(true);
    let r = new Replies();
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.on('data', r.onData);
    socket.on('end', r.onEnd);
    socket.on('error', r.onError);
    const inFlight: Item[] = [];
    try {
      const banner = await r.next();
      stats.bannerMs += banner.at - born;
      if (banner.code === 421) {
        stats.refused421++;
        socket.end();
        await closed;
        await sleep(50);
        return;
      }
      if (banner.code !== 220) throw new Error(`banner ${banner.code}`);
      socket.write(`EHLO ${HELO}\r\n`);
      let ehlo = await r.next();
      if (o.starttls && /^250[- ]STARTTLS$/im.test(ehlo.text)) {
        const tlsFrom = performance.now();
        socket.write('STARTTLS\r\n');
        if ((await r.next()).code !== 220) throw new Error('STARTTLS refused');
        socket.off('data', r.onData);
        socket.off('end', r.onEnd);
        socket.off('error', r.onError);
        r = new Replies();
        const secure = tls.connect({ socket, servername: host, rejectUnauthorized: false, session: tickets.get(host) });
        secure.on('session', (s: Buffer) => tickets.set(host, s));
        await new Promise<void>((resolve, reject) => {
          secure.once('secureConnect', resolve);
          secure.once('error', reject);
        });
        stats.tls++;
        if (secure.isSessionReused()) stats.tlsResumed++;
        secure.on('data', r.onData);
        secure.on('end', r.onEnd);
        secure.on('error', r.onError);
        socket = secure;
        socket.write(`EHLO ${HELO}\r\n`);
        ehlo = await r.next();
        stats.tlsMs += ehlo.at - tlsFrom;
      }
      if (ehlo.code !== 250) throw new Error(`EHLO ${ehlo.code}`);
      // One transaction: MAIL with the first RCPTs, then a window of (budget − rejections).
      let rejected = 0;
      let mailPending = true;
      let firstAccept = true;
      // A reply is timed from the previous CHUNK of replies: smtpd holds a pipelined MAIL's reply
      // (and earlier RCPTs' replies) with an RCPT's that waited in_flow_delay, all in one write.
      let curAt = ehlo.at;
      let prevAt = ehlo.at;
      const see = (at: number) => {
        if (at !== curAt) {
          prevAt = curAt;
          curAt = at;
        }
      };
      const sentAt: number[] = [];
      const fill = () => {
        let out = mailPending && inFlight.length === 0 && sentAt.length === 0 ? `MAIL FROM:<${MAIL_FROM}>\r\n` : '';
        while (queue.length && inFlight.length < REJECT_BUDGET - rejected) {
          const it = queue.shift()!;
          inFlight.push(it);
          out += `RCPT TO:<${it.email}>\r\n`;
        }
        if (out) {
          const t = performance.now();
          for (let k = sentAt.length; k < inFlight.length; k++) sentAt.push(t);
          socket.write(out);
        }
      };
      fill();
      if (mailPending) {
        const mail = await r.next();
        mailPending = false;
        if (mail.code !== 250) throw new Error(`MAIL ${mail.code}`);
        see(mail.at);
      }
      while (inFlight.length) {
        const rep = await r.next();
        const it = inFlight.shift()!;
        see(rep.at);
        const t0 = Math.max(sentAt.shift()!, prevAt);
        stats.rcpts++;
        if (rep.code === 250) {
          if (firstAccept) {
            firstAccept = false;
            stats.transactions++;
            if (rep.at - t0 >= FLOW_WAIT_MS) stats.flowWaits++;
          }
          if (it.probe) probeAccepted.add(it.email.split('@')[1]!);
          else verdicts.set(it.email, 250);
        } else if (rep.code === 550) {
          rejected++;
          stats.rejections++;
          if (!it.probe) verdicts.set(it.email, 550);
        } else {
          rejected++;
          if (++it.tries < 3) {
            stats.requeued++;
            queue.push(it);
          } else verdicts.set(it.email, rep.code);
          if (rep.code === 421) throw new Error('421 in session');
        }
        fill();
      }
      socket.write('QUIT\r\n');
      await r.next().catch(() => undefined);
      await closed;
      const ms = performance.now() - born;
      stats.sessionMs += ms;
      stats.maxSessionMs = Math.max(stats.maxSessionMs, Math.round(ms));
    } catch (err) {
      stats.failures++;
      if (stats.failures <= 3) console.log(`  reference session to ${host}: ${String(err)}`);
      for (const it of inFlight.splice(0)) {
        stats.requeued++;
        queue.unshift(it);
      }
      socket.destroy();
      raw.destroy();
      await closed;
    }
  };

  await Promise.all(
    [...queues].map(async ([host, queue]) => {
      const ip = await ipOf.get(host)!;
      await Promise.all(
        Array.from({ length: CONNS }, async () => {
          while (queue.length) await session(host, ip, queue);
        }),
      );
    }),
  );
  for (const k of ['bannerMs', 'tlsMs', 'sessionMs'] as const) stats[k] = Math.round(stats[k] / Math.max(1, k === 'tlsMs' ? stats.tls : stats.sessions));
  return { verdicts, stats, catchAllDomains: probeAccepted.size };
}

// ---------------------------------------------------------------------------------------------
// The service

interface Service {
  url: string;
  key: string;
  pid: number;
  cpuMs(): number;
  /** The last 4,000 characters the service wrote to stderr. */
  stderr(): string;
  stop(): Promise<void>;
}

const running = new Set<Service>();

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
  });
}

async function startServiceChild(env: Record<string, string>): Promise<Service> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'realj-svc-'));
  const port = await freePort();
  const key = `svc_test_${randomBytes(16).toString('hex')}`;
  const url = `http://127.0.0.1:${port}`;
  const nodeArgs = (process.env.REALJ_SERVICE_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const cp: ChildProcess = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', 'cluster/embedded.ts'], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    env: {
      ...process.env,
      PORT: String(port),
      HOST: '127.0.0.1',
      SVC_PUBLIC_URL: url,
      SVC_DATA_DIR: dataDir,
      SVC_BOOTSTRAP_API_KEY: key,
      SVC_BOOTSTRAP_CREDITS: '1000000',
      SVC_HELO_NAME: HELO,
      SVC_MAIL_FROM: MAIL_FROM,
      SVC_READY_DOMAIN: 'ready.bench.test',
      SVC_LOG_LEVEL: 'warn',
      ...env,
    },
  });
  let stderr = '';
  cp.stderr!.on('data', (c: Buffer) => (stderr = (stderr + c.toString()).slice(-4000)));
  cp.stdout!.resume();
  const exited = new Promise<void>((resolve) => cp.once('exit', () => resolve()));
  let stopping: Promise<void> | undefined;
  const svc: Service = {
    url,
    key,
    pid: cp.pid!,
    stderr: () => stderr,
    cpuMs: () => procCpuMs(cp.pid!),
    stop() {
      return (stopping ??= (async () => {
        if (cp.exitCode === null && cp.signalCode === null) {
          cp.kill('SIGTERM');
          const killer = setTimeout(() => cp.kill('SIGKILL'), 35_000);
          await exited;
          clearTimeout(killer);
        }
        running.delete(svc);
        rmSync(dataDir, { recursive: true, force: true });
      })());
    },
  };
  running.add(svc);
  for (let i = 0; ; i++) {
    if (cp.exitCode !== null) throw new Error(`service exited (${cp.exitCode}): ${stderr}`);
    if (i > 1200) {
      await svc.stop();
      throw new Error(`service did not answer /live in 120 s: ${stderr}`);
    }
    const ok = await fetch(`${url}/live`).then((r) => r.ok, () => false);
    if (ok) break;
    await sleep(100);
  }
  return svc;
}

async function api<T>(svc: Service, method: string, p: string, body?: unknown): Promise<{ status: number; json: T }> {
  const res = await fetch(`${svc.url}${p}`, { method, headers: { 'X-API-Key': svc.key, ...(body ? { 'Content-Type': 'application/json' } : {}) }, body: body ? JSON.stringify(body) : undefined });
  const text = await res.text();
  let json: T;
  try {
    json = JSON.parse(text) as T;
  } catch {
    json = text as T;
  }
  return { status: res.status, json };
}

interface Verdict {
  email: string;
  result: string;
  reason_code: string;
}

function pctls(xs: number[]): string {
  const v = [...xs].sort((a, b) => a - b);
  const at = (q: number) => Math.round(v[Math.min(v.length - 1, Math.floor(q * v.length))] ?? NaN);
  return `${at(0.5)}/${at(0.9)}/${Math.round(v[v.length - 1] ?? NaN)}`;
}

function checkVerdicts(addrs: Addr[], verdicts: Verdict[]): string[] {
  const truth = new Map(addrs.map((a) => [a.email, a.exists]));
  const wrong: string[] = [];
  for (const v of verdicts) {
    const t = truth.get(v.email);
    const ok = t === undefined ? false : t ? v.result === 'valid' && v.reason_code === 'accepted' : v.result === 'invalid' && v.reason_code === 'mailbox_not_found';
    if (!ok) wrong.push(`${v.email}: ${v.result}/${v.reason_code}`);
  }
  if (verdicts.length !== addrs.length) wrong.push(`${verdicts.length} verdicts for ${addrs.length} addresses`);
  return wrong;
}

// ---------------------------------------------------------------------------------------------
// Phases

interface Ctx {
  dnsServer: string;
  proxyPort: number;
  proxyStats: () => Promise<FlowStats>;
}

interface Phase {
  name: string;
  n: number;
  ms: number;
  rate: number;
  wrong: string[];
  log: Record<string, number>;
  proxy: Record<string, number | string>;
  extra: Record<string, unknown>;
  load: string;
}

async function measured(ctx: Ctx, name: string, n: number, body: () => Promise<{ ms: number; wrong: string[]; extra: Record<string, unknown>; after?: () => Promise<void> }>): Promise<Phase> {
  if (MTA === 'exim') await restartExim(SETTLE_MS);
  else await restartPostfix();
  const from = MTA === 'exim' ? eximLogSize() : logSize();
  const s0 = await ctx.proxyStats();
  const r = await body();
  await r.after?.();
  await sleep(1500); // the last sessions' disconnect lines
  const log = MTA === 'exim' ? eximLogCounts(from) : logCounts(from);
  const p: Phase = { name, n, ms: r.ms, rate: (n * 1000) / r.ms, wrong: r.wrong, log, proxy: { ...statsSince(s0, await ctx.proxyStats()), hostEndS: hostEnds.value, rejectionsPerSession: rejectionsPerSession.value }, extra: r.extra, load: loadavg().map((x) => x.toFixed(2)).join(' ') };
  console.log(`\n${name}: ${n} addresses in ${r.ms.toFixed(0)} ms = ${p.rate.toFixed(0)}/s; wrong ${p.wrong.length}; load ${p.load}`);
  console.log(`  ${MTA} log: ${JSON.stringify(p.log)}`);
  console.log(`  proxy: ${JSON.stringify(p.proxy)}`);
  console.log(`  ${JSON.stringify(p.extra)}`);
  if (p.wrong.length) console.log(`  wrong: ${p.wrong.slice(0, 5).join('; ')}`);
  return p;
}

function referencePhase(ctx: Ctx, name: string, addrs: Addr[], starttls: boolean): Promise<Phase> {
  return measured(ctx, name, addrs.length, async () => {
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const { verdicts, stats, catchAllDomains } = await referenceRun(addrs, { dnsServer: ctx.dnsServer, port: ctx.proxyPort, starttls });
    const ms = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    const vs: Verdict[] = addrs.map((a) => {
      const c = verdicts.get(a.email);
      return { email: a.email, result: c === 250 ? 'valid' : c === 550 ? 'invalid' : `code ${c}`, reason_code: c === 250 ? 'accepted' : c === 550 ? 'mailbox_not_found' : '' };
    });
    return { ms, wrong: checkVerdicts(addrs, vs), extra: { ...stats, catchAllDomains, cpuMs: Math.round((cpu.user + cpu.system) / 1000) } };
  });
}

function serviceEnv(ctx: Ctx): Record<string, string> {
  return { SVC_DNS_SERVERS: ctx.dnsServer, SVC_SMTP_PORT: String(ctx.proxyPort) };
}

async function jobPhase(ctx: Ctx, name: string, addrs: Addr[]): Promise<Phase> {
  const svc = await startServiceChild(serviceEnv(ctx));
  try {
    return await measured(ctx, name, addrs.length, async () => {
      const cpu0 = svc.cpuMs();
      const t0 = performance.now();
      const created = await api<{ id: string; status: string }>(svc, 'POST', '/v1/validate/batch', { emails: addrs.map((a) => a.email) });
      if (created.status !== 202) throw new Error(`job: ${created.status} ${JSON.stringify(created.json)}`);
      const tPosted = performance.now() - t0;
      let status = created.json.status;
      let job: { status: string; results?: Record<string, number>; started_at?: string; completed_at?: string } = created.json;
      let polls = 0;
      // Each status request waits for the service's event loop, which the SMTP sessions share.
      const pollMs: number[] = [];
      while (status !== 'completed') {
        if (status === 'failed' || status === 'canceled') throw new Error(`job ${status}`);
        if (performance.now() - t0 > Number(process.env.REALJ_JOB_TIMEOUT_S ?? 600) * 1000) throw new Error(`job not completed in time: ${JSON.stringify(job)}; service stderr: ${svc.stderr()}`);
        if (process.env.REALJ_PROGRESS && polls % 50 === 0) console.log(`  ${((performance.now() - t0) / 1000).toFixed(0)} s: ${JSON.stringify(job)}`);
        await sleep(100);
        const tp = performance.now();
        const s = await api<typeof job>(svc, 'GET', `/v1/csv/jobs/${created.json.id}`);
        pollMs.push(performance.now() - tp);
        job = s.json;
        status = job.status;
        polls++;
      }
      const ms = performance.now() - t0;
      const cpuMs = svc.cpuMs() - cpu0;
      const dl = await api<{ url: string }>(svc, 'GET', `/v1/csv/jobs/${created.json.id}/download?mode=url`);
      const csv = await (await fetch(dl.json.url)).text();
      const rows = parseCsv(csv, { columns: true, skip_empty_lines: true }) as Verdict[];
      return {
        ms,
        wrong: checkVerdicts(addrs, rows),
        extra: { postMs: Math.round(tPosted), polls, pollMsP50P90Max: pctls(pollMs), serviceCpuMs: cpuMs, results: job.results, startedToCompletedMs: job.started_at && job.completed_at ? Date.parse(job.completed_at) - Date.parse(job.started_at) : undefined },
        after: () => svc.stop(),
      };
    });
  } finally {
    await svc.stop();
  }
}

async function syncPhase(ctx: Ctx, name: string, addrs: Addr[]): Promise<Phase> {
  const svc = await startServiceChild(serviceEnv(ctx));
  try {
    return await measured(ctx, name, addrs.length, async () => {
      const cpu0 = svc.cpuMs();
      const t0 = performance.now();
      const chunks = Array.from({ length: Math.ceil(addrs.length / 100) }, (_, i) => addrs.slice(i * 100, i * 100 + 100));
      const each: number[] = [];
      const answers = await Promise.all(
        chunks.map(async (c) => {
          const t = performance.now();
          const r = await api<{ results: Verdict[] }>(svc, 'POST', '/v1/validate/bulk', { emails: c.map((a) => a.email) });
          each.push(Math.round(performance.now() - t));
          if (r.status !== 200) throw new Error(`bulk: ${r.status} ${JSON.stringify(r.json).slice(0, 300)}`);
          return r.json.results;
        }),
      );
      const ms = performance.now() - t0;
      return { ms, wrong: checkVerdicts(addrs, answers.flat()), extra: { requestMs: each.sort((a, b) => a - b).join('/'), serviceCpuMs: svc.cpuMs() - cpu0 }, after: () => svc.stop() };
    });
  } finally {
    await svc.stop();
  }
}

function zone(): Zone {
  const names = new Map<string, { mx?: { exchange: string; priority: number }[]; a?: string[] }>();
  for (const h of worldHosts().slice(0, POSTFIX_HOSTS)) {
    names.set(h.host, { a: [h.ip] });
    for (const d of h.domains) names.set(d, { mx: [{ exchange: h.host, priority: 10 }] });
  }
  // SVC_READY_DOMAIN: an MX on an address nothing listens on, so readiness never reaches Postfix.
  names.set('ready.bench.test', { mx: [{ exchange: 'mx.ready.bench.test', priority: 10 }] });
  names.set('mx.ready.bench.test', { a: ['127.0.0.1'] });
  return { names, servfail: new Set(), timeout: new Set() };
}

async function main(): Promise<void> {
  const all = addresses().slice(0, N);
  const small = all.slice(0, S_N);
  const rev = execFileSync('git', ['-C', ROOT, 'rev-parse', '--short', 'HEAD']).toString().trim();
  const branch = execFileSync('git', ['-C', ROOT, 'rev-parse', '--abbrev-ref', 'HEAD']).toString().trim();
  const dns = await startDns(zone(), 0);
  const proxy = fork(path.join(ROOT, 'bench/engine/real-postfix.ts'), ['proxy'], { execArgv: ['--import', 'tsx'], env: { ...process.env, REAL_INSTANCES: String(POSTFIX_HOSTS) }, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const cleanup = async () => {
    for (const s of [...running]) await s.stop().catch(() => {});
    proxy.kill();
    await dns.close().catch(() => {});
    if (MTA === 'exim') return stopExim();
    try {
      execFileSync('postconf', ['-e', 'smtpd_tls_security_level = may']);
    } catch {
      /* left as is */
    }
    await stopPostfix();
  };
  const onSignal = () => void cleanup().finally(() => process.exit(130));
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const results: Phase[] = [];
  try {
    const proxyPort = await new Promise<number>((resolve, reject) => {
      proxy.once('message', (m) => resolve((m as { port: number }).port));
      proxy.once('exit', (code) => reject(new Error(`proxy exited ${code}`)));
    });
    const proxyStats = () =>
      new Promise<FlowStats>((resolve) => {
        proxy.once('message', (m) => resolve((m as { stats: FlowStats }).stats));
        proxy.send('stats');
      });
    const ctx: Ctx = { dnsServer: `127.0.0.1:${dns.port}`, proxyPort, proxyStats };
    const version =
      MTA === 'exim'
        ? `exim ${/Exim version (\S+)/.exec(execFileSync('exim4', ['-bV']).toString())?.[1] ?? '?'} (${EXIM_LOG})`
        : `postfix ${execFileSync('postconf', ['-h', 'mail_version']).toString().trim()}: ${execFileSync('postconf', ['default_process_limit', 'in_flow_delay', 'smtpd_client_connection_count_limit', 'smtpd_tls_security_level']).toString().trim().replace(/\n/g, '; ')}`;
    if (MTA === 'exim' && SERVER_NOTLS) throw new Error('REALJ_SERVER_NOTLS is for the Postfix world');
    console.log(`${new Date().toISOString()} revision ${rev} (${branch}); ${version}; proxy port ${proxyPort}; DNS ${ctx.dnsServer}; load before ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);
    for (const ph of PHASES) {
      if (ph === 'R' || ph === 'R2') results.push(await referencePhase(ctx, ph, all, true));
      else if (ph === 'Rplain') results.push(await referencePhase(ctx, ph, all, false));
      else if (ph === 'J') results.push(await jobPhase(ctx, ph, all));
      else if (ph === 'R800') results.push(await referencePhase(ctx, ph, small, true));
      else if (ph === 'S') results.push(await syncPhase(ctx, ph, small));
      else throw new Error(`unknown phase ${ph}`);
    }
    if (SERVER_NOTLS) {
      execFileSync('postconf', ['-e', 'smtpd_tls_security_level = none']);
      results.push(await jobPhase(ctx, 'Jnone', all));
      results.push(await referencePhase(ctx, 'Rnone', all, true));
      execFileSync('postconf', ['-e', 'smtpd_tls_security_level = may']);
    }
  } finally {
    await cleanup();
  }
  const by = (n: string) => results.find((r) => r.name === n);
  const ratio = (a?: Phase, b?: Phase) => (a && b ? (a.rate / b.rate).toFixed(2) : '-');
  console.log(`\nload after ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);
  console.log(`RATIOS J/R=${ratio(by('J'), by('R'))} J/R2=${ratio(by('J'), by('R2'))} S/R800=${ratio(by('S'), by('R800'))} Rplain/R=${ratio(by('Rplain'), by('R'))} Jnone/J=${ratio(by('Jnone'), by('J'))} Rnone/R=${ratio(by('Rnone'), by('R'))}`);
  console.log(
    `SUMMARY rev=${rev} ${results.map((r) => `${r.name}=${r.rate.toFixed(0)}/s,${(r.ms / 1000).toFixed(1)}s,wrong=${r.wrong.length},sessions=${r.log.connections},anvil=${r.log.anvilRefusals},errLimit=${r.log.tooManyErrors},tx=${r.log.transactions},tls=${r.log.tlsEstablished},rset=${r.log.rset},load=${r.load.split(' ')[0]}`).join(' ')}`,
  );
}

// One run at a time: every mode restarts the one Postfix.
const LOCK = '/tmp/real-postfix-job.lock';
function lock(): void {
  try {
    writeFileSync(LOCK, String(process.pid), { flag: 'wx' });
  } catch {
    const other = Number(readFileSync(LOCK, 'utf8'));
    if (alive(other)) throw new Error(`another run (pid ${other}) holds ${LOCK}`);
    writeFileSync(LOCK, String(process.pid));
  }
  process.once('exit', () => rmSync(LOCK, { force: true }));
}

const mode = process.argv[2] ?? 'run';
if (mode === 'setup' && MTA === 'exim') {
  const all = addresses();
  setupExim({ ports: Array.from({ length: POSTFIX_HOSTS }, (_, i) => listenerPort(i)), perHost: CONNS, ...(process.env.REALJ_EXIM_ACCEPT_MAX ? { acceptMax: Number(process.env.REALJ_EXIM_ACCEPT_MAX) } : {}), domains: [...new Set(all.map((a) => a.domain))].sort(), users: all.filter((a) => a.exists).map((a) => a.email) });
} else if (mode === 'setup') setup();
else if (mode === 'anvil-lag') {
  lock();
  try {
    await anvilLag();
  } finally {
    await stopPostfix();
  }
} else {
  lock();
  await main();
}
