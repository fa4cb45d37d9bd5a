/**
 * The gateway's only outbound HTTP client. Built on node:http/https rather than
 * fetch because the executor needs facts fetch hides: whether the socket ever
 * connected (a write that never left may be retried; one that may have arrived
 * must not be blindly resent), a connect timeout separate from the total one,
 * and a hard cap enforced while the body streams in.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import http from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import { jsonDepth } from '../../common/json-depth.js';
import { parseJsonKeepingNumbers } from '../../common/json-numbers.js';
import type { VendorFailureKind, VendorOutcome } from '../vendor-handler.js';

export interface VendorHttpRequest {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  url: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  signal?: AbortSignal;
  timeoutMs: number;
  connectTimeoutMs: number;
  maxResponseBytes: number;
  /**
   * The vendor's error answers (non-2xx) are judged by their status alone (Shopify: VENDORS.md §1.4): once such a
   * status has arrived, a body cut off, stalled past the timeout or aborted still resolves, with the bytes that came.
   * Otherwise (a Nango 4xx, judged by its body) it fails as a reset or timeout: the answer is unknown.
   */
  errorJudgedByStatus?: boolean;
}

export interface VendorHttpResponse {
  status: number;
  /** lower-cased names; repeated headers joined with ", " */
  headers: Record<string, string>;
  body: Buffer;
  text(): string;
  /** throws VendorHttpError kind 'bad_json' */
  json(): unknown;
}

/**
 * `unsendable`: the request could not be built (Node refused a header value), so it never left: a known failure of
 * this request, not a network one (the vendor's health is not in question), and the same request would fail again.
 */
export type VendorHttpErrorKind = 'connect_timeout' | 'connect_error' | 'timeout' | 'reset' | 'too_large' | 'aborted' | 'bad_json' | 'unsendable';

export class VendorHttpError extends Error {
  override readonly name = 'VendorHttpError';
  constructor(
    readonly kind: VendorHttpErrorKind,
    /** false only when we know nothing was written to the vendor */
    readonly requestSent: boolean,
    /** our own text: never a header value, URL or body (they can hold secrets) */
    message: string,
    /** the HTTP status when an answer had started (too_large, bad_json) */
    readonly status?: number,
  ) {
    super(message);
  }
}

// Shared keep-alive pools: a TCP (and TLS) handshake per call would cost more
// than most vendor answers. A reset on a reused socket counts as sent (a write
// then ends unknown), so idle sockets are retired before the server closes
// them: after IDLE_SOCKET_MS, or 1 s ahead of the server's `Keep-Alive:
// timeout` hint when that is sooner. Node applies the hint only when the agent
// has a `timeout` of its own (without one, idle sockets were kept until the
// server closed them). On a socket in use the timeout does nothing: the
// request's own timers govern it.
const IDLE_SOCKET_MS = 4_000;
const AGENT_OPTIONS = { keepAlive: true, timeout: IDLE_SOCKET_MS, maxFreeSockets: 256, scheduling: 'lifo' } as const;
const httpAgent = new http.Agent(AGENT_OPTIONS);
const httpsAgent = new https.Agent(AGENT_OPTIONS);

const SAFE_CODE = /^[A-Z0-9_]{2,40}$/;

function errCode(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && SAFE_CODE.test(code) ? code : 'unknown';
}

function flattenHeaders(raw: http.IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(raw)) {
    if (value !== undefined) out[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

/** Deeper than any vendor's real answer (theirs stay under 20 levels), shallow enough to serialize and redact. */
export const MAX_VENDOR_JSON_DEPTH = 64;

/**
 * The body as UTF-8 text, without one leading byte order mark: some servers (IIS, .NET) start a JSON answer with
 * U+FEFF, which RFC 8259 §8.1 lets a parser ignore and WHATWG fetch's text() strips; JSON.parse would refuse it.
 */
function bodyText(body: Buffer): string {
  const text = body.toString('utf8');
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}

function makeResponse(status: number, headers: Record<string, string>, body: Buffer): VendorHttpResponse {
  return {
    status,
    headers,
    body,
    text: () => bodyText(body),
    json: () => {
      const text = bodyText(body);
      // JSON.parse has no nesting limit, but what is parsed is then serialized, redacted and stored: a body nested
      // 100,000 deep (200 KB) overflowed the stack there, after the vendor had answered (a 500, the call left running).
      if (jsonDepth(text) > MAX_VENDOR_JSON_DEPTH) {
        throw new VendorHttpError('bad_json', true, `vendor answered with JSON nested deeper than ${MAX_VENDOR_JSON_DEPTH} levels`, status);
      }
      try {
        // Numbers a double would change (a 64-bit id) are kept as the vendor wrote them, as strings.
        return parseJsonKeepingNumbers(text);
      } catch {
        throw new VendorHttpError('bad_json', true, 'vendor answered with a body that is not JSON', status);
      }
    },
  };
}

/** The time a piece of work (a call's attempt) spent in HTTP exchanges with a vendor: see timeVendorExchanges. */
interface ExchangeTiming {
  ms: number;
  exchanges: number;
  active: number;
  since: number;
}

const exchangeTiming = new AsyncLocalStorage<ExchangeTiming>();

/**
 * `work`'s result, with the wall time during which at least one of the vendor exchanges it made (vendorRequest, a
 * token fetch it started included) was under way, and how many it made: what vendor_call_duration_seconds observes.
 * Timed around the whole of `work`, the gateway's own waits (another refund's lease on the order, the token store's
 * statements, the credentials re-check) read as the vendor's latency on the dashboards.
 */
export async function timeVendorExchanges<T>(work: () => Promise<T>): Promise<{ result: T; ms: number; exchanges: number }> {
  const timing: ExchangeTiming = { ms: 0, exchanges: 0, active: 0, since: 0 };
  const result = await exchangeTiming.run(timing, work);
  const open = timing.active > 0 ? performance.now() - timing.since : 0; // one still under way (a shared token fetch)
  return { result, ms: timing.ms + open, exchanges: timing.exchanges };
}

/**
 * A pooled socket the vendor had already closed when the agent handed it out: nothing of the request was written
 * (Node emits 'socket' before it flushes the request), so it is sent again on another socket (sendOnLiveSocket).
 */
class ClosedPooledSocket extends Error {}

/**
 * How many closed pooled sockets one request passes over before it gives up unsent (a vendor that closed every
 * pooled connection at once: each is handed out at most once, then a fresh connection is made).
 */
const CLOSED_SOCKET_RESENDS = 8;

/**
 * sendVendorRequest, again on another socket when the agent handed out one the vendor had closed. Node's agent drops
 * a destroyed socket from its free list only on the socket's 'close' event, later in the loop iteration (and, with
 * 'lifo' scheduling, skips only those at the list's other end): a request made in between — a database answer read
 * in the same poll phase, a setImmediate — was given the dead socket, failed ECONNRESET on a reused socket and counted
 * as sent, so a refund or a POST the vendor never saw was recorded indeterminate, and the breaker charged a failure.
 */
async function sendOnLiveSocket(spec: VendorHttpRequest): Promise<VendorHttpResponse> {
  for (let resend = 0; ; resend++) {
    try {
      return await sendVendorRequest(spec);
    } catch (err) {
      if (!(err instanceof ClosedPooledSocket)) throw err;
      if (resend >= CLOSED_SOCKET_RESENDS) throw new VendorHttpError('connect_error', false, 'could not connect to vendor (every pooled connection was closed by the vendor)');
    }
  }
}

export function vendorRequest(spec: VendorHttpRequest): Promise<VendorHttpResponse> {
  const timing = exchangeTiming.getStore();
  const exchange = sendOnLiveSocket(spec);
  if (!timing) return exchange;
  timing.exchanges++;
  if (timing.active++ === 0) timing.since = performance.now();
  const done = (): void => {
    if (--timing.active === 0) timing.ms += performance.now() - timing.since;
  };
  exchange.then(done, done);
  return exchange;
}

function sendVendorRequest(spec: VendorHttpRequest): Promise<VendorHttpResponse> {
  return new Promise<VendorHttpResponse>((resolve, reject) => {
    if (spec.signal?.aborted) {
      reject(new VendorHttpError('aborted', false, 'vendor call aborted before it started'));
      return;
    }
    let url: URL;
    try {
      url = new URL(spec.url);
    } catch {
      reject(new VendorHttpError('connect_error', false, 'vendor URL is invalid'));
      return;
    }
    const isHttps = url.protocol === 'https:';
    if (!isHttps && url.protocol !== 'http:') {
      reject(new VendorHttpError('connect_error', false, 'vendor URL must be http or https'));
      return;
    }
    const body = typeof spec.body === 'string' ? Buffer.from(spec.body, 'utf8') : spec.body;
    const headers: Record<string, string> = { ...spec.headers };
    if (body && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-length')) {
      headers['content-length'] = String(body.length);
    }

    let request: http.ClientRequest;
    try {
      request = (isHttps ? https : http).request(url, { method: spec.method, headers, agent: isHttps ? httpsAgent : httpAgent });
    } catch {
      // Node throws synchronously on an invalid header name/value; its message names the header, so drop it.
      // Nothing was sent: not a network failure (no retry, nothing against the vendor's breaker).
      reject(new VendorHttpError('unsendable', false, 'vendor request could not be built (invalid header)'));
      return;
    }

    // Set once the socket is connected: the request bytes are already queued
    // (end() is called below), so from here on the vendor may have received them.
    let connected = false;
    let settled = false;

    const cleanup = (): void => {
      clearTimeout(connectTimer);
      clearTimeout(totalTimer);
      spec.signal?.removeEventListener('abort', onAbort);
    };
    const fail = (kind: VendorHttpErrorKind, message: string, status?: number): void => {
      if (settled) return;
      settled = true;
      cleanup();
      request.destroy();
      reject(new VendorHttpError(kind, connected, message, status));
    };
    const onConnected = (): void => {
      connected = true;
      clearTimeout(connectTimer);
    };
    // Set once an error status judged by itself has arrived (errorJudgedByStatus): a body that then fails to come whole resolves.
    let judgedByStatus: (() => void) | undefined;
    const onAbort = (): void => (judgedByStatus ? judgedByStatus() : fail('aborted', 'vendor call aborted'));

    const connectTimer = setTimeout(() => {
      if (!connected) fail('connect_timeout', `vendor connect timed out after ${spec.connectTimeoutMs} ms`);
    }, spec.connectTimeoutMs);
    const totalTimer = setTimeout(() => {
      if (judgedByStatus) judgedByStatus();
      else if (connected) fail('timeout', `vendor did not answer within ${spec.timeoutMs} ms`);
      else fail('connect_timeout', `vendor connect did not finish within ${spec.timeoutMs} ms`);
    }, spec.timeoutMs);
    spec.signal?.addEventListener('abort', onAbort, { once: true });

    request.once('socket', (socket: Socket) => {
      // A pooled socket the vendor has closed (its FIN read, or already destroyed): this request was not written yet.
      if (request.reusedSocket && (socket.destroyed || socket.readableEnded || !socket.writable)) {
        settled = true;
        cleanup();
        request.destroy();
        reject(new ClosedPooledSocket());
        return;
      }
      // A pooled socket is already connected. A fresh TLS socket counts as
      // connected only after the handshake: nothing is written before it. A socket whose connect failed at once
      // (EMFILE, ENFILE, EADDRNOTAVAIL: it is destroyed, not connecting) never connected: nothing was sent.
      if (request.reusedSocket || (!isHttps && !socket.connecting && !socket.destroyed)) onConnected();
      else socket.once(isHttps ? 'secureConnect' : 'connect', onConnected);
    });

    request.on('error', (err) => {
      // On a pooled socket the server may have closed it just as we wrote; we
      // cannot tell whether it read anything, so a reset there counts as sent.
      // A connect error (syscall "connect") is never one after sending, whatever `connected` says.
      if (connected && (err as NodeJS.ErrnoException).syscall !== 'connect') fail('reset', `vendor connection was reset (${errCode(err)})`);
      else fail('connect_error', `could not connect to vendor (${errCode(err)})`);
    });

    request.on('response', (res) => {
      const status = res.statusCode ?? 0;
      const limit = spec.maxResponseBytes;
      // An error answer (a 5xx's HTML page, a 429) is judged by its status, which handlers read before the body:
      // past the cap it is cut there, not turned into "too large" (which would hide a 5xx to a write, an unknown
      // outcome, behind a plain failure). Only a 2xx body must be whole.
      const errorAnswer = status < 200 || status >= 300;
      const finish = (buf: Buffer): void => {
        if (settled) return;
        settled = true;
        cleanup();
        resolve(makeResponse(status, flattenHeaders(res.headers), buf));
      };
      if (!errorAnswer && Number(res.headers['content-length']) > limit) {
        fail('too_large', `vendor response is over the ${limit} byte limit`, status);
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      if (errorAnswer && spec.errorJudgedByStatus) {
        // A 423 whose body was cut was recorded indeterminate (a refund the shop refused, to be reconciled by hand).
        judgedByStatus = () => {
          finish(Buffer.concat(chunks));
          request.destroy();
        };
      }
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size <= limit) {
          chunks.push(chunk);
          return;
        }
        // Destroying the request stops the read: we never buffer past the cap.
        if (!errorAnswer) {
          fail('too_large', `vendor response is over the ${limit} byte limit`, status);
          return;
        }
        chunks.push(chunk.subarray(0, chunk.length - (size - limit)));
        finish(Buffer.concat(chunks, limit));
        request.destroy();
      });
      res.on('end', () => finish(Buffer.concat(chunks, size)));
      res.on('error', (err) => (judgedByStatus ? judgedByStatus() : fail('reset', `vendor connection was reset during the answer (${errCode(err)})`)));
      res.on('close', () => {
        if (res.complete) return;
        if (judgedByStatus) judgedByStatus();
        else fail('reset', 'vendor connection closed during the answer');
      });
    });

    request.end(body);
  });
}

const OUTCOME_KIND: Record<VendorHttpErrorKind, VendorFailureKind> = {
  connect_timeout: 'timeout',
  connect_error: 'network',
  timeout: 'timeout',
  reset: 'network',
  too_large: 'too_large',
  // The executor aborts the signal when the call's time budget is spent.
  aborted: 'timeout',
  bad_json: 'bad_response',
  // Never sent, and the same request would be refused again (a header value Node will not write): a refusal
  // before sending, not retried and not held against the vendor's breaker (failure-mapping.ts).
  unsendable: 'rejected',
};

/** Maps a transport failure to a failed VendorOutcome; the message is our own text. */
export function httpErrorOutcome(err: VendorHttpError): VendorOutcome {
  return {
    ok: false,
    kind: OUTCOME_KIND[err.kind],
    ...(err.status !== undefined ? { vendorStatus: err.status } : {}),
    // Connect failures are the only case where we know the vendor saw nothing.
    requestSent: err.kind === 'connect_error' || err.kind === 'connect_timeout' ? false : err.requestSent,
    message: err.message,
  };
}

// Retry-After parsing lives in its own module; re-exported here for the handlers that import it with the client.
export { clampRetryAfterMs, MAX_RETRY_AFTER_MS, parseRetryAfterMs } from './retry-after.js';
