// Requests that never reach a route still get the catalogue body (docs/errors.md) and an
// X-Request-ID: what Node's HTTP parser rejects, a missing Host, an HTTP version other than 1.0 or
// 1.1, a request that does not arrive in time. Before, Node answered these with a bare status
// line (or Fastify with its own body) and no request id. Raw sockets, since no HTTP client will
// send such requests.

import net from 'node:net';
import t from 'tap';
import { ERRORS } from '@svc/contracts';
import { BOOTSTRAP_KEY, startStack } from '../helpers/stack.ts';

type Test = Parameters<Parameters<typeof t.test>[0]>[0];

const stack = await startStack();
t.teardown(() => stack.close());
const { port } = new URL(stack.url);

interface Response {
  statusLine: string;
  headers: Record<string, string>;
  body: string;
}

/** Parses every response in `data` (a pipelined exchange can hold several). */
function parseResponses(data: Buffer): Response[] {
  const out: Response[] = [];
  let rest = data;
  for (let i = 0; i < 10 && rest.length > 0; i++) {
    const end = rest.indexOf('\r\n\r\n');
    if (end === -1) throw new Error(`incomplete response head: ${JSON.stringify(rest.toString('latin1'))}`);
    const [statusLine, ...lines] = rest.subarray(0, end).toString('latin1').split('\r\n');
    const headers: Record<string, string> = {};
    for (const l of lines) {
      const colon = l.indexOf(':');
      headers[l.slice(0, colon).toLowerCase()] = l.slice(colon + 1).trim();
    }
    const length = Number(headers['content-length'] ?? 0);
    out.push({ statusLine: statusLine!, headers, body: rest.subarray(end + 4, end + 4 + length).toString('utf8') });
    rest = rest.subarray(end + 4 + length);
  }
  return out;
}

/** Sends `raw` on a new connection and collects everything until the server closes it. */
function exchange(raw: string | Buffer, onConnect?: (socket: net.Socket) => void): Promise<Response[]> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const socket = net.connect({ host: '127.0.0.1', port: Number(port) }, () => {
      if (raw.length > 0) socket.write(raw);
      onConnect?.(socket);
    });
    socket.setTimeout(5000, () => {
      socket.destroy();
      reject(new Error(`the server did not close the connection within 5 s; got ${JSON.stringify(Buffer.concat(chunks).toString('latin1'))}`));
    });
    socket.on('data', (c) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => {
      try {
        resolve(parseResponses(Buffer.concat(chunks)));
      } catch (err) {
        reject(err);
      }
    });
  });
}

const STATUS_LINES: Record<number, string> = {
  400: 'HTTP/1.1 400 Bad Request',
  408: 'HTTP/1.1 408 Request Timeout',
  431: 'HTTP/1.1 431 Request Header Fields Too Large',
  505: 'HTTP/1.1 505 HTTP Version Not Supported',
};

/** The exact answer: status line, catalogue body, request id, JSON type, length, Connection: close. */
function assertAnswer(t: Test, r: Response | undefined, status: number, code: keyof typeof ERRORS): void {
  t.ok(r, 'a response arrived');
  if (!r) return;
  t.equal(r.statusLine, STATUS_LINES[status]);
  t.match(r.headers['x-request-id'], /^req_[0-9a-f]{32}$/, 'X-Request-ID');
  t.equal(r.headers['content-type'], 'application/json; charset=utf-8');
  t.equal(r.headers['connection'], 'close');
  t.equal(Number(r.headers['content-length']), Buffer.byteLength(r.body));
  const body = JSON.parse(r.body) as Record<string, unknown>;
  t.strictSame(Object.keys(body).sort(), ['code', 'error', 'message'], 'the error body of docs/errors.md');
  t.equal(body.code, code);
  t.equal(body.error, ERRORS[code].error);
  t.equal(typeof body.message, 'string');
}

const host = 'Host: 127.0.0.1\r\n';
const validateHead = `POST /v1/validate HTTP/1.1\r\n${host}X-API-Key: ${BOOTSTRAP_KEY}\r\nContent-Type: application/json\r\n`;

const cases: Array<{ name: string; raw: string; status: number; code: keyof typeof ERRORS }> = [
  { name: 'a control character in a header value', raw: `GET /health HTTP/1.1\r\n${host}X-Note: a\x01b\r\n\r\n`, status: 400, code: 'invalid_request' },
  { name: 'a control character in a header name', raw: `GET /health HTTP/1.1\r\n${host}X\x01Note: ab\r\n\r\n`, status: 400, code: 'invalid_request' },
  { name: 'a space in a header name', raw: `GET /health HTTP/1.1\r\n${host}X Note: ab\r\n\r\n`, status: 400, code: 'invalid_request' },
  { name: 'both Content-Length and Transfer-Encoding', raw: `${validateHead}Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`, status: 400, code: 'invalid_request' },
  { name: 'two different Content-Length values', raw: `${validateHead}Content-Length: 3\r\nContent-Length: 4\r\n\r\n{}  `, status: 400, code: 'invalid_request' },
  { name: 'a non-numeric Content-Length', raw: `${validateHead}Content-Length: abc\r\n\r\n`, status: 400, code: 'invalid_request' },
  { name: 'a Transfer-Encoding that does not end in chunked', raw: `${validateHead}Transfer-Encoding: gzip\r\n\r\n{}`, status: 400, code: 'invalid_request' },
  { name: 'a malformed chunk size in the body', raw: `${validateHead}Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`, status: 400, code: 'invalid_request' },
  { name: 'an invalid method', raw: `G@T /health HTTP/1.1\r\n${host}\r\n`, status: 400, code: 'invalid_request' },
  { name: 'a bare LF after the version', raw: `GET /health HTTP/1.1\n${host}\n`, status: 400, code: 'invalid_request' },
  { name: 'not HTTP at all', raw: `GET /health HTTQ/1.1\r\n${host}\r\n`, status: 400, code: 'invalid_request' },
  { name: 'headers over 16 KiB', raw: `GET /health HTTP/1.1\r\n${host}X-Big: ${'a'.repeat(17_000)}\r\n\r\n`, status: 431, code: 'headers_too_large' },
  { name: 'an HTTP/1.1 request without Host', raw: 'GET /health HTTP/1.1\r\n\r\n', status: 400, code: 'invalid_request' },
  { name: 'two Host headers (RFC 9112 §3.2)', raw: `GET /health HTTP/1.1\r\n${host}host: other.example\r\n\r\n`, status: 400, code: 'invalid_request' },
  { name: 'CONNECT, with bytes for the tunnel after it (not served; Node would drop the socket)', raw: 'CONNECT x:443 HTTP/1.1\r\nHost: x:443\r\n\r\n\x16\x03\x01\x00\x05hello', status: 400, code: 'invalid_request' },
  { name: 'the HTTP/2 prior-knowledge preface', raw: 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', status: 505, code: 'http_version_not_supported' },
  { name: 'an HTTP/1.1 POST without Host', raw: `POST /v1/validate HTTP/1.1\r\nX-API-Key: ${BOOTSTRAP_KEY}\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`, status: 400, code: 'invalid_request' },
  { name: 'HTTP/3.0', raw: `GET /health HTTP/3.0\r\n${host}\r\n`, status: 505, code: 'http_version_not_supported' },
  { name: 'HTTP/1.7', raw: `GET /health HTTP/1.7\r\n${host}\r\n`, status: 505, code: 'http_version_not_supported' },
  { name: 'HTTP/2.0 in HTTP/1 syntax', raw: `GET /health HTTP/2.0\r\n${host}\r\n`, status: 505, code: 'http_version_not_supported' },
  { name: 'HTTP/0.9 in a request line', raw: `GET /health HTTP/0.9\r\n${host}\r\n`, status: 505, code: 'http_version_not_supported' },
];

for (const c of cases) {
  t.test(c.name, async (t) => {
    const rs = await exchange(c.raw);
    t.equal(rs.length, 1, 'one response, then the connection closes');
    assertAnswer(t, rs[0], c.status, c.code);
  });
}

t.test('request ids of these answers are fresh for each', async (t) => {
  const [a] = await exchange('GET /health HTTP/1.1\r\n\r\n');
  const [b] = await exchange('GET /health HTTP/1.1\r\n\r\n');
  t.not(a?.headers['x-request-id'], b?.headers['x-request-id']);
});

t.test('HTTP/1.0 without Host is served (Host is required from 1.1 on)', async (t) => {
  const [r, more] = await exchange('GET /health HTTP/1.0\r\n\r\n');
  t.equal(r?.statusLine, 'HTTP/1.1 200 OK');
  t.match(r?.headers['x-request-id'], /^req_[0-9a-f]{32}$/);
  t.equal(JSON.parse(r!.body).status, 'healthy');
  t.equal(more, undefined);
});

t.test('an Expect other than 100-continue is ignored (RFC 9110 §10.1.1), not a bare 417', async (t) => {
  const [r] = await exchange(`GET /health HTTP/1.1\r\n${host}Expect: something-else\r\nConnection: close\r\n\r\n`);
  t.equal(r?.statusLine, 'HTTP/1.1 200 OK');
  t.match(r?.headers['x-request-id'], /^req_[0-9a-f]{32}$/);
  t.equal(JSON.parse(r!.body).status, 'healthy');
});

t.test('a malformed request pipelined after a good one: the good one is answered first, then the error', async (t) => {
  const rs = await exchange(`GET /health HTTP/1.1\r\n${host}\r\nGET /health HTTP/1.1\r\n${host}X-Note: a\x01b\r\n\r\n`);
  t.equal(rs.length, 2);
  t.equal(rs[0]?.statusLine, 'HTTP/1.1 200 OK');
  t.equal(JSON.parse(rs[0]!.body).status, 'healthy');
  assertAnswer(t, rs[1], 400, 'invalid_request');
  t.not(rs[0]?.headers['x-request-id'], rs[1]?.headers['x-request-id']);
});

t.test('a request that does not arrive in time: 408 request_timeout', async (t) => {
  // Node checks requestTimeout (30 s) every 30 s and then emits `clientError` with
  // ERR_HTTP_REQUEST_TIMEOUT on the stalled socket; the test emits that same event on the
  // server side of a connection that sent half a request, instead of waiting up to a minute.
  const server = stack.svc.app.server;
  const serverSide = new Promise<net.Socket>((resolve) => server.once('connection', resolve));
  const rs = await exchange(`POST /v1/validate HTTP/1.1\r\n${host}`, () => {
    void serverSide.then((s) => server.emit('clientError', Object.assign(new Error('Request timeout'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' }), s));
  });
  t.equal(rs.length, 1);
  assertAnswer(t, rs[0], 408, 'request_timeout');
});

t.test('the service still answers normally afterwards', async (t) => {
  const r = await stack.call('GET', '/health', { key: null });
  t.equal(r.status, 200);
  t.match(r.headers.get('x-request-id'), /^req_[0-9a-f]{32}$/);
});
