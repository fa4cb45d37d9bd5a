import type { NextFunction, Request, Response } from 'express';
import { AppError } from '../errors/app-error.js';
import { isEchoableFieldName, UNNAMED_UNKNOWN_FIELD } from '../echoable-field-name.js';
import { sendProblem } from '../errors/problem.filter.js';
import { jsonDepth } from '../json-depth.js';
import { closeAfterAnswer } from './closing-connection.js';
import { closeLingering } from './lingering-close.js';
import { findUnstorableText } from '../storable-text.js';
import { hasRoundedLiteral, unrepresentableNumber } from '../json-numbers.js';

export { jsonDepth };

export const TOOL_CALL_BODY_LIMIT = 512 * 1024;
export const ADMIN_BODY_LIMIT = 64 * 1024;
export const MAX_JSON_DEPTH = 32;

// Case-insensitive, as Express routes: /V1/Runs/…/Tool-Calls reaches the same handler.
const TOOL_CALL_PATH = /^\/v1\/runs\/[^/]+\/tool-calls(:batch)?\/?$/i;

/** Charsets a UTF-8 reading gets right: UTF-8 itself and its ASCII subset. */
const UTF8_COMPATIBLE = new Set(['utf-8', 'utf8', 'us-ascii', 'ascii']);
/**
 * Content codings that transform the body (RFC 9110 §8.4.1: IANA's HTTP Content Coding Registry but identity, the
 * compressions, dictionary compressions, encryption and EXI); anything else (a misconfigured "UTF-8") is read as it comes.
 */
const COMPRESSIONS = new Set(['gzip', 'x-gzip', 'deflate', 'br', 'compress', 'x-compress', 'zstd', 'dcb', 'dcz', 'aes128gcm', 'exi', 'pack200-gzip']);

/**
 * Strict UTF-8: Buffer#toString would turn an invalid byte into U+FFFD, and the call would then be acted on (sent to
 * the vendor, stored, digested) with other text than the client wrote. A BOM is kept, as toString kept it (and
 * JSON.parse refuses it).
 */
const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The body as text, or undefined when it is not valid UTF-8. */
function utf8Text(bytes: Buffer): string | undefined {
  try {
    return STRICT_UTF8.decode(bytes);
  } catch {
    return undefined;
  }
}

/**
 * The most body bytes a request to `path` (as Express routes it: no query) may carry. Also read before any body is
 * invited (bootstrap's 'checkContinue'), so both places agree.
 */
export function bodyLimitFor(path: string): number {
  return TOOL_CALL_PATH.test(path) ? TOOL_CALL_BODY_LIMIT : ADMIN_BODY_LIMIT;
}

/** A parameter of a media type's `; name=value` list (quoted values read whole, so a quoted ";charset=" is not one). */
function mediaTypeParameter(params: string, name: string): string | undefined {
  const re = /;\s*([!#$%&'*+.^_`|~0-9A-Za-z-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^;]*)/g;
  for (let m = re.exec(params); m; m = re.exec(params)) {
    if (m[1].toLowerCase() !== name) continue;
    const value = m[2].trim();
    return value.startsWith('"') ? value.slice(1, -1).replace(/\\(.)/g, '$1') : value;
  }
  return undefined;
}

type BodyRequest = Request & { correlationId?: string; bodyError?: AppError };

/** `Bearer <token>` with a token (AuthGuard reads it; anything else is 401 there). */
function bearerCredentialsIn(header: string | undefined): boolean {
  return header !== undefined && /^\s*bearer\s+\S/i.test(header);
}

/**
 * The body's bytes in one buffer, grown by doubling (at most the declared length): each piece Node hands over is
 * copied in, not kept. A body trickled a byte per packet kept one Buffer object per byte, some 300 times its size.
 */
class BodyBuffer {
  private buf: Buffer;
  size = 0;

  constructor(private readonly declared: number | undefined) {
    this.buf = Buffer.allocUnsafe(Math.min(declared ?? 16 * 1024, 16 * 1024));
  }

  append(chunk: Buffer): void {
    const needed = this.size + chunk.length;
    if (needed > this.buf.length) {
      let length = this.buf.length * 2;
      while (length < needed) length *= 2;
      const grown = Buffer.allocUnsafe(this.declared !== undefined && this.declared >= needed ? Math.min(length, this.declared) : length);
      this.buf.copy(grown, 0, 0, this.size);
      this.buf = grown;
    }
    chunk.copy(this.buf, this.size);
    this.size = needed;
  }

  bytes(): Buffer {
    return this.buf.subarray(0, this.size);
  }
}

/**
 * What was wrong with the body (415, 400) or a repeated Idempotency-Key (400),
 * for the auth guard to throw once the caller is authenticated and may call the
 * route: the order of checks is authenticate (401) → role (403) → the rest
 * (API.md §9), so an anonymous caller learns nothing from a body check. Only
 * the size limit (413) answers at once: it protects the reader, whoever sent
 * the body.
 */
export function bodyErrorOf(req: Request): AppError | undefined {
  return (req as BodyRequest).bodyError;
}

/**
 * The 413 (RFC 9110 §15.5.14: the server may close the connection), the connection closed after it: the rest of the
 * body is not read, and the client does not send its next request behind a body the server stopped reading. The close
 * lingers (closeLingering), so a client still sending reads the 413 rather than a reset.
 */
function tooLarge(req: Request, res: Response, limit: number, cid: string): void {
  closeAfterAnswer(req, res);
  closeLingering(req.socket);
  sendProblem(res, new AppError('PAYLOAD_TOO_LARGE', `body exceeds ${limit} bytes`), cid);
}

/**
 * Our own JSON body reader (Nest's body parser is off): a per-route size limit
 * (413), a nesting limit, and problem+json for every failure. The limit is
 * enforced while reading, so an oversized body is never buffered whole, nor read on after its 413.
 */
export function jsonBodyMiddleware(req: BodyRequest, res: Response, next: NextFunction): void {
  const method = req.method;
  // A DELETE takes no body, but one sent is read as a POST's is (its limit, 413; the request starts once it is in) and
  // refused unless empty: `DELETE /v1/api-keys/:id` with {"dryRun": true} revoked the key, 204. A GET, HEAD or OPTIONS
  // body means nothing (RFC 9110 §9.3.1) and is not read: the connection is closed after the answer instead. Node read
  // and dropped it to its end, whoever sent it: a gigabyte in 3 s on one connection to /healthz, bounded only by the
  // request timeout.
  if (method === 'GET' || method === 'HEAD' || method === 'OPTIONS') {
    if (Number(req.headers['content-length'] ?? 0) > 0 || req.headers['transfer-encoding'] !== undefined) {
      closeAfterAnswer(req, res);
      closeLingering(req.socket);
    }
    return next();
  }
  const toolCallPath = TOOL_CALL_PATH.exec(req.path);
  const toolCalls = toolCallPath !== null;
  const limit = bodyLimitFor(req.path);
  const cid = req.correlationId ?? 'unknown';
  const declared = Number(req.headers['content-length'] ?? 0);
  // A body over the limit is not read on: the 413 closes the connection (Connection: close), which Node ends once the
  // answer is out, rather than reading (and throwing away) the rest of it until the request timeout, gigabytes maybe.
  if (declared > limit) return tooLarge(req, res, limit, cid);
  // Without credentials the answer is 401 whatever the body holds (or 404 for no route): given at once, the body not
  // read, and the connection closed after it rather than read to the end of a body nobody will use. Anonymous
  // uploads held open across many connections pinned up to the limit each.
  if (!bearerCredentialsIn(req.headers.authorization)) {
    if (declared > 0 || req.headers['transfer-encoding'] !== undefined) {
      closeAfterAnswer(req, res);
      closeLingering(req.socket);
    }
    return next();
  }
  const received = new BodyBuffer(declared > 0 ? declared : undefined);
  let failed = false;
  req.on('data', (chunk: Buffer) => {
    if (failed) return;
    if (received.size + chunk.length > limit) {
      failed = true;
      tooLarge(req, res, limit, cid);
      return;
    }
    received.append(chunk);
  });
  req.on('error', () => {
    failed = true;
  });
  req.on('end', () => {
    if (failed) return;
    const refuse = (error: AppError): void => {
      req.bodyError = error;
      next();
    };
    // Node joins a repeated field into "k1, k2", itself a valid key: a retry sending only k1 would then be
    // another call. One tool_use has one key (idempotencyKeyFor); a batch refuses the header outright.
    if (toolCallPath && !toolCallPath[1] && (req.headersDistinct['idempotency-key']?.length ?? 0) > 1) {
      return refuse(new AppError('BAD_REQUEST', 'Idempotency-Key must be sent once, not in several header fields'));
    }
    const text = utf8Text(received.bytes());
    if (text !== undefined && text.trim() === '') {
      (req as { body?: unknown }).body = undefined;
      return next();
    }
    // Node keeps the first of several Content-Type fields and drops the rest: one that disagrees is refused, as a
    // repeated Host or Authorization is (a proxy in front may have read the other one).
    const types = req.headersDistinct['content-type'];
    if (types !== undefined && types.length > 1 && new Set(types.map((v) => v.trim().toLowerCase())).size > 1) {
      return refuse(new AppError('BAD_REQUEST', 'send one Content-Type, not several that disagree'));
    }
    const type = String(req.headers['content-type'] ?? '');
    // application/json or a +json type, nothing after it but parameters (application/json-seq is not JSON).
    const media = /^application\/(?:[a-z0-9.+-]*\+)?json\s*(;.*)?$/i.exec(type);
    if (!media) return refuse(new AppError('UNSUPPORTED_MEDIA_TYPE', 'send the body as application/json'));
    // JSON is UTF-8 (RFC 8259 §8.1): the body is read as UTF-8, so another charset would be misread.
    const charset = mediaTypeParameter(media[1] ?? '', 'charset')?.toLowerCase();
    if (charset !== undefined && !UTF8_COMPATIBLE.has(charset)) {
      return refuse(new AppError('UNSUPPORTED_MEDIA_TYPE', 'send the body as application/json in UTF-8'));
    }
    // A compressed body would be read as text and refused as "not JSON": say what is wrong instead.
    const codings = String(req.headers['content-encoding'] ?? '').toLowerCase().split(',').map((c) => c.trim());
    if (codings.some((c) => COMPRESSIONS.has(c))) {
      return refuse(new AppError('UNSUPPORTED_MEDIA_TYPE', 'Content-Encoding is not supported: send the body uncompressed'));
    }
    // After the media type checks: a compressed or mislabelled body is refused for what it is, not as bad UTF-8.
    if (text === undefined) return refuse(new AppError('BAD_REQUEST', 'body is not valid UTF-8'));
    // A batch's {"toolUses": [...]} adds two levels: each item may be as deep as a single call's body (deeper, the batch goes).
    if (jsonDepth(text) > MAX_JSON_DEPTH + (toolCallPath?.[1] ? 2 : 0)) {
      return refuse(new AppError('BAD_REQUEST', `JSON nesting deeper than ${MAX_JSON_DEPTH}`));
    }
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      return refuse(new AppError('BAD_REQUEST', 'body is not valid JSON'));
    }
    // A number literal too big for a double (1e309, 400 digits) parses to ±Infinity, which no JSON
    // can carry on (JSON.stringify writes null) and the action digest refuses: refused here. So is an
    // integer past 2^53 the double rounds (a 64-bit id): the vendor would get another number.
    const numberProblem = unrepresentableNumber(body, text);
    // In a batch, only the items that hold such a number are refused (each its own 400 entry); the rest still run.
    if (numberProblem !== undefined && !(toolCallPath?.[1] && refuseBatchItems(body, text))) {
      return refuse(numberError(numberProblem));
    }
    // Only a \u escape can put NUL or an unpaired surrogate into parsed JSON. Tool calls
    // record the model's text repaired (redaction, storableText); everything else is refused.
    if (!toolCalls && text.includes('\\u') && findUnstorableText(body) !== undefined) {
      return refuse(new AppError('BAD_REQUEST', 'strings must not contain NUL characters or unpaired UTF-16 surrogates'));
    }
    if (method === 'DELETE' && !isEmptyObject(body)) return refuse(bodyOnDelete(body));
    (req as { body?: unknown }).body = body;
    next();
  });
}

const isEmptyObject = (v: unknown): boolean => v === null || (typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length === 0);

/** A DELETE's body that is not empty: 400 VALIDATION_FAILED naming its fields, as an unknown field of any body is. */
function bodyOnDelete(body: unknown): AppError {
  const errors =
    typeof body === 'object' && body !== null && !Array.isArray(body)
      ? Object.keys(body).map((k) => (isEchoableFieldName(k) ? `${k}: property ${k} should not exist (a DELETE takes no body)` : `body: ${UNNAMED_UNKNOWN_FIELD}`))
      : ['body: a DELETE takes no body'];
  return new AppError('VALIDATION_FAILED', errors.join('; '), { fields: { errors } });
}

/** The 400 for a number JSON.parse lost: the same words for a single call's body and a batch item. */
function numberError(problem: 'infinite' | 'rounded'): AppError {
  return problem === 'infinite'
    ? new AppError('BAD_REQUEST', 'a number in the body is too large to represent')
    : new AppError('BAD_REQUEST', 'a number in the body would be rounded (an integer beyond 2^53, or more significant digits than a double holds): send it as a string');
}

/** Batch items the body reader refused, by the placeholder that stands in for each (see refuseBatchItems). */
const refusedItems = new WeakMap<object, AppError>();

/** The 400 of a batch item the body reader refused (a number it could not represent), or undefined. */
export function refusedBatchItem(item: unknown): AppError | undefined {
  return typeof item === 'object' && item !== null ? refusedItems.get(item) : undefined;
}

/**
 * A batch body `{"toolUses": [...]}` whose unrepresentable numbers (unrepresentableNumber) are all inside items:
 * each such item is replaced by a placeholder (its id kept, so duplicate ids are still found) whose 400 the batch
 * answers in the item's place; nothing of what it held is passed on. False (nothing changed) when the body is not
 * that envelope or a number outside its items is at fault: the whole body is refused, as before. Runs only after
 * the one walk found a problem, so a body without one costs nothing more; the text is read once more here.
 */
export function refuseBatchItems(body: unknown, text: string): boolean {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return false;
  const keys = Object.keys(body);
  const items = (body as { toolUses?: unknown }).toolUses;
  if (keys.length !== 1 || keys[0] !== 'toolUses' || !Array.isArray(items)) return false;
  const spans = batchItemSpans(text);
  if (spans.length !== items.length) return false;
  // What lies outside the items: the envelope, and any earlier "toolUses" member JSON.parse dropped.
  let from = 0;
  for (const [start, end] of spans) {
    if (hasRoundedLiteral(text, from, start)) return false;
    from = end;
  }
  if (hasRoundedLiteral(text, from, text.length)) return false;
  const refused = spans.map(([start, end], i) => unrepresentableNumber(items[i], text, start, end));
  if (refused.every((p) => p === undefined)) return false;
  refused.forEach((problem, i) => {
    if (problem === undefined) return;
    const item = items[i] as unknown;
    const id = typeof item === 'object' && item !== null && typeof (item as { id?: unknown }).id === 'string' ? (item as { id: string }).id : undefined;
    const placeholder = Object.freeze(id === undefined ? {} : { id });
    refusedItems.set(placeholder, numberError(problem));
    items[i] = placeholder;
  });
  return true;
}

/**
 * Where each item of a batch body's toolUses array is in its (valid JSON) text: [start, end) pairs, one per
 * item, in order. The array is the last member value of the top-level object that is an array, as JSON.parse
 * keeps the last of repeated keys (the caller has checked that toolUses is the only key). Linear, no recursion.
 */
export function batchItemSpans(text: string): [number, number][] {
  let spans: [number, number][] = [];
  let depth = 0;
  let inString = false;
  let inItems = false; // inside an array that is a member value of the top-level object
  let start = -1; // where the current item began, or -1 between items
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92) i++; // backslash: skip the escaped char
      else if (c === 34) inString = false;
      continue;
    }
    if (inItems && depth === 2) {
      if (c === 44 || c === 93) {
        // ',' or the array's ']': the item so far ends here
        if (start >= 0) spans.push([start, i]);
        start = -1;
      } else if (start < 0 && c !== 32 && c !== 9 && c !== 10 && c !== 13) start = i;
    }
    if (c === 34) inString = true;
    else if (c === 123 || c === 91) {
      if (depth === 1 && c === 91) {
        inItems = true;
        spans = [];
      }
      depth++;
    } else if (c === 125 || c === 93) {
      if (--depth === 1) inItems = false;
    }
  }
  return spans;
}
