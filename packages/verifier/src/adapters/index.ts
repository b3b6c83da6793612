// @svc/verifier/adapters: the verifier's ports on the real network (node:dns, node:net/tls).
export { nodeDns } from './dns-node.ts';
export { createNetSmtpConnector, netSmtpConnector, TlsCache } from './smtp-net.ts';
export { tcpReachable } from './tcp.ts';
