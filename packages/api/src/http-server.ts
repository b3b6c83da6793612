// The HTTP/1 server under Fastify, and the answers to requests that never reach a route. Node
// answers these itself, with a status line and no body (a missing Host, an unexpected
// `Expect`), drops them without a word (CONNECT, with no `connect` listener), or leaves them to
// a `clientError` listener (what its parser rejects, a request that does not arrive in time, the
// HTTP/2 preface), where Fastify's default writes its own body. Here each gets
// the catalogue's error body (docs/errors.md), an `X-Request-ID` and `Connection: close`.
//
// Fastify's server factory is used (rather than its `clientErrorHandler` option, which it binds
// to the main server only) so every server Fastify creates gets the same listeners, including
// the extra ones it opens when HOST is a name with several addresses.

import http, { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { ServiceError } from '@svc/contracts';
import { nextRequestId } from './request-id.ts';

/** Where these answers are logged (the app's logger, read when they happen). */
export type HttpLog = () => { info(obj: object, msg: string): void };

/** The error a `clientError` calls for; undefined for a socket that failed (nothing to answer). */
function clientErrorAnswer(err: Error & { code?: string; reason?: string }): ServiceError | undefined {
  const code = err.code ?? '';
  // The request (line, headers and body) did not arrive within `requestTimeout`.
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return new ServiceError('request_timeout');
  if (!code.startsWith('HPE_')) return undefined; // ECONNRESET, EPIPE...: the socket is gone
  // Node's `maxHeaderSize` (16 KiB): RFC 6585 §5.
  if (code === 'HPE_HEADER_OVERFLOW') return new ServiceError('headers_too_large');
  // The HTTP/2 prior-knowledge preface (`PRI * HTTP/2.0` ... `SM`, RFC 9113 §3.4): llhttp stops
  // there for the caller to switch protocols. HTTP/2.0 is not served (RFC 9110 §15.6.6).
  if (code === 'HPE_PAUSED_H2_UPGRADE') return versionNotSupported();
  // llhttp's reason is a fixed text (never request bytes). `Invalid HTTP version` is a
  // well-formed `HTTP/d.d` it does not speak (HTTP/3.0, HTTP/1.7): RFC 9110 §15.6.6. A
  // malformed version (`HTTP/12.1`, a bare LF after it) is a malformed request.
  const reason = err.reason ?? 'parse error';
  if (code === 'HPE_INVALID_VERSION' && reason === 'Invalid HTTP version') return versionNotSupported();
  // Control characters, conflicting or invalid Content-Length/Transfer-Encoding, a bad method,
  // chunk framing... (RFC 9112 §6.3: such a request cannot be framed, so the connection closes).
  return new ServiceError('invalid_request', `Malformed HTTP request: ${reason}`);
}

const versionNotSupported = (): ServiceError => new ServiceError('http_version_not_supported');

/** The whole response, as bytes on a socket that no HTTP response object owns. */
function rawResponse(e: ServiceError, id: string): string {
  const body = JSON.stringify(e.body());
  return (
    `HTTP/1.1 ${e.status} ${STATUS_CODES[e.status]}\r\n` +
    `Date: ${new Date().toUTCString()}\r\n` +
    'Content-Type: application/json; charset=utf-8\r\n' +
    `X-Request-ID: ${id}\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\n` +
    'Connection: close\r\n\r\n' +
    body
  );
}

/** Node's own, undocumented but stable since 0.x: the response that owns the socket now. */
type HttpSocket = Socket & { _httpMessage?: ServerResponse | null };

function clientErrorListener(log: HttpLog): (err: Error, socket: Socket) => void {
  // Sockets already being answered: the parser reports each further chunk as an error again.
  const answering = new WeakSet<Socket>();

  const answer = (socket: HttpSocket, e: ServiceError, cause: string): void => {
    if (socket.destroyed || !socket.writable) return;
    const inFlight = socket._httpMessage;
    if (inFlight) {
      if (inFlight.req.complete) {
        // The error is in a later pipelined request: the responses before it go out first, in
        // order, then this one (Node's own answer would have been taken for theirs).
        inFlight.once('finish', () => answer(socket, e, cause));
        return;
      }
      // The error is in the body of the request being handled; once its response has begun,
      // nothing more can be said on this connection.
      if (inFlight.headersSent) return void socket.destroy();
    }
    const id = nextRequestId();
    // The address and port tie this line to the request's own `incoming request` line when the
    // error was in its body (that request was already under way, with an id of its own).
    log().info({ reqId: id, code: e.code, cause, remoteAddress: socket.remoteAddress, remotePort: socket.remotePort }, 'malformed or incomplete request');
    socket.write(rawResponse(e, id));
    socket.destroySoon(); // after the response is flushed
  };

  return (err, socket) => {
    if (socket.destroyed || answering.has(socket)) return;
    const e = clientErrorAnswer(err);
    if (!e || !socket.writable) return void socket.destroy();
    answering.add(socket);
    // Never log the error itself: its rawPacket holds the request's bytes (keys, query strings).
    answer(socket, e, (err as { code?: string }).code ?? '');
  };
}

/**
 * `connect` listener: Node hands a CONNECT request over with its socket (its parser and listeners
 * removed) and, with no listener, destroys the socket without a word. CONNECT is not served, so it
 * gets the same raw answer as a malformed request; `head` (bytes after the request) is ignored.
 */
function connectListener(log: HttpLog): (req: IncomingMessage, socket: Socket, head: Buffer) => void {
  return (req, socket) => {
    // Node removed its own `error` listener: without one, a reset here would crash the process.
    socket.on('error', () => socket.destroy());
    // Whatever the client sends after the request is read and dropped, so the close is not a reset.
    socket.resume();
    if (socket.destroyed || !socket.writable) return void socket.destroy();
    const e = req.httpVersionMajor !== 1 ? versionNotSupported() : new ServiceError('invalid_request', 'Malformed HTTP request: CONNECT is not served');
    const id = nextRequestId();
    log().info({ reqId: id, code: e.code, cause: 'CONNECT', remoteAddress: socket.remoteAddress, remotePort: socket.remotePort }, 'request refused before routing');
    socket.write(rawResponse(e, id));
    socket.destroySoon(); // after the response is flushed
  };
}

/** Whether the request has more than one Host field line (RFC 9112 §3.2); Node keeps the first. */
function hasSeveralHosts(req: IncomingMessage): boolean {
  let hosts = 0;
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    if (req.rawHeaders[i]!.toLowerCase() === 'host' && ++hosts > 1) return true;
  }
  return false;
}

/** Answers a request the server refuses before Fastify sees it. */
function refuse(req: IncomingMessage, res: ServerResponse, e: ServiceError, log: HttpLog): void {
  const id = nextRequestId();
  const body = JSON.stringify(e.body());
  log().info({ reqId: id, code: e.code, remoteAddress: req.socket.remoteAddress, remotePort: req.socket.remotePort }, 'request refused before routing');
  res.writeHead(e.status, { 'Content-Type': 'application/json; charset=utf-8', 'X-Request-ID': id, 'Content-Length': Buffer.byteLength(body), Connection: 'close' });
  res.end(body);
}

/**
 * Fastify's `serverFactory`: an HTTP/1 server like the one Fastify would make (same timeouts),
 * that serves HTTP/1.0 and 1.1 only and answers what never reaches a route itself.
 */
export function httpServerFactory(log: HttpLog) {
  return (handler: (req: IncomingMessage, res: ServerResponse) => void, opts: Record<string, unknown>): http.Server => {
    // Node's requireHostHeader would answer a missing Host with a bare 400; it is checked below.
    const server = http.createServer({ ...(opts.http as http.ServerOptions | undefined), requireHostHeader: false }, (req, res) => {
      // llhttp accepts the request lines `HTTP/0.9` and `HTTP/2.0` besides 1.0 and 1.1; neither
      // is HTTP/1 (RFC 9110 §15.6.6).
      if (req.httpVersionMajor !== 1) return refuse(req, res, versionNotSupported(), log);
      // RFC 9112 §3.2: a server MUST answer 400 to any request with more than one Host header, and
      // to an HTTP/1.1 request without one.
      if (hasSeveralHosts(req)) {
        return refuse(req, res, new ServiceError('invalid_request', 'Malformed HTTP request: more than one Host header'), log);
      }
      if (req.headers.host === undefined && req.httpVersionMinor === 1) {
        return refuse(req, res, new ServiceError('invalid_request', 'Malformed HTTP request: an HTTP/1.1 request needs a Host header'), log);
      }
      handler(req, res);
    });
    // What Fastify's own factory sets (lib/server.js).
    server.keepAliveTimeout = opts.keepAliveTimeout as number;
    server.requestTimeout = opts.requestTimeout as number;
    server.setTimeout(opts.connectionTimeout as number);
    server.on('clientError', clientErrorListener(log));
    server.on('connect', connectListener(log));
    // An `Expect` other than 100-continue: RFC 9110 §10.1.1 lets a server ignore it (instead of
    // Node's bare 417), so the request is served as usual.
    server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => server.emit('request', req, res));
    return server;
  };
}
